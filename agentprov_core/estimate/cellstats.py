"""Per-cell statistics for the estimate, in the specification's order (R-9.2): the corpora
named with ``--stats-corpus`` (counts from their index only), else the shipped priors, else a
conservative default that says so.

A statistic (:class:`Stat`) holds, for one cell, the agent's model calls, the judges' calls
(an Inspect task's, D-770), the input and output tokens of each, and the duration, each at
p50 and p90 (nearest rank over the executions it was made from), with its basis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import inputfile, paths
from agentprov_core.corpus.opening import read_manifest
from agentprov_core.errors import AgentprovError
from agentprov_core.evidence.executions import MAX_COUNT, IndexCounts

PRIORS_FORMAT = "agentprov-priors/0.1"
#: at most this many ``--stats-corpus`` (R-9.2)
MAX_STATS_CORPORA = 16
ANY = "*"
#: the fields of a statistic, each a (p50, p90) pair
FIELDS = ("agent_calls", "judge_calls", "agent_input_tokens", "agent_output_tokens",
          "judge_input_tokens", "judge_output_tokens", "duration_s")


@dataclass(frozen=True)
class Stat:
    """One cell's statistics at p50 and p90 (``values[field] = (p50, p90)``)."""

    values: dict[str, tuple[float, float]]
    basis: str  # corpora | priors | default
    detail: str = ""  # which row or corpus group it came from
    n: int = 0  # executions behind it
    estimated_tokens: bool = False

    def get(self, name: str, q: int) -> float:
        return self.values.get(name, (0.0, 0.0))[0 if q == 50 else 1]


def quantiles(values: list[float]) -> tuple[float, float]:
    """p50 and p90 by nearest rank (the values themselves, never interpolated)."""
    from agentprov_core.base.ranks import nearest_rank

    if not values:
        return 0.0, 0.0
    return nearest_rank(values, 0.5), nearest_rank(values, 0.9)


def family(model: str | None) -> str:
    """A model's family for the priors: its id without the provider prefix and without a
    date suffix (``openai/gpt-4o-2024-08-06`` -> ``gpt-4o``), lower case."""
    if not model:
        return ANY
    name = model.lower().rsplit("/", 1)[-1]
    name = re.sub(r"-\d{4}-\d{2}-\d{2}$", "", name)
    return re.sub(r"-\d{8}$", "", name)


# --------------------------------------------------------------------------- priors
def priors_file() -> Path:
    return paths.registry_dir() / "priors.json"


@dataclass
class Priors:
    rows: dict[tuple[str, str, str, str, str], dict[str, Any]]
    doc: dict[str, Any]

    def lookup(self, benchmark: str, suite: str | None, attack: str | None, fam: str,
               defence: str, *, any_benchmark: bool = True) -> Stat | None:
        """The most specific row: the cell's benchmark, suite, attack, model family and
        defence, then coarser rows (any family, any attack, any suite, and with
        ``any_benchmark`` any benchmark), first with the plan's defence and then with any."""
        s, a = suite or ANY, attack or "none"
        for d in (defence, ANY):
            keys = [(benchmark, s, a, fam, d), (benchmark, s, a, ANY, d),
                    (benchmark, s, ANY, ANY, d), (benchmark, ANY, ANY, ANY, d)]
            if any_benchmark:
                keys.append((ANY, ANY, ANY, ANY, d))
            for key in keys:
                row = self.rows.get(key)
                if row is not None:
                    return _row_stat(row, key, (benchmark, s, a, fam, defence))
        return None


def _row_stat(row: dict[str, Any], key: tuple[str, ...], want: tuple[str, ...]) -> Stat:
    values = {f: (float(row[f][0]), float(row[f][1])) for f in FIELDS if f in row}
    names = ("benchmark", "suite", "attack", "family", "defence")
    coarser = [f"any {n}" for n, k, w in zip(names, key, want, strict=True) if k == ANY != w]
    return Stat(values=values, basis="priors", n=int(row.get("n", 0)),
                detail="/".join(key) + (f" ({', '.join(coarser)})" if coarser else ""),
                estimated_tokens=bool(row.get("tokens_estimated")))


def load_priors(path: Path | None = None) -> Priors | None:
    """The shipped priors, or None when there are none (``cli.usage.registry_file``, exit 2,
    when the file is there but malformed)."""
    path = path or priors_file()
    try:
        doc = inputfile.load_json(inputfile.read_bytes(path))
    except inputfile.Missing:
        return None
    except inputfile.Unreadable as exc:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=str(exc)) from None
    if not isinstance(doc, dict) or doc.get("format") != PRIORS_FORMAT:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f'format must be "{PRIORS_FORMAT}"')
    rows = {}
    for i, r in enumerate(doc.get("rows") or []):
        try:
            rows[(r["benchmark"], r["suite"], r["attack"], r["family"], r["defence"])] = r
        except (KeyError, TypeError):
            raise AgentprovError("cli.usage.registry_file", location=str(path),
                                 what="a row needs benchmark, suite, attack, family and "
                                      "defence") from None
        bad = _bad_prior(r)
        if bad:
            raise AgentprovError("cli.usage.registry_file", location=f"{path} rows[{i}]",
                                 what=bad)
    return Priors(rows=rows, doc=doc)


def _bad_prior(row: dict[str, Any]) -> str | None:
    """What is wrong with a priors row's figures (each field a [p50, p90] pair of
    non-negative finite numbers, ``n`` a non-negative integer), checked before any
    arithmetic; None when nothing is."""
    def count(v: Any) -> bool:
        return (isinstance(v, int | float) and not isinstance(v, bool)
                and math.isfinite(v) and 0 <= v <= MAX_COUNT)

    for f in FIELDS:
        if f in row and not (isinstance(row[f], list) and len(row[f]) == 2
                             and all(count(v) for v in row[f])):
            return f"{f} must be [p50, p90], two numbers from 0 to {MAX_COUNT:.0e}"
    n = row.get("n", 0)
    if not (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_COUNT):
        return "n must be a whole number of executions, 0 or more"
    return None


# --------------------------------------------------------------------------- corpora
class IndexRow(msgspec.Struct):
    """What the estimate reads of an index row (``executions.jsonl``); the rest is skipped."""

    unit: str
    execution_observed: bool
    counts: IndexCounts | None = None


@dataclass
class _Pool:
    values: dict[str, list[float]] = field(default_factory=lambda: {f: [] for f in FIELDS})
    n: int = 0

    def add(self, c: Any) -> None:
        self.n += 1
        for f in FIELDS:
            v = (c.duration_ms / 1000 if c.duration_ms is not None else None) \
                if f == "duration_s" else getattr(c, f)
            if v is not None:
                self.values[f].append(float(v))

    def stat(self, detail: str) -> Stat:
        return Stat(values={f: quantiles(v) for f, v in self.values.items() if v},
                    basis="corpora", detail=detail, n=self.n)


@dataclass
class CorpusStats:
    """The executions' counts of the ``--stats-corpus`` corpora, pooled by source and cell
    key, by source, suite and attack, and by source."""

    corpora: list[str]
    by_cell: dict[tuple[str, str], _Pool] = field(default_factory=dict)
    by_group: dict[tuple[str, str, str], _Pool] = field(default_factory=dict)
    by_source: dict[str, _Pool] = field(default_factory=dict)
    executions: int = 0
    without_counts: int = 0
    without_tokens: int = 0
    _cache: dict[Any, Stat | None] = field(default_factory=dict)

    def lookup(self, source: str, cell_key: str, suite: str | None,
               attack: str | None) -> Stat | None:
        for kind, key, pools in (("cell", (source, cell_key), self.by_cell),
                                 ("suite and attack", (source, suite or ANY, attack or "none"),
                                  self.by_group),
                                 ("source", source, self.by_source)):
            pool = pools.get(key)
            if pool is not None and pool.n:
                ck = (kind, key)
                if ck not in self._cache:
                    self._cache[ck] = pool.stat(f"{kind} {'/'.join(key) if isinstance(key, tuple) else key}")
                return self._cache[ck]
        return None


def _cell_parts(cell_key: str) -> tuple[str | None, str | None]:
    parts = cell_key.split("/")
    if len(parts) == 4:
        return parts[0], (None if parts[2] == "none" else parts[2])
    return None, None


def read_corpora(dirs: Iterable[str]) -> CorpusStats:
    """Read the ``executions.jsonl`` index of each corpus (never an AER). A directory that is
    not a corpus, or more than :data:`MAX_STATS_CORPORA` of them, is
    ``cli.usage.stats_corpus`` (exit 2)."""
    from agentprov_core.evidence.executions import INDEX

    dirs = list(dirs)
    if len(dirs) > MAX_STATS_CORPORA:
        raise AgentprovError("cli.usage.stats_corpus", path=dirs[MAX_STATS_CORPORA],
                             what=f"is the {len(dirs)}th --stats-corpus; at most "
                                  f"{MAX_STATS_CORPORA} corpora are read")
    stats = CorpusStats(corpora=dirs)
    dec = msgspec.json.Decoder(IndexRow)
    for d in dirs:
        root = _corpus_root(d)
        try:
            m = read_manifest(root / "manifest.json")
        except ValueError as exc:
            raise AgentprovError("cli.usage.stats_corpus", path=d,
                                 what=f"is not a corpus: its manifest.json {exc}") from None
        if not isinstance(m, dict) or not isinstance(m.get("source"), str):
            raise AgentprovError("cli.usage.stats_corpus", path=d,
                                 what="is not a corpus (no manifest.json naming its source)")
        source = m["source"]
        try:
            data = inputfile.read_bytes(root / INDEX, inputfile.MAX_STORED, follow=False)
        except inputfile.Missing:
            continue
        except inputfile.Unreadable as exc:
            raise AgentprovError("cli.usage.stats_corpus", path=d,
                                 what=f"its {INDEX} {exc}") from None
        lines = data.split(b"\n")
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                e = dec.decode(line)
            except (msgspec.DecodeError, RecursionError) as exc:
                if n == len(lines):
                    continue  # a torn last line: a run cut short
                raise AgentprovError(
                    "cli.usage.stats_corpus", path=d,
                    what=f"{INDEX} line {n} is not an index line T0 writes ({exc}); "
                         "agentprov verify says what is damaged") from None
            stats.executions += 1
            if e.counts is None or not e.execution_observed:
                stats.without_counts += e.counts is None
                continue
            if e.counts.agent_calls and (e.counts.agent_input_tokens is None
                                         or e.counts.agent_output_tokens is None):
                # calls without their tokens (an imported AgentDojo result file records
                # none) would price the cell at nothing: not used
                stats.without_tokens += 1
                continue
            cell_key = e.unit.split("|", 1)[0]
            suite, attack = _cell_parts(cell_key)
            for pools, key in ((stats.by_cell, (source, cell_key)),
                               (stats.by_group, (source, suite or ANY, attack or "none")),
                               (stats.by_source, source)):
                pool = pools.get(key)
                if pool is None:
                    pool = pools[key] = _Pool()
                pool.add(e.counts)
    return stats


def _corpus_root(d: str) -> Path:
    """A corpus's directory: DIR, or DIR.partial while it is being written."""
    from agentprov_core.corpus.working import partial_dir

    p = Path(d)
    if (p / "manifest.json").is_file():
        return p
    part = partial_dir(p)
    return part if (part / "manifest.json").is_file() else p


# --------------------------------------------------------------------------- default
#: the conservative default per AgentDojo-family cell (no corpus, no prior): the cell
#: bound's 48 calls at p90, a third of it at p50, 10,000 input and 500 output tokens a call,
#: two and ten minutes
DEFAULT_CALLS = (16.0, 48.0)
DEFAULT_IN_PER_CALL = 10_000.0
DEFAULT_OUT_PER_CALL = 500.0
DEFAULT_SECONDS = (120.0, 600.0)


def default_stat(agent_calls: tuple[float, float], judge_calls: tuple[float, float] = (0, 0),
                 seconds: tuple[float, float] = DEFAULT_SECONDS) -> Stat:
    values = {"agent_calls": agent_calls, "judge_calls": judge_calls,
              "agent_input_tokens": tuple(c * DEFAULT_IN_PER_CALL for c in agent_calls),
              "agent_output_tokens": tuple(c * DEFAULT_OUT_PER_CALL for c in agent_calls),
              "judge_input_tokens": tuple(c * DEFAULT_IN_PER_CALL for c in judge_calls),
              "judge_output_tokens": tuple(c * DEFAULT_OUT_PER_CALL for c in judge_calls),
              "duration_s": seconds}
    return Stat(values=values, basis="default",
                detail=f"{agent_calls[0]:g}/{agent_calls[1]:g} calls, "
                       f"{DEFAULT_IN_PER_CALL:,.0f} input and {DEFAULT_OUT_PER_CALL:,.0f} "
                       "output tokens a call")
