"""The concurrency sweep's report (D-820..D-823): ``tune-jobs.json`` and ``tune-jobs.md``.

An arm is one ``--jobs`` value. A measured arm (run now, or reused from an earlier run of
the same sweep) has its cells' outcomes from its corpus's ledger and its wall time; its
traces per hour are its complete cells over that wall time. The recommendation is the
smallest value within 90 % of the best traces per hour among the measured arms with no
timeouts and no failed cells (ties go to the smaller value); without such an arm there is
none, and the report says why. Skipped arms (the model's memory cannot hold them, or they
come after an arm with timeouts) are listed with their reason.

Nothing here runs anything: :mod:`agentprov_core.run.tunejobs` runs the arms and hands
their measurements here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from agentprov_core.base.ranks import nearest_rank

REPORT_FORMAT = "agentprov-tune-jobs/0.1"
#: the share of the best traces per hour an arm must reach to be recommended (D-822)
WITHIN = 0.9


class Arm(msgspec.Struct, kw_only=True):
    jobs: int
    #: measured (run now) | reused (measured by an earlier run of the same sweep) | skipped
    status: str
    reason: str | None = None
    corpus: str | None = None
    cells: int = 0
    complete: int = 0
    failed: int = 0
    timeouts: int = 0
    wall_s: float | None = None
    traces_per_hour: float | None = None
    seconds_per_cell_p50: float | None = None
    seconds_per_cell_p90: float | None = None
    exit_code: int | None = None

    @property
    def eligible(self) -> bool:
        return (self.status in ("measured", "reused") and self.traces_per_hour is not None
                and self.timeouts == 0 and self.failed == 0 and self.complete > 0)


def measure(jobs: int, durations: list[float], statuses: list[tuple[str, str | None]],
            wall_s: float, corpus: str, exit_code: int | None, status: str = "measured") -> Arm:
    """An arm from its attempts: each one's seconds, and (status, reason). A timeout is an
    attempt whose reason says it timed out (the cell's ``--cell-timeout``, or a model call
    that timed out through every retry); a failed cell is any other attempt that did not
    complete."""
    timeouts = sum(1 for st, why in statuses
                   if st != "complete" and why and ("timed out" in why.lower()
                                                     or "timeout" in why.lower()))
    complete = sum(1 for st, _ in statuses if st == "complete")
    failed = len(statuses) - complete - timeouts
    tph = complete / (wall_s / 3600) if wall_s > 0 and complete else None
    return Arm(jobs=jobs, status=status, corpus=corpus, cells=len(statuses),
               complete=complete, failed=failed, timeouts=timeouts, wall_s=round(wall_s, 3),
               traces_per_hour=round(tph, 3) if tph is not None else None,
               seconds_per_cell_p50=_r(nearest_rank(durations, 0.5)),
               seconds_per_cell_p90=_r(nearest_rank(durations, 0.9)), exit_code=exit_code)


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def recommend(arms: list[Arm]) -> tuple[int | None, str]:
    """The recommended ``--jobs`` and why (see the module's text)."""
    ok = [a for a in arms if a.eligible]
    if not ok:
        return None, ("no arm finished without timeouts or failed cells, so there is no "
                      "recommendation")
    best = max(a.traces_per_hour for a in ok)
    pick = min((a for a in ok if a.traces_per_hour >= WITHIN * best), key=lambda a: a.jobs)
    top = min((a for a in ok if a.traces_per_hour == best), key=lambda a: a.jobs)
    return pick.jobs, (f"--jobs {pick.jobs}: the smallest value within {WITHIN:.0%} of the "
                       f"best traces per hour ({best:g} at --jobs {top.jobs}), among the arms "
                       "with no timeouts or failed cells")


def document(head: dict[str, Any], arms: list[Arm]) -> dict[str, Any]:
    """``tune-jobs.json``: ``head`` (the sweep, the host, the model, the sample) with the
    arms and the recommendation."""
    jobs, why = recommend(arms)
    return {"format": REPORT_FORMAT, **head,
            "arms": [msgspec.to_builtins(a) for a in arms],
            "recommendation": {"jobs": jobs, "rule": f"the smallest value within "
                               f"{WITHIN:.0%} of the best traces per hour, with no timeouts "
                               "or failed cells", "why": why}}


def _n(v: Any, fmt: str = "g") -> str:
    return "—" if v is None else format(v, fmt)


def markdown(doc: dict[str, Any]) -> str:
    """``tune-jobs.md``: the same, for a reader."""
    h, m, s = doc.get("host") or {}, doc.get("model") or {}, doc.get("sample") or {}
    rec = doc["recommendation"]
    lines = [
        f"# Concurrency sweep ({doc.get('created_at', '')})", "",
        f"**Recommendation:** {rec['why']}.", "",
        f"- Command: `{doc.get('command', '')}`",
        f"- Host: {h.get('description', '')} ({h.get('platform')}/{h.get('machine')}, "
        f"{h.get('cpus')} CPUs, {_n(h.get('memory_gb'), '.1f')} GB); load average "
        f"{h.get('load_before')} before, {h.get('load_after')} after",
        f"- Model: `{m.get('model_id')}` on `{m.get('endpoint')}` "
        f"({m.get('server', '')}); identity {str(m.get('identity_digest') or '')[:16]}…",
        f"- Facts: {m.get('facts', '')}",
        f"- Preset: {doc.get('preset') or 'none'}; LLM element {doc.get('llm_element')}",
        f"- Sample: {s.get('cells')} cell(s) ({s.get('description', '')}); plan "
        f"{str(s.get('plan_sha256') or '')[:16]}…; warm-up {s.get('warm_up', '')}",
        "",
        "| --jobs | status | cells | complete | failed | timeouts | wall s | traces/h "
        "| s/cell p50 | s/cell p90 | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for a in doc["arms"]:
        lines.append(
            f"| {a['jobs']} | {a['status']} | {a['cells']} | {a['complete']} | {a['failed']} "
            f"| {a['timeouts']} | {_n(a['wall_s'], '.1f')} | {_n(a['traces_per_hour'], '.1f')} "
            f"| {_n(a['seconds_per_cell_p50'], '.1f')} | {_n(a['seconds_per_cell_p90'], '.1f')} "
            f"| {a.get('reason') or ''} |")
    lines += ["", "Traces per hour are the complete cells over the arm's wall time, from "
              "its first cell's start to its last cell's end (the ledger's times; the "
              "worker's start and the preflight probe are not in it). Seconds per cell are "
              "the ledger's per-attempt times. Arms run one after another against the same "
              "server, after one unmeasured warm-up cell.", ""]
    return "\n".join(lines)
