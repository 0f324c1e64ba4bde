"""Mapping ledgered attempts into executions (AER, SEM, PROV, validation;
:mod:`agentprov_core.evidence.live_mapping`), failed attempts too.

Mapping never stops the campaign: an attempt whose mapping raised counts as "failed" in the
summary and the error is kept in the manifest. During a campaign the mappings run in one
background thread, behind the loop (:class:`Mappings`); before any new work, a run maps what
an earlier one left unmapped (:func:`finish_unmapped`).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from agentprov_core.base import timing
from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import WorkingCorpus, now
from agentprov_core.run.summary import Tally, count, map_failure_notices

if TYPE_CHECKING:
    from agentprov_core.run.attempt import Flight
    from agentprov_core.run.prepare import Prepared


def map_attempt(prepared: Prepared, wc: WorkingCorpus, entry: Attempt, finish: bool = False):
    """The mapping of one ledgered attempt (its execution written; None when it is not
    mapped); raises what the mapping raised. ``finish``: an attempt an earlier run left
    unmapped, whose cut-short files are kept where they hold the bytes it writes now."""
    from agentprov_core.evidence import live_mapping

    with timing.span("map", session=entry.session_id):
        return live_mapping.map_attempt(
            wc.root, entry, wc.manifest_as_read(), mapped_at=now(), finish=finish)


def mapped(t: Tally, entry: Attempt, mapping, exc: BaseException | None = None):
    """Count a mapping in the tally: the execution derived, or (``exc``) the mapping failed,
    its error kept; returns the mapping (None when there is none)."""
    if exc is not None:
        t.map_failed += 1
        t.map_failures.append({"session_id": entry.session_id, "unit": entry.unit,
                               "ledger_seq": str(entry.seq),
                               "error": f"{type(exc).__name__}: {exc}"[:500], "at": now()})
        return None
    if mapping is not None:
        t.derived += 1
        t.issues.update(mapping.entry.issues)
    return mapping


def map_counted(prepared: Prepared, wc: WorkingCorpus, entry: Attempt, t: Tally,
                finish: bool = False):
    """Map a ledgered attempt into its execution (None when it is not mapped, or when the
    mapping raised: then it is counted failed and the error kept, never raised)."""
    try:
        mapping = map_attempt(prepared, wc, entry, finish)
    except Exception as exc:  # noqa: BLE001 - a mapping bug must not lose the campaign
        return mapped(t, entry, None, exc)
    return mapped(t, entry, mapping)


def warm_mapping(prepared: Prepared) -> None:
    """What the first mapping would import and build (the mapper of the run's source, AER,
    SEM, PROV, validation), done while the worker's forkserver imports the benchmark."""
    from agentprov_core.evidence import derive, live_mapping  # noqa: F401
    from agentprov_core.mapping import mapper_for_source

    mapper_for_source(prepared.source.meta.name)


class Mappings:
    """Map the ledgered attempts in one background thread, in ledger order, while the next
    cell runs: an attempt's ledger entry is written (and fsynced) before the next cell
    starts, its mapping (and the removal of its staging directory) need not be; both are
    handed to the thread once the next cell is launched (:meth:`start`). The tally is only
    updated on T0's main thread, in ledger order (:meth:`harvest`). A mapping cut short by a
    kill leaves a ledgered attempt without its execution, which a re-run of the same command
    maps."""

    def __init__(self, prepared: Prepared, wc: WorkingCorpus, tally: Tally) -> None:
        self.prepared, self.wc, self.tally = prepared, wc, tally
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentprov-map")
        self._pending: list[tuple[Future, Attempt, Flight | None]] = []
        self._queued: list[tuple[Any, tuple]] = []
        self._pool.submit(warm_mapping, prepared)

    def drop_later(self, session_id: str) -> None:
        """Remove a ledgered attempt's staging directory in the background thread too."""
        self._queued.append((self.wc.drop_staging, (session_id,)))

    def submit(self, entry: Attempt, fl: Flight | None) -> None:
        fut: Future = Future()
        self._queued.append((self._run_into, (fut, entry)))
        self._pending.append((fut, entry, fl))

    def _run_into(self, fut: Future, entry: Attempt) -> None:
        try:
            fut.set_result(map_attempt(self.prepared, self.wc, entry))
        except BaseException as exc:  # noqa: BLE001 - counted by harvest
            fut.set_exception(exc)

    def start(self) -> None:
        """Hand what was queued to the thread. The loop calls it once the next cell is
        launched, so that A14 and the launch do not share T0 with a mapping."""
        for fn, args in self._queued:
            self._pool.submit(fn, *args)
        self._queued.clear()

    def harvest(self, block: bool = False) -> None:
        """Count the finished mappings (all of them, waiting, with ``block``)."""
        while self._pending and (block or self._pending[0][0].done()):
            fut, entry, fl = self._pending.pop(0)
            exc = fut.exception()
            count(self.tally, entry, fl,
                  mapped(self.tally, entry, None if exc else fut.result(), exc))

    def close(self) -> None:
        try:
            self.start()
            self.harvest(block=True)
        finally:
            self._pool.shutdown(wait=True)


def finish_unmapped(prepared: Prepared, wc: WorkingCorpus, entries: list[Attempt]) -> Tally:
    """Map every ledgered attempt that has a stored capture log and no execution in the
    index, in ledger order, before any new work: the attempts of a T0 killed between an
    attempt's ledger line and its index line (or whose mapping raised). An attempt that an
    index line names is never mapped again, and files a cut-short mapping left are kept
    only where their bytes are the ones it writes now (an execution is written once).
    Returns the tally of these mappings (derived, failed, their issues)."""
    from agentprov_core.evidence import live_mapping
    from agentprov_core.evidence.executions import Executions

    t = Tally()
    done = Executions(wc.root).mapped()
    todo = []
    for e in entries:
        if e.session_id not in done and live_mapping.mappable(wc.store, e):
            done.add(e.session_id)  # one execution per session
            todo.append(e)
    if not todo:
        return t
    for e in todo:
        map_counted(prepared, wc, e, t, finish=True)
    click.echo(f"agentprov run: {len(todo)} attempt(s) in the ledger had no execution (an "
               f"earlier run ended before mapping them): {t.derived} mapped now, "
               f"{t.map_failed} failed", err=True)
    map_failure_notices(t)
    if t.map_failures:
        manifest = wc.manifest()
        manifest.setdefault("mapping_failures", []).extend(t.map_failures)
        wc.write_manifest(manifest)
    return t


def unrepairable(wc: WorkingCorpus, entries: list[Attempt]) -> list[str]:
    """The sessions whose execution an earlier agentprov wrote without the plan or
    configuration digest its ledger line records: an attempt whose capture log stayed empty
    (its worker killed before the cell wrote the header), mapped before the AER took those
    digests from the ledger line. ``verify`` fails them; an execution is written once, so no
    run rewrites them. Only such attempts' AERs are read (a handful, never every AER)."""
    import json

    from agentprov_core.base import inputfile
    from agentprov_core.evidence.executions import Executions

    ex = Executions(wc.root)
    out = []
    for e in entries:
        if e.capture_records != 0 or not (e.plan_sha256 or e.config_digest):
            continue
        try:
            header = json.loads(inputfile.read_bytes(ex.path(e.session_id, "aer"),
                                                     inputfile.MAX_STORED,
                                                     follow=False)).get("header") or {}
        except (inputfile.Unreadable, ValueError, AttributeError):
            continue  # not mapped, or damaged: verify and the mapping say so
        if (e.plan_sha256 and header.get("plan_sha256") != e.plan_sha256) or \
                (e.config_digest and header.get("config_digest") != e.config_digest):
            out.append(e.session_id)
    return out
