"""The tally of one invocation's attempts and mappings, and the summary lines it ends with
(on stderr; the last line, the counts, on stdout)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from agentprov_core.corpus.ledger import Attempt

if TYPE_CHECKING:
    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.run.attempt import Flight
    from agentprov_core.run.prepare import Prepared

CONFIG_STOP = ("agentprov run: a cell's setup refused this configuration, so no further cell "
               "was started (every one would fail the same way); fix the option the refusal "
               "names and re-run the same command")


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
    canary: list[Any] = field(default_factory=list)  # canary findings (stop or notice)
    validity: list[Any] = field(default_factory=list)  # the canary's A13 notices
    cap: str | None = None  # why a cap stopped the campaign
    #: complete scripted sessions that left replies over: "CELL (SESSION): refusal_judge 2"
    script_unused: list[str] = field(default_factory=list)
    gate_line: str | None = None  # what the adaptive start gate did (run/gate.py)

    def add_mappings(self, other: Tally) -> None:
        """Count the executions ``other`` derived and the mappings that failed in it (the
        attempts an earlier run left unmapped) as this invocation's."""
        self.derived += other.derived
        self.map_failed += other.map_failed
        self.issues.update(other.issues)


def count(t: Tally, e: Attempt, fl: Flight | None = None, mapped=None) -> None:
    """Count a ledgered attempt (and its mapping, when it has one) in the tally."""
    from agentprov_core.live import quality

    if fl is not None:
        quality.merge(t.quality, fl.quality)
    t.attempts += 1
    if e.staging_refused and (mapped is None or "map.staging_refused" not in mapped.entry.issues):
        t.issues["map.staging_refused"] += 1  # an attempt whose capture log was not stored
    if e.status == "quarantined":
        t.quarantined += 1
        t.issues["capture.quarantined"] += 1
    elif e.status == "complete":
        t.sealed += 1
        if not e.conclusive or (mapped is not None
                                and mapped.entry.live_vs_native == "disagree"):
            t.inconsistent += 1  # its accounting, or its two views, disagree
        else:
            t.conclusive += 1
    else:
        t.failed += 1
        t.inconclusive += 1


def caps_line_wanted(prepared: Prepared) -> bool:
    """The summary names the caps for a real model, and for a scripted run given caps."""
    o = prepared.request.options
    return not prepared.request.scripted or o.max_calls is not None or \
        o.max_cost_usd is not None


def summary(prepared: Prepared, wc: WorkingCorpus, t: Tally, stop: str | None, code: int,
            started: float, done_before: int, due: int,
            caps: dict[str, Any] | None = None) -> None:
    e = lambda s: click.echo(s, err=True)  # noqa: E731
    units = prepared.plan.units
    e(f"run: finished in {time.monotonic() - started:.1f}s (exit {code})")
    e(f"  units    {t.attempts} of {units}: sealed {t.sealed}, failed {t.failed}"
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
    elif stop == "canary":
        from agentprov_core.live.canary import STOP_LINE

        e(f"agentprov run: {STOP_LINE}")
    elif stop == "rate_limited":
        e(f"agentprov run: rate_limited: {t.refusals[-1]}; no further cell was started, the "
          "cells in flight were sealed as they ended; re-run the same command once the "
          "provider's limit allows (it resumes)")
    elif stop in ("cap_reached", "cap_bound_exceeded"):
        e(f"agentprov run: {stop}: {t.cap}; no further cell was started "
          + ("(raise the cap and re-run the same command to resume)" if stop == "cap_reached"
             else "(a cell billed more than its bound: check the endpoint, then re-run)"))
    from agentprov_core.live import quality

    for line in quality.lines(t.quality):
        e(line)
    if t.gate_line:
        e(t.gate_line)
    if caps:
        usd = caps.get("spend_upper_bound_usd")
        e(f"  caps     {caps['billed_calls']} billed call(s) in the corpus ({caps['probe_calls']} "
          f"probe)" + (f" of --max-calls {caps['max_calls']}" if caps.get("max_calls") is not None
                       else "")
          + (f"; spend upper bound ${usd:.4f} of --max-cost-usd {caps['max_cost_usd']:g}"
             if usd is not None else ""))
    for f in t.canary:
        e(f"{'canary' if stop == 'canary' else 'notice: canary'}: {f.line()}")
    for f in t.validity:
        e(f"notice: canary: {f.line()}")
    for u in t.script_unused:
        e(f"notice: scripted replies left over at the end of a cell (the script holds more "
          f"than its calls took): {u}")
    e(f"  corpus   {wc.root} (working; {len(wc.attempts())} attempt(s) in the ledger)")
    if stop in ("config", "worker"):
        for n in notices:
            e(f"notice: {n}")
    map_failure_notices(t)
    click.echo(f"agentprov run: {t.attempts} attempt(s); {t.conclusive} conclusive, "
               f"{t.inconsistent} inconsistent, {t.inconclusive} inconclusive; "
               f"{t.derived} derived, {t.map_failed} failed; "
               f"{done_before} of {units} unit(s) done before")


def map_failure_notices(t: Tally) -> None:
    """A notice on stderr for each mapping that failed."""
    for f in t.map_failures:
        click.echo(f"notice: mapping failed: {f['session_id']} ({f['unit']}): {f['error']}",
                   err=True)
