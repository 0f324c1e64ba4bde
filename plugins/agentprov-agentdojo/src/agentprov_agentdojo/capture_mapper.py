"""The shared capture mapper ``agentdojo.capture``: a capture/0.1 log and AgentDojo's native
log to an AER of mode ``live``.

It serves every AgentDojo-shaped backend (AgentDojo, AutoDojo, AgentDyn). What it reads:

* the capture log: the header (session, cell, backend, plan and configuration digests,
  the agent configuration, the declared instrumentation), the model calls
  (``model_call_start`` … ``model_call_end`` with their ``wire_request``, ``wire_response``
  and ``wire_error`` attempts), ``tool_result``, ``environment_digest``, ``note`` and the
  ``end`` record (status, utility, security, the worker's counts);
* the native log, for the live-versus-native check (:mod:`agentprov_agentdojo.live_native`);
* a defended session's defence notes (:mod:`agentprov_agentdojo.defence_records`): the
  defence observed, its actor, its digests, decisions and denied tool results;
* the ledger entry and the manifest, for the unit, the attempt, the producer (and the
  defence, for a capture that does not record it).

Anything the evidence lacks is ``"not recorded"``. A session that failed is mapped all the
same, as a failed execution with its register codes (docs/formats/aer-0.1.md).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from msgspec import UNSET

from agentprov_agentdojo import defence_records, live_native
from agentprov_agentdojo.plugin import CAPTURE_MAPPER
from agentprov_core.api import NOT_RECORDED, CaptureView, LiveEvidence, capture_view, reply_body
from agentprov_core.api import aer as A

NAME = CAPTURE_MAPPER.name
# 0.1.1: the chain is read by agentprov_capture.check (verify's check), so a
# damaged log's map.capture_damaged detail names verify's problems
# 0.2.0: a defended session is recorded: task.defense_id as the capture observed it, the
# defence's actor, its own model calls under that actor, its digests as notes, its
# interventions as decisions and denied tool results, and the live-versus-native check
# compares the defence's messages (an undefended session maps as before)
# 0.2.1: the live-versus-native check compares the user task's last pass (AgentDojo runs the
# task again, up to three times, while its final reply has no text, and its native log keeps
# the last pass only): a faithful session of several passes agrees
VERSION = CAPTURE_MAPPER.version  # the number is declared with the reference, in plugin.py
CAPTURE_FORMAT = "capture/0.1"
#: a declared instrumentation item whose ``mode`` is one of these changes what is sent
REQUEST_MODIFYING_MODES = ("modify", "rewrite")


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode("utf-8")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------ replies
def _int(v: Any) -> Any:
    return v if isinstance(v, int) and not isinstance(v, bool) else NOT_RECORDED


def _dig(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return NOT_RECORDED
        d = d[k]
    return d


_args = live_native.parse_arguments  # tool-call arguments: parsed JSON when they parse


def parse_reply(body: Any) -> tuple[A.Message | None, Any, Any, A.Usage]:
    """``(message, served_model, finish_reason, usage)`` of a reply body: an OpenAI-style
    chat completion or an Anthropic message (a recorded Anthropic event stream, the body of
    AgentDojo's streaming ``AnthropicLLM``, is read as the message it assembles into).
    Unknown shapes give no message."""
    body = reply_body(body)
    if not isinstance(body, dict):
        return None, NOT_RECORDED, NOT_RECORDED, A.Usage()
    served = body.get("model") if isinstance(body.get("model"), str) else NOT_RECORDED
    u = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    if body.get("type") == "message" and isinstance(body.get("content"), list):  # Anthropic
        texts = [b.get("text", "") for b in body["content"]
                 if isinstance(b, dict) and b.get("type") == "text"]
        calls = [A.ToolCallRequest(id=b.get("id", NOT_RECORDED), function=str(b.get("name")),
                                   arguments=b.get("input"))
                 for b in body["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        msg = A.Message(role=body.get("role", "assistant"),
                        content="\n".join(texts) if texts else None, tool_calls=calls)
        usage = A.Usage(input_tokens=_int(u.get("input_tokens")),
                        output_tokens=_int(u.get("output_tokens")),
                        cached_input_tokens=_int(u.get("cache_read_input_tokens")))
        return msg, served, body.get("stop_reason", NOT_RECORDED), usage
    choices = body.get("choices")
    usage = A.Usage(input_tokens=_int(u.get("prompt_tokens")),
                    output_tokens=_int(u.get("completion_tokens")),
                    reasoning_tokens=_int(_dig(u, "completion_tokens_details",
                                               "reasoning_tokens")),
                    cached_input_tokens=_int(_dig(u, "prompt_tokens_details", "cached_tokens")))
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None, served, NOT_RECORDED, usage
    choice = choices[0]
    m = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    calls = []
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            calls.append(A.ToolCallRequest(id=tc.get("id", NOT_RECORDED),
                                           function=str(fn.get("name")),
                                           arguments=_args(fn.get("arguments"))))
    msg = A.Message(role=m.get("role", "assistant"), content=m.get("content"), tool_calls=calls)
    return msg, served, choice.get("finish_reason", NOT_RECORDED), usage


# ------------------------------------------------------------------------------ records
def _model_calls(raw: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The model calls in order of first appearance: start, end and attempts by id."""
    calls: dict[str, dict[str, Any]] = {}
    attempts: dict[Any, dict[str, Any]] = {}

    def call(cid: str, seq: int) -> dict[str, Any]:
        return calls.setdefault(cid, {"start": None, "end": None, "attempts": {}, "seq": seq})

    for r in raw:
        kind, cid = r.get("kind"), r.get("call_id")
        if kind == "model_call_start":
            call(cid, r["seq"])["start"] = r
        elif kind == "model_call_end":
            call(cid, r["seq"])["end"] = r
        elif kind == "wire_request":
            cid = cid or f"call-{r.get('attempt_id')}"
            attempts[r.get("attempt_id")] = {"req": r, "out": None}
            call(cid, r["seq"])["attempts"][r.get("attempt_id")] = attempts[r.get("attempt_id")]
        elif kind in ("wire_response", "wire_error") and r.get("attempt_id") in attempts:
            attempts[r["attempt_id"]]["out"] = r
    return calls


def _model_call(cid: str, c: dict[str, Any]) -> A.ModelCall:
    start, end = c["start"] or {}, c["end"] or {}
    attempts = []
    for a in c["attempts"].values():
        attempts.append(capture_view.wire_attempt(a["req"], a["out"], index=len(attempts)))
    first = next(iter(c["attempts"].values()), None)
    last = list(c["attempts"].values())[-1] if c["attempts"] else None
    req_body = first["req"].get("body") if first else None
    reply = None
    served = finish = reply_sha = NOT_RECORDED
    usage = A.Usage()
    if last and last["out"] and last["out"].get("kind") == "wire_response" \
            and isinstance(last["out"].get("status"), int) and 200 <= last["out"]["status"] < 300:
        reply, served, finish, usage = parse_reply(last["out"].get("body"))
        reply_sha = last["out"].get("body_sha256", NOT_RECORDED)
    model = start.get("model") if start.get("model") is not None else (
        req_body.get("model", NOT_RECORDED) if isinstance(req_body, dict) else NOT_RECORDED)
    msgs = req_body.get("messages") if isinstance(req_body, dict) else None
    t = start.get("t", first["req"].get("t") if first else NOT_RECORDED)
    return A.ModelCall(
        call_id=cid, element=start.get("element") or NOT_RECORDED, model_requested=model,
        status=end.get("status") or NOT_RECORDED,
        request_sha256=first["req"].get("body_sha256", NOT_RECORDED) if first else NOT_RECORDED,
        reply_sha256=reply_sha, messages_sent=len(msgs) if isinstance(msgs, list)
        else NOT_RECORDED, reply=reply, served_model=served, finish_reason=finish, usage=usage,
        first_attempt_id=first["req"].get("first_attempt_id", NOT_RECORDED) if first
        else end.get("first_attempt_id", NOT_RECORDED),
        attempts=attempts, retries=max(len(attempts) - 1, 0),
        error_type=end.get("error_type"), t=t,
        actor=start["actor"] if isinstance(start.get("actor"), str) else UNSET)


def _take_pending(pending: list[tuple[str, A.ToolCallRequest]], function: Any,
                  arguments: Any) -> tuple[Any, Any]:
    """(tool call id, model call id) of the pending requested tool call with this function
    and these arguments, taken off the list; not recorded when none matches."""
    for i, (c, tc) in enumerate(pending):
        if tc.function == function and tc.arguments == arguments:
            del pending[i]
            return tc.id, c
    return NOT_RECORDED, NOT_RECORDED


def _environment_digest(r: dict[str, Any], t: Any) -> A.EnvironmentDigest:
    """An ``environment_digest`` record, with how it was made when the capture says so."""
    sha = r.get("sha256")
    extra: dict[str, Any] = {}
    if isinstance(r.get("method"), str):
        extra["method"] = r["method"]
    if isinstance(r.get("omitted"), list):
        extra["omitted"] = [A.OmittedValue(path=str(o.get("path")), type=str(o.get("type")))
                            for o in r["omitted"] if isinstance(o, dict)]
    if isinstance(r.get("error"), str):
        extra["error"] = r["error"]
    return A.EnvironmentDigest(name=str(r.get("name")),
                               sha256=NOT_RECORDED if sha is None else str(sha), t=t, **extra)


def _records(raw: list[dict[str, Any]], attempt: Any) -> list[tuple[int, A.Record]]:
    out: list[tuple[int, A.Record]] = []
    calls = _model_calls(raw)
    mapped = {cid: _model_call(cid, c) for cid, c in calls.items()}
    out += [(calls[cid]["seq"], mc) for cid, mc in mapped.items()]
    # tool calls, linked to the reply that asked for them (same function and arguments)
    pending: list[tuple[str, A.ToolCallRequest]] = []
    replied_at = {mc.attempts[-1].capture_seq[-1]: mc for mc in mapped.values()
                  if mc.reply is not None}  # the seq of the reply the element used
    refusal = attempt.setup_refusal if attempt is not None else None
    for r in raw:
        kind, t = r.get("kind"), r.get("t", NOT_RECORDED)
        if r.get("seq") in replied_at:
            mc = replied_at[r["seq"]]
            pending = [(mc.call_id, tc) for tc in mc.reply.tool_calls]
        elif kind == "tool_result" and r.get("phase") == "harness":
            out.append((r["seq"], A.Note(
                code="harness.tool_call",
                text=f"the benchmark called {r.get('tool')} outside the agent's pipeline "
                     "(AgentDojo's ground truth, run to find the injection candidates)"
                     + (f"; error: {r.get('error')}" if r.get("error") else ""), t=t)))
        elif kind == "tool_result":
            tid, cid = _take_pending(pending, r.get("tool"), r.get("arguments"))
            out.append((r["seq"], A.ToolCall(
                tool_call_id=tid, call_id=cid, function=str(r.get("tool")),
                arguments=r.get("arguments"), result=r.get("result"),
                result_sha256=_sha(_canonical(r.get("result"))), error=r.get("error"), t=t)))
        elif kind == "environment_digest":
            out.append((r["seq"], _environment_digest(r, t)))
        elif kind == "note" and r.get("code") == defence_records.INSTALLED:
            out += [(r["seq"], n) for n in defence_records.digest_notes(r)]
        elif kind == "note" and r.get("code") == defence_records.DENIED:
            tid, cid = _take_pending(pending, r.get("tool"), r.get("arguments"))
            if tid == NOT_RECORDED and isinstance(r.get("tool_call_id"), str):
                tid = r["tool_call_id"]
            out.append((r["seq"], defence_records.denied_call(r, tid, cid)))
        elif defence_records.is_intervention(r):
            out.append((r["seq"], defence_records.decision(r)))
        elif kind == "note" and r.get("code") == "setup_refusal":
            data = {k: v for k, v in (refusal or {}).items() if k not in ("code", "message")}
            code = r.get("refusal_code") or (refusal or {}).get("code") or "setup_refusal"
            out.append((r["seq"], A.Decision(code=str(code), text=str(r.get("text")),
                                             data=data, t=t)))
        elif kind == "note":
            out.append((r["seq"], A.Note(code=str(r.get("code")), text=str(r.get("text")), t=t)))
    return sorted(out, key=lambda x: x[0])


# ------------------------------------------------------------------------------ header
def request_modifying(items: list[str]) -> list[str]:
    """The declared items that change requests: those whose ``mode`` is modify or rewrite."""
    return [i for i in items if any(f" mode: {m}" in i for m in REQUEST_MODIFYING_MODES)]


def _header(ev: LiveEvidence, view: CaptureView, native: dict[str, Any] | None,
            defense_id: str) -> A.Header:
    a, m, h, end, raw = ev.attempt, ev.manifest or {}, view.header, view.end, view.raw
    cell, agent, backend = view.part("cell"), view.part("agent"), view.part("backend")
    start = next((r for r in raw if r.get("kind") == "model_call_start"), {})
    source = h.get("source") or m.get("source") or "agentdojo"
    attack = cell.get("attack") or None
    evidence = []
    if ev.capture is not None:
        evidence.append(A.Evidence(role="capture", format=CAPTURE_FORMAT,
                                   sha256=_sha(ev.capture), bytes=len(ev.capture),
                                   path=ev.capture_path or NOT_RECORDED,
                                   head_sha256=a.capture_head_sha256))
    if ev.native is not None:
        version = (native or {}).get("agentdojo_package_version")
        evidence.append(A.Evidence(role="native_log",
                                   format=f"agentdojo-native/{version or 'unknown'}",
                                   sha256=_sha(ev.native), bytes=len(ev.native),
                                   path=ev.native_path or NOT_RECORDED))
    items = [str(i) for i in h.get("declared_instrumentation") or []]
    display = agent.get("display_name")
    if display is None:
        display = next((i.split(" value: ", 1)[1] for i in items
                        if i.startswith("model_display_name@") and " value: " in i), None)
    return A.Header(
        execution_id=str(h.get("session_id") or a.session_id), mode="live", source=source,
        backend=A.Backend(id=str(m.get("backend") or source),
                          environment_id=backend.get("environment_id", NOT_RECORDED),
                          identity_sha256=backend.get("identity_sha256", NOT_RECORDED),
                          benchmark_version=h.get("benchmark_version") or NOT_RECORDED),
        task=A.Task(source=source, suite=cell.get("suite", NOT_RECORDED),
                    user_task_id=cell.get("user_task_id", NOT_RECORDED),
                    injection_task_id=cell.get("injection_task_id") if attack else None,
                    attack=attack, cell_key=str(cell.get("cell_key") or a.cell_key),
                    defense_id=defense_id, unit=a.unit, attempt=a.attempt,
                    repeat=a.repeat),
        agent=capture_view.agent(view, model=start.get("model", NOT_RECORDED),
                                 element=start.get("element", NOT_RECORDED),
                                 display_name=display),
        instrumentation=items, request_modifying=request_modifying(items),
        producer=capture_view.producer(ev, view, NAME, VERSION),
        evidence=evidence, plan_sha256=h.get("plan_sha256") or a.plan_sha256 or NOT_RECORDED,
        config_digest=h.get("config_digest") or a.config_digest or NOT_RECORDED,
        started_at=h.get("started_at") or NOT_RECORDED,
        ended_at=capture_view.ended_at(h.get("started_at"), end),
        actors=defence_records.actors(defense_id, h, raw))


# ------------------------------------------------------------------------------ the mapper
def _bool(v: Any) -> Any:
    return v if isinstance(v, bool) else NOT_RECORDED


class CaptureMapper:
    """``agentdojo.capture``: see the module's docstring."""

    name = NAME
    version = VERSION
    evidence_formats = (CAPTURE_FORMAT,)

    def map(self, evidence: LiveEvidence) -> A.AER:
        ev = evidence
        view = capture_view.read(ev)  # a missing end record is map.capture_error, below
        raw, problems, h, end = view.raw, view.problems, view.header, view.end
        native = live_native.parse_native(ev.native) if ev.native is not None else None
        defense_id, mismatch = defence_records.observed(h, raw, ev.attempt.defence)
        header = _header(ev, view, native, defense_id)
        records = [r for _, r in _records(raw, ev.attempt)]
        observed = any(isinstance(r, (A.ModelCall, A.ToolCall)) for r in records)
        session = end.get("status", NOT_RECORDED) if end else NOT_RECORDED
        issues: list[A.Issue] = []
        if problems:
            issues.append(A.Issue(code="map.capture_damaged", detail="; ".join(problems[:3])))
        if mismatch:
            issues.append(A.Issue(code="map.defence_mismatch", detail="; ".join(mismatch)))
        if session not in ("complete", "incomplete"):
            why = f"the session ended {session}" if end else "the capture log has no end record"
            reason = (end or {}).get("reason")
            issues.append(A.Issue(code="map.capture_error",
                                  detail=f"{why}: {reason}" if reason else why))
        if not observed:
            issues.append(A.Issue(code="map.no_execution_observed",
                                  detail="no model call and no tool call was recorded"))
        lvn = None
        if session in ("complete", "incomplete"):
            if end is not None and not isinstance(end.get("calls"), int):
                issues.append(A.Issue(code="map.unverifiable_accounting",
                                      detail="the end record has no worker call count"))
            elif end is not None:
                starts = sum(1 for r in raw if r.get("kind") == "model_call_start")
                if end["calls"] != starts:
                    issues.append(A.Issue(code="map.capture_damaged",
                                          detail=f"the worker counted {end['calls']} model "
                                                 f"call(s), the capture records {starts}"))
            if native is None:
                why = ("the native log is missing" if ev.native is None
                       else "the native log is not a readable AgentDojo log")
                issues.append(A.Issue(code="map.native_missing", detail=why))
                lvn = A.LiveVsNative(checked=False, reason=why)
            else:
                lvn = live_native.check(raw, records, native)
                if not lvn.agree:
                    issues.append(A.Issue(code="map.live_native_disagree",
                                          detail="; ".join(lvn.differences[:3])))
        else:
            lvn = A.LiveVsNative(checked=False, reason="the session did not complete")
        refused = ev.attempt.staging_refused or []
        if refused:  # T0 sealed the session errored: what the worker staged was refused
            issues.append(A.Issue(code="map.staging_refused", detail="; ".join(refused[:3])))
        codes = {i.code for i in issues}
        if codes & {"map.capture_damaged", "map.capture_error", "map.defence_mismatch",
                    "map.staging_refused"}:
            status = "failed"
        elif issues:
            status = "ok_with_issues"
        else:
            status = "ok"
        reason = (end or {}).get("reason") if end else (problems[0] if problems else None)
        if refused:
            reason = ev.attempt.reason
        outcome = A.Outcome(status=status, session_status=session, execution_observed=observed,
                            utility=_bool((end or {}).get("utility")),
                            security=_bool((end or {}).get("security")), issues=issues,
                            live_vs_native=lvn, reason=reason)
        return A.AER(header=header, records=records, outcome=outcome)


MAPPER = CaptureMapper()
