"""The ``inspect.eval`` mapper: an Inspect cell's ``.eval`` log to an AER of mode ``import``.

The evidence is Inspect's own record (``by: source``, R-2.12, R-25.5): the log is read by
Inspect's reader (:mod:`agentprov_inspect_harness.evalread`) and every record of the AER
comes from it, sample by sample in the log's order:

* a note ``inspect.sample`` opening each sample (its id, epoch, error and limit);
* each model event as a ``model_call``: the agent's, and each judge's under its actor,
  ``judge0``, ``judge1``… in the order of the plan's judge roles (R-25.7); a failed attempt
  (an event with ``error``) is a model call that failed;
* each tool event as a ``tool_call``, linked to the model call that asked for it;
* each score as a decision ``inspect.score``.

The wire log (capture/0.1) is stored beside the log and not mapped (R-25.6); it is read for
the header (what ran, the agent, the declared instrumentation) and for the **wire-versus-
eval check**, recorded as the live-versus-native check: every model event Inspect recorded
was on the wire, and nothing else was. Inspect sends each request with its own id in the
``x-irid`` header, which the capture records, so each model event is paired with its wire
attempt by that id, and the request body Inspect recorded (``call.request``, without its
``extra_headers`` and unset fields) must equal the body on the wire. A session recorded
before the capture kept ``x-irid`` is paired in order. The model calls take the wire
attempt's call id and digests, so an AER's calls can be followed to the wire log.

A sample that errored in the harness is kept and imported, and raises ``map.sample_errored``
(D-743: its cell is incomplete). A log Inspect's reader cannot read raises
``map.native_missing`` and the check is not made.
"""

from __future__ import annotations

import hashlib
from typing import Any

from msgspec import UNSET

from agentprov_core.api import CAPTURE_FORMAT, NOT_RECORDED, CaptureView, LiveEvidence, capture_view
from agentprov_core.api import aer as A
from agentprov_inspect_harness import evalread
from agentprov_inspect_harness.plugin import EVAL_FORMAT, EVAL_MAPPER

NAME = EVAL_MAPPER.name
VERSION = EVAL_MAPPER.version
#: the request header that carries Inspect's id of a model request
REQUEST_ID_HEADER = "x-irid"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text(content: Any) -> Any:
    """A message's text: a string, or the text parts of a list of content parts joined."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)
                 and p.get("type") == "text" and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


# ------------------------------------------------------------------------------ the wire
class Wire:
    """The wire attempts of the capture log, in order, with their request ids."""

    def __init__(self, raw: list[dict[str, Any]]) -> None:
        self.attempts: list[dict[str, Any]] = []
        by_attempt: dict[Any, dict[str, Any]] = {}
        for r in raw:
            kind = r.get("kind")
            if kind == "wire_request":
                headers = r.get("headers") if isinstance(r.get("headers"), dict) else {}
                a = {"req": r, "out": None, "irid": headers.get(REQUEST_ID_HEADER),
                     "taken": False}
                self.attempts.append(a)
                by_attempt[r.get("attempt_id")] = a
            elif kind in ("wire_response", "wire_error") and r.get("attempt_id") in by_attempt:
                by_attempt[r["attempt_id"]]["out"] = r
        self.by_irid = {a["irid"]: a for a in self.attempts if a["irid"]}
        self.paired_by_id = bool(self.by_irid)

    def take(self, irid: Any) -> dict[str, Any] | None:
        """The wire attempt of the model event whose request id is ``irid`` (by id; in
        order when the capture holds no ids), or None when none is left."""
        if self.paired_by_id:
            a = self.by_irid.get(irid) if isinstance(irid, str) else None
        else:
            a = next((x for x in self.attempts if not x["taken"]), None)
        if a is None or a["taken"]:
            return None
        a["taken"] = True
        return a

    def untaken(self) -> list[dict[str, Any]]:
        return [a for a in self.attempts if not a["taken"]]

    def pair(self, events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """The wire attempt of each model event (by ``id()`` of the event): by its request
        id; then each event whose request Inspect did not record (it leaves out the
        request of a call identical to an earlier one) takes, in order, the first attempt
        left whose body asks for the event's model."""
        out: dict[int, dict[str, Any]] = {}
        unrecorded = []
        for e in events:
            request = event_request(e)
            if request is None:
                unrecorded.append(e)
                continue
            headers = request.get("extra_headers")
            a = self.take(headers.get(REQUEST_ID_HEADER) if isinstance(headers, dict) else None)
            if a is not None:
                out[id(e)] = a
        for e in unrecorded:
            model = str(e.get("model") or "").rsplit("/", 1)[-1]
            a = next((x for x in self.attempts if not x["taken"] and isinstance(
                x["req"].get("body"), dict) and x["req"]["body"].get("model") == model), None)
            if a is not None:
                a["taken"] = True
                out[id(e)] = a
        return out


def event_request(e: dict[str, Any]) -> dict[str, Any] | None:
    """The request body a model event recorded (``call.request``), or None."""
    call = e.get("call")
    request = call.get("request") if isinstance(call, dict) else None
    return request if isinstance(request, dict) else None


def sent_body(request: Any) -> Any:
    """The body Inspect's provider sent, as its model event records it: ``call.request``
    without ``extra_headers`` (sent as headers) and the fields it left unset (``None``,
    which the SDK does not send)."""
    if not isinstance(request, dict):
        return request
    return {k: v for k, v in request.items() if v is not None and k != "extra_headers"}


# ------------------------------------------------------------------------------ records
def _usage(u: Any) -> A.Usage:
    u = u if isinstance(u, dict) else {}

    def n(k: str) -> Any:
        v = u.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else NOT_RECORDED

    return A.Usage(input_tokens=n("input_tokens"), output_tokens=n("output_tokens"),
                   reasoning_tokens=n("reasoning_tokens"),
                   cached_input_tokens=n("input_tokens_cache_read"))


def _reply(output: Any) -> tuple[A.Message | None, Any, Any]:
    """(reply message, served model, finish reason) of a model event's output."""
    if not isinstance(output, dict):
        return None, NOT_RECORDED, NOT_RECORDED
    choices = output.get("choices") if isinstance(output.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    msg = first.get("message") if isinstance(first.get("message"), dict) else None
    served = output.get("model") if isinstance(output.get("model"), str) else NOT_RECORDED
    finish = first.get("stop_reason", NOT_RECORDED) if first else NOT_RECORDED
    if msg is None:
        return None, served, finish
    calls = [A.ToolCallRequest(id=tc.get("id", NOT_RECORDED), function=str(tc.get("function")),
                               arguments=tc.get("arguments"))
             for tc in msg.get("tool_calls") or [] if isinstance(tc, dict)]
    return (A.Message(role=str(msg.get("role") or "assistant"), content=_text(msg.get("content")),
                      tool_calls=calls), served, finish)


class _Mapping:
    """One log's records, built sample by sample, with the wire-versus-eval findings."""

    def __init__(self, wire: Wire, actors: dict[str, str], element: Any,
                 paired: dict[int, dict[str, Any]]) -> None:
        self.wire, self.actors, self.element, self.paired = wire, actors, element, paired
        self.records: list[A.Record] = []
        self.differences: list[str] = []
        self.errored: list[str] = []
        self._n = 0

    def model_call(self, e: dict[str, Any], where: str) -> A.ModelCall:
        recorded = event_request(e)
        request = recorded or {}
        role = e.get("role")
        who = f"{where}, {role or 'agent'}"
        a = self.paired.get(id(e))
        if a is None:
            self.differences.append(f"the model event {e.get('uuid')} ({who}) has no wire "
                                    "request")
        elif recorded is None:  # Inspect kept no request: the pairing is by order
            self.records.append(A.Note(
                code="inspect.request_not_recorded",
                text=f"the model event {e.get('uuid')} ({who}) records no request; it is "
                     f"wire attempt {a['req'].get('attempt_id')}, the next one of its model "
                     "(its body is not compared)",
                data={"event": e.get("uuid"), "attempt_id": a["req"].get("attempt_id")}))
        elif sent_body(request) != a["req"].get("body"):
            self.differences.append(f"the model event {e.get('uuid')} ({who}): the request "
                                    f"body Inspect recorded is not the body of wire attempt "
                                    f"{a['req'].get('attempt_id')}")
        error = e.get("error")
        reply, served, finish = _reply(e.get("output")) if not error else (
            None, NOT_RECORDED, NOT_RECORDED)
        out = (a or {}).get("out") or {}
        msgs = request.get("messages")
        self._n += 1
        actor = self.actors.get(role) if isinstance(role, str) else None
        if isinstance(role, str) and actor is None:
            self.differences.append(f"the model event {e.get('uuid')} ({who}) has a role the "
                                    "plan has no judge for")
        return A.ModelCall(
            call_id=str(a["req"].get("call_id") or f"call-{a['req'].get('attempt_id')}")
            if a else f"inspect-{e.get('uuid') or self._n}",
            element=self.element,
            model_requested=request.get("model", NOT_RECORDED) if recorded is not None
            else (a["req"].get("body") or {}).get("model", NOT_RECORDED) if a else NOT_RECORDED,
            status="error" if error else "ok",
            request_sha256=a["req"].get("body_sha256", NOT_RECORDED) if a else NOT_RECORDED,
            reply_sha256=out.get("body_sha256", NOT_RECORDED) if reply is not None
            else NOT_RECORDED,
            messages_sent=len(msgs) if isinstance(msgs, list) else NOT_RECORDED,
            reply=reply, served_model=served, finish_reason=finish,
            usage=_usage((e.get("output") or {}).get("usage") if not error else None),
            first_attempt_id=str(a["req"].get("attempt_id")) if a else NOT_RECORDED,
            attempts=[capture_view.wire_attempt(a["req"], a["out"])] if a else [],
            error_type=str(error).splitlines()[0][:200] if error else None,
            t=a["req"].get("t", NOT_RECORDED) if a else NOT_RECORDED,
            actor=actor if actor is not None else UNSET)

    def sample(self, s: dict[str, Any]) -> None:
        sid, epoch = s.get("id"), s.get("epoch")
        where = f"sample {sid} epoch {epoch}"
        err = s.get("error") if isinstance(s.get("error"), dict) else None
        limit = s.get("limit") if isinstance(s.get("limit"), dict) else None
        if err is not None:
            self.errored.append(f"{sid}/{epoch}: {str(err.get('message'))[:200]}")
        self.records.append(A.Note(
            code="inspect.sample", text=where,
            data={"id": sid, "epoch": epoch,
                  "error": err.get("message") if err else None,
                  "limit": {"type": limit.get("type"), "limit": limit.get("limit")}
                  if limit else None}))
        asked: dict[str, str] = {}  # tool call id -> the model call that asked for it
        for e in s.get("events") or []:
            if not isinstance(e, dict):
                continue
            if e.get("event") == "model":
                mc = self.model_call(e, where)
                self.records.append(mc)
                for tc in mc.reply.tool_calls if mc.reply is not None else []:
                    if isinstance(tc.id, str):
                        asked[tc.id] = mc.call_id
            elif e.get("event") == "tool":
                terr = e.get("error") if isinstance(e.get("error"), dict) else None
                tid = e.get("id")
                self.records.append(A.ToolCall(
                    tool_call_id=tid if isinstance(tid, str) else NOT_RECORDED,
                    call_id=asked.get(tid, NOT_RECORDED) if isinstance(tid, str)
                    else NOT_RECORDED,
                    function=str(e.get("function")), arguments=e.get("arguments"),
                    result=e.get("result"),
                    error=str(terr.get("message")) if terr else None))
        scores = s.get("scores") if isinstance(s.get("scores"), dict) else {}
        for scorer, score in sorted(scores.items()):
            value = score.get("value") if isinstance(score, dict) else None
            self.records.append(A.Decision(
                code="inspect.score", text=f"{where}: {scorer} {value}",
                data={"sample": sid, "epoch": epoch, "scorer": scorer, "value": value}))


# ------------------------------------------------------------------------------ header
def judge_actors(h: dict[str, Any]) -> dict[str, str]:
    """The judges' actor ids by role: ``judge0``, ``judge1``… in the order of the plan's
    roles (the capture header's ``inspect.judges``, sorted: refusal_judge, semantic_judge
    for AgentHarm)."""
    insp = h.get("inspect") if isinstance(h.get("inspect"), dict) else {}
    judges = insp.get("judges") if isinstance(insp.get("judges"), dict) else {}
    return {role: f"judge{i}" for i, role in enumerate(sorted(judges))}


def _header(ev: LiveEvidence, view: CaptureView, log: dict[str, Any] | None,
            actors: dict[str, str]) -> A.Header:
    a, m, h = ev.attempt, ev.manifest or {}, view.header
    cell, backend, insp = view.part("cell"), view.part("backend"), view.part("inspect")
    source = h.get("source") or m.get("source") or NOT_RECORDED
    judges = insp.get("judges") if isinstance(insp.get("judges"), dict) else {}
    evidence = []
    if ev.native is not None:
        version = (log or {}).get("version")
        evidence.append(A.Evidence(role="inspect_log",
                                   format=f"{EVAL_FORMAT}/{version or 'unknown'}",
                                   sha256=_sha(ev.native), bytes=len(ev.native),
                                   path=ev.native_path or NOT_RECORDED))
    if ev.capture is not None:
        evidence.append(A.Evidence(role="capture", format=CAPTURE_FORMAT,
                                   sha256=_sha(ev.capture), bytes=len(ev.capture),
                                   path=ev.capture_path or NOT_RECORDED,
                                   head_sha256=a.capture_head_sha256))
    spec = (log or {}).get("eval") if isinstance((log or {}).get("eval"), dict) else {}
    return A.Header(
        execution_id=str(h.get("session_id") or a.session_id), mode="import",
        source=str(source),
        backend=A.Backend(id=str(m.get("backend") or source),
                          environment_id=backend.get("environment_id", NOT_RECORDED),
                          identity_sha256=backend.get("identity_sha256", NOT_RECORDED),
                          benchmark_version=spec.get("task_version", NOT_RECORDED)),
        task=A.Task(source=str(source), suite=insp.get("task", NOT_RECORDED),
                    user_task_id=NOT_RECORDED, cell_key=str(cell.get("cell_key") or a.cell_key),
                    unit=a.unit, attempt=a.attempt, repeat=a.repeat),
        agent=capture_view.agent(view),
        instrumentation=[str(i) for i in h.get("declared_instrumentation") or []],
        request_modifying=[], producer=capture_view.producer(ev, view, NAME, VERSION),
        evidence=evidence, plan_sha256=h.get("plan_sha256") or a.plan_sha256 or NOT_RECORDED,
        config_digest=h.get("config_digest") or a.config_digest or NOT_RECORDED,
        started_at=h.get("started_at") or NOT_RECORDED,
        ended_at=capture_view.ended_at(h.get("started_at"), view.end),
        actors=[A.Actor(id=actors[r], kind="judge", name=r,
                        model=str(judges.get(r, NOT_RECORDED)))
                for r in sorted(actors)] or UNSET)


# ------------------------------------------------------------------------------ the mapper
class EvalMapper:
    """``inspect.eval``: see the module's docstring."""

    name = NAME
    version = VERSION
    evidence_formats = (EVAL_FORMAT,)

    def read(self, evidence: LiveEvidence) -> dict[str, Any]:
        """The ``.eval`` log as Inspect's JSON form (raises
        :class:`~agentprov_inspect_harness.evalread.EvalUnreadable`)."""
        m = evidence.manifest or {}
        ident = m.get("backend_identity") if isinstance(m.get("backend_identity"), dict) else {}
        return evalread.read(evidence.native or b"", str(ident.get("environment_id") or ""))

    def map(self, evidence: LiveEvidence) -> A.AER:
        ev = evidence
        view = capture_view.read(ev)
        log, unreadable = None, None
        if ev.native is None:
            unreadable = "the .eval log is missing"
        else:
            try:
                log = self.read(ev)
            except evalread.EvalUnreadable as exc:
                unreadable = f"the .eval log is unreadable: {exc}"
        actors = judge_actors(view.header)
        wire = Wire(view.raw)
        samples = [s for s in (log or {}).get("samples") or [] if isinstance(s, dict)]
        events = [e for s in samples for e in s.get("events") or []
                  if isinstance(e, dict) and e.get("event") == "model"]
        mapping = _Mapping(wire, actors, view.part("agent").get("element", NOT_RECORDED),
                           wire.pair(events))
        for s in samples:
            mapping.sample(s)
        records = mapping.records
        observed = any(isinstance(r, (A.ModelCall, A.ToolCall)) for r in records)
        issues = view.issues()
        if not observed:
            issues.append(A.Issue(code="map.no_execution_observed",
                                  detail="no model call and no tool call was recorded"))
        if mapping.errored:
            issues.append(A.Issue(code="map.sample_errored",
                                  detail="; ".join(mapping.errored[:3])))
        if unreadable is not None:
            issues.append(A.Issue(code="map.native_missing", detail=unreadable))
            lvn = A.LiveVsNative(checked=False, reason=unreadable)
        else:
            differences = mapping.differences + [
                f"wire attempt {a['req'].get('attempt_id')} is no model event Inspect "
                "recorded" for a in wire.untaken()]
            lvn = A.LiveVsNative(
                checked=True, agree=not differences,
                compared=["model_events", "request_bodies"], differences=differences[:50]
                + ([f"and {len(differences) - 50} more"] if len(differences) > 50 else []))
            if differences:
                issues.append(A.Issue(code="map.live_native_disagree",
                                      detail="; ".join(differences[:3])))
        refused = ev.attempt.staging_refused or []
        if refused:
            issues.append(A.Issue(code="map.staging_refused", detail="; ".join(refused[:3])))
        outcome = A.Outcome(status=capture_view.status(issues), session_status=view.session,
                            execution_observed=observed, issues=issues, live_vs_native=lvn,
                            reason=ev.attempt.reason if refused else view.reason())
        return A.AER(header=_header(ev, view, log, actors), records=records, outcome=outcome)


MAPPER = EvalMapper()
