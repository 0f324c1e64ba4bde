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
    the capture's end record with the native log's values.

Any difference is listed (the first few per item) and the session's AER outcome carries
``map.live_native_disagree``.
"""

from __future__ import annotations

import json
from typing import Any

from agentprov_core.evidence.aer import LiveVsNative, ModelCall, ToolCall

COMPARED = ("task", "assistant_messages", "tool_calls", "tool_results", "utility", "security")
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


def parse_arguments(value: Any) -> Any:
    """Tool-call arguments as the model gave them: parsed JSON when a string parses, else
    the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


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
    if agent.get("pipeline_name"):
        want["pipeline_name"] = agent["pipeline_name"]
    for k, v in want.items():
        if native.get(k) != v:
            diffs.append(f"task: {k}: capture {_show(v)} != native {_show(native.get(k))}")

    msgs = [m for m in native["messages"] if isinstance(m, dict)]
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
    live_t = [(t.function, t.arguments, t.error) for t in records if isinstance(t, ToolCall)]
    native_t = [((m.get("tool_call") or {}).get("function"), (m.get("tool_call") or {}).get("args"),
                 m.get("error")) for m in ran]
    _diff_lists("tool_calls", live_t, native_t, diffs)

    # tool results as the model saw them
    live_r = _wire_tool_messages(raw, calls[-1].call_id if calls else None)
    native_r = [(m.get("tool_call_id"), m.get("error") or _text(m.get("content")) or "")
                for m in tools]
    live_r = [(i, t if t is not None else "") for i, t in live_r]
    _diff_lists("tool_results", live_r, native_r, diffs)

    for k in ("utility", "security"):
        if end.get(k) != native.get(k):
            diffs.append(f"{k}: capture {_show(end.get(k))} != native {_show(native.get(k))}")
    return LiveVsNative(checked=True, agree=not diffs, compared=list(COMPARED),
                        differences=diffs)
