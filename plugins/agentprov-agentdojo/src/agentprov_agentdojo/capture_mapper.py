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

from typing import Any

from agentprov_agentdojo import defence_records, live_native
from agentprov_agentdojo.plugin import CAPTURE_MAPPER
from agentprov_core.api import (
    NOT_RECORDED,
    CaptureView,
    DojoCaptureMapper,
    LiveEvidence,
    Pending,
    dojo_mapper,
)
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

# what the tests use of the shared mapper, under the names they know
parse_reply, request_modifying = dojo_mapper.parse_reply, dojo_mapper.request_modifying


class CaptureMapper(DojoCaptureMapper):
    """``agentdojo.capture``: see the module's docstring."""

    name = NAME
    version = VERSION
    source = "agentdojo"

    def native(self, ev: LiveEvidence) -> Any:
        return live_native.parse_native(ev.native) if ev.native is not None else None

    def native_evidence(self, ev: LiveEvidence, native: Any) -> list[A.Evidence]:
        if ev.native is None:
            return []
        version = (native or {}).get("agentdojo_package_version")
        return [A.Evidence(role="native_log", format=f"agentdojo-native/{version or 'unknown'}",
                           sha256=dojo_mapper.sha256(ev.native), bytes=len(ev.native),
                           path=ev.native_path or NOT_RECORDED)]

    def defence(self, view: CaptureView, ev: LiveEvidence) -> tuple[str, list[str]]:
        return defence_records.observed(view.header, view.raw, ev.attempt.defence)

    def actors(self, defense_id: str, view: CaptureView) -> Any:
        return defence_records.actors(defense_id, view.header, view.raw)

    def record(self, r: dict[str, Any], pending: Pending,
               attempt: Any) -> list[A.Record] | None:
        """AgentDojo's ground-truth tool calls, a defence's notes and decisions, and a
        setup refusal."""
        kind, t = r.get("kind"), r.get("t", NOT_RECORDED)
        if kind == "tool_result" and r.get("phase") == "harness":
            return [A.Note(
                code="harness.tool_call",
                text=f"the benchmark called {r.get('tool')} outside the agent's pipeline "
                     "(AgentDojo's ground truth, run to find the injection candidates)"
                     + (f"; error: {r.get('error')}" if r.get("error") else ""), t=t)]
        if kind == "note" and r.get("code") == defence_records.INSTALLED:
            return list(defence_records.digest_notes(r))
        if kind == "note" and r.get("code") == defence_records.DENIED:
            tid, cid = pending.take(r.get("tool"), r.get("arguments"))
            if tid == NOT_RECORDED and isinstance(r.get("tool_call_id"), str):
                tid = r["tool_call_id"]
            return [defence_records.denied_call(r, tid, cid)]
        if defence_records.is_intervention(r):
            return [defence_records.decision(r)]
        if kind == "note" and r.get("code") == "setup_refusal":
            refusal = attempt.setup_refusal if attempt is not None else None
            data = {k: v for k, v in (refusal or {}).items() if k not in ("code", "message")}
            code = r.get("refusal_code") or (refusal or {}).get("code") or "setup_refusal"
            return [A.Decision(code=str(code), text=str(r.get("text")), data=data, t=t)]
        return None

    def live_vs_native(self, view: CaptureView, records: list[A.Record], native: Any,
                       ev: LiveEvidence) -> tuple[A.LiveVsNative, list[A.Issue]]:
        if native is None:
            why = ("the native log is missing" if ev.native is None
                   else "the native log is not a readable AgentDojo log")
            return (A.LiveVsNative(checked=False, reason=why),
                    [A.Issue(code="map.native_missing", detail=why)])
        lvn = live_native.check(view.raw, records, native)
        return lvn, [] if lvn.agree else [A.Issue(code="map.live_native_disagree",
                                                  detail="; ".join(lvn.differences[:3]))]


MAPPER = CaptureMapper()
