"""The preflight probe (R-18, :mod:`agentprov_core.live.preflight`) run through the worker,
before the first cell of a real-model campaign, or alone (``--preflight-only``).

Each probe call is a session of its own in the worker, charged to the caps; the worker makes
it through the source's own model (AgentDojo's stock element; for an Inspect source,
Inspect's ``openai-api`` model, D-742, whose task fixes the sampling parameters, so A3 has
nothing to check there). In a campaign its capture log is stored under ``preflight/`` and
listed in its ledger (:data:`agentprov_core.run.live.PREFLIGHT_LEDGER`). What the probe's worker stages and
returns is hostile input, taken as a cell's is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentprov_capture
import click

from agentprov_core.base import redaction
from agentprov_core.corpus import selfdigest, staged
from agentprov_core.corpus.working import WorkingCorpus, now
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence import capture_end
from agentprov_core.live import endpoints as epmod
from agentprov_core.run.live import (
    PREFLIGHT_LEDGER,
    Live,
    account_of,
    canary_settings,
    capture_records,
    missing_log,
)
from agentprov_core.run.stops import CapStop

if TYPE_CHECKING:
    from agentprov_core.backend.executor import Executor
    from agentprov_core.live.caps import Account
    from agentprov_core.run.prepare import Prepared


def _preflight():
    from agentprov_core.live import preflight

    return preflight


def probe_call(prepared: Prepared, live: Live, executor: Executor, staging_root: Path,
               wc: WorkingCorpus | None, acc: Account, invocation: str):
    """The ``call`` of :class:`agentprov_core.live.preflight.Probe`: one probe call in its own
    session, charged to the caps and (in a campaign) kept under ``preflight/``."""
    from agentprov_core.live import caps

    plan, resolved = prepared.plan, prepared.resolved

    def call(n: int, code: str, text: str) -> tuple[list[dict[str, Any]], str | None]:
        why = acc.fits(0, new_cells=0, new_calls=1) if acc.caps.active else None
        if why is not None:
            raise CapStop("cap_reached", f"the preflight probe's call {n} does not fit: {why}")
        session_id = f"pf-{uuid.uuid4().hex[:16]}"
        staging = staging_root / session_id
        staging.mkdir(parents=True)
        req = {"session_id": session_id, "staging": os.path.abspath(staging),
               "source": prepared.source.meta.name, "benchmark_version": plan.benchmark_version,
               "defence": "none",
               "cell": {"suite": None, "user_task_id": None, "attack": None,
                        "injection_task_id": None, "cell_key": "preflight", "kind": "preflight"},
               "unit": None, "attempt": n, "agent": live.agent(session_id),
               "backend": prepared.identity, "plan_sha256": plan.plan_sha256,
               "config_digest": plan.config_digest, "timeout_s": 300,
               "preflight": {"call": n, "instruction": text, "user": _preflight().USER}}
        try:
            result = executor.result(executor.submit(req), timeout=330)
        except AgentprovError as exc:
            result = {"status": "aborted", "error": exc.message}
            capture_end.append_end(staging / "capture.jsonl", "aborted", exc.message,
                               "session.worker_failed")
        raw_result = result  # the worker's: hostile input, taken as a cell's result is
        result, refused = staged.returned(result)
        got = staged.read(staging)  # read once, through descriptors: scanned and stored
        files = got.files
        if refused or got.refused:
            raise AgentprovError("cli.environment.preflight", endpoint=resolved.name,
                                 url=epmod.shown(resolved.base_url),
                                 why="T0 refused what the probe's worker staged or returned "
                                     "(map.staging_refused: "
                                     + "; ".join((refused + got.refused)[:3])
                                     + f"); its staging directory {staging} was kept")
        data = files.get("capture.jsonl", b"")
        records = capture_records(data)
        charge = caps.charge_records(records) if records else missing_log(prepared, "none")
        acc.charge(charge, probe=True)
        if redaction.scan_files(files, live.secrets()) or redaction.scan_value(
                "the worker's result", raw_result, live.secrets()):
            raise AgentprovError("cli.environment.preflight", endpoint=resolved.name,
                                 url=epmod.shown(resolved.base_url),
                                 why="a staged file of the probe held a secret; its staging "
                                     f"directory {staging} was kept")
        if wc is not None:
            from agentprov_core.corpus.store import RawStore

            sha = RawStore(wc.root / "preflight").put_bytes(data) if data else None
            chain = (agentprov_capture.check(data, require_end=False)
                     if "capture.jsonl" in files else None)
            entry = {"at": now(), "invocation": invocation, "session_id": session_id,
                     "call": n, "status": result.get("status"),
                     "capture_sha256": sha,
                     "capture_head_sha256": chain.head_sha256 if chain else None,
                     "billed_calls": charge.billed, "plan_sha256": plan.plan_sha256,
                     "config_digest": plan.config_digest}
            (wc.root / PREFLIGHT_LEDGER).parent.mkdir(exist_ok=True)
            with open(wc.root / PREFLIGHT_LEDGER, "a", encoding="utf-8") as f:
                f.write(selfdigest.json_line(entry))
                f.flush()
                os.fsync(f.fileno())
        if not prepared.request.options.keep_staging:
            shutil.rmtree(staging, ignore_errors=True)
        return records, result.get("error")

    return call


def run_preflight(prepared: Prepared, live: Live, executor: Executor, staging_root: Path,
                  wc: WorkingCorpus | None, acc: Account, invocation: str) -> dict[str, Any]:
    """Run the probe (R-18); returns what ``live.preflight`` records. Raises
    ``cli.refused.preflight`` (4), ``cli.environment.preflight`` (3) or a cap stop."""

    pf = _preflight()
    resolved = prepared.resolved
    # An Inspect task fixes its own sampling parameters and its cells transmit none of the
    # agent's (D-742): A3 has no configured parameter to check, so the judge gets none.
    fixed = prepared.source.meta.kind == "inspect"
    s = canary_settings(prepared, {} if fixed else live.params, live.wire)
    probe = pf.Probe(resolved.name, epmod.shown(resolved.base_url), s)
    try:
        verdict = probe.run(probe_call(prepared, live, executor, staging_root, wc, acc,
                                       invocation))
    except AgentprovError:
        click.echo(f"preflight: {len(probe.calls)} call(s): "
                   + "; ".join(f"{c['verdict']} ({c['why']})" for c in probe.calls), err=True)
        raise
    a3 = ("A3: the task fixes the sampling parameters (D-742)" if fixed
          else "the configured parameters are transmitted (A3)")
    click.echo(f"preflight: confirmed after {len(probe.calls)} call(s): the roles reach the "
               f"model (A9), tool calls come back structured (A4), {a3}"
               + "".join(f"; {n}" for n in verdict.notes), err=True)
    return probe.record(verdict) | {"at": now()}


def preflight_only(prepared: Prepared) -> int:
    """``--preflight-only`` (R-18.8): the probe alone, in a temporary staging directory;
    nothing is kept and no corpus is written."""
    live = Live(prepared)
    acc = account_of(prepared, None, live)
    executor = None
    with tempfile.TemporaryDirectory(prefix="agentprov-pf-") as tmp:
        try:
            executor = live.start(Path(tmp) / "staging")
            run_preflight(prepared, live, executor, Path(tmp) / "staging", None, acc,
                          uuid.uuid4().hex[:12])
        finally:
            if executor is not None:
                executor.close()
            live.stop()
    click.echo(f"agentprov run: preflight only: {acc.probe.billed} billed probe call(s); no "
               "cell was run and nothing was written")
    return 0
