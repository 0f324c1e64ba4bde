"""The mapper of an AgentDojo-shaped session's capture/0.1 log, for a plugin to reuse.

An AgentDojo-shaped worker (a loop of model calls, each reply's tool calls run in order,
the cell scored at the end) leaves the same capture log whatever its benchmark: a header
(session, cell, backend, plan and configuration digests, the agent as configured, the
declared instrumentation), model calls (``model_call_start`` … ``model_call_end`` with
their ``wire_request``, ``wire_response`` and ``wire_error`` attempts; the replies OpenAI
chat completions or Anthropic messages), ``tool_result``, ``environment_digest`` and
``note`` records, and an ``end`` record (status, utility, security, the worker's call
count). :class:`DojoCaptureMapper` maps all of that to an AER of mode ``live``: a plugin
subclasses it, names itself, and overrides only what its benchmark adds (a native log and
its live-versus-native check, records of its own kinds, a defence's actors).

It is pure: the same bytes give the same AER. Whatever the evidence lacks is
``"not recorded"``; a session that failed is mapped all the same, as a failed execution with
its register codes (docs/formats/aer-0.1.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from agentprov_core.evidence import aer as A
from agentprov_core.evidence import capture_view
from agentprov_core.evidence.aer import NOT_RECORDED
from agentprov_core.evidence.capture_view import CaptureView
from agentprov_core.live.sse import reply_body
from agentprov_core.mapping import CAPTURE_FORMAT, LiveEvidence

#: a declared instrumentation item whose ``mode`` is one of these changes what is sent
REQUEST_MODIFYING_MODES = ("modify", "rewrite")
#: the register codes that make an execution ``failed`` whatever else it holds
FAILING = frozenset({"map.capture_damaged", "map.capture_error", "map.defence_mismatch",
                     "map.staging_refused"})


def canonical(value: Any) -> bytes:
    """The JSON a tool result's ``result_sha256`` is the digest of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str).encode("utf-8")


def sha256(data: bytes) -> str:
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


def parse_arguments(value: Any) -> Any:
    """Tool-call arguments as the model gave them: parsed JSON when a string parses, else
    the value itself."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def parse_reply(body: Any) -> tuple[A.Message | None, Any, Any, A.Usage]:
    """``(message, served_model, finish_reason, usage)`` of a reply body: an OpenAI-style
    chat completion or an Anthropic message (a recorded Anthropic event stream is read as
    the message it assembles into). Unknown shapes give no message."""
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
                                           arguments=parse_arguments(fn.get("arguments"))))
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


@dataclass
class Pending:
    """The tool calls the last reply asked for and no tool result has answered yet."""

    calls: list[tuple[str, A.ToolCallRequest]] = field(default_factory=list)

    def take(self, function: Any, arguments: Any) -> tuple[Any, Any]:
        """(tool call id, model call id) of the pending call with this function and these
        arguments, taken off the list; not recorded when none matches."""
        for i, (c, tc) in enumerate(self.calls):
            if tc.function == function and tc.arguments == arguments:
                del self.calls[i]
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


def request_modifying(items: list[str]) -> list[str]:
    """The declared items that change requests: those whose ``mode`` is modify or rewrite."""
    return [i for i in items if any(f" mode: {m}" in i for m in REQUEST_MODIFYING_MODES)]


def _bool(v: Any) -> Any:
    return v if isinstance(v, bool) else NOT_RECORDED


# ------------------------------------------------------------------------------ the mapper
class DojoCaptureMapper:
    """An AgentDojo-shaped session's capture log to an AER (see the module's docstring).

    A subclass sets :attr:`name`, :attr:`version` (as its ``MapperRef`` declares them) and
    :attr:`source` (the source a header that names none is of), and overrides what its
    benchmark adds; each method below says what it does by default.
    """

    name: str
    version: str
    evidence_formats: tuple[str, ...] = (CAPTURE_FORMAT,)
    source: str
    #: why the live-versus-native check is not made when :meth:`native` gives nothing
    no_native: str = "the benchmark keeps no native log"

    # --------------------------------------------------------------- what a subclass adds
    def native(self, ev: LiveEvidence) -> Any:
        """The benchmark's own log, parsed; ``None`` (the default) when it keeps none."""
        return None

    def native_evidence(self, ev: LiveEvidence, native: Any) -> list[A.Evidence]:
        """The header's evidence entries besides the capture log's: none by default."""
        return []

    def defence(self, view: CaptureView, ev: LiveEvidence) -> tuple[str, list[str]]:
        """(the defence the session ran, the problems of comparing it with the ledger's):
        by default the ledger's defence, unchecked."""
        return ev.attempt.defence or "none", []

    def actors(self, defense_id: str, view: CaptureView) -> Any:
        """The header's actors besides the agent: none (unset) by default."""
        return UNSET

    def record(self, r: dict[str, Any], pending: Pending,
               attempt: Any) -> list[A.Record] | None:
        """The AER records of a capture record this benchmark records in its own way
        (``None``, the default: the record is mapped as every AgentDojo-shaped one is)."""
        return None

    def live_vs_native(self, view: CaptureView, records: list[A.Record], native: Any,
                       ev: LiveEvidence) -> tuple[A.LiveVsNative, list[A.Issue]]:
        """The live-versus-native check of a session that completed, and its issues: by
        default not checked, saying :attr:`no_native`."""
        return A.LiveVsNative(checked=False, reason=self.no_native), []

    # --------------------------------------------------------------------- the mapping
    def records(self, raw: list[dict[str, Any]], attempt: Any) -> list[A.Record]:
        """The AER's records in the capture's order; a tool call is linked to the model call
        whose reply asked for it (same function and arguments)."""
        out: list[tuple[int, A.Record]] = []
        calls = _model_calls(raw)
        mapped = {cid: _model_call(cid, c) for cid, c in calls.items()}
        out += [(calls[cid]["seq"], mc) for cid, mc in mapped.items()]
        pending = Pending()
        replied_at = {mc.attempts[-1].capture_seq[-1]: mc for mc in mapped.values()
                      if mc.reply is not None}  # the seq of the reply the element used
        for r in raw:
            kind, t = r.get("kind"), r.get("t", NOT_RECORDED)
            if r.get("seq") in replied_at:
                mc = replied_at[r["seq"]]
                pending.calls = [(mc.call_id, tc) for tc in mc.reply.tool_calls]
            elif (own := self.record(r, pending, attempt)) is not None:
                out += [(r["seq"], x) for x in own]
            elif kind == "tool_result":
                tid, cid = pending.take(r.get("tool"), r.get("arguments"))
                out.append((r["seq"], A.ToolCall(
                    tool_call_id=tid, call_id=cid, function=str(r.get("tool")),
                    arguments=r.get("arguments"), result=r.get("result"),
                    result_sha256=sha256(canonical(r.get("result"))), error=r.get("error"),
                    t=t)))
            elif kind == "environment_digest":
                out.append((r["seq"], _environment_digest(r, t)))
            elif kind == "note":
                out.append((r["seq"], A.Note(code=str(r.get("code")), text=str(r.get("text")),
                                             t=t)))
        return [r for _, r in sorted(out, key=lambda x: x[0])]

    def header(self, ev: LiveEvidence, view: CaptureView, native: Any,
               defense_id: str) -> A.Header:
        a, m, h, end, raw = ev.attempt, ev.manifest or {}, view.header, view.end, view.raw
        cell, backend = view.part("cell"), view.part("backend")
        start = next((r for r in raw if r.get("kind") == "model_call_start"), {})
        source = h.get("source") or m.get("source") or self.source
        attack = cell.get("attack") or None
        evidence = []
        if ev.capture is not None:
            evidence.append(A.Evidence(role="capture", format=CAPTURE_FORMAT,
                                       sha256=sha256(ev.capture), bytes=len(ev.capture),
                                       path=ev.capture_path or NOT_RECORDED,
                                       head_sha256=a.capture_head_sha256))
        evidence += self.native_evidence(ev, native)
        items = [str(i) for i in h.get("declared_instrumentation") or []]
        display = view.part("agent").get("display_name")
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
            producer=capture_view.producer(ev, view, self.name, self.version),
            evidence=evidence, plan_sha256=h.get("plan_sha256") or a.plan_sha256 or NOT_RECORDED,
            config_digest=h.get("config_digest") or a.config_digest or NOT_RECORDED,
            started_at=h.get("started_at") or NOT_RECORDED,
            ended_at=capture_view.ended_at(h.get("started_at"), end),
            actors=self.actors(defense_id, view))

    def map(self, evidence: LiveEvidence) -> A.AER:
        ev = evidence
        view = capture_view.read(ev)  # a missing end record is map.capture_error, below
        raw, problems, end = view.raw, view.problems, view.end
        native = self.native(ev)
        defense_id, mismatch = self.defence(view, ev)
        header = self.header(ev, view, native, defense_id)
        records = self.records(raw, ev.attempt)
        observed = any(isinstance(r, (A.ModelCall, A.ToolCall)) for r in records)
        session = view.session
        issues: list[A.Issue] = []
        if problems:
            issues.append(A.Issue(code="map.capture_damaged", detail="; ".join(problems[:3])))
        if mismatch:
            issues.append(A.Issue(code="map.defence_mismatch", detail="; ".join(mismatch)))
        issues += [i for i in view.issues() if i.code == "map.capture_error"]
        if not observed:
            issues.append(A.Issue(code="map.no_execution_observed",
                                  detail="no model call and no tool call was recorded"))
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
            lvn, found = self.live_vs_native(view, records, native, ev)
            issues += found
        else:
            lvn = A.LiveVsNative(checked=False, reason="the session did not complete")
        refused = ev.attempt.staging_refused or []
        if refused:  # T0 sealed the session errored: what the worker staged was refused
            issues.append(A.Issue(code="map.staging_refused", detail="; ".join(refused[:3])))
        outcome = A.Outcome(
            status=capture_view.status(issues, FAILING), session_status=session,
            execution_observed=observed, utility=_bool((end or {}).get("utility")),
            security=_bool((end or {}).get("security")), issues=issues, live_vs_native=lvn,
            reason=ev.attempt.reason if refused else view.reason())
        return A.AER(header=header, records=records, outcome=outcome)
