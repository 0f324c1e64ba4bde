"""One attempt of a unit: launched through the executor, then ingested by T0.

Each attempt gets a session id and a staging directory in the working corpus; the
executor (:mod:`agentprov_core.backend.executor`) has the worker run the cell there, and
the worker writes the capture/0.1 log and the native log. T0 then reads what
was staged (once, through descriptors: what the worker staged and returned is hostile
input), checks the capture's hash chain, runs the redaction scan, stores both logs in the
raw store and appends the attempt to the ledger. A failed execution is kept, never
discarded.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentprov_capture

from agentprov_core.backend.executor import NODE_LOST
from agentprov_core.base import redaction, timing
from agentprov_core.corpus import staged
from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import WorkingCorpus, now
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence import capture_end
from agentprov_core.run import testfaults
from agentprov_core.run.live import missing_log as live_missing_log
from agentprov_core.run.units import Unit

if TYPE_CHECKING:
    from agentprov_core.backend.executor import Executor
    from agentprov_core.run.live import Live
    from agentprov_core.run.prepare import Prepared


#: the result a cell's host stages beside its logs, and its worker answers with
RESULT = "result.json"


@dataclass
class Flight:
    """An attempt in flight: launched through the executor, not yet ledgered."""

    unit: Unit
    session_id: str
    staging: Path
    started_at: str
    future: Future
    quality: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] | None = None
    charge: Any = None
    #: the executor lost the host it ran on (``cli.environment.node_lost``): its unit is
    #: attempted again in this invocation
    lost: bool = False


def launch(prepared: Prepared, wc: WorkingCorpus, executor: Executor, live: Live, unit: Unit,
           local_model: dict[str, Any] | None = None, first: bool = False) -> Flight:
    """Submit ``unit``'s next attempt to the executor, in a fresh staging directory."""
    o = prepared.request.options
    plan = prepared.plan
    session_id = f"s-{uuid.uuid4().hex[:16]}"
    staging = wc.staging(session_id)
    cell = unit.cell
    agent = live.agent(session_id)
    req = {
        "session_id": session_id, "staging": os.path.abspath(staging),
        "source": prepared.source.meta.name,
        "benchmark_version": plan.benchmark_version, "defence": plan.defence,
        "cell": {"suite": cell.suite, "user_task_id": cell.user_task_id, "attack": cell.attack,
                 "injection_task_id": cell.injection_task_id, "kind": cell.kind,
                 "cell_key": cell.key}
        | ({"samples": list(cell.samples)} if cell.samples is not None else {}),
        "unit": unit.key, "attempt": unit.attempt, "agent": agent,
        "backend": prepared.identity, "plan_sha256": plan.plan_sha256,
        "config_digest": plan.config_digest, "timeout_s": o.cell_timeout or 1800,
    }
    req.update(prepared.source.cell_request(prepared.doc, prepared.catalogue))
    if local_model is not None:  # A14's observation before this cell: the session notes it
        req["local_model"] = local_model
    fault = testfaults.native_log_fault()
    if fault is not None:
        req["test_fault"] = fault
    hostile = testfaults.hostile_fault() if first else None
    if hostile is not None:
        req["test_fault"] = hostile
    try:
        future = executor.submit(req)
    except AgentprovError:
        wc.drop_staging(session_id)  # nothing started in it
        raise
    timing.emit("submit", time.time(), session=session_id)
    return Flight(unit, session_id, staging, now(), future)


def result(executor: Executor, fl: Flight) -> dict[str, Any]:
    """The worker's result of a finished flight; a failure to run it to an answer seals
    its capture ``aborted``. A cell whose host the executor lost (``NODE_LOST``) is marked
    :attr:`Flight.lost`, its reason led by the code (the node named in the message)."""
    try:
        return executor.result(fl.future, timeout=0)
    except AgentprovError as exc:
        fl.lost = exc.code == NODE_LOST
        reason = f"{exc.code}: {exc.message}" if fl.lost else exc.message
        capture_end.append_end(fl.staging / "capture.jsonl", "aborted", reason,
                               "session.node_lost" if fl.lost else "session.worker_failed")
        return {"status": "aborted", "reason": reason}


def staged_result(staging: Path) -> dict[str, Any] | None:
    """The result a cell staged (``result.json``, which its worker answers with), read as
    T0 reads any staging (:func:`agentprov_core.corpus.staged.read`); None when there is
    none or it is not a JSON object. For a cell whose log had ended when its worker was
    ended before it answered (an interrupt): its result names its native log."""
    import json

    data = staged.read(staging).files.get(RESULT)
    with contextlib.suppress(ValueError, RecursionError):
        got = json.loads(data) if data is not None else None
        return got if isinstance(got, dict) else None
    return None


def ingest(prepared: Prepared, wc: WorkingCorpus, fl: Flight, result: dict[str, Any],
           invocation: str, seq: list[int], live: Live | None = None, drop=None) -> Attempt:
    """Ledger a finished attempt (chain check, redaction scan, raw store, ledger entry),
    then remove its staging directory (``drop(session_id)``, by default at once)."""
    o = prepared.request.options
    plan = prepared.plan
    secrets = live.secrets() if live is not None else {}
    raw_result = result
    # what the worker returned and staged is hostile input: a field of the wrong type, a
    # returned path outside staging, a staged link, FIFO, device or oversized file is
    # refused (never read) and the session is errored (map.staging_refused)
    result, refused = staged.returned(result)
    with timing.span("ingest.read"):
        got = staged.read(fl.staging, native=result.get("native_log"))
    files = got.files  # read once: checked, scanned and stored
    refused = [redaction.redact_text(r, secrets.values()) for r in refused + got.refused]
    data = files.get(staged.CAPTURE)
    with timing.span("ingest.chain"):
        chain = (agentprov_capture.check(data, require_end=False) if data is not None
                 else agentprov_capture.Chain(0, None, ["the capture log is missing" if not any(
                     r.startswith(staged.CAPTURE + ":") for r in refused)
                     else "the capture log was refused"], None, None, []))
    status = result.get("status", "errored")
    reason = result.get("reason") or result.get("error")
    end = chain.end
    if data is None and status == "aborted" and not refused and not fl.lost:
        # ended before its cell began its log (an interrupt, or the worker's death, as
        # the request arrived): nothing ran, nothing is damaged. Not a cell whose host was
        # lost: its log may have been begun there, and is missing here
        reason = f"{reason}; the cell had not begun its capture log" if reason \
            else "the cell had not begun its capture log"
    elif not chain.ok:
        damage = "capture log damaged: " + "; ".join(chain.problems[:2])
        status, reason = "errored", f"{reason}; {damage}" if reason else damage
    elif end is None:
        status, reason = "aborted", "the capture log has no end record"
    elif end.get("status") != status:
        status = end.get("status")
    if refused:
        why = "map.staging_refused: " + "; ".join(refused[:3]) + (
            f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        status, reason = "errored", f"{why}; {reason}" if reason else why
    from agentprov_core.live import caps, quality

    wire = live.wire if live is not None else "openai"
    fl.quality = quality.from_records(chain.records, wire)
    fl.records = chain.records
    fl.charge = caps.charge_records(chain.records) if chain.records \
        else live_missing_log(prepared, plan.defence)
    with timing.span("ingest.scan"):
        # what the worker returned goes into the ledger: scanned like what it staged
        findings = redaction.scan_files(files, secrets) + redaction.scan_value(
            "the worker's result", raw_result, secrets)
    base = dict(seq=seq[0], invocation=invocation, unit=fl.unit.key, cell_key=fl.unit.cell.key,
                defence=plan.defence, repeat=fl.unit.repeat, attempt=fl.unit.attempt,
                session_id=fl.session_id, started_at=fl.started_at, ended_at=now(),
                plan_sha256=plan.plan_sha256, config_digest=plan.config_digest,
                unit_digest=fl.unit.digest)
    seq[0] += 1
    if findings:
        # nothing of it is stored: a whole cell
        fl.charge, fl.records = live_missing_log(prepared, plan.defence), None
        wc.quarantine(fl.session_id, fl.unit.key, findings)
        entry = Attempt(**base, status="quarantined", conclusive=False,
                        reason="capture.quarantined: " + "; ".join(findings[:3]),
                        **({"staging_refused": refused} if refused else {}))
        ledger_append(wc, entry)
        return entry
    t = time.time()
    cap_sha = wc.store.put_bytes(data) if data is not None else None
    native_sha = native_path = None
    native = result.get("native_log")
    if native in files:  # a file read from staging, under the name the worker returned
        native_sha, native_path = wc.store.put_bytes(files[native]), native
    timing.emit("ingest.store", t)
    books = accounting(chain.records)
    if status == "complete" and books != "consistent" and books != "unverifiable":
        reason = f"{reason}; {books}" if reason else books
    entry = Attempt(**base, status=status,
                    conclusive=status == "complete" and books in ("consistent", "unverifiable"),
                    capture_sha256=cap_sha, capture_head_sha256=chain.head_sha256,
                    capture_records=len(chain.records), native_sha256=native_sha,
                    native_path=native_path,
                    utility=None if refused else result.get("utility"),
                    security=None if refused else result.get("security"),
                    setup_refusal=result.get("setup_refusal"), reason=reason,
                    calls=result.get("calls"),
                    **({"staging_refused": refused} if refused else {}))
    with timing.span("ingest.ledger"):
        ledger_append(wc, entry)
    if not o.keep_staging:
        with timing.span("ingest.drop"):
            (drop or wc.drop_staging)(fl.session_id)
    return entry


def accounting(records: list[dict[str, Any]]) -> str:
    """A session's accounting (R-21.29): the worker's own count of its model calls (the end
    record's ``calls``) against the model calls its capture records. ``consistent`` or
    ``unverifiable`` (no count) lets a complete session be conclusive; otherwise the text
    says what differs, and the attempt is inconsistent: counted so, never settling its unit
    (it is attempted again)."""
    end = records[-1] if records and records[-1].get("kind") == "end" else None
    calls = end.get("calls") if end is not None else None
    if not isinstance(calls, int) or isinstance(calls, bool):
        return "unverifiable"
    starts = sum(1 for r in records if r.get("kind") == "model_call_start")
    if calls == starts:
        return "consistent"
    return (f"accounting: the worker counted {calls} model call(s), the capture records "
            f"{starts}")


def ledger_append(wc: WorkingCorpus, entry: Attempt) -> None:
    wc.ledger.append(entry)
    testfaults.test_kill("ledger")
