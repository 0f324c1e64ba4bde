"""T0's campaign: run the due units of a plan through an executor and keep what happened.

Every unit (cell × repeat) that is not yet settled and has attempts left
(:mod:`agentprov_core.run.units`) is started, up to ``--jobs`` at once. Each attempt is
launched through the executor (:mod:`agentprov_core.backend.executor`: where the cell runs,
``local`` by default) and ingested by T0: its capture checked, scanned, stored and
ledgered (:mod:`agentprov_core.run.attempt`); right after, it is mapped behind the loop,
failed attempts too (:mod:`agentprov_core.run.mappings`).

A real model adds, around the same loop, the endpoint side (:mod:`agentprov_core.run.live`:
key, egress proxy, containment); the preflight probe before the first cell
(:mod:`agentprov_core.run.preflight`); the caps (:mod:`agentprov_core.live.caps`): a cell starts
only if its worst case fits; against a local server, A14 before each cell; and the canary
(:mod:`agentprov_core.live.canary`). The manifest records ``producer.sandbox``,
``live.endpoint_class``, ``live.caps``, ``live.egress``, ``live.quality``, ``live.canary``
and ``live.preflight`` (:mod:`agentprov_core.run.manifest`). Why the loop stops early and
the exit code: :mod:`agentprov_core.run.stops`; the summary lines:
:mod:`agentprov_core.run.summary`; the test-only faults: :mod:`agentprov_core.run.testfaults`.
"""

from __future__ import annotations

import contextlib
import errno
import sys
import time
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import click

from agentprov_core.base import inputfile, timing
from agentprov_core.corpus.working import WorkingCorpus, partial_dir, unit_key
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence import capture_end
from agentprov_core.run import attempt, checks, manifest, mappings, preflight, stops, summary, units
from agentprov_core.run.gate import Gate, Tail, policy_of
from agentprov_core.run.live import Live, account_of, canary_settings, check_executor
from agentprov_core.run.stops import CapStop, Interrupted, Signals
from agentprov_core.run.summary import Tally

if TYPE_CHECKING:
    from agentprov_core.backend.executor import Executor
    from agentprov_core.live.caps import Account
    from agentprov_core.run.attempt import Flight
    from agentprov_core.run.prepare import Prepared
    from agentprov_core.run.units import Unit

#: The corpus's filesystem refused a write: a full disk or quota, a read-only or failing device.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def start(prepared: Prepared, consent: dict[str, Any] | None = None) -> int:
    """A consented run from the preflight on, as ``agentprov run`` and each arm of the
    sweep start one: the worker prewarmed, then, holding the environment's lock shared
    throughout (other runs share the environment; a build or an offline check of it is
    refused until the run ends), the plan checked by the worker (steps 5 and 6,
    :func:`agentprov_core.run.dryrun.dry_run`) and :func:`run`; its exit code. The corpus
    refusals ran before consent (:func:`agentprov_core.run.sequence.checked`)."""
    from agentprov_core.backend.envlock import hold
    from agentprov_core.run import dryrun
    from agentprov_core.run.live import prewarm

    prewarm(prepared)
    with hold(prepared.plan.environment_id, shared=True):
        with timing.span("check"):
            checked = dryrun.dry_run(prepared)
        if checked is not prepared:  # the worker's catalogue re-made the plan: its corpus
            checks.check_corpus(checked)  # refusals again (the plan's content may differ)
        return run(checked, consent=consent)


def run(prepared: Prepared, consent: dict[str, Any] | None = None) -> int:
    """Run the prepared campaign (or ``--preflight-only``, the probe alone); its exit code."""
    try:
        if prepared.request.options.preflight_only:
            return preflight.preflight_only(prepared)
        return _run(prepared, consent)
    except OSError as exc:
        if exc.errno not in DISK_ERRNOS:
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise AgentprovError(
            "cli.environment.corpus", corpus=partial_dir(prepared.request.options.corpus),
            what=f"a write failed: {exc.strerror}{where}; the attempts already in its ledger "
                 "are kept: free space and re-run the same command to resume") from None


def _run(prepared: Prepared, consent: dict[str, Any] | None = None) -> int:
    o = prepared.request.options
    started = time.monotonic()
    t_open = time.time()
    check_executor(prepared)  # where the cells will run, before anything is written
    wc = WorkingCorpus(partial_dir(o.corpus))
    wc.lock()
    live_ctx = Live(prepared)
    wc.secrets = live_ctx.secrets  # the manifest is scanned for the key too
    try:
        opened = manifest.opening(prepared, wc, consent)
        acc = account_of(prepared, wc, live_ctx)
        manifest.write_opening(wc, opened, acc)
        entries = wc.attempts()
        finished = mappings.finish_unmapped(prepared, wc, entries)
        stale = mappings.unrepairable(wc, entries)
        if stale:
            click.echo(f"agentprov run: {len(stale)} execution(s) an earlier agentprov wrote for "
                       "sessions whose capture log stayed empty record no plan or "
                       "configuration digest, while their ledger lines do "
                       f"({', '.join(stale[:3])}{', …' if len(stale) > 3 else ''}): verify "
                       "fails them (executions.aer) and this run cannot repair them (an "
                       "execution is written once); their units are run again as any "
                       "aborted attempt's. Start a new corpus for one that passes verify.",
                       err=True)
        # only entries of this plan's units count (another plan's stay apart)
        settled, counts, mine, uid = units.plan_progress(prepared.plan, wc, entries)
        if o.retry_inconsistent:
            settled -= units.inconsistent_units(wc, mine, uid)
        due, done_before = units.due_units(prepared, settled, counts)
        jobs = o.jobs or 1
        click.echo(f"agentprov run {prepared.source.meta.name}: units={len(due)} "
                   f"plan={prepared.plan.units} unit(s) workers={jobs}")
        run_state: dict[str, Any] = {}
        timing.emit("campaign.open", t_open)
        try:
            tally, stop = _campaign(prepared, wc, due, jobs, len(entries), live_ctx, acc,
                                    run_state)
        except AgentprovError:  # the preflight refused: keep what it recorded, then report
            manifest.record_live(wc, live_ctx, acc, run_state)
            raise
        tally.add_mappings(finished)  # executions this invocation wrote
        t_finish = time.time()
        exit_code = stops.exit_code(stop, tally)
        manifest.record_live(wc, live_ctx, acc, run_state)
        manifest.close_manifest(wc, tally, stop, exit_code)
    finally:
        wc.unlock()
    summary.summary(prepared, wc, tally, stop, exit_code, started, done_before, len(due),
                    acc.record() if summary.caps_line_wanted(prepared) else None)
    timing.emit("campaign.finish", t_finish)
    if stop == "rate_limited":
        raise AgentprovError("run.environment.rate_limited", why=tally.refusals[-1],
                             left=run_state["not_started"])
    return exit_code


def _campaign(prepared: Prepared, wc: WorkingCorpus, due: list[Unit], jobs: int, seq0: int,
              live: Live, acc: Account, run_state: dict[str, Any]) -> tuple[Tally, str | None]:
    """Run the due units; the tally and why the loop stopped early (None: it did not)."""
    return _Loop(prepared, wc, due, jobs, seq0, live, acc, run_state).run()


def _native(wc: WorkingCorpus, sha: str | None) -> Any:
    """The native log an attempt stored (its JSON document), or None when it has none or it
    does not read."""
    if sha is None:
        return None
    try:
        return inputfile.load_json(inputfile.read_bytes(wc.store.path(sha),
                                                        inputfile.MAX_STORED, follow=False))
    except inputfile.Unreadable:
        return None


class _Loop:
    """One invocation's loop: launch due units while a job is free and nothing stops it,
    wait for one to finish, ingest it, hand it to the mappings, and decide whether to stop.
    A signal interrupts it (:class:`agentprov_core.run.stops.Signals`): the cells in flight
    are sealed ``aborted`` and ledgered."""

    def __init__(self, prepared: Prepared, wc: WorkingCorpus, due: list[Unit], jobs: int,
                 seq0: int, live: Live, acc: Account, run_state: dict[str, Any]) -> None:
        from agentprov_core.live import canary as canarymod

        self.prepared, self.wc, self.live, self.acc = prepared, wc, live, acc
        self.run_state = run_state
        self.options = o = prepared.request.options
        self.jobs, self.queue, self.total = jobs, list(due), len(due)
        self.tally = Tally()
        self.stop: str | None = None
        self.invocation = uuid.uuid4().hex[:12]
        self.signals = Signals()
        self.signals.install()
        self.executor: Executor | None = None
        self.flights: dict[Future, Flight] = {}
        self.seq = [seq0]
        self.started_units = 0
        #: units attempted again after the executor lost their host (not counted by --limit)
        self.again: set[str] = set()
        self.capacity = None  # the executor's, when it has one (hosts may be lost)
        plan = prepared.plan
        plan_units = [unit_key(c.key, plan.defence, r) for r in range(plan.repeats)
                      for c in plan.cells]
        self.canary = canarymod.Canary(o.canary, plan_units,
                                       canary_settings(prepared, live.params, live.wire))
        self.mappings = mappings.Mappings(prepared, wc, self.tally)
        policy = policy_of(prepared, jobs)
        run_state["gate_policy"] = policy
        # the adaptive start gate (run/gate.py): when the next cell may start
        self.gate = Gate(policy) if policy.mode == "on" else None
        self.tail = Tail()

    def run(self) -> tuple[Tally, str | None]:
        # T0's threads that wait on sockets (the bridge's relays, the worker's reader) must
        # not wait the default 5 ms for the GIL while a mapping runs
        switch = sys.getswitchinterval()
        sys.setswitchinterval(min(switch, 0.0005))
        progress: units.Progress | None = None
        try:
            with timing.span("live.start"):
                self.executor = self.live.start(self.wc.root / "staging")
            self.capacity = getattr(self.executor, "capacity", None)  # optional
            if self.queue and not self.live.scripted:  # the preflight probe
                why = self.acc.fits(0) if self.acc.caps.active else None
                if why is not None:
                    raise CapStop("cap_reached", f"the next cell does not fit: {why}")
                with timing.span("preflight"):
                    self.run_state["preflight"] = preflight.run_preflight(
                        self.prepared, self.live, self.executor, self.wc.root / "staging",
                        self.wc, self.acc, self.invocation)
            progress = units.Progress(self.total)
            limit = self.options.limit
            while self.queue or self.flights:
                self._launch_due(limit)
                if not self.flights:
                    if (self.queue and self.stop is None and limit is not None
                            and self.started_units >= limit):
                        self.stop = "limit"
                    elif self.queue and self.stop is None and self._gate_holds():
                        continue
                    break
                self.mappings.start()  # the last cell's mapping, now the next one is launched
                with timing.span("wait"):
                    done = self.executor.wait_any(self.flights, timeout=0.25)
                self.signals.critical = bool(done)
                for fut in done:
                    self._settle(fut)
                self.signals.critical = False
                if self.gate is not None:
                    self.tail.poll(self.gate, list(self.flights.values()))
                    self.gate.note(len(self.flights))
                self.mappings.harvest()
                self.signals.raise_pending()
                failure = self.executor.failure() if self.stop is None else None
                if failure is not None:
                    self.stop = "worker"  # it died, even on the last cell
                    self.tally.refusals.append(f"{failure} with a cell in flight")
                progress.update(self.tally.attempts, len(self.flights), self.tally.failed,
                                sum(q["calls"] for q in self.tally.quality.values()))
                if self.stop is None and stops.drain_requested(self.options.control_file):
                    self.stop = "drain"
        except CapStop as exc:
            self.stop, self.tally.cap = exc.stop, exc.why
        except Interrupted:
            self._abort_in_flight()
        finally:
            if progress is not None:
                progress.stop()
            self.signals.restore()
            self._close(switch)
        return self.tally, self.stop

    def _launch_due(self, limit: int | None) -> None:
        """Launch due units while a job is free, ``--limit`` allows and nothing stops the
        campaign: a drain, a cap the next cell's worst case does not fit (R-17.5: spend + in
        flight + the new cell's), a local server that no longer serves the plan's model
        (A14), a worker that died."""
        stagger = self.options.start_stagger or 0.0
        jobs = self.jobs if self.capacity is None else min(self.jobs, self.capacity())
        while (self.queue and len(self.flights) < jobs and self.stop is None
               and (limit is None or self.started_units < limit
                    or self.queue[0].key in self.again)
               and (self.gate is None or self.gate.allows(len(self.flights)))):
            if stops.drain_requested(self.options.control_file):
                self.stop = "drain"
                break
            if self.acc.caps.active:
                why = self.acc.fits(len(self.flights))
                if why is not None:
                    self.stop, self.tally.cap = "cap_reached", f"the next cell does not fit: {why}"
                    break
            local_note = None
            if self.prepared.local_identity is not None:
                same, local_note = self._a14()
                if not same:
                    self.stop = "canary"
                    break
            unit = self.queue.pop(0)
            self.signals.critical = True  # a launched cell is always tracked
            try:
                with timing.span("launch"):
                    fl = attempt.launch(self.prepared, self.wc, self.executor, self.live, unit,
                                        local_note, first=not self.started_units)
                self.flights[fl.future] = fl
                if self.gate is not None:
                    self.gate.started(fl.session_id)
                    self.gate.note(len(self.flights))
            except AgentprovError as exc:  # the worker died: stop, re-run resumes
                self.stop = "worker"
                self.tally.refusals.append(exc.message)
                break
            finally:
                self.signals.critical = False
            self.signals.raise_pending()
            self.started_units += unit.key not in self.again
            if stagger and self.queue:
                time.sleep(stagger)

    def _gate_holds(self) -> bool:
        """Nothing in flight and the gate holds the next cell back (a pause): wait for it,
        a quarter second at a time (a signal or a drain is seen meanwhile); False when the
        gate has closed (the stop ``rate_limited``) or holds nothing back."""
        g = self.gate
        if g is None or g.allows(0):
            return False
        if g.closed is not None:
            self.stop = "rate_limited"
            self.run_state["not_started"] = len(self.queue)
            self.tally.refusals.append(g.closed)
            return False
        with timing.span("gate"):
            time.sleep(min(0.25, max(0.01, g.wait_s())))
        self.signals.raise_pending()
        if stops.drain_requested(self.options.control_file):
            self.stop = "drain"
            return False
        return True

    def _a14(self) -> tuple[bool, dict[str, Any] | None]:
        """A14 before each cell: the local server re-observed. ``(True, the session's note)``
        when it serves the plan's model; else ``(False, None)`` and a canary finding (no cell
        runs against another model than the plan's)."""
        from agentprov_core.live.local import identity as local_ident

        p = self.prepared
        with timing.span("a14"):
            same, changed, seen = local_ident.reobserve(p.local_identity, p.resolved,
                                                        p.local_options)
        if not same:
            self.tally.canary.append(self.canary.local_model_changed(self.queue[0].key, changed))
            return False, None
        return True, local_ident.session_note(p.local_identity, seen)

    def _settle(self, fut: Future, result: dict[str, Any] | None = None) -> None:
        """Ingest a finished flight (``result``: its answer, when already taken) and hand it
        to the mappings; then the stops it causes: a setup refusal (config), a cell that
        billed more than its bound, a canary finding."""
        from agentprov_core.live import caps as capsmod

        fl = self.flights[fut]
        if result is None:
            result = attempt.result(self.executor, fl)
        with timing.span("ingest", session=fl.session_id):
            entry = attempt.ingest(self.prepared, self.wc, fl, result, self.invocation,
                                   self.seq, self.live, drop=self.mappings.drop_later)
        self.mappings.submit(entry, fl)  # counted once mapped (harvest)
        if self.gate is not None:
            self.gate.ended(fl.session_id, fl.records)
        del self.flights[fut]  # ledgered: an interrupt from here on leaves it alone
        # a complete cell that left scripted replies over (one that failed stopped early)
        if self.live.scripted and entry.status == "complete" and (
                left := self.live.endpoint.unused(fl.session_id)):
            self.tally.script_unused.append(f"{fl.unit.cell.key} ({fl.session_id}): " + ", ".join(
                f"{role} {n}" for role, n in left.items()))
        if entry.setup_refusal and self.stop is None:
            self.stop = "config"
            self.tally.refusals.append(f"{fl.unit.cell.key}: {entry.setup_refusal['message']}")
        if fl.charge is not None:
            over = capsmod.exceeds_cell(fl.charge, self.acc.bound)
            self.acc.charge(fl.charge)
            if over is not None and self.stop in (None, "drain", "limit"):
                self.stop, self.tally.cap = "cap_bound_exceeded", f"{fl.unit.key}: {over}"
        if fl.lost:  # the executor's loss, not the cell's: no canary evidence
            self._again(fl.unit, entry.conclusive)
            fl.records = None
            return
        found = self.canary.observe(fl.unit.key, entry.status, fl.records)
        if fl.unit.cell.injection_task_id and entry.status == "complete" and fl.records:
            notice = self.canary.observe_payload(fl.unit.key, fl.records,
                                                 _native(self.wc, entry.native_sha256))
            if notice is not None:
                self.tally.validity.append(notice)
        if found:
            self.tally.canary += found
            if (self.stop is None and (self.queue or self.flights)
                    and self.executor.failure() is None):
                self.stop = "canary"
        fl.records = None

    def _again(self, unit: Unit, conclusive: bool) -> None:
        """The unit of an attempt whose host the executor lost goes first in the queue
        again, by the rule of any unit not settled (:func:`agentprov_core.run.units.again`:
        while it has attempts left under ``--max-attempts``), if the executor can still
        run cells; its failed attempt stays in the ledger and its caps stay charged."""
        nxt = None if conclusive else units.again(unit, self.prepared.plan.max_attempts)
        if nxt is not None and self.executor.failure() is None:
            self.queue.insert(0, nxt)
            self.again.add(unit.key)

    def _abort_in_flight(self) -> None:
        """An interrupt: the cells in flight ended (the executor cancelled). A cell that had
        ended before it (its answer came, or its log ended and its result was staged) is
        ingested as any finished cell, with the native log its result names; every other is
        sealed ``aborted`` and ledgered. A log its cell ended is never sealed over: ledgered
        without the cell's result, it would be ``complete`` without its native log."""
        self.stop = "interrupt"
        if self.executor is not None:
            self.executor.cancel()
        for fut, fl in list(self.flights.items()):
            result = self._answer(fut)
            if result is None and not capture_end.append_end(
                    fl.staging / "capture.jsonl", "aborted",
                    "interrupted: the parent received a signal", "session.interrupted"):
                result = attempt.staged_result(fl.staging)
            if result is not None:
                self._settle(fut, result)
                continue
            entry = attempt.ingest(self.prepared, self.wc, fl,
                                   {"status": "aborted", "reason": "interrupted"},
                                   self.invocation, self.seq, self.live)
            if fl.charge is not None:
                self.acc.charge(fl.charge)
            self.mappings.submit(entry, fl)
        self.flights.clear()

    def _answer(self, fut: Future) -> dict[str, Any] | None:
        """The worker's answer of a cell in flight at an interrupt, when it came before the
        executor ended the cell (an executor that runs cells elsewhere carries the session
        back with it), else None."""
        if not fut.done():
            return None
        try:
            return self.executor.result(fut, timeout=0)
        except AgentprovError:
            return None

    def _close(self, switch: float) -> None:
        """The executor and the endpoint side stopped (cells still in flight, after a worker
        death or a failure of T0 such as a full disk, cancelled and sealed ``aborted`` where
        they can be written); the last mappings waited for."""
        from agentprov_core.live import quality

        t_close = time.time()
        executor = self.executor
        if executor is not None:
            if self.flights:
                executor.cancel()
            for fut, fl in self.flights.items():
                with contextlib.suppress(OSError):  # unsealed in staging if it cannot be written
                    self._answer(fut)  # what a node carried back, landed in staging
                    capture_end.append_end(fl.staging / "capture.jsonl", "aborted",
                                       "the worker ended with the cell in flight",
                                       "session.worker_died")
            executor.close()
            record = getattr(executor, "record", None)  # optional for a plugin's executor
            self.run_state["executor"] = record() if record is not None else None
        self.live.stop()
        t_drain = time.time()
        self.signals.critical = True  # a signal now waits for the last mappings
        self.mappings.close()
        self.signals.critical = False
        timing.emit("mappings.drain", t_drain)
        sys.setswitchinterval(switch)
        self.run_state["canary"] = self.canary.record()
        if self.gate is not None:
            self.gate.note(len(self.flights))
            self.run_state["gate"] = self.gate.record()
            backoffs = self.gate.backoffs()
            quality.merge(self.tally.quality, {
                m: quality.empty() | {"gate_backoffs": backoffs.get(m, 0)}
                for m in set(self.tally.quality) | set(backoffs)})
            self.tally.gate_line = self.gate.summary_line()
        timing.emit("campaign.close", t_close)
