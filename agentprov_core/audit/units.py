"""The units of a corpus with the outcome each settled on, for the results table and the
comparison (``agentprov stats --tables results``, ``--compare``).

A unit is its name and its digest (docs/decisions.md, "Unit identity"): every attempt the
ledger holds of it is read, and the unit **counts** when one of them settles it as the run
does, and its record holds the outcome:

* the attempt is conclusive (its session completed and its accounting held, the ledger's
  ``conclusive``), its execution is in the index, and its AER is the one the index line
  names (its sha256) and decodes;
* its live-versus-native check did not disagree (a unit whose every conclusive attempt
  disagreed is the run summary's "inconsistent");
* its AER holds the outcome the table needs (``utility``, and ``security`` for an attacked
  cell, as booleans; for an Inspect cell, at least one ``inspect.score`` decision).

The first attempt that settles the unit is the one counted (a later one of the same unit
was a re-run of a settled unit, under ``--retry-inconsistent`` for example). A unit that
does not count is left out with one reason, the most telling of its attempts' (in this
order): ``aer_damaged`` (an AER missing, changed since it was indexed, or not an AER),
``live_native_disagree``, ``outcome_not_recorded``, ``unmapped`` (a conclusive attempt
with no execution), ``inconsistent`` (complete, but its call accounting did not hold),
``quarantined``, ``inconclusive`` (no attempt completed: errored, aborted, incomplete).

Everything is read from ``ledger.jsonl``, ``executions.jsonl`` and each indexed
``aer.json`` (decoded with the one AER schema, ``evidence/aer.py``, its sha256 checked
against the index); nothing is re-validated. An execution whose index line names no ledger entry (a corpus an
importer wrote) is a unit of its own AER's ``task.unit``, conclusive when its session
completed and its outcome is not ``failed``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.audit import validity
from agentprov_core.base import inputfile
from agentprov_core.evidence.aer import AER, NOT_RECORDED, Decision

#: the reasons a unit is left out, most telling first
REASONS = ("aer_damaged", "live_native_disagree", "outcome_not_recorded", "unmapped",
           "inconsistent", "quarantined", "inconclusive")
#: a key no AER of the unit could give (filled in by :func:`_fill`)
_UNREAD = "\0unread"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


#: an AER is read with the one schema the mappers build and ``validate`` checks
_DECODER = msgspec.json.Decoder(AER)


# --------------------------------------------------------------- units
@dataclass
class Score:
    """One Inspect sample's score (an ``inspect.score`` decision)."""

    sample: str
    scorer: str
    value: Any


@dataclass
class Unit:
    """A unit, with what it counts as (``reason`` None) or why it is left out."""

    uid: str
    keys: dict[str, str]  # the grouping keys (see KEYS) and BENCHMARK_VERSION
    kind: str  # "agentdojo" (utility and security) or "inspect" (scores)
    reason: str | None = None
    utility: bool | None = None
    security: bool | None = None  # None for a benign cell
    scores: list[Score] = field(default_factory=list)
    live_vs_native: str = "unchecked"  # agree | unchecked (a disagreeing one is left out)
    not_reproducible: list[str] = field(default_factory=list)  # declared items
    execution_id: str | None = None
    # A13 (audit/validity.py): an attacked unit's payload (reached | not_reached |
    # not_determined), whether its session was a no-op, its user task's vacuous utility
    payload: str | None = None
    noop: bool | None = None
    vacuous: str | None = None


#: the keys a table can be grouped by (``--by``), in the order they are printed
KEYS = ("corpus", "source", "mode", "model", "suite", "attack", "defence", "user_task",
        "injection_task", "repeat")
#: a key every unit holds beside KEYS: what ``--compare`` checks two corpora share
BENCHMARK_VERSION = "benchmark_version"


@dataclass
class CorpusUnits:
    units: list[Unit]
    damaged: list[str]  # what was wrong with each damaged AER (path: why)
    in_progress: bool  # a run held the corpus when it was read


def _s(v: Any) -> str:
    return NOT_RECORDED if v is None or v == "" else str(v)


def _keys(corpus_id: str, aer: AER | None, cell_key: str, defence: str,
          repeat: int) -> dict[str, str]:
    if aer is None:  # no AER to read: what the ledger's cell key says
        parts = cell_key.split("/")
        suite, user, attack, inj = (parts + [NOT_RECORDED] * 4)[:4] if len(parts) == 4 \
            else (NOT_RECORDED,) * 4
        return {"corpus": corpus_id, "source": _UNREAD, "mode": _UNREAD,
                "model": _UNREAD, BENCHMARK_VERSION: _UNREAD, "suite": suite,
                "attack": attack, "defence": defence, "user_task": user,
                "injection_task": inj, "repeat": str(repeat)}
    h, t = aer.header, aer.header.task
    return {"corpus": corpus_id, "source": _s(h.source), "mode": _s(h.mode),
            "model": _s(h.agent.model), BENCHMARK_VERSION: _s(h.backend.benchmark_version),
            "suite": _s(t.suite), "attack": _s(t.attack or "none"),
            "defence": _s(t.defense_id or "none"), "user_task": _s(t.user_task_id),
            "injection_task": _s(t.injection_task_id or "none"), "repeat": str(t.repeat)}


def _is_inspect(aer: AER) -> bool:
    return aer.header.producer.mapper == "inspect.eval" or any(
        isinstance(r, Decision) and r.code == "inspect.score" for r in aer.records)


def _scores(aer: AER) -> list[Score]:
    out = []
    for r in aer.records:
        if isinstance(r, Decision) and r.code == "inspect.score" and isinstance(r.data, dict):
            d = r.data
            epoch = d.get("epoch")
            out.append(Score(sample=f"{d.get('sample')}" + (f"@{epoch}" if epoch not in
                                                              (None, 1) else ""),
                             scorer=str(d.get("scorer")), value=d.get("value")))
    return out


def _not_reproducible(aer: AER) -> list[str]:
    """The declared instrumentation items that say a re-run is not a reproduction."""
    return sorted({str(i).split(" ", 1)[0] for i in aer.header.instrumentation
                   if isinstance(i, str) and "reproducible: no" in i})


class _Reader:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.damaged: list[str] = []

    def aer(self, execution_id: str, sha: str) -> AER | None:
        rel = f"executions/{execution_id}/aer.json"
        if not _SAFE_ID.fullmatch(execution_id):
            self.damaged.append(f"executions.jsonl: execution id {execution_id!r} is not a "
                                "directory name T0 writes")
            return None
        try:
            data = inputfile.read_bytes(self.root / rel, inputfile.MAX_STORED, follow=False)
        except inputfile.Unreadable as exc:
            self.damaged.append(f"{rel}: cannot be read ({exc})")
            return None
        if hashlib.sha256(data).hexdigest() != sha:
            self.damaged.append(f"{rel}: its sha256 is not the aer_sha256 executions.jsonl "
                                "records (changed after it was indexed)")
            return None
        try:
            return _DECODER.decode(data)
        except (msgspec.DecodeError, RecursionError) as exc:
            self.damaged.append(f"{rel}: not an AER ({exc})")
            return None


def _outcome(u: Unit, aer: AER, root: Path) -> str | None:
    """Fill ``u`` from ``aer`` (and, for an attacked cell, its stored capture and native
    log: A13); the reason it cannot count, if any."""
    o = aer.outcome
    lvn = o.live_vs_native
    if lvn is not None and lvn.checked is True and lvn.agree is False:
        return "live_native_disagree"
    u.live_vs_native = "agree" if lvn is not None and lvn.agree is True else "unchecked"
    u.not_reproducible = _not_reproducible(aer)
    u.execution_id = str(aer.header.execution_id)
    if u.kind == "inspect":
        u.scores = _scores(aer)
        return None if u.scores else "outcome_not_recorded"
    attacked = aer.header.task.injection_task_id not in (None, "", NOT_RECORDED)
    if not isinstance(o.utility, bool) or (attacked and not isinstance(o.security, bool)):
        return "outcome_not_recorded"
    u.utility = o.utility
    u.security = o.security if attacked else None
    u.noop = validity.noop(aer.records)
    if attacked:
        u.payload = validity.payload_state(root, aer.header.evidence)
    return None


def read_units(root: Path, corpus_id: str) -> CorpusUnits:
    """Every unit of the corpus at ``root``: see the module's docstring."""
    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.corpus.snapshot import decoded, take
    from agentprov_core.corpus.working import unit_id
    from agentprov_core.evidence.executions import INDEX, IndexEntry

    snap = take(root)
    index: dict[int, IndexEntry] = {}
    entries: list[IndexEntry] = []
    seen: set[str] = set()
    for _, e in decoded(snap, INDEX, IndexEntry):
        if e.execution_id in seen:
            continue
        seen.add(e.execution_id)
        entries.append(e)
        index.setdefault(e.ledger_seq, e)
    attempts: dict[str, list[Attempt]] = {}
    seqs: set[int] = set()
    for _, a in decoded(snap, "ledger.jsonl", Attempt):
        seqs.add(a.seq)
        uid = unit_id(a.unit, a.unit_digest) if isinstance(a.unit_digest, str) else a.unit
        attempts.setdefault(uid, []).append(a)
    orphans = [e for e in entries if e.ledger_seq not in seqs]
    reader = _Reader(root)
    units = [_ledgered(uid, atts, index, reader, corpus_id) for uid, atts in attempts.items()]
    units += _imported(orphans, reader, corpus_id)
    _fill(units)
    tasks = validity.vacuous_tasks(units)
    for u in units:
        if u.reason is None and u.kind == "agentdojo":
            u.vacuous = tasks.get(validity.task_key(u.keys), validity.NOT_DETERMINED)
    return CorpusUnits(units, reader.damaged, snap.held)


def _fill(units: list[Unit]) -> None:
    """A unit none of whose AERs could be read takes the corpus's source, mode, model and
    benchmark version when every other unit has the same one (a live corpus: one source,
    one model); else they are not recorded."""
    for k in ("source", "mode", "model", BENCHMARK_VERSION):
        values = {u.keys[k] for u in units if u.keys[k] != _UNREAD}
        fill = next(iter(values)) if len(values) == 1 else NOT_RECORDED
        for u in units:
            if u.keys[k] == _UNREAD:
                u.keys[k] = fill


def _ledgered(uid: str, atts: list, index: dict, reader: _Reader, corpus_id: str) -> Unit:
    reasons: set[str] = set()
    shown: AER | None = None  # the AER whose keys name the unit
    for a in atts:
        e = index.get(a.seq)
        aer = reader.aer(e.execution_id, e.aer_sha256) if e is not None else None
        if e is not None and aer is None:
            reasons.add("aer_damaged")
        if aer is not None:
            shown = aer
        if a.status == "quarantined":
            reasons.add("quarantined")
            continue
        if not a.conclusive:
            reasons.add("inconsistent" if a.status == "complete" else "inconclusive")
            continue
        if e is None:
            reasons.add("unmapped")
            continue
        if aer is None:
            continue
        u = Unit(uid, _keys(corpus_id, aer, a.cell_key, a.defence, a.repeat),
                 "inspect" if _is_inspect(aer) else "agentdojo")
        why = _outcome(u, aer, reader.root)
        if why is None:
            return u
        reasons.add(why)
    last = atts[-1]
    kind = "inspect" if shown is not None and _is_inspect(shown) else "agentdojo"
    return Unit(uid, _keys(corpus_id, shown, last.cell_key, last.defence, last.repeat), kind,
                reason=next(r for r in REASONS if r in reasons))


def _imported(entries: list, reader: _Reader, corpus_id: str) -> list[Unit]:
    """Executions no ledger entry names: one unit per AER ``task.unit``."""
    by_unit: dict[str, list[tuple[Any, AER | None]]] = {}
    for e in entries:
        by_unit.setdefault(e.unit, []).append((e, reader.aer(e.execution_id, e.aer_sha256)))
    out = []
    for uid, pairs in by_unit.items():
        reasons: set[str] = set()
        shown = next((aer for _, aer in pairs if aer is not None), None)
        done = None
        for _, aer in pairs:
            if aer is None:
                reasons.add("aer_damaged")
                continue
            o = aer.outcome
            if o.session_status != "complete" or o.status == "failed":
                reasons.add("inconclusive")
                continue
            u = Unit(uid, _keys(corpus_id, aer, "", "none", 0),
                     "inspect" if _is_inspect(aer) else "agentdojo")
            why = _outcome(u, aer, reader.root)
            if why is None:
                done = u
                break
            reasons.add(why)
        if done is None:
            t = shown.header.task if shown is not None else None
            done = Unit(uid, _keys(corpus_id, shown, str(getattr(t, "cell_key", "")),
                                   "none", 0),
                        "inspect" if shown is not None and _is_inspect(shown) else "agentdojo",
                        reason=next(r for r in REASONS if r in reasons))
        out.append(done)
    return out
