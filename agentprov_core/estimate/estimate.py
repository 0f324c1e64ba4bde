"""The estimate of a prepared plan: cost and time at p50 and p90, and the worst case, from
per-cell statistics and prices, without a model call (R-9.1 … R-9.10, R-9.20 … R-9.30).

Every due unit (a cell × repeat not settled in the corpus, with attempts left) is counted at
its cell's statistic (:mod:`agentprov_core.estimate.cellstats`). The p50 and p90 totals are
sums of the units' p50 and p90 figures (so the p90 total is a pessimistic bound for a large
plan, not the 90th percentile of the total); the worst case prices every due attempt at
p90. Time is the units' durations summed and divided by ``--jobs``. An Inspect plan's judge
calls are counted and priced apart from the agent's, at their own model at the agent's
endpoint (D-770): roles on different models are priced at the dearest, with a warning, and
a judge model without a price makes the cost unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentprov_core.backend.environments import NOT_BUILT
from agentprov_core.estimate import cellstats, prices
from agentprov_core.estimate.cellstats import Stat

if TYPE_CHECKING:
    from agentprov_core.plan.plans import Cell
    from agentprov_core.run.prepare import Prepared

FORMAT = "agentprov-estimate/0.1"
STAND_IN_WARNING = ("Planned with a scripted stand-in (no key, no network): the plan digest "
                    "is the stand-in's, so units this model already settled in the corpus are "
                    "counted as due, so this estimate is high.")
BENIGN = "(benign)"


@dataclass
class Group:
    units: int = 0
    cost: list[float] = field(default_factory=lambda: [0.0, 0.0])
    calls: list[float] = field(default_factory=lambda: [0.0, 0.0])
    bases: dict[str, int] = field(default_factory=dict)
    #: where the time comes from when not from the cell statistics (a preset, D-826)
    time_basis: str | None = None

    def add(self, cost: tuple[float, float], calls: tuple[float, float], basis: str) -> None:
        self.units += 1
        for i in (0, 1):
            self.cost[i] += cost[i]
            self.calls[i] += calls[i]
        self.bases[basis] = self.bases.get(basis, 0) + 1

    def basis(self) -> str:
        text = ", ".join(sorted(self.bases))
        return f"{text}; time: {self.time_basis}" if self.time_basis else text

    def as_json(self, name: str, priced: bool) -> dict[str, Any]:
        return {"name": name, "units": self.units, "basis": self.basis(),
                "cost_usd": {"p50": _r(self.cost[0]), "p90": _r(self.cost[1])} if priced
                else None,
                "model_calls": {"p50": round(self.calls[0]), "p90": round(self.calls[1])}}


def _r(x: float) -> float:
    return round(x, 6)


@dataclass
class Estimate:
    prepared: Prepared
    price: prices.Price | None
    judge_price: prices.Price | None
    judges: dict[str, str]
    units: int = 0
    due_units: int = 0
    settled: int = 0
    attempts_due: int = 0
    cost: list[float] = field(default_factory=lambda: [0.0, 0.0])
    worst: float = 0.0
    judge_cost: list[float] = field(default_factory=lambda: [0.0, 0.0])
    agent_calls: list[float] = field(default_factory=lambda: [0.0, 0.0])
    judge_calls: list[float] = field(default_factory=lambda: [0.0, 0.0])
    tokens: dict[str, list[float]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=lambda: [0.0, 0.0])
    jobs: int = 1
    by_suite: dict[str, Group] = field(default_factory=dict)
    by_attack: dict[str, Group] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    priors_doc: dict[str, Any] | None = None
    stats_corpora: list[str] = field(default_factory=list)
    inspect: dict[str, Any] | None = None

    @property
    def priced(self) -> bool:
        return self.price is not None and (not self.judges or self.judge_price is not None)


# --------------------------------------------------------------------------- units due
def due_units(prepared: Prepared) -> tuple[list[tuple[Cell, int]], int]:
    """``[(cell, attempts left)]`` of every due unit in plan order, and how many units the
    corpus already settled (not estimated again)."""
    from agentprov_core.corpus.working import WorkingCorpus, unit_id
    from agentprov_core.run import units

    plan = prepared.plan
    wc = WorkingCorpus.peek(prepared.request.options.corpus)
    if wc is None:
        return [(c, plan.max_attempts) for _ in range(plan.repeats) for c in plan.cells], 0
    settled, counts, _, _ = units.plan_progress(plan, wc)
    out, done = [], 0
    for _, cell, key, digest in units.plan_units(plan):
        uid = unit_id(key, digest)
        if uid in settled:
            done += 1
        elif counts[uid] < plan.max_attempts:
            out.append((cell, plan.max_attempts - counts[uid]))
    return out, done


# --------------------------------------------------------------------------- statistics
class StatSource:
    """Where each cell's statistic comes from: the corpora, else the priors, else the
    default."""

    def __init__(self, prepared: Prepared, corpora: cellstats.CorpusStats | None,
                 priors: cellstats.Priors | None) -> None:
        self.prepared = prepared
        self.corpora = corpora
        self.priors = priors
        p = prepared
        self.source = p.source.meta.name
        self.family = cellstats.family(p.request.options.model_id)
        self.defence = p.plan.defence or "none"
        self._priors_cache: dict[tuple[str | None, str | None], Stat | None] = {}
        self._default = self._make_default()

    def _make_default(self) -> Stat:
        doc = self.prepared.doc
        if doc.inspect is None:
            return cellstats.default_stat(cellstats.DEFAULT_CALLS)
        insp = doc.inspect
        m = insp.limits.get("message_limit") or 10
        bound = getattr(self.prepared.source, "cell_bound", None)
        a = bound.judge_calls_per_agent_call if bound else 1
        j = bound.judge_calls_per_sample if bound else 0
        agent = ((m - 1) / 3, float(m - 1))
        judge = (agent[0] * a + j, agent[1] * a + j)
        return cellstats.default_stat(agent, judge, (30.0, 90.0))

    def inspect_scale(self, cell: Cell) -> tuple[float, float]:
        """An Inspect cell's multiple of the per-sample default: samples × epochs for calls
        and tokens; for time, the rounds of ``--max-connections`` samples at a time."""
        insp = self.prepared.doc.inspect
        n = len(cell.samples or ()) or 1
        per = n * insp.epochs
        rounds = math.ceil(n / max(1, insp.max_connections)) * insp.epochs
        return float(per), float(rounds)

    def stat(self, cell: Cell) -> Stat:
        if self.corpora is not None:
            s = self.corpora.lookup(self.source, cell.key, cell.suite, cell.attack)
            if s is not None:
                return s
        if self.priors is not None:
            key = (cell.suite, cell.attack)
            if key not in self._priors_cache:
                # the priors are AgentDojo-format runs: an Inspect task's cells (with judges)
                # take only rows of their own benchmark
                self._priors_cache[key] = self.priors.lookup(
                    self.source, cell.suite, cell.attack, self.family, self.defence,
                    any_benchmark=self.prepared.doc.inspect is None)
            s = self._priors_cache[key]
            if s is not None:
                return s
        return self._default


# --------------------------------------------------------------------------- estimate
def judge_price(prepared: Prepared, ep_name: str, judges: dict[str, str],
                known: list[prices.Price]) -> tuple[prices.Price | None, list[str]]:
    """The price the judges are charged at (their models at the agent's endpoint, D-770):
    the dearest when roles differ (with a warning); None when one has no price."""
    if not judges:
        return None, []
    warnings: list[str] = []
    found = {}
    for role, model in sorted(judges.items()):
        p = prices.lookup(ep_name, model, known=known)
        if p is None:
            return None, [f"no price for the judge {role}'s model {model} at {ep_name}: the "
                          "cost is unknown (agentprov prices set adds one)"]
        found[role] = p
    dear = max(found.values(), key=lambda p: (p.input + p.output, p.output))
    if len({p.model for p in found.values()}) > 1:
        warnings.append("the judges' roles use different models ("
                        + ", ".join(f"{r} {p.model}" for r, p in found.items())
                        + f"): every judge call is priced at the dearest, {dear.model}")
    return dear, warnings


def not_built_warning(prepared: Prepared) -> str:
    """What an estimate says when the backend environment is not built: what it planned
    from, and that the figures stay the same once it is."""
    env_id = prepared.identity["environment_id"]
    return (f"the backend environment {env_id} is not built: the plan comes from the "
            f"catalogue the {prepared.source.meta.name} plugin ships, the cell statistics "
            f"from the priors shipped with agentprov; a build changes none of these figures")


def build(prepared: Prepared, *, corpora: cellstats.CorpusStats | None,
          priors: cellstats.Priors | None, stand_in: bool) -> Estimate:
    o = prepared.request.options
    ep = prepared.endpoint
    known = prices.every()
    if ep is None:  # the scripted transport
        price: prices.Price | None = prices.Price(
            endpoint="scripted", model="scripted", input=0.0, output=0.0,
            as_of=prices.today().isoformat(), source="the scripted transport: no cost",
            origin="local")
    else:
        price = prices.lookup(ep.name, o.model_id, local=ep.local, known=known)
    doc = prepared.doc
    judges = dict(doc.inspect.judges) if doc.inspect is not None else {}
    jprice, jwarn = (None, [])
    if judges:
        if ep is None or ep.local:
            jprice = price
        else:
            jprice, jwarn = judge_price(prepared, ep.name, judges, known)
    est = Estimate(prepared=prepared, price=price, judge_price=jprice, judges=judges,
                   jobs=o.jobs or 1, priors_doc=priors.doc if priors else None,
                   stats_corpora=corpora.corpora if corpora else [])
    est.warnings += jwarn
    if stand_in:
        est.warnings.insert(0, STAND_IN_WARNING)
    if prepared.identity.get("identity_sha256") == NOT_BUILT:
        est.warnings.insert(0, not_built_warning(prepared))
    due, est.settled = due_units(prepared)
    plan = prepared.plan
    est.units, est.due_units = plan.units, len(due)
    src = StatSource(prepared, corpora, priors)
    inspect = doc.inspect is not None
    tok = {k: [0.0, 0.0] for k in ("agent_input", "agent_output", "judge_input", "judge_output")}
    pin = price or prices.Price(endpoint="", model="", input=0, output=0, as_of="", source="")
    pj = jprice or pin
    estimated_tokens = False
    other = 0
    for cell, left in due:
        s = src.stat(cell)
        scale, rounds = (1.0, 1.0)
        if inspect and s.basis == "default":
            scale, rounds = src.inspect_scale(cell)
        estimated_tokens |= s.estimated_tokens
        if s.basis == "priors" and "any benchmark" in s.detail:
            other += 1
        cost, calls = [0.0, 0.0], [0.0, 0.0]
        for i, q in enumerate((50, 90)):
            ai, ao = s.get("agent_input_tokens", q) * scale, s.get("agent_output_tokens", q) * scale
            ji, jo = s.get("judge_input_tokens", q) * scale, s.get("judge_output_tokens", q) * scale
            ac, jc = s.get("agent_calls", q) * scale, s.get("judge_calls", q) * scale
            jcost = pj.usd(ji, jo)
            cost[i] = pin.usd(ai, ao) + jcost
            calls[i] = ac + jc
            est.cost[i] += cost[i]
            est.judge_cost[i] += jcost
            est.agent_calls[i] += ac
            est.judge_calls[i] += jc
            est.seconds[i] += s.get("duration_s", q) * rounds
            for k, v in (("agent_input", ai), ("agent_output", ao), ("judge_input", ji),
                         ("judge_output", jo)):
                tok[k][i] += v
        est.worst += left * cost[1]
        est.attempts_due += left
        est.sources[s.basis] = est.sources.get(s.basis, 0) + 1
        basis = s.basis
        est.by_suite.setdefault(cell.suite or prepared.source.meta.name, Group()).add(
            (cost[0], cost[1]), (calls[0], calls[1]), basis)
        est.by_attack.setdefault(cell.attack or BENIGN, Group()).add(
            (cost[0], cost[1]), (calls[0], calls[1]), basis)
    est.tokens = tok
    _preset_time(est, len(due))
    if est.sources.get("default"):
        est.warnings.append(
            f"{est.sources['default']} unit(s) have no statistics in the named corpora or the "
            f"shipped priors: they are counted at a conservative default "
            f"({src._default.detail}), so this estimate is high")
    if other:
        est.warnings.append(f"{other} unit(s) take the priors' rows of any benchmark (there "
                            f"are none of {src.source}): the shipped priors count AgentDyn's "
                            "published AgentDojo-format runs")
    if estimated_tokens:
        tk = (priors.doc.get("tokenizer") if priors else None) or "a tokenizer"
        est.warnings.append(f"the priors' token counts are estimated from the recorded "
                            f"messages with {tk} (the recorded runs hold no token counts); "
                            "tool schemas are not counted")
    if est.sources.get("priors"):
        est.warnings.append("the priors' durations are the recorded runs' time on the machine "
                            "that made them: a guide, not a promise (--stats-corpus with "
                            "your own corpora is closer)")
    if price is None:
        model = o.model_id
        est.warnings.append(f"no price for this model ({ep.name if ep else '?'} {model}): no "
                            f"cost is given; agentprov prices set {ep.name if ep else 'ENDPOINT'} "
                            f"{model} --input USD --output USD adds one")
    if corpora is not None and corpora.without_counts:
        est.warnings.append(f"{corpora.without_counts} execution(s) of the named corpora were "
                            "indexed without counts and are not used")
    if corpora is not None and corpora.without_tokens:
        est.warnings.append(f"{corpora.without_tokens} execution(s) of the named corpora "
                            "record model calls but not their tokens (an imported AgentDojo "
                            "result file has none) and are not used")
    if inspect:
        est.inspect = inspect_figures(prepared)
    return est


def _preset_time(est: Estimate, units: int) -> None:
    """D-826: a calibrated preset's seconds per cell replace the statistics' time
    (:mod:`agentprov_core.estimate.presettime`)."""
    from agentprov_core.estimate import presettime

    chosen, kept = presettime.choose(est.prepared)
    if kept:
        est.warnings.append(kept)
    if chosen is None:
        return
    row = chosen.row
    if "jobs" not in est.prepared.request.given:
        est.jobs = row.jobs
    est.seconds = [row.seconds_per_cell_p50 * units, row.seconds_per_cell_p90 * units]
    est.warnings.append(chosen.warning(est.jobs))
    for g in (*est.by_suite.values(), *est.by_attack.values()):
        g.time_basis = chosen.label


def cell_seconds(prepared: Prepared) -> tuple[float, str]:
    """A cell's rough seconds at p50 for the sweep's dry run: the preset's measured row for
    this model, else the estimate's (the priors or the conservative default)."""
    pp = prepared.preset
    if pp is not None and pp.row.seconds_per_cell_p50 is not None:
        return pp.row.seconds_per_cell_p50, (f"the preset {pp.preset.name}'s "
                                             f"{pp.row.seconds_per_cell_p50:g} s a cell")
    e = build(prepared, corpora=None, priors=cellstats.load_priors(), stand_in=True)
    n = max(1, e.due_units)
    return e.seconds[0] / n, f"the estimate's {e.seconds[0] / n:.0f} s a cell (priors)"


def inspect_figures(prepared: Prepared) -> dict[str, Any]:
    """What the Inspect line shows: samples, epochs, concurrency, judges and the D-740 bound
    of one sample, from the bound the caps use (``InspectSource.cell_bound``)."""
    insp = prepared.doc.inspect
    bound = getattr(prepared.source, "cell_bound", None)
    m = insp.limits.get("message_limit")
    per_sample = bound.per_sample(insp.epochs, m) if bound is not None and m else None
    return {"task": insp.task, "samples": sum(len(c.samples or ()) for c in prepared.cells),
            "epochs": insp.epochs, "max_connections": insp.max_connections,
            "judges": dict(sorted(insp.judges.items())),
            "billed_calls_per_sample_bound": per_sample}


# --------------------------------------------------------------------------- rendering
def usd(x: float) -> str:
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{round(seconds)} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} m"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _calls(x: float) -> str:
    return f"{round(x):,}"


def _row(name: str, g: Group, priced: bool) -> str:
    figures = (f"p50 {usd(g.cost[0])}  p90 {usd(g.cost[1])}" if priced
               else f"p50 {_calls(g.calls[0])} calls  p90 {_calls(g.calls[1])} calls")
    return f"  {name:<46}{g.units:>2} units  {figures}  [{g.basis()}]"


def text(est: Estimate) -> str:
    plan = est.prepared.plan
    jobs = est.jobs
    t50, t90 = est.seconds[0] / jobs, est.seconds[1] / jobs
    time = f"Time ≈ {duration(t50)} (p90 {duration(t90)}) at --jobs {jobs}."
    n = est.due_units
    if est.priced:
        p = est.price
        head = (f"≈ {usd(est.cost[0])} (p90 {usd(est.cost[1])}) for {n} cell run(s), prices as "
                f"of {p.as_of} ({p.label}) {time}")
        cost = (f"Cost: p50 {usd(est.cost[0])}, p90 {usd(est.cost[1])}, worst case (every due "
                f"attempt at p90) {usd(est.worst)}")
    else:
        head = f"≈ no price for this model: no cost for {n} cell run(s) {time}"
        cost = "Cost: no price for this model"
    calls50 = est.agent_calls[0] + est.judge_calls[0]
    calls90 = est.agent_calls[1] + est.judge_calls[1]
    lines = [head,
             f"Plan {plan.plan_sha256[:16]}…: {len(plan.cells)} cells × {plan.repeats} repeat(s) "
             f"= {est.units} units; {est.settled} already settled; up to {est.attempts_due} "
             f"attempts due (--max-attempts {plan.max_attempts})."]
    if est.inspect is not None:
        lines.append(inspect_line(est))
    if est.judges:
        cost += (f"; model calls p50 {_calls(calls50)}, p90 {_calls(calls90)} (agent "
                 f"{_calls(est.agent_calls[0])}/{_calls(est.agent_calls[1])}, judges "
                 f"{_calls(est.judge_calls[0])}/{_calls(est.judge_calls[1])}).")
    else:
        cost += f"; model calls p50 {_calls(calls50)}, p90 {_calls(calls90)}."
    lines += [cost, "", "By suite:"]
    lines += [_row(k, g, est.priced) for k, g in sorted(est.by_suite.items())]
    lines += ["", "By attack:"]
    lines += [_row(k, g, est.priced) for k, g in sorted(est.by_attack.items(),
                                                          key=lambda kv: (kv[0] != BENIGN, kv[0]))]
    lines += ["", "Sources of the cell statistics: "
              + (", ".join(f"{k} {v} units" for k, v in sorted(est.sources.items()))
                 or "none (no unit is due)")]
    lines += [f"Warning: {w}" for w in est.warnings]
    return "\n".join(lines)


def inspect_line(est: Estimate) -> str:
    f = est.inspect
    judges = ", ".join(f"{r} {m}" for r, m in f["judges"].items()) or "none"
    bound = f["billed_calls_per_sample_bound"]
    tail = (f"at most {bound} billed calls per sample (D-740)" if bound is not None
            else "no D-740 bound declared by the source")
    return (f"Inspect {f['task']}: {f['samples']} sample(s) × {f['epochs']} epoch(s), "
            f"{f['max_connections']} at a time; judges (priced at their model, at the agent's "
            f"endpoint): {judges}; {tail}.")


def document(est: Estimate) -> dict[str, Any]:
    plan = est.prepared.plan
    jobs = est.jobs
    priced = est.priced

    def pair(v: list[float], f=_r) -> dict[str, Any]:
        return {"p50": f(v[0]), "p90": f(v[1])}

    return {
        "format": FORMAT, "source": plan.source, "plan_sha256": plan.plan_sha256,
        "cells": len(plan.cells), "repeats": plan.repeats, "units": est.units,
        "settled": est.settled, "units_due": est.due_units, "attempts_due": est.attempts_due,
        "max_attempts": plan.max_attempts,
        "model_calls": pair([est.agent_calls[i] + est.judge_calls[i] for i in (0, 1)], round),
        "agent_calls": pair(est.agent_calls, round),
        "judge_calls": pair(est.judge_calls, round) if est.judges else None,
        "tokens": {k: pair(v, round) for k, v in est.tokens.items()},
        "cost_usd": dict(pair(est.cost), worst_case=_r(est.worst)) if priced else None,
        "judge_cost_usd": pair(est.judge_cost) if priced and est.judges else None,
        "time_s": dict(pair([est.seconds[0] / jobs, est.seconds[1] / jobs], round), jobs=jobs),
        "by_suite": [g.as_json(k, priced) for k, g in sorted(est.by_suite.items())],
        "by_attack": [g.as_json(k, priced) for k, g in sorted(est.by_attack.items())],
        "price": est.price.as_json() if est.price is not None else None,
        "judge_price": est.judge_price.as_json() if est.judge_price is not None else None,
        "judges": est.judges or None,
        "inspect": est.inspect,
        "sources": dict(sorted(est.sources.items())),
        "stats_corpora": est.stats_corpora,
        "priors": {k: est.priors_doc.get(k) for k in ("built_by", "built_at_commit",
                                                      "tokenizer", "sources")} if est.priors_doc else None,
        "warnings": est.warnings,
    }
