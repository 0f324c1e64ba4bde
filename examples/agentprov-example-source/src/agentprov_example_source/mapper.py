"""The mapper ``examplebench.capture``: an examplebench session's capture/0.1 log to an AER.

examplebench keeps no native log: the capture log is all its evidence. The mapper reads
its header (session, cell, backend, digests, agent, declared instrumentation), its model
calls (``model_call_start`` … ``model_call_end`` with their wire attempts; the replies are
OpenAI chat completions), its ``tool_result`` and ``note`` records and its ``end`` record
(status, utility, security, the worker's call count), plus the ledger entry and the
manifest. It is pure: the same bytes give the same AER. Whatever the log lacks is
``"not recorded"``; a session that failed is mapped all the same, as a failed execution.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import agentprov_capture

from agentprov_core.api import NOT_RECORDED, LiveEvidence
from agentprov_core.api import aer as A

# as plugin.py's MapperRef declares them (a reference that differs is refused when it loads)
NAME = "examplebench.capture"
VERSION = "0.1.0"
CAPTURE_FORMAT = "capture/0.1"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _reply(body: Any) -> tuple[A.Message | None, Any, Any, A.Usage]:
    """(message, served model, finish reason, usage) of a chat completion; no message when
    the body is not one (the worker is untrusted: a reply of another shape is no reply)."""
    try:
        choice, usage = body["choices"][0], body.get("usage") or {}
        m = choice["message"]
        calls = []
        for tc in m.get("tool_calls") or []:
            try:
                args = json.loads(tc["function"].get("arguments") or "{}")
            except ValueError:
                args = tc["function"].get("arguments")
            calls.append(A.ToolCallRequest(id=tc.get("id", NOT_RECORDED),
                                           function=str(tc["function"].get("name")),
                                           arguments=args))
        return (A.Message(role=str(m.get("role", "assistant")), content=m.get("content"),
                          tool_calls=calls), body.get("model", NOT_RECORDED),
                choice.get("finish_reason", NOT_RECORDED),
                A.Usage(input_tokens=_int(usage.get("prompt_tokens")) or NOT_RECORDED,
                        output_tokens=_int(usage.get("completion_tokens")) or NOT_RECORDED))
    except (KeyError, IndexError, TypeError, AttributeError):
        return None, NOT_RECORDED, NOT_RECORDED, A.Usage()


def _model_call(start: dict[str, Any], attempts: list[dict[str, Any]],
                end: dict[str, Any]) -> A.ModelCall:
    wire = []
    for i, (req, out) in enumerate((a["req"], a.get("out") or {}) for a in attempts):
        error = out.get("kind") == "wire_error"
        wire.append(A.WireAttempt(
            attempt_id=str(req.get("attempt_id")), attempt_index=i,
            request_sha256=req.get("body_sha256", NOT_RECORDED),
            response_sha256=NOT_RECORDED if error or not out else out.get("body_sha256"),
            http_status=_int(out.get("status")),
            error_type=str(out.get("error_type")) if error else None,
            elapsed_ms=_int(out.get("elapsed_ms")), capture_seq=[req["seq"]] + (
                [out["seq"]] if out else [])))
    last = (attempts[-1].get("out") or {}) if attempts else {}
    reply, served, finish, usage = (None, NOT_RECORDED, NOT_RECORDED, A.Usage())
    if last.get("kind") == "wire_response" and 200 <= (_int(last.get("status")) or 0) < 300:
        reply, served, finish, usage = _reply(last.get("body"))
    sent = attempts[0]["req"].get("body") if attempts else None
    return A.ModelCall(
        call_id=str(start.get("call_id")), element=start.get("element", NOT_RECORDED),
        model_requested=start.get("model", NOT_RECORDED), status=end.get("status", NOT_RECORDED),
        request_sha256=wire[0].request_sha256 if wire else NOT_RECORDED,
        reply_sha256=last.get("body_sha256", NOT_RECORDED) if reply else NOT_RECORDED,
        messages_sent=len(sent["messages"]) if isinstance(sent, dict)
        and isinstance(sent.get("messages"), list) else NOT_RECORDED,
        reply=reply, served_model=served, finish_reason=finish, usage=usage,
        first_attempt_id=end.get("first_attempt_id", NOT_RECORDED), attempts=wire,
        retries=max(len(wire) - 1, 0),
        error_type=str(end["error_type"]) if end.get("error_type") is not None else None,
        t=start.get("t", NOT_RECORDED))


def records(raw: list[dict[str, Any]]) -> list[A.Record]:
    """The AER's records, in the capture's order; a tool call is linked to the model call
    whose reply asked for it (the worker runs a reply's tool calls in order)."""
    out: list[A.Record] = []
    calls: dict[str, dict[str, Any]] = {}
    attempts: dict[str, dict[str, Any]] = {}
    pending: list[tuple[str, A.ToolCallRequest]] = []
    for r in raw:
        kind, t = r.get("kind"), r.get("t", NOT_RECORDED)
        if kind == "model_call_start":
            calls[r.get("call_id")] = {"start": r, "attempts": [], "at": len(out)}
            out.append(None)  # its place; filled at the call's end
        elif kind == "wire_request" and r.get("call_id") in calls:
            attempts[r.get("attempt_id")] = {"req": r}
            calls[r["call_id"]]["attempts"].append(attempts[r.get("attempt_id")])
        elif kind in ("wire_response", "wire_error") and r.get("attempt_id") in attempts:
            attempts[r["attempt_id"]]["out"] = r
        elif kind == "model_call_end" and r.get("call_id") in calls:
            c = calls[r["call_id"]]
            out[c["at"]] = mc = _model_call(c["start"], c["attempts"], r)
            pending = [(mc.call_id, tc) for tc in (mc.reply.tool_calls if mc.reply else [])]
        elif kind == "tool_result":
            i = next((i for i, (_, tc) in enumerate(pending) if tc.function == r.get("tool")),
                     None)
            tid, cid = (NOT_RECORDED, NOT_RECORDED) if i is None else (
                pending[i][1].id, pending.pop(i)[0])
            out.append(A.ToolCall(
                tool_call_id=tid, call_id=cid, function=str(r.get("tool")),
                arguments=r.get("arguments"), result=r.get("result"),
                result_sha256=_sha(agentprov_capture.canonical(r.get("result"))),
                error=None if r.get("error") is None else str(r["error"]), t=t))
        elif kind == "note":
            out.append(A.Note(code=str(r.get("code")), text=str(r.get("text")), t=t))
    for c in calls.values():  # a call the log never ended (a cell killed mid-call)
        if out[c["at"]] is None:
            out[c["at"]] = _model_call(c["start"], c["attempts"], {})
    return [r for r in out if r is not None]  # (a call id started twice keeps the second)


class CaptureMapper:
    """``examplebench.capture``: see the module's docstring."""

    name = NAME
    version = VERSION
    evidence_formats = (CAPTURE_FORMAT,)

    def map(self, evidence: LiveEvidence) -> A.AER:
        from agentprov_core.api import __version__

        ev, a, m = evidence, evidence.attempt, evidence.manifest or {}
        problems = ["the capture log is missing from the raw store"]
        raw: list[dict[str, Any]] = []
        if ev.capture is not None:
            chain = agentprov_capture.check(ev.capture, a.capture_head_sha256,
                                            require_end=False)
            raw = [r for r in chain.records if isinstance(r, dict)]
            problems = list(chain.problems)
        h = raw[0] if raw and raw[0].get("kind") == "header" else {}
        end = raw[-1] if raw and raw[-1].get("kind") == "end" else {}
        cell, agent = h.get("cell") or {}, h.get("agent") or {}
        source = h.get("source") or m.get("source") or "examplebench"
        attack = cell.get("attack") or None
        producer = m.get("producer") or {}
        items = [str(i) for i in h.get("declared_instrumentation") or []]
        header = A.Header(
            execution_id=str(h.get("session_id") or a.session_id), mode="live", source=source,
            backend=A.Backend(id=str(m.get("backend") or source),
                              environment_id=(h.get("backend") or {}).get(
                                  "environment_id", NOT_RECORDED),
                              identity_sha256=(h.get("backend") or {}).get(
                                  "identity_sha256", NOT_RECORDED),
                              benchmark_version=h.get("benchmark_version") or NOT_RECORDED),
            task=A.Task(source=source, suite=cell.get("suite", NOT_RECORDED),
                        user_task_id=cell.get("user_task_id", NOT_RECORDED),
                        injection_task_id=cell.get("injection_task_id") if attack else None,
                        attack=attack, cell_key=str(cell.get("cell_key") or a.cell_key),
                        defense_id=a.defence or "none", unit=a.unit, attempt=a.attempt,
                        repeat=a.repeat),
            agent=A.Agent(model=agent.get("model", NOT_RECORDED),
                          display_name=agent.get("display_name"),
                          endpoint_kind=agent.get("endpoint_kind", NOT_RECORDED),
                          endpoint=agent.get("base_url", NOT_RECORDED),
                          element=agent.get("element", NOT_RECORDED),
                          parameters=dict(agent.get("parameters") or {})),
            instrumentation=items,
            request_modifying=[i for i in items if " mode: modify" in i or " mode: rewrite" in i],
            producer=A.Producer(version=__version__, mapper=NAME, mapper_version=VERSION,
                                sandbox=producer.get("sandbox"),
                                test_only=bool(m.get("test_only") or h.get("test_only")),
                                preset=producer.get("preset")),
            evidence=[] if ev.capture is None else [A.Evidence(
                role="capture", format=CAPTURE_FORMAT, sha256=_sha(ev.capture),
                bytes=len(ev.capture), path=ev.capture_path or NOT_RECORDED,
                head_sha256=a.capture_head_sha256)],
            plan_sha256=h.get("plan_sha256") or NOT_RECORDED,
            config_digest=h.get("config_digest") or NOT_RECORDED,
            started_at=h.get("started_at") or NOT_RECORDED)
        recs = records(raw)
        observed = any(isinstance(r, (A.ModelCall, A.ToolCall)) for r in recs)
        session = end.get("status", NOT_RECORDED)
        issues = [A.Issue(code="map.capture_damaged", detail="; ".join(problems[:3]))] \
            if problems else []
        starts = sum(1 for r in raw if r.get("kind") == "model_call_start")
        if isinstance(end.get("calls"), int) and end["calls"] != starts:
            issues.append(A.Issue(code="map.capture_damaged", detail=(
                f"the worker counted {end['calls']} model call(s), the capture records "
                f"{starts}")))
        if session not in ("complete", "incomplete"):
            why = f"the session ended {session}" if end else "the capture log has no end record"
            issues.append(A.Issue(code="map.capture_error", detail=(
                f"{why}: {end['reason']}" if end.get("reason") else why)))
        if not observed:
            issues.append(A.Issue(code="map.no_execution_observed",
                                  detail="no model call and no tool call was recorded"))
        refused = a.staging_refused or []  # T0 sealed the session: what it staged was refused
        if refused:
            issues.append(A.Issue(code="map.staging_refused", detail="; ".join(refused[:3])))
        failing = {"map.capture_damaged", "map.capture_error", "map.staging_refused"}
        status = ("failed" if any(i.code in failing for i in issues)
                  else "ok_with_issues" if issues else "ok")
        outcome = A.Outcome(
            status=status, session_status=session, execution_observed=observed,
            utility=end["utility"] if isinstance(end.get("utility"), bool) else NOT_RECORDED,
            security=end["security"] if isinstance(end.get("security"), bool) else NOT_RECORDED,
            issues=issues, reason=a.reason if refused else end.get("reason"),
            live_vs_native=A.LiveVsNative(checked=False,
                                          reason="examplebench keeps no native log"))
        return A.AER(header=header, records=recs, outcome=outcome)


MAPPER = CaptureMapper()
