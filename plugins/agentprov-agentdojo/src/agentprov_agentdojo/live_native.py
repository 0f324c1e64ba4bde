"""The live-versus-native check: the capture's view of a session against AgentDojo's own log.

AgentDojo's ``OutputLogger`` writes one JSON document per cell (``suite_name``,
``pipeline_name``, ``user_task_id``, ``injection_task_id``, ``attack_type``, ``injections``,
``messages``, ``error``, ``utility``, ``security``, ``duration``). The capture holds the same
session seen from the wire and the tool runtime. The check compares, item by item:

``task``
    the native log's suite, user task, injection task and attack with the capture header's
    cell (and the pipeline name with the header's agent, when it records one);
``assistant_messages``
    each reply the LLM element received (text and tool calls: function and parsed
    arguments), in order, with the native log's assistant messages;

(these and the two items below compare the user task's last pass: AgentDojo runs the task
again, up to three times, while its final reply has no text, and its native log keeps the
last pass's conversation only; a pass starts at an element call whose request holds no
assistant message yet)
``tool_calls``
    each ``tool_result`` record (function, arguments, error), in order, with the native
    log's tool messages that reached the runtime (AgentDojo's ``ToolsExecutor`` answers an
    empty or unknown function name itself; those never reach the runtime, so they are not
    in the capture's tool records and are left out on both sides);
``tool_results``
    the tool messages as the model was sent them (from the last element call's request:
    ``tool_call_id`` and text, or the error text AgentDojo sends instead) with the native
    log's tool messages (id and text, or its error);
``utility``, ``security``
    the capture's end record with the native log's values;
``defence`` (a defended session only)
    the defence's interventions as the capture noted them (``defence_recorder@1``) with the
    messages of AgentDojo's native log that show them, for the last pass of the user task
    (the native log keeps the last pass's conversation): each noted message (its index,
    role and the sha256 of its text) against the native message at that index, and the
    native messages the defence puts there (a repeated prompt, the filter's prompt, a
    delimited tool output and the delimiter warning, a call to a removed tool) against the
    noted ones, so that none is missing on either side; the installed pipeline's name
    against the native log's; and each tool-filter pass's kept tools against the tools the
    agent's next request offered.

A defended session's pipeline is AgentDojo's ``f"{llm_name}-{defence}"``: ``task`` compares
the native log's ``pipeline_name`` with that name, built from the capture header's agent
and defence. Tool calls the defence denied never reached the runtime: like AgentDojo's own
answers to unknown functions, they are left out of ``tool_calls`` on both sides (and are
compared under ``defence``). Any difference is listed (the first few per item) and the
session's AER outcome carries ``map.live_native_disagree``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from msgspec import UNSET

from agentprov_core.api import LiveVsNative, ModelCall, ToolCall, dojo_mapper

COMPARED = ("task", "assistant_messages", "tool_calls", "tool_results", "utility", "security")
DEFENDED = (*COMPARED, "defence")
#: tool messages AgentDojo's ToolsExecutor writes itself, without running a function
_EXECUTOR_ERRORS = ("Empty function name provided", "Invalid tool ")
MAX_PER_ITEM = 3


def parse_native(data: bytes) -> dict[str, Any] | None:
    """The native log as a dict, or ``None`` when it is not a JSON object with messages."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        return None
    return doc


def _text(blocks: Any) -> str | None:
    """Text of AgentDojo content blocks (``{type, content}``) or OpenAI parts
    (``{type, text}``), joined by newlines; a plain string as it is; None for null."""
    if blocks is None:
        return None
    if isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        parts = []
        for b in blocks:
            if isinstance(b, dict):
                v = b.get("content", b.get("text"))
                parts.append(v if isinstance(v, str) else "")
            elif isinstance(b, str):
                parts.append(b)
        return "\n".join(parts)
    return json.dumps(blocks, sort_keys=True)


#: tool-call arguments as the model gave them: parsed JSON when a string parses
parse_arguments = dojo_mapper.parse_arguments


def _show(v: Any) -> str:
    s = json.dumps(v, sort_keys=True, ensure_ascii=False, default=str)
    return s if len(s) <= 120 else s[:117] + "..."


def _diff_lists(name: str, live: list, native: list, out: list[str]) -> None:
    n = 0
    if len(live) != len(native):
        out.append(f"{name}: the capture has {len(live)}, the native log {len(native)}")
        n += 1
    for i, (a, b) in enumerate(zip(live, native, strict=False)):
        if a != b:
            if n >= MAX_PER_ITEM:
                out.append(f"{name}: more differences not listed")
                return
            out.append(f"{name}[{i}]: capture {_show(a)} != native {_show(b)}")
            n += 1


def _element_calls(records: list[Any]) -> list[ModelCall]:
    return [r for r in records if isinstance(r, ModelCall) and isinstance(r.element, str)
            and r.element != "not recorded"]


def _last_pass(raw: list[dict[str, Any]], records: list[Any]) -> int:
    """The index in ``records`` of the first model call of the user task's last pass: the
    last element call whose request holds no assistant message yet (a pass starts from the
    system and user messages; a defence's own call at its head, the tool filter's, counts)."""
    bodies: dict[Any, Any] = {}
    for r in raw:
        if r.get("kind") == "wire_request" and r.get("call_id") not in bodies:
            bodies[r.get("call_id")] = r.get("body")
    start = 0
    for i, r in enumerate(records):
        if not isinstance(r, ModelCall) or r not in _element_calls([r]):
            continue
        body = bodies.get(r.call_id)
        sent = body.get("messages") if isinstance(body, dict) else None
        if isinstance(sent, list) and not any(
                isinstance(m, dict) and m.get("role") == "assistant" for m in sent):
            start = i
    return start


def _wire_tool_messages(raw: list[dict[str, Any]], last_call: str | None) -> list[tuple]:
    """``(tool_call_id, text)`` of the tool messages in the last element call's request."""
    if last_call is None:
        return []
    body = None
    for r in raw:
        if r.get("kind") == "wire_request" and r.get("call_id") == last_call:
            body = r.get("body")  # every attempt of a call sends the same body; keep the last
    msgs = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(msgs, list):
        return []
    out: list[tuple] = []
    for m in msgs:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            out.append((m.get("tool_call_id"), _text(m.get("content"))))
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            # the Anthropic wire: tool results are tool_result blocks of user messages
            out.extend((b.get("tool_use_id"), _text(b.get("content")))
                       for b in m["content"]
                       if isinstance(b, dict) and b.get("type") == "tool_result")
    return out


def check(raw: list[dict[str, Any]], records: list[Any], native: dict[str, Any]
          ) -> LiveVsNative:
    """Compare the capture (its raw records, and the AER records mapped from them) with the
    parsed native log."""
    header = raw[0] if raw else {}
    end = raw[-1] if raw and raw[-1].get("kind") == "end" else {}
    cell = header.get("cell") or {}
    diffs: list[str] = []

    # task
    attack = cell.get("attack")
    want = {"suite_name": cell.get("suite"), "user_task_id": cell.get("user_task_id"),
            "injection_task_id": cell.get("injection_task_id") if attack else None,
            "attack_type": attack or None}
    agent = header.get("agent") if isinstance(header.get("agent"), dict) else {}
    defence = header.get("defence") if isinstance(header.get("defence"), str) else "none"
    if agent.get("pipeline_name"):
        want["pipeline_name"] = agent["pipeline_name"] + (
            f"-{defence}" if defence != "none" else "")
    for k, v in want.items():
        if native.get(k) != v:
            diffs.append(f"task: {k}: capture {_show(v)} != native {_show(native.get(k))}")

    msgs = [m for m in native["messages"] if isinstance(m, dict)]
    # AgentDojo re-runs the user task up to three times while its final reply has no text,
    # and its native log keeps the last pass's conversation only: compare that pass
    records = records[_last_pass(raw, records):]
    # assistant messages
    calls = _element_calls(records)
    live_a = []
    for c in calls:
        if c.status == "ok" and c.reply is not None:
            # no text and empty text are one (AnthropicLLM keeps [] for a tool-use reply)
            live_a.append((_text(c.reply.content) or None,
                           [(t.function, t.arguments) for t in c.reply.tool_calls]))
    native_a = [(_text(m.get("content")) or None,
                 [(t.get("function"), parse_arguments(t.get("args"))) for t in (m.get("tool_calls") or [])
                  if isinstance(t, dict)])
                for m in msgs if m.get("role") == "assistant"]
    _diff_lists("assistant_messages", live_a, native_a, diffs)

    # tool calls
    tools = [m for m in msgs if m.get("role") == "tool"]
    ran = [m for m in tools if not str(m.get("error") or "").startswith(_EXECUTOR_ERRORS)]
    live_t = [(t.function, t.arguments, t.error) for t in records
              if isinstance(t, ToolCall) and t.denied is not True]
    native_t = [((m.get("tool_call") or {}).get("function"), (m.get("tool_call") or {}).get("args"),
                 m.get("error")) for m in ran]
    _diff_lists("tool_calls", live_t, native_t, diffs)

    # tool results as the model saw them (in the agent's last request, not a defence's)
    agents = [c for c in calls if c.actor is UNSET]
    live_r = _wire_tool_messages(raw, agents[-1].call_id if agents else None)
    native_r = [(m.get("tool_call_id"), m.get("error") or _text(m.get("content")) or "")
                for m in tools]
    live_r = [(i, t if t is not None else "") for i, t in live_r]
    _diff_lists("tool_results", live_r, native_r, diffs)

    for k in ("utility", "security"):
        if end.get(k) != native.get(k):
            diffs.append(f"{k}: capture {_show(end.get(k))} != native {_show(native.get(k))}")
    if defence == "none":
        return LiveVsNative(checked=True, agree=not diffs, compared=list(COMPARED),
                            differences=diffs)
    diffs += defence_differences(raw, msgs, native, defence)
    return LiveVsNative(checked=True, agree=not diffs, compared=list(DEFENDED),
                        differences=diffs)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _native_entry(msgs: list[dict[str, Any]], i: Any, sent_as: Any) -> tuple:
    """(index, role, sha256 of the text) of native message ``i``, its text read from the
    field the capture says it was sent in (``content`` or ``error``)."""
    if not isinstance(i, int) or not 0 <= i < len(msgs):
        return (i, None, None)
    m = msgs[i]
    text = m.get("error") if sent_as == "error" else _text(m.get("content"))
    return (i, m.get("role"), _sha(text) if isinstance(text, str) else None)


def _placed(defence: str, msgs: list[dict[str, Any]], removed: set[str]) -> list[int]:
    """The native messages the defence puts into the conversation (by index): where the
    capture must have noted an intervention."""
    users = [i for i, m in enumerate(msgs) if m.get("role") == "user"]
    out: list[int] = []
    if defence in ("repeat_user_prompt", "tool_filter"):
        out += users[1:]  # after the user task's own prompt: the repeats, the filter's prompt
    if defence == "spotlighting_with_delimiting":
        out += [i for i, m in enumerate(msgs) if m.get("role") == "system"]
        out += [i for i, m in enumerate(msgs) if m.get("role") == "tool"
                and not str(m.get("error") or "").startswith(_EXECUTOR_ERRORS)]
    if defence == "tool_filter":
        out += [i for i, m in enumerate(msgs) if m.get("role") == "tool"
                and str(m.get("error") or "").startswith("Invalid tool ")
                and (m.get("tool_call") or {}).get("function") in removed]
    return sorted(out)


def _offered(raw: list[dict[str, Any]], after_seq: int) -> list[str] | None:
    """The tool names of the agent's first request after capture record ``after_seq``."""
    agents = {r.get("call_id") for r in raw if r.get("kind") == "model_call_start"
              and "actor" not in r}
    for r in raw:
        if r.get("kind") == "wire_request" and r.get("seq", -1) > after_seq \
                and r.get("call_id") in agents:
            body = r.get("body") if isinstance(r.get("body"), dict) else {}
            return [(t.get("function") or {}).get("name") for t in body.get("tools") or []
                    if isinstance(t, dict)]
    return None


def defence_differences(raw: list[dict[str, Any]], msgs: list[dict[str, Any]],
                        native: dict[str, Any], defence: str) -> list[str]:
    """The ``defence`` item: the capture's defence notes against the native log."""
    out: list[str] = []
    notes = [r for r in raw if r.get("kind") == "note" and isinstance(r.get("code"), str)
             and r["code"].startswith("defence.") and isinstance(r.get("actor"), str)]
    installed = next((r for r in notes if r["code"] == "defence.installed"), None)
    if installed is None:
        out.append("defence: the capture notes no installed defence")
    elif installed.get("pipeline_name") != native.get("pipeline_name"):
        out.append(f"defence: pipeline: capture {_show(installed.get('pipeline_name'))} != "
                   f"native {_show(native.get('pipeline_name'))}")
    passes = [r["pass"] for r in notes if isinstance(r.get("pass"), int)]
    last = [r for r in notes if passes and r.get("pass") == max(passes)
            and "message_index" in r]
    live = [(r.get("message_index"), r.get("role"), r.get("text_sha256")) for r in last]
    native_side = [_native_entry(msgs, r.get("message_index"), r.get("sent_as")) for r in last]
    _diff_lists("defence: messages", live, native_side, out)
    removed = {t for r in notes if r["code"] == "defence.tool_filter.filtered"
               for t in (r.get("removed") or []) if isinstance(t, str)}
    placed = _placed(defence, msgs, removed)
    noted = sorted(i for i, _, _ in live if isinstance(i, int))
    if placed != noted and defence in ("repeat_user_prompt", "spotlighting_with_delimiting",
                                       "tool_filter"):
        out.append(f"defence: the native log shows the defence's messages at {placed}, the "
                   f"capture notes {noted}")
    for r in notes:
        if r["code"] == "defence.tool_filter.filtered":
            offered = _offered(raw, r.get("seq", -1))
            if offered is not None and offered != r.get("kept"):
                out.append(f"defence: the filter kept {_show(r.get('kept'))}, the agent's "
                           f"next request offered {_show(offered)}")
    return out
