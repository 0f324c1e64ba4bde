"""The units of a plan (cell × repeat) and what a corpus already holds of them.

A unit is named by its unit key and identified by that key with its unit digest
(docs/decisions.md, "Unit identity"). A unit is settled once an attempt of it is
conclusive; it is due while it is not settled and has attempts left (``--max-attempts``,
counted across invocations).
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import WorkingCorpus, unit_id, unit_key

if TYPE_CHECKING:
    from agentprov_core.plan.plans import Cell, Plan
    from agentprov_core.run.prepare import Prepared


@dataclass
class Unit:
    cell: Cell
    repeat: int
    key: str  # the unit's name (the ledger's ``unit``)
    attempt: int
    digest: str = ""  # with ``key``, the unit's identity (the ledger's ``unit_digest``)


def unit_ids(plan: Plan) -> Callable[[Attempt], str | None]:
    """The unit of ``plan`` that a ledger entry answers for (its :func:`unit_id`), or
    ``None`` when it answers for none of them (docs/decisions.md, "Unit identity").

    An entry answers for the unit of its own unit key and unit digest. An entry written
    before units had a digest answers only for a unit of this very plan digest (which holds
    everything its cell runs but the display name) whose attack does not address the model
    by name; otherwise it is another plan's attempt, kept and counted by nothing here."""
    cells = {c.key: c for c in plan.cells}

    def uid(e: Attempt) -> str | None:
        if isinstance(e.unit_digest, str):
            return unit_id(e.unit, e.unit_digest)
        c = cells.get(e.cell_key)
        if c is None or e.plan_sha256 != plan.plan_sha256 or c.attack in plan.named_attacks:
            return None
        return unit_id(e.unit, plan.unit_digest(c))

    return uid


def plan_progress(plan: Plan, wc: WorkingCorpus, entries: list[Attempt] | None = None):
    """``(settled, counts, mine, uid)``: the unit ids of ``plan`` that are settled, the
    attempts per unit id, the entries that answer for its units, and :func:`unit_ids`."""
    uid = unit_ids(plan)
    mine = [e for e in (wc.attempts() if entries is None else entries) if uid(e) is not None]
    return wc.settled(mine, key=uid), wc.attempts_per_unit(mine, key=uid), mine, uid


def plan_units(plan: Plan) -> Iterator[tuple[int, Cell, str, str]]:
    """``(repeat, cell, unit key, unit digest)`` of every unit, in plan order."""
    for r in range(plan.repeats):
        for cell in plan.cells:
            yield r, cell, unit_key(cell.key, plan.defence, r), plan.unit_digest(cell)


def due_units(prepared: Prepared, settled: set[str], counts: Counter) -> tuple[list[Unit], int]:
    """The due units (not settled, attempts left) in plan order, and how many were settled
    (``settled`` and ``counts`` by unit id)."""
    plan = prepared.plan
    due, done_before = [], 0
    for r, cell, key, digest in plan_units(plan):
        uid = unit_id(key, digest)
        if uid in settled:
            done_before += 1
            continue
        if counts[uid] >= plan.max_attempts:
            continue  # exhausted: no attempt left
        due.append(Unit(cell, r, key, counts[uid] + 1, digest))
    return due, done_before


def again(unit: Unit, max_attempts: int) -> Unit | None:
    """``unit``'s next attempt in the same invocation, or None when it has none left (the
    rule of :func:`due_units`: at most ``max_attempts`` attempts of a unit in all)."""
    if unit.attempt >= max_attempts:
        return None
    return dataclasses.replace(unit, attempt=unit.attempt + 1)


def read_progress(prepared: Prepared) -> Prepared:
    """The prepared run with its plan's settled units and attempts already used read from
    its corpus, if any (attempts are counted across invocations; only entries that answer
    for the plan's own units count)."""
    wc = WorkingCorpus.peek(prepared.request.options.corpus)
    if wc is None:
        return prepared
    plan = prepared.plan
    settled, counts, _, _ = plan_progress(plan, wc)
    n_settled, used, settled_cells = 0, 0, {}
    for _, c, key, digest in plan_units(plan):
        uid = unit_id(key, digest)
        if uid in settled:
            n_settled += 1
            settled_cells[c.key] = settled_cells.get(c.key, 0) + 1
        else:
            used += min(counts[uid], plan.max_attempts)
    plan = msgspec.structs.replace(plan, settled=n_settled, attempts_used=used,
                                   settled_cells=settled_cells)
    return dataclasses.replace(prepared, plan=plan)


def inconsistent_units(wc: WorkingCorpus, entries: list[Attempt], uid) -> set[str]:
    """Units (by unit id) none of whose conclusive attempts agreed with the native log
    (``--retry-inconsistent`` re-attempts them)."""
    from agentprov_core.evidence.executions import Executions

    verdicts = {x.ledger_seq: x.live_vs_native for x in Executions(wc.root).entries()}
    by_unit: dict[str, list[str]] = {}
    for e in entries:
        if e.conclusive:
            by_unit.setdefault(uid(e), []).append(verdicts.get(e.seq, "unchecked"))
    return {u for u, v in by_unit.items() if v and all(x == "disagree" for x in v)}


class Progress:
    """A live line on a terminal (cells done and in flight, failures, calls); silent when
    stderr is not a terminal."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
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
