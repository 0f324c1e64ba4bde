"""``agentprov stats --compare A B [C …]``: the results table of each corpus, and the
difference of each later corpus from the first (B - A, C - A, …) with its 95 % interval.

**Pairs.** A unit of A and a unit of B are a pair when they are the same cell and repeat:
the same suite, user task, injection task and attack (an Inspect sample: the same task and
sample) and the same repeat, both counted (agentprov_core/audit/units.py). What the two
corpora vary (the defence, the model, the mode of a live corpus against an imported one) is
what the difference measures. A cell and repeat that one corpus holds twice (two models in
one corpus, say) pairs with nothing (``ambiguous``).

**Groups.** The difference rows are grouped by the same ``--by`` keys as the tables. A key
whose values differ between the two corpora (``defence``: ``none`` in A, ``tool_filter``
in B) is shown as ``none -> tool_filter``: every unit of both corpora is labelled that way,
so the undefended and the defended units of one cell fall in one group.

**Intervals.** Over the pairs of a group: Newcombe's paired interval (method 10, from the
two Wilson intervals and the pairs' correlation), which is what the same units measured
twice call for. Beside it, over every counted unit of the group in each corpus, paired or
not: Newcombe's hybrid score interval for independent proportions (the difference of the
two Wilson intervals, squared and added), for a reader whose corpora hold different
repeats of the same cells. The attack success rate is compared over attacked units only.

**Benchmarks.** A difference measures what changed between two runs of one benchmark.
Corpora of different sources (AgentDojo against AgentDyn, whose suites share names) or of
different benchmark versions (``v1.2`` against ``v1.2.1``, as their AERs record them) are
refused (``stats.usage.different_benchmarks``, exit 2, naming both corpora and what each
holds) unless ``across=True`` (``--across-benchmarks``) says the comparison is meant; then
each difference names both benchmarks. A version one corpus does not record (an import
whose log named none) differs from no version.

Corpora that share no cell cannot be compared: ``stats.usage.no_shared_cells`` (exit 2)
names them, and nothing is printed.
"""

from __future__ import annotations

from typing import Any

import msgspec

from agentprov_core.audit.intervals import LEVEL, paired_difference, unpaired_difference
from agentprov_core.audit.results import ResultsTable, table_of
from agentprov_core.audit.units import BENCHMARK_VERSION, CorpusUnits, Unit
from agentprov_core.evidence.aer import NOT_RECORDED

COMPARE_FORMAT = "agentprov-compare/0.1"
ARROW = " -> "


class Difference(msgspec.Struct, kw_only=True):
    """B - A with its interval. ``paired``: over pairs, with their 2x2 counts."""

    n_a: int
    n_b: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    low: float | None
    high: float | None
    method: str  # newcombe-paired | newcombe-hybrid
    both: int | None = None  # paired: succeeded in A and in B
    only_a: int | None = None
    only_b: int | None = None
    neither: int | None = None


class DiffRow(msgspec.Struct, kw_only=True):
    group: dict[str, str]
    kind: str
    pairs: int
    utility: Difference | None = None
    utility_unpaired: Difference | None = None
    attack_success: Difference | None = None
    attack_success_unpaired: Difference | None = None
    refusal: Difference | None = None  # Inspect: refusal rate, paired by sample
    refusal_unpaired: Difference | None = None


class Against(msgspec.Struct, kw_only=True):
    """The difference of corpus ``b`` from corpus ``a``."""

    a: str  # corpus ids
    b: str
    shared_cells: int
    pairs: int
    ambiguous: int  # counted units whose cell and repeat their corpus holds twice
    rows: list[DiffRow]
    benchmark_a: str  # what each corpus's counted units are: "agentdojo v1.2.1"
    benchmark_b: str


class Comparison(msgspec.Struct, kw_only=True):
    format: str = COMPARE_FORMAT
    by: list[str]
    level: float = LEVEL
    tables: list[ResultsTable]
    differences: list[Against]


def cell_of(u: Unit) -> tuple[str, ...]:
    k = u.keys
    return (u.kind, k["suite"], k["user_task"], k["injection_task"], k["attack"])


def _pairable(units: list[Unit]) -> tuple[dict[tuple, Unit | dict], int]:
    """Counted units by (cell, repeat); an Inspect unit's samples each on their own."""
    out: dict[tuple, Any] = {}
    dup: set[tuple] = set()
    for u in units:
        if u.reason is not None:
            continue
        keys = [(*cell_of(u), u.keys["repeat"])] if u.kind == "agentdojo" else \
            [(u.kind, u.keys["suite"], s.sample, u.keys["repeat"]) for s in u.scores]
        for key in dict.fromkeys(keys):
            if key in out:
                dup.add(key)
            out[key] = u
    ambiguous = len({id(out[k]) for k in dup})
    return {k: v for k, v in out.items() if k not in dup}, ambiguous


def _cells(units: list[Unit]) -> set[tuple]:
    out = set()
    for u in units:
        if u.kind == "agentdojo":
            out.add(cell_of(u))
        else:
            out.update((u.kind, u.keys["suite"], s.sample) for s in u.scores)
            out.add((u.kind, u.keys["suite"], u.keys["user_task"]))
    return out


def _labels(a: list[Unit], b: list[Unit], by: list[str]) -> dict[str, Any]:
    """Per key: None (label by the unit's value) or the one label of every unit."""
    out: dict[str, Any] = {}
    for k in by:
        va, vb = sorted({u.keys[k] for u in a}), sorted({u.keys[k] for u in b})
        out[k] = None if va == vb else f"{','.join(va)}{ARROW}{','.join(vb)}"
    return out


def _diff_paired(pairs: list[tuple[bool, bool]]) -> Difference:
    both = sum(x and y for x, y in pairs)
    only_a = sum(x and not y for x, y in pairs)
    only_b = sum(y and not x for x, y in pairs)
    neither = len(pairs) - both - only_a - only_b
    got = paired_difference(both, only_a, only_b, neither)
    n = len(pairs)
    return Difference(n_a=n, n_b=n, rate_a=(both + only_a) / n if n else None,
                      rate_b=(both + only_b) / n if n else None,
                      difference=got[0] if got else None, low=got[1] if got else None,
                      high=got[2] if got else None, method="newcombe-paired", both=both,
                      only_a=only_a, only_b=only_b, neither=neither)


def _diff_unpaired(xa: list[bool], xb: list[bool]) -> Difference:
    ka, kb = sum(xa), sum(xb)
    got = unpaired_difference(ka, len(xa), kb, len(xb))
    return Difference(n_a=len(xa), n_b=len(xb), rate_a=ka / len(xa) if xa else None,
                      rate_b=kb / len(xb) if xb else None,
                      difference=got[0] if got else None, low=got[1] if got else None,
                      high=got[2] if got else None, method="newcombe-hybrid")


def _refused(u: Unit, sample: str | None = None) -> bool | None:
    from agentprov_core.audit.results import _sample_value

    got = [_sample_value(s.value)[1] for s in u.scores if sample is None or s.sample == sample]
    got = [g for g in got if g is not None]
    return any(got) if got else None


def _refusals(units: list[Unit]) -> list[bool]:
    """Each sample's refusal (a sample scored by several scorers once)."""
    return [r for u in units for sample in dict.fromkeys(s.sample for s in u.scores)
            if (r := _refused(u, sample)) is not None]


def _benchmark(units: list[Unit]) -> tuple[frozenset[str], frozenset[str]]:
    """The sources and the recorded benchmark versions of the counted units."""
    counted = [u for u in units if u.reason is None]
    return (frozenset(u.keys["source"] for u in counted),
            frozenset(v for u in counted if (v := u.keys[BENCHMARK_VERSION]) != NOT_RECORDED))


def benchmark_text(units: list[Unit]) -> str:
    """``agentdojo v1.2.1``; several of either joined by commas."""
    sources, versions = _benchmark(units)
    return " ".join(x for x in (",".join(sorted(sources)) or NOT_RECORDED,
                                ",".join(sorted(versions))) if x)


def same_benchmark(a: list[Unit], b: list[Unit]) -> bool:
    (sa, va), (sb, vb) = _benchmark(a), _benchmark(b)
    return sa == sb and (not va or not vb or va == vb)


def against(a: CorpusUnits, b: CorpusUnits, a_id: str, b_id: str, by: list[str],
            across: bool = False) -> Against:
    from agentprov_core.errors import AgentprovError

    bench_a, bench_b = benchmark_text(a.units), benchmark_text(b.units)
    if not across and not same_benchmark(a.units, b.units):
        raise AgentprovError("stats.usage.different_benchmarks", a=a_id, b=b_id,
                             a_holds=bench_a, b_holds=bench_b)
    shared = _cells(a.units) & _cells(b.units)
    if not shared:
        raise AgentprovError("stats.usage.no_shared_cells", a=a_id, b=b_id)
    labels = _labels(a.units, b.units, by)
    pa, amb_a = _pairable(a.units)
    pb, amb_b = _pairable(b.units)

    def label(u: Unit) -> tuple[str, ...]:
        return tuple(labels[k] if labels[k] is not None else u.keys[k] for k in by)

    groups: dict[tuple, dict[str, list]] = {}
    for side, cu in (("a", a), ("b", b)):
        for u in cu.units:
            if u.reason is None:
                g = groups.setdefault((u.kind, label(u)), {"a": [], "b": [], "pairs": []})
                g[side].append(u)
    for key, ua in pa.items():
        ub = pb.get(key)
        if ub is not None:
            g = groups.setdefault((ua.kind, label(ua)), {"a": [], "b": [], "pairs": []})
            g["pairs"].append((key, ua, ub))
    rows = []
    for (kind, vals), g in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        row = DiffRow(group=dict(zip(by, vals, strict=True)), kind=kind, pairs=len(g["pairs"]))
        if kind == "agentdojo":
            row.utility = _diff_paired([(bool(x.utility), bool(y.utility))
                                        for _, x, y in g["pairs"]])
            row.utility_unpaired = _diff_unpaired([bool(u.utility) for u in g["a"]],
                                                  [bool(u.utility) for u in g["b"]])
            attacked = [(x, y) for _, x, y in g["pairs"]
                        if x.security is not None and y.security is not None]
            if attacked or any(u.security is not None for u in g["a"] + g["b"]):
                row.attack_success = _diff_paired([(bool(x.security), bool(y.security))
                                                   for x, y in attacked])
                row.attack_success_unpaired = _diff_unpaired(
                    [bool(u.security) for u in g["a"] if u.security is not None],
                    [bool(u.security) for u in g["b"] if u.security is not None])
        else:
            pairs = [(_refused(x, key[2]), _refused(y, key[2])) for key, x, y in g["pairs"]]
            row.refusal = _diff_paired([(bool(x), bool(y)) for x, y in pairs
                                        if x is not None and y is not None])
            row.refusal_unpaired = _diff_unpaired(_refusals(g["a"]), _refusals(g["b"]))
        rows.append(row)
    n_pairs = sum(r.pairs for r in rows)
    return Against(a=a_id, b=b_id, shared_cells=len(shared), pairs=n_pairs,
                   ambiguous=amb_a + amb_b, rows=rows, benchmark_a=bench_a,
                   benchmark_b=bench_b)


def compare(corpora: list[Any], by: list[str], across: bool = False) -> Comparison:
    """The comparison of the opened corpora (:class:`~agentprov_core.corpus.opening.OpenCorpus`)
    ``corpora``, the first the baseline; ``by`` checked by the caller; ``across``: corpora
    of different benchmarks are meant to be compared."""
    from agentprov_core.audit.units import read_units

    read = [(c, read_units(c.root, c.corpus_id)) for c in corpora]
    tables = [table_of(cu, corpus=str(c.root), corpus_id=c.corpus_id, state=c.state, by=by)
              for c, cu in read]
    (c0, base), rest = read[0], read[1:]
    diffs = [against(base, cu, c0.corpus_id, c.corpus_id, by, across) for c, cu in rest]
    return Comparison(by=by, tables=tables, differences=diffs)
