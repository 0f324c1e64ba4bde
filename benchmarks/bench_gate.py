"""The adaptive start gate against a rate limit (docs/performance.md, "The adaptive start
gate").

The same campaign twice, with ``--adaptive-jobs off`` and ``on``, against the scripted
transport playing a provider's limit (``rate_limit``: a token bucket of ``--burst``
requests refilled at ``--rpm`` a minute, 429 with ``Retry-After`` beyond it) with
``latency_s`` seconds a call: ``agentprov run agentdojo`` through the real AgentDojo
environment (the stock element, its SDK retries and tenacity's), the live-demo script's
three calls a cell, the canary off (``--canary 0``: its A11 stop at the first errored
cells would end the run without the gate before anything is measured). For each arm: the
wall time of the run, the billed attempts (wire replies served 200, in every stored capture
log), the 429s, the inconclusive cells, and the ratio of the wall time to the limit's ideal (calls ÷ rpm); then the same command again
(a resume, which re-attempts the inconclusive units) until every cell is settled, at most
``--invocations`` runs, and the totals: what finishing the campaign cost.

    python benchmarks/bench_gate.py [--cells 100] [--jobs 8] [--rpm 180] [--burst 10]
        [--latency 1.0] [--invocations 3] [--home DIR] [--out FILE.json]

``--home`` reuses an ``AGENTPROV_HOME`` whose AgentDojo environment is built; without it
one is built in a temporary home. ``--jobs`` is bounded by this host's maximum
(``agentprov_core.backend.hostlimits``). Prints one JSON document and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from benchutil import child_env  # noqa: E402

DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
CALLS_PER_CELL = 3
TASKS = 10  # banking user tasks 0-9, repeated to make the cells


def script(path: Path, rpm: int, burst: int, latency: float) -> Path:
    path.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": latency,
                                "rate_limit": {"per_minute": rpm, "burst": burst},
                                "replies": json.loads(DEMO.read_text())}))
    return path


def build(home: Path) -> None:
    argv = [sys.executable, "-m", "agentprov_core", "backends", "build", "agentdojo",
            "--allow-network"]
    subprocess.run(argv, check=True, env=child_env(str(home)), cwd=ROOT,
                   stdout=subprocess.DEVNULL)


def arm(home: Path, work: Path, mode: str, cells: int, jobs: int, s: Path,
        invocations: int) -> dict[str, Any]:
    """One arm: the run, then the same command again (a resume: its inconclusive units are
    attempted again) until every unit is settled or ``invocations`` ran."""
    corpus = work / f"gate-{mode}"
    argv = [sys.executable, "-m", "agentprov_core", "run", "agentdojo", "--suite", "banking",
            "--user-tasks", f"0-{TASKS - 1}", "--repeats", str(cells // TASKS),
            "--llm-script", str(s), "--jobs", str(jobs), "--adaptive-jobs", mode,
            "--cell-timeout", "900", "--canary", "0", "--corpus", str(corpus),
            "--campaign", mode]
    part = corpus.with_name(corpus.name + ".partial")
    walls, summaries = [], []
    for _ in range(invocations):
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=child_env(str(home)),
                              cwd=ROOT)
        walls.append(round(time.perf_counter() - t, 1))
        summaries.append([x for x in proc.stderr.splitlines() if x.startswith("  ")][-6:])
        entries = [json.loads(x) for x in (part / "ledger.jsonl").read_text().splitlines()]
        if len({e["unit"] for e in entries if e.get("conclusive")}) == cells:
            break
    served = refused = other = 0
    for e in entries:
        if not e.get("capture_sha256"):
            continue
        sha = e["capture_sha256"]
        for line in (part / "raw" / "sha256" / sha[:2] / sha).read_bytes().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "wire_response":
                if rec.get("status") == 200:
                    served += 1
                elif rec.get("status") == 429:
                    refused += 1
                else:
                    other += 1
            elif rec.get("kind") == "wire_error":
                other += 1
    gates = [g for g in json.loads((part / "manifest.json").read_text())["live"].get("gate")
             or [] if g["policy"]["mode"] == "on"]
    first = entries[:cells]
    return {"mode": mode, "exit": proc.returncode, "wall_s": walls[0], "walls_s": walls,
            "wall_total_s": round(sum(walls), 1), "invocations": len(walls),
            "attempts": len(entries),
            "inconclusive_first": sum(1 for e in first if not e.get("conclusive")),
            "inconclusive_attempts": sum(1 for e in entries if not e.get("conclusive")),
            "unsettled": cells - len({e["unit"] for e in entries if e.get("conclusive")}),
            "billed": served, "http_429": refused, "other_errors": other,
            "decreases": sum(g.get("decreases_total") or 0 for g in gates) if gates else None,
            "paused_s": round(sum(g.get("paused_s") or 0 for g in gates), 1) if gates else None,
            "window_end": gates[0].get("window_end") if gates else None,
            "max_in_flight": max((p[1] for p in gates[0].get("trace", [])), default=None)
            if gates else None,
            "summary": summaries}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--rpm", type=int, default=180)
    ap.add_argument("--burst", type=int, default=10)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--home")
    ap.add_argument("--modes", default="off,on")
    ap.add_argument("--invocations", type=int, default=3,
                    help="runs of the same command at most (a resume re-attempts the "
                         "inconclusive units), until every unit is settled")
    ap.add_argument("--out")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        work = Path(tmp)
        home = Path(a.home) if a.home else work / "home"
        if not a.home:
            home.mkdir()
            build(home)
        s = script(work / "limited.json", a.rpm, a.burst, a.latency)
        calls = (a.cells // TASKS) * TASKS * CALLS_PER_CELL
        ideal = calls / a.rpm * 60
        arms = []
        for mode in a.modes.split(","):
            r = arm(home, work, mode, a.cells, a.jobs, s, a.invocations)
            r["ratio_to_ideal"] = round(r["wall_s"] / ideal, 2)
            r["total_ratio_to_ideal"] = round(r["wall_total_s"] / ideal, 2)
            r["billed_over_calls"] = round(r["billed"] / calls, 3)
            arms.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    doc = {"cells": (a.cells // TASKS) * TASKS, "calls": calls, "jobs": a.jobs, "rpm": a.rpm,
           "burst": a.burst, "latency_s": a.latency, "ideal_s": round(ideal, 1), "arms": arms}
    if a.out:
        Path(a.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))
    print(f"\n| gate | first run: wall s (x ideal {ideal:.0f} s) | inconclusive cells | "
          "runs to settle every cell | total wall s (x ideal) | billed (÷ calls) | 429s | "
          "unsettled | decreases | paused s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in arms:
        dash = lambda v: "—" if v is None else v  # noqa: E731
        print(f"| {r['mode']} | {r['wall_s']} ({r['ratio_to_ideal']}) | "
              f"{r['inconclusive_first']} | {r['invocations']} | {r['wall_total_s']} "
              f"({r['total_ratio_to_ideal']}) | {r['billed']} ({r['billed_over_calls']:.3f}) | "
              f"{r['http_429']} | {r['unsettled']} | {dash(r['decreases'])} | "
              f"{dash(r['paused_s'])} |")


if __name__ == "__main__":
    main()
