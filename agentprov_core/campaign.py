"""T0's campaign: run the due units of a plan in the worker and keep what happened.

Every unit (cell × repeat) that is not yet settled and has attempts left is started, up to
``--jobs`` at once. Each attempt gets a session id and a staging directory in the working
corpus; the worker runs the cell there and writes the capture/0.1 log and the native log.
T0 then checks the capture's hash chain, runs the redaction scan, stores both logs in the
raw store and appends the attempt to the ledger. Right after, it maps the attempt (AER, SEM,
PROV, validation; :mod:`agentprov_core.evidence.live_mapping`), failed attempts too: a
failed execution is kept, never discarded. Mapping never stops the campaign; an attempt whose
mapping raised counts as "failed" in the summary and the error is kept in the manifest.

Stops: a config stop (a cell's setup refused the configuration), a drain
(``--control-file``), ``--limit``, and an interrupt (SIGINT, SIGTERM, SIGHUP: in-flight
sessions are sealed ``aborted`` and ledgered, exit 130; a second signal exits at once).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import msgspec

from agentprov_core import __version__, capture_chain, environments, redaction
from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import MANIFEST_FORMAT, WorkingCorpus, now, partial_dir, unit_key
from agentprov_core.errors import AgentprovError

CONFIG_STOP = ("agentprov run: a cell's setup refused this configuration, so no further cell "
               "was started (every one would fail the same way); fix the option the refusal "
               "names and re-run the same command")


@dataclass
class Unit:
    cell: Any
    repeat: int
    key: str
    attempt: int


@dataclass
class Flight:
    unit: Unit
    session_id: str
    staging: Path
    started_at: str
    future: Future
    quality: dict[str, Any] = field(default_factory=dict)


@dataclass
class Tally:
    attempts: int = 0
    sealed: int = 0
    failed: int = 0
    conclusive: int = 0
    inconclusive: int = 0
    quarantined: int = 0
    inconsistent: int = 0  # complete, but the live-versus-native check disagreed
    derived: int = 0  # executions written
    map_failed: int = 0  # attempts whose mapping raised
    issues: Counter = field(default_factory=Counter)  # register codes of this invocation
    map_failures: list[dict[str, str]] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    quality: dict[str, Any] = field(default_factory=dict)


class Interrupted(Exception):
    pass


class Progress:
    """A live line on a terminal (cells done and in flight, failures, calls); silent when
    stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        self.bar = None
        if sys.stderr.isatty() and total:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(TextColumn("cells"), BarColumn(), MofNCompleteColumn(),
                                    TextColumn("{task.description}"), transient=True)
            self.task = self.bar.add_task("", total=total)
            self.bar.start()

    def update(self, done: int, in_flight: int, failed: int, calls: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done,
                            description=f"{in_flight} in flight, {failed} failed, {calls} call(s)")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _units(p, settled: set[str], counts) -> tuple[list[Unit], int]:
    """The due units (not settled, attempts left) in plan order, and how many were settled."""
    plan = p.plan
    due, done_before = [], 0
    for r in range(plan.repeats):
        for cell in plan.cells:
            key = unit_key(cell.key, plan.defence, r)
            if key in settled:
                done_before += 1
                continue
            if counts[key] >= plan.max_attempts:
                continue  # exhausted: no attempt left
            due.append(Unit(cell, r, key, counts[key] + 1))
    return due, done_before


def read_progress(p) -> None:
    """Set the plan's settled units and attempts already used from its corpus, if any
    (attempts are counted across invocations)."""
    wc = WorkingCorpus.peek(p.request.options["corpus"])
    if wc is None:
        return
    plan = p.plan
    entries = [e for e in wc.attempts() if e.config_digest == plan.config_digest]
    settled = wc.settled(entries)
    counts = wc.attempts_per_unit(entries)
    plan.settled, plan.attempts_used, plan.settled_cells = 0, 0, {}
    for r in range(plan.repeats):
        for c in plan.cells:
            key = unit_key(c.key, plan.defence, r)
            if key in settled:
                plan.settled += 1
                plan.settled_cells[c.key] = plan.settled_cells.get(c.key, 0) + 1
            else:
                plan.attempts_used += min(counts[key], plan.max_attempts)


def check_corpus(p) -> None:
    """Mixed configuration and mixed transport refusals (exit 4), before anything starts."""
    o = p.request.options
    wc = WorkingCorpus.peek(o["corpus"])
    if wc is None:
        return
    m = wc.manifest()
    want = "scripted" if p.request.scripted else "real"
    have = "scripted" if m.get("test_only") else "real"
    if have != want:
        raise AgentprovError("cli.refused.mixed_transport", corpus=wc.root, have=have, want=want)
    digests = set(m.get("config_digests", []))
    if digests and p.plan.config_digest not in digests and not o.get("allow_mixed_config"):
        raise AgentprovError("cli.refused.mixed_config", corpus=wc.root,
                             have=", ".join(sorted(d[:16] for d in digests)),
                             want=p.plan.config_digest[:16])


def _manifest(p, wc: WorkingCorpus, old: dict[str, Any] | None) -> dict[str, Any]:
    from agentprov_core.plugins import manager

    plan = p.plan
    meta = p.source.meta
    m = dict(old or {})
    marker = environments.read_marker(meta, plan.environment_id)
    m.update({
        "format": MANIFEST_FORMAT, "corpus_id": plan.corpus_id, "source": meta.name,
        "profile": meta.live_profile, "registry_parts": "live",
        "backend": plan.backend, "working": True, "test_only": p.request.scripted,
        "synthetic": p.request.scripted, "updated_at": now(),
        "backend_identity": {"environment_id": plan.environment_id,
                             "identity_sha256": marker.identity_sha256,
                             "lock_sha256": marker.lock_sha256,
                             "pinned_commit": marker.pinned_commit,
                             "distributions": marker.distributions},
        "producer": {"agentprov": __version__, "sandbox": None if p.request.scripted else "?",
                     "python": sys.version.split()[0]},
        "plugins": sorted(({"name": r.name, "distribution": r.distribution,
                            "version": r.version, "status": r.status}
                           for r in manager().records), key=lambda r: r["name"]),
        "source_meta": msgspec.to_builtins(meta),
    })
    m.setdefault("created_at", now())
    m["plans"] = sorted(set(m.get("plans", [])) | {plan.plan_sha256})
    m["config_digests"] = sorted(set(m.get("config_digests", [])) | {plan.config_digest})
    live = dict(m.get("live") or {})
    live.update({"endpoint_class": p.endpoint_class,  # local|api, decided before consent
                 "transport": "scripted" if p.request.scripted else "endpoint",
                 "llm_element": p.request.options.get("llm_element") or "native",
                 "caps": {"max_calls": p.request.options.get("max_calls"),
                          "max_cost_usd": p.request.options.get("max_cost_usd")},
                 "egress": None})
    m["live"] = live
    return m


#: The corpus's filesystem refused a write: a full disk or quota, a read-only or failing device.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def run(p) -> int:
    try:
        return _run(p)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise AgentprovError(
            "cli.environment.corpus", corpus=partial_dir(p.request.options["corpus"]),
            what=f"a write failed: {exc.strerror}{where}; the attempts already in its ledger "
                 "are kept: free space and re-run the same command to resume") from None


def _run(p) -> int:
    o = p.request.options
    started = time.monotonic()
    check_corpus(p)
    wc = WorkingCorpus(partial_dir(o["corpus"]))
    wc.lock()
    try:
        old = wc.manifest() if (wc.root / "manifest.json").is_file() else None
        manifest = _manifest(p, wc, old)
        manifest["partial"] = bool(old and old.get("partial"))
        wc.write_manifest(manifest)
        entries = wc.attempts()
        mine = [e for e in entries if e.config_digest == p.plan.config_digest]  # mixed: apart
        settled = wc.settled(mine)
        if o.get("retry_inconsistent"):
            settled -= _inconsistent_units(wc, mine)
        due, done_before = _units(p, settled, wc.attempts_per_unit(mine))
        jobs = o.get("jobs") or 1
        click.echo(f"agentprov run {p.source.meta.name}: units={len(due)} plan={p.plan.units} "
                   f"unit(s) workers={jobs}")
        tally, stop = _campaign(p, wc, due, jobs, len(entries))
        if stop == "interrupt":
            exit_code = 130
        elif stop in ("config", "worker") or tally.failed or tally.quarantined or \
                tally.inconclusive or tally.inconsistent or tally.map_failed:
            exit_code = 1
        else:  # complete, a drain or --limit with every attempt conclusive (decisions 3, 4)
            exit_code = 0
        manifest = wc.manifest()
        from agentprov_core import quality

        live = manifest.setdefault("live", {})
        total = live.get("quality") or {}
        quality.merge(total, tally.quality)
        live["quality"] = total
        manifest["partial"] = bool(manifest.get("partial")) or stop in (
            "config", "limit", "interrupt", "worker")
        manifest["updated_at"] = now()
        manifest.setdefault("stops", []).append({"at": now(), "stop": stop or "complete",
                                                 "exit": exit_code})
        if tally.map_failures:
            manifest.setdefault("mapping_failures", []).extend(tally.map_failures)
        wc.write_manifest(manifest)
    finally:
        wc.unlock()
    _summary(p, wc, tally, stop, exit_code, started, done_before, len(due))
    return exit_code


def _campaign(p, wc: WorkingCorpus, due: list[Unit], jobs: int, seq0: int):
    from agentprov_core.workerclient import Worker

    o = p.request.options
    tally = Tally()
    stop: str | None = None
    invocation = uuid.uuid4().hex[:12]
    state = {"signals": 0}

    state["critical"] = False
    state["pending"] = False

    def on_signal(signum, _frame):
        state["signals"] += 1
        if state["signals"] > 1:
            click.echo("agentprov run: second signal: exiting now; in-flight sessions stay in "
                       "staging, unledgered", err=True)
            os._exit(130)
        if state["critical"]:  # never between a launch and its tracking, nor a finished
            #                    cell and its ledger entry: the loop raises right after
            state["pending"] = True
            return
        raise Interrupted

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM,
                                                         signal.SIGHUP)}
    endpoint = None
    worker = None
    flights: dict[Future, Flight] = {}
    seq = [seq0]
    progress: Progress | None = None
    try:
        if p.request.scripted:
            from agentprov_core.scripted.script import load_script
            from agentprov_core.scripted.server import ScriptedEndpoint

            endpoint = ScriptedEndpoint(load_script(Path(o["llm_script"])))
            endpoint.start()
        env_dir = environments.environment_dir(p.plan.environment_id)
        (wc.root / "staging").mkdir(exist_ok=True)
        worker = Worker(p.plan.environment_id, env_dir, wc.root / "staging", network=True)
        limit = o.get("limit")
        progress = Progress(len(due))
        started_units = 0
        queue = list(due)
        stagger = o.get("start_stagger") or 0.0
        while queue or flights:
            while (queue and len(flights) < jobs and stop is None
                   and (limit is None or started_units < limit)):
                if _drain_requested(o):
                    stop = "drain"
                    break
                unit = queue.pop(0)
                state["critical"] = True  # a launched cell is always tracked
                try:
                    fl = _launch(p, wc, worker, endpoint, unit)
                    flights[fl.future] = fl
                except AgentprovError as exc:  # the worker died: stop, re-run resumes
                    stop = "worker"
                    tally.refusals.append(exc.message)
                    break
                finally:
                    state["critical"] = False
                if state["pending"]:
                    raise Interrupted
                started_units += 1
                if stagger and queue:
                    time.sleep(stagger)
            if not flights:
                if queue and stop is None and limit is not None and started_units >= limit:
                    stop = "limit"
                break
            done, _ = wait(list(flights), timeout=0.25, return_when=FIRST_COMPLETED)
            state["critical"] = bool(done)
            for fut in done:
                fl = flights[fut]
                result = _result(worker, fl)
                entry = _ingest(p, wc, fl, result, invocation, seq)
                _count(tally, entry, fl, _map(p, wc, entry, tally))
                del flights[fut]  # ledgered: an interrupt from here on leaves it alone
                if entry.setup_refusal and stop is None:
                    stop = "config"
                    tally.refusals.append(f"{fl.unit.cell.key}: {entry.setup_refusal['message']}")
            state["critical"] = False
            if state["pending"]:
                raise Interrupted
            if stop is None and worker.proc.poll() is not None:  # it died, even on the last cell
                stop = "worker"
                tally.refusals.append(f"the worker of {p.plan.environment_id} exited (code "
                                      f"{worker.proc.returncode}) with a cell in flight")
            progress.update(tally.attempts, len(flights), tally.failed,
                            sum(q["calls"] for q in tally.quality.values()))
            if stop is None and _drain_requested(o):
                stop = "drain"
    except Interrupted:
        stop = "interrupt"
        if worker is not None:
            worker.kill()
        for fl in flights.values():
            capture_chain.seal(fl.staging / "capture.jsonl", "aborted",
                               "interrupted: the parent received a signal", "session.interrupted")
            entry = _ingest(p, wc, fl, {"status": "aborted", "reason": "interrupted"},
                            invocation, seq)
            _count(tally, entry, fl, _map(p, wc, entry, tally))
        flights.clear()
    finally:
        if progress is not None:
            progress.stop()
        if not state["signals"]:  # after an interrupt on_signal stays: another signal, even
            for s, h in previous.items():  # while the summary is written, exits 130 at once
                signal.signal(s, h)
        if worker is not None:
            if flights:  # the worker died, or T0 failed (a full disk), with cells in flight
                worker.kill()
            for fl in flights.values():
                with contextlib.suppress(OSError):  # unsealed in staging if it cannot be written
                    capture_chain.seal(fl.staging / "capture.jsonl", "aborted",
                                       "the worker ended with the cell in flight",
                                       "session.worker_died")
            worker.close()
        if endpoint is not None:
            endpoint.stop()
    return tally, stop


def _drain_requested(o) -> bool:
    path = o.get("control_file")
    if not path:
        return False
    try:
        return Path(path).read_text(encoding="utf-8").strip() == "drain"
    except OSError:
        return False


def _launch(p, wc: WorkingCorpus, worker, endpoint, unit: Unit) -> Flight:
    o = p.request.options
    session_id = f"s-{uuid.uuid4().hex[:16]}"
    staging = wc.staging(session_id)
    cell = unit.cell
    if endpoint is not None:
        agent = {"scripted": True, "base_url": endpoint.base_url(session_id),
                 "model_id": "scripted", "pipeline_name": "scripted", "key_env": None,
                 "display_name": o.get("model_display_name")}
    else:  # real endpoints arrive with the real-endpoint issue; refused before this point
        raise AgentprovError("run.unsupported.campaign", source=p.source.meta.name)
    req = {
        "session_id": session_id, "staging": str(staging), "source": p.source.meta.name,
        "benchmark_version": p.plan.benchmark_version, "defence": p.plan.defence,
        "cell": {"suite": cell.suite, "user_task_id": cell.user_task_id, "attack": cell.attack,
                 "injection_task_id": cell.injection_task_id, "kind": cell.kind,
                 "cell_key": cell.key},
        "unit": unit.key, "attempt": unit.attempt, "agent": agent,
        "backend": p.identity, "plan_sha256": p.plan.plan_sha256,
        "config_digest": p.plan.config_digest, "timeout_s": o.get("cell_timeout") or 1800,
    }
    try:
        future = worker.submit("run-cell", **req)
    except AgentprovError:
        wc.drop_staging(session_id)  # nothing started in it
        raise
    return Flight(unit, session_id, staging, now(), future)


def _result(worker, fl: Flight) -> dict[str, Any]:
    try:
        return worker.result(fl.future, timeout=0)
    except AgentprovError as exc:
        capture_chain.seal(fl.staging / "capture.jsonl", "aborted", exc.message,
                           "session.worker_failed")
        return {"status": "aborted", "reason": exc.message}


def _ingest(p, wc: WorkingCorpus, fl: Flight, result: dict[str, Any], invocation: str,
            seq: list[int]) -> Attempt:
    o = p.request.options
    cap = fl.staging / "capture.jsonl"
    chain = capture_chain.read(cap)
    status = result.get("status", "errored")
    reason = result.get("reason") or result.get("error")
    end = chain.end
    if not chain.ok:
        damage = "capture log damaged: " + "; ".join(chain.problems[:2])
        status, reason = "errored", f"{reason}; {damage}" if reason else damage
    elif end is None:
        status, reason = "aborted", "the capture log has no end record"
    elif end.get("status") != status:
        status = end.get("status")
    from agentprov_core import quality

    fl.quality = quality.from_records(chain.records)
    findings = redaction.scan(fl.staging, {})
    base = dict(seq=seq[0], invocation=invocation, unit=fl.unit.key, cell_key=fl.unit.cell.key,
                defence=p.plan.defence, repeat=fl.unit.repeat, attempt=fl.unit.attempt,
                session_id=fl.session_id, started_at=fl.started_at, ended_at=now(),
                plan_sha256=p.plan.plan_sha256, config_digest=p.plan.config_digest)
    seq[0] += 1
    if findings:
        wc.quarantine(fl.session_id, fl.unit.key, findings)
        entry = Attempt(**base, status="quarantined", conclusive=False,
                        reason="capture.quarantined: " + "; ".join(findings[:3]))
        wc.ledger.append(entry)
        return entry
    cap_sha = wc.store.put_file(cap) if cap.exists() else None
    native_sha = native_path = None
    if result.get("native_log"):
        nl = fl.staging / result["native_log"]
        if nl.is_file():
            native_sha, native_path = wc.store.put_file(nl), result["native_log"]
    entry = Attempt(**base, status=status, conclusive=status == "complete",
                    capture_sha256=cap_sha, capture_head_sha256=chain.head_sha256,
                    capture_records=len(chain.records), native_sha256=native_sha,
                    native_path=native_path, utility=result.get("utility"),
                    security=result.get("security"), setup_refusal=result.get("setup_refusal"),
                    reason=reason, calls=result.get("calls"))
    wc.ledger.append(entry)
    if not o.get("keep_staging"):
        wc.drop_staging(fl.session_id)
    return entry


def _inconsistent_units(wc: WorkingCorpus, entries: list[Attempt]) -> set[str]:
    """Units none of whose conclusive attempts agreed with the native log
    (``--retry-inconsistent`` re-attempts them)."""
    from agentprov_core.evidence.executions import Executions

    verdicts = {x.ledger_seq: x.live_vs_native for x in Executions(wc.root).entries()}
    by_unit: dict[str, list[str]] = {}
    for e in entries:
        if e.conclusive:
            by_unit.setdefault(e.unit, []).append(verdicts.get(e.seq, "unchecked"))
    return {u for u, v in by_unit.items() if v and all(x == "disagree" for x in v)}


def _map(p, wc: WorkingCorpus, entry: Attempt, t: Tally):
    """Map a ledgered attempt into its execution (None when it is not mapped, or when the
    mapping raised: then it is counted failed and the error kept, never raised)."""
    from agentprov_core.evidence import live_mapping

    try:
        mapped = live_mapping.map_attempt(
            wc.root, entry, wc.manifest(), mapped_at=now(),
            skip_prov=bool(p.request.options.get("skip_prov_conformance")))
    except Exception as exc:  # noqa: BLE001 - a mapping bug must not lose the campaign
        t.map_failed += 1
        t.map_failures.append({"session_id": entry.session_id, "unit": entry.unit,
                               "ledger_seq": str(entry.seq),
                               "error": f"{type(exc).__name__}: {exc}"[:500], "at": now()})
        return None
    if mapped is not None:
        t.derived += 1
        t.issues.update(mapped.entry.issues)
    return mapped


def _count(t: Tally, e: Attempt, fl: Flight | None = None, mapped=None) -> None:
    from agentprov_core import quality

    if fl is not None:
        quality.merge(t.quality, fl.quality)
    t.attempts += 1
    if e.status == "quarantined":
        t.quarantined += 1
        t.issues["capture.quarantined"] += 1
    elif e.status == "complete":
        t.sealed += 1
        if mapped is not None and mapped.entry.live_vs_native == "disagree":
            t.inconsistent += 1
        else:
            t.conclusive += 1
    else:
        t.failed += 1
        t.inconclusive += 1


def _summary(p, wc, t: Tally, stop, code: int, started: float, done_before: int,
             due: int) -> None:
    e = lambda s: click.echo(s, err=True)  # noqa: E731
    e(f"run: finished in {time.monotonic() - started:.1f}s (exit {code})")
    e(f"  units    {t.attempts} of {p.plan.units}: sealed {t.sealed}, failed {t.failed}"
      + (f", quarantined {t.quarantined}" if t.quarantined else ""))
    if t.issues:
        e("  issues   " + ", ".join(f"{c} x{n}" for c, n in sorted(t.issues.items())))
    notices = list(t.refusals)
    if stop == "config":
        e(CONFIG_STOP)
        notices = [f"setup refusal: {r}" for r in t.refusals]
    elif stop == "worker":
        e("agentprov run: the worker ended; the sessions in flight were sealed aborted; "
          "re-run the same command to resume")
    elif stop == "interrupt":
        e("agentprov run: interrupted: in-flight sessions were sealed aborted and ledgered; "
          "re-run the same command to resume")
    elif stop == "drain":
        e("agentprov run: drained: the cells in flight finished; re-run to resume")
    elif stop == "limit":
        e("agentprov run: --limit reached; re-run to resume (the corpus is partial)")
    from agentprov_core import quality

    for line in quality.lines(t.quality):
        e(line)
    e(f"  corpus   {wc.root} (working; {len(wc.attempts())} attempt(s) in the ledger)")
    if stop in ("config", "worker"):
        for n in notices:
            e(f"notice: {n}")
    for f in t.map_failures:
        e(f"notice: mapping failed: {f['session_id']} ({f['unit']}): {f['error']}")
    click.echo(f"agentprov run: {t.attempts} attempt(s); {t.conclusive} conclusive, "
               f"{t.inconsistent} inconsistent, {t.inconclusive} inconclusive; "
               f"{t.derived} derived, {t.map_failed} failed; "
               f"{done_before} of {p.plan.units} unit(s) done before")
