"""The results table (``agentprov stats --tables results``): per group of units, the
utility rate and the attack success rate as AgentDojo defines them, with 95 % Wilson score
intervals, over the units that count (agentprov_core/audit/units.py), and how many were left
out and why.

AgentDojo (0.1.35, ``benchmark.py`` and ``scripts/benchmark.py``) scores each (user task,
injection task) pair of a suite: ``utility`` is the user task's utility check, ``security``
is the injection task's check, ``True`` when the injection's goal was carried out. Its
"average utility" is the mean of ``utility`` over the pairs, its "average security" the
mean of ``security``: the **attack success rate**. A benign cell (no attack, no injection
task) has a utility and no attack success (AgentDojo's ``security`` is always ``True``
there and means nothing), so its ``attack_success`` is null. Here each unit (a cell and a
repeat) is one such pair; a group's rate is ``k / n`` over its counted units.

An Inspect cell (AgentHarm) holds one ``inspect.score`` decision per sample and scorer;
each sample counts once. A value that is a number is a score; a value that is an object
holds ``score`` (a number) and ``refusal`` (AgentHarm's combined scorer, 1.0 when the
refusal judge found a refusal). The row gives the number of samples, the mean score (no
interval: the scores are not proportions) and the refusal rate with its Wilson interval.

Beside the rates, A13, the benchmark-validity flag (agentprov_core/audit/validity.py): of
the attacked units, how many had their injection reach a model request, and the attack
success rate over those; of every unit, whether its user task's utility is vacuous.

:func:`results_table` is what other parts call (the CLI, a viewer): it returns a
:class:`ResultsTable`, whose shape docs/results.md documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import msgspec

from agentprov_core.audit import validity
from agentprov_core.audit.intervals import LEVEL, wilson
from agentprov_core.audit.units import KEYS, REASONS, CorpusUnits, Unit, read_units
from agentprov_core.live import payload

RESULTS_FORMAT = "agentprov-results/0.1"
DEFAULT_BY = ("model", "suite", "attack", "defence")


class Rate(msgspec.Struct, kw_only=True):
    """``successes`` of ``n`` units, their ``rate`` and its Wilson interval (null: n = 0)."""

    successes: int
    n: int
    rate: float | None
    low: float | None
    high: float | None


#: what a missing figure prints as
DASH = "-"


def percent(x: float | None) -> str:
    """A fraction in percent, one decimal; a bound that one decimal would round to 0 or
    100 when it is neither keeps two significant digits (0/10000 is [0.0, 0.038])."""
    if x is None:
        return DASH
    text = f"{100 * x:.1f}"
    if 0 < x < 1 and text in ("0.0", "100.0"):
        return f"{100 * x:.2g}" if x < 0.5 else f"{100 - float(f'{100 * (1 - x):.2g}'):g}"
    return text


def rate_text(r: Rate | None) -> str:
    """``k/n pct% [low, high]``: how ``stats --tables results`` and ``view`` show a rate."""
    if r is None:
        return DASH
    if r.n == 0:
        return "0/0"
    return f"{r.successes}/{r.n} {percent(r.rate)}% [{percent(r.low)}, {percent(r.high)}]"


def payload_text(counts: dict[str, int]) -> str:
    """A13's payload column: ``k/n``, the attacked units whose payload reached the model of
    those counted, and ``(m not determined)`` when some could not be decided."""
    if not counts:
        return DASH
    und = counts.get(payload.NOT_DETERMINED, 0)
    return (f"{counts.get(payload.REACHED, 0)}/{sum(counts.values())}"
            + (f" ({und} not determined)" if und else ""))


class Mean(msgspec.Struct, kw_only=True):
    n: int
    mean: float | None


class Row(msgspec.Struct, kw_only=True):
    """One group: ``group`` holds the value of each ``by`` key."""

    group: dict[str, str]
    kind: Literal["agentdojo", "inspect"]
    units: int  # units counted
    left_out: dict[str, int]  # units left out, by reason (docs/results.md)
    utility: Rate | None = None
    attack_success: Rate | None = None  # null: no attacked unit in the group
    samples: int | None = None  # Inspect: samples scored
    score: Mean | None = None
    refusal: Rate | None = None
    live_vs_native: dict[str, int] = {}  # of the counted units: agree / unchecked
    flags: list[str] = []  # what the figures of this row must be read with
    # A13: of the counted attacked units, whether the payload reached the model (reached /
    # not_reached / not_determined), and the attack success over those it reached; of the
    # counted units, their user task's vacuous utility (yes / no / not_determined)
    payload: dict[str, int] = {}
    attack_success_reached: Rate | None = None
    vacuous_utility: dict[str, int] = {}


class ResultsTable(msgspec.Struct, kw_only=True):
    format: str = RESULTS_FORMAT
    corpus: str
    corpus_id: str
    state: str
    by: list[str]
    level: float = LEVEL
    interval: str = "wilson"
    units: int  # every unit of the corpus
    counted: int
    left_out: dict[str, int]
    damaged: list[str]  # each damaged AER: path and why
    in_progress: bool  # a run held the corpus when it was read
    rows: list[Row]


def rate(k: int, n: int) -> Rate:
    ci = wilson(k, n)
    return Rate(successes=k, n=n, rate=k / n if n else None,
                low=ci[0] if ci else None, high=ci[1] if ci else None)


def check_by(by: tuple[str, ...] | list[str]) -> list[str]:
    """The ``by`` keys, checked (``stats.usage.by_key`` names an unknown one)."""
    from agentprov_core.errors import AgentprovError

    keys = [k for k in dict.fromkeys(by) if k]
    bad = [k for k in keys if k not in KEYS]
    if bad or not keys:
        raise AgentprovError("stats.usage.by_key", key=", ".join(bad) or "(none)",
                             keys=", ".join(KEYS))
    return keys


def _sample_value(value: Any) -> tuple[float | None, bool | None]:
    """A score's number and refusal, as far as the value holds them."""
    if isinstance(value, bool):
        return float(value), None
    if isinstance(value, (int, float)):
        return float(value), None
    if isinstance(value, dict):
        s, r = value.get("score"), value.get("refusal")
        score = float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else None
        refusal = bool(r) if isinstance(r, (bool, int, float)) else None
        return score, refusal
    return None, None


def _counts(values: list[str | None], order: tuple[str, ...]) -> dict[str, int]:
    return {v: n for v in order if (n := values.count(v))}


def _validity_flags(units: list[Unit]) -> list[str]:
    """A13's flags: attacked units whose payload did not (or cannot be shown to) reach
    the model, and units of a user task whose utility held for a no-op session."""
    out = []
    states = [u.payload for u in units if u.payload is not None]
    if n := states.count(payload.NOT_REACHED):
        out.append(f"payload_not_reached: {n} attacked unit(s): no model request held the "
                   "injection's text (the agent never read it; its attack success says "
                   "nothing of the model)")
    if n := states.count(payload.NOT_DETERMINED):
        out.append(f"payload_not_determined: {n} attacked unit(s): no capture log or no "
                   "injection text to look for")
    tasks = sorted({u.keys["user_task"] for u in units if u.vacuous == validity.VACUOUS})
    if tasks:
        n = sum(u.vacuous == validity.VACUOUS for u in units)
        out.append(f"vacuous_utility: {n} unit(s) of {', '.join(tasks)}: the utility held "
                   "for a session that called no tool and left the environment unchanged")
    return out


def _flags(units: list[Unit], left: dict[str, int]) -> list[str]:
    out = _validity_flags(units)
    if left.get("live_native_disagree"):
        out.append(f"live_native_disagree: {left['live_native_disagree']} unit(s) left out "
                   "(their capture and native log differ)")
    unchecked = sum(u.live_vs_native == "unchecked" for u in units)
    if unchecked:
        out.append(f"live_native_unchecked: {unchecked} counted unit(s) had no live-versus-"
                   "native check")
    items = sorted({i for u in units for i in u.not_reproducible})
    for item in items:
        n = sum(item in u.not_reproducible for u in units)
        out.append(f"not_reproducible: {item} ({n} unit(s)): a re-run is a new execution")
    if left.get("aer_damaged"):
        out.append(f"aer_damaged: {left['aer_damaged']} unit(s) left out (see damaged)")
    return out


def build_row(group: dict[str, str], kind: str, members: list[Unit]) -> Row:
    """A row over ``members`` (the units of one group, counted or not)."""
    counted = [u for u in members if u.reason is None]
    left: dict[str, int] = {}
    for u in members:
        if u.reason is not None:
            left[u.reason] = left.get(u.reason, 0) + 1
    left = {r: left[r] for r in REASONS if r in left}
    lvn: dict[str, int] = {}
    for u in counted:
        lvn[u.live_vs_native] = lvn.get(u.live_vs_native, 0) + 1
    row = Row(group=group, kind=kind, units=len(counted), left_out=left,  # type: ignore[arg-type]
              live_vs_native=lvn, flags=_flags(counted, left))
    if kind == "agentdojo":
        row.utility = rate(sum(bool(u.utility) for u in counted), len(counted))
        attacked = [u for u in counted if u.security is not None]
        if attacked or any(u.keys.get("attack") not in (None, "none") for u in members):
            row.attack_success = rate(sum(bool(u.security) for u in attacked), len(attacked))
            reached = [u for u in attacked if u.payload == payload.REACHED]
            row.payload = _counts([u.payload for u in attacked], payload.STATES)
            row.attack_success_reached = rate(sum(bool(u.security) for u in reached),
                                              len(reached))
        row.vacuous_utility = _counts([u.vacuous for u in counted], validity.VACUOUS_STATES)
        return row
    samples: dict[str, tuple[list[float], list[bool]]] = {}
    for u in counted:
        for s in u.scores:
            score, refusal = _sample_value(s.value)
            got = samples.setdefault(f"{u.uid}/{s.sample}", ([], []))
            if score is not None:
                got[0].append(score)
            if refusal is not None:
                got[1].append(refusal)
    scored = [sum(v[0]) / len(v[0]) for v in samples.values() if v[0]]
    refusals = [any(v[1]) for v in samples.values() if v[1]]
    row.samples = len(samples)
    row.score = Mean(n=len(scored), mean=sum(scored) / len(scored) if scored else None)
    row.refusal = rate(sum(refusals), len(refusals)) if refusals else None
    return row


def group_rows(units: list[Unit], by: list[str]) -> list[Row]:
    groups: dict[tuple[str, tuple[str, ...]], list[Unit]] = {}
    for u in units:
        groups.setdefault((u.kind, tuple(u.keys[k] for k in by)), []).append(u)
    return [build_row(dict(zip(by, vals, strict=True)), kind, members)
            for (kind, vals), members in sorted(groups.items(), key=lambda kv: (kv[0][1],
                                                                                 kv[0][0]))]


def table_of(cu: CorpusUnits, *, corpus: str, corpus_id: str, state: str,
             by: list[str]) -> ResultsTable:
    left: dict[str, int] = {}
    for u in cu.units:
        if u.reason is not None:
            left[u.reason] = left.get(u.reason, 0) + 1
    return ResultsTable(corpus=corpus, corpus_id=corpus_id, state=state, by=by,
                        units=len(cu.units), counted=sum(u.reason is None for u in cu.units),
                        left_out={r: left[r] for r in REASONS if r in left},
                        damaged=cu.damaged, in_progress=cu.in_progress,
                        rows=group_rows(cu.units, by))


def results_table(corpus: Any, by: tuple[str, ...] | list[str] = DEFAULT_BY) -> ResultsTable:
    """The results table of ``corpus`` (a path, or an opened
    :class:`~agentprov_core.corpus.opening.OpenCorpus`), grouped by ``by`` (keys of
    :data:`agentprov_core.audit.units.KEYS`)."""
    from agentprov_core.corpus.opening import OpenCorpus, open_corpus

    c = corpus if isinstance(corpus, OpenCorpus) else open_corpus(Path(corpus))
    keys = check_by(by)
    return table_of(read_units(c.root, c.corpus_id), corpus=str(c.root),
                    corpus_id=c.corpus_id, state=c.state, by=keys)
