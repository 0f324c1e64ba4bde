"""Local vs Ray at equal cells in flight (docs/performance.md, "Local vs Ray at equal cells
in flight"; docs/cluster.md).

One scripted AgentDojo campaign (``--suite banking --attack important_instructions``: its 16
benign and 144 attacked cells, 160; ``--limit`` runs fewer) through the real CLI, every model
call answered by the scripted endpoint after ``--latency`` seconds (three calls a cell: the
replies of ``examples/scripts/live-demo.json``), at the same ``--jobs``: with the local
executor, and with ``--executor ray`` on a local cluster
(``agentprov_ray.testing.local_cluster``) of 1 node and of ``--nodes`` nodes, each arm with a
fresh corpus and a cluster of its own. The arms run interleaved over ``--rounds`` rounds
(the order rotated each round) after an untimed warm-up of each, so each round gives paired
ratios of Ray to local at about the same load of a shared machine.

For each run: the wall time against the ideal (cells x calls x latency / cells in flight),
and the driver's own CPU (T0's process alone, the ``agentprov run`` process: no worker, no
node): all of it (``RUSAGE_SELF`` at exit) and its parts, *start* (up to the first cell's
launch: imports, plan, the check worker, the executor's start: under Ray the connection and
the node checks), *loop* (from the first launch to the end of the campaign's loop: launch,
wait, ingest, mapping, ledger and, under Ray, the driver's share of Ray and the landing of
the carried sessions) and *end* (the executor closed, the manifest, the summary). The loop's
CPU a cell is the marginal cost of a cell to the driver: one driver core takes at most
1000 / (loop ms a cell) cells a second before it is the bottleneck. ``--threads`` adds the
driver's CPU by thread (``/proc/self/task`` read every half second; the reader's own CPU is
taken out of every figure).

``python benchmarks/ray_cluster.py [--jobs 8] [--latency 1.0] [--nodes 3] [--rounds 3]
[--threads] [--json]`` (``tox -e ray`` runs it). The environment is the one built in
``$AGENTPROV_HOME`` (built with ``--allow-network`` when absent). The ratios are the result;
the absolute times belong to the machine that measured them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_campaign import write_script  # noqa: E402
from benchutil import load_avg  # noqa: E402

PLAN = ("--suite", "banking", "--attack", "important_instructions")
CELLS, CALLS = 160, 3
#: T0 under a probe: its CPU (the process's, less the probe's own thread) at the first
#: cell's launch, at the end of the campaign's loop and at exit, written to argv[1] as JSON;
#: with argv[2] == "threads", its CPU by thread too
DRIVER = r'''
import atexit, json, os, re, resource, runpy, sys, threading, time
out, by_thread, paths = sys.argv[1], sys.argv[2] == "threads", json.loads(sys.argv[3])
sys.path[0:0] = paths
sys.argv = ["agentprov", *sys.argv[4:]]
TICK = os.sysconf("SC_CLK_TCK")
marks, threads, probe = {}, {}, [0.0]

def cpu():
    return time.process_time() - probe[0]

def sample():
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                raw = f.read().decode()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        name = names.get(int(tid)) or raw[raw.index("(") + 1:raw.rindex(")")]
        threads[int(tid)] = (re.sub(r"[-_ ]?\d+", "", name.split(" (")[0]) or name,
                             (int(fields[11]) + int(fields[12])) / TICK)

if by_thread:
    def loop():
        while True:
            sample()
            probe[0] = time.thread_time()
            time.sleep(0.5)
    threading.Thread(target=loop, name="probe", daemon=True).start()

from agentprov_core.backend import executor
from agentprov_core.run import attempt, campaign
_launch, _close, _start = attempt.launch, campaign._Loop._close, executor.start
parts = {}

def timed(name, fn):
    def call(*a, **k):
        t = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            parts[name] = parts.get(name, 0.0) + time.thread_time() - t
    return call

def start(name, launch):
    e = _start(name, launch)
    for m in ("submit", "wait_any", "result"):
        setattr(e, m, timed(m, getattr(e, m)))
    return e

executor.start, attempt.ingest = start, timed("ingest", attempt.ingest)
import gc
gcs = threading.local()

def collected(phase, info):
    if phase == "start":
        gcs.t = time.thread_time()
    elif hasattr(gcs, "t"):
        key = f"gc{info['generation']}"
        parts[key] = parts.get(key, 0.0) + time.thread_time() - gcs.t

gc.callbacks.append(collected)

def launch(*a, **k):
    if "first_launch" not in marks:
        marks["first_launch"], marks["parts_at_launch"] = cpu(), dict(parts)
    return _launch(*a, **k)

def close(self, *a, **k):
    marks["loop_end"], marks["parts_at_end"] = cpu(), dict(parts)
    return _close(self, *a, **k)

attempt.launch, campaign._Loop._close = launch, close

def done():
    if by_thread:
        sample()
    total = {}
    for name, s in threads.values():
        total[name] = total.get(name, 0.0) + s
    own = total.pop("probe", probe[0])
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        json.dump({"cpu_s": r.ru_utime + r.ru_stime - own, **marks,
                   "threads": total, "parts": parts}, f)

atexit.register(done)
runpy.run_module("agentprov_core", run_name="__main__")
'''


def home() -> Path:
    h = Path(os.environ.get("AGENTPROV_HOME") or Path.home() / ".agentprov")
    if not any((h / "envs").glob("agentdojo-*/AGENTPROV_ENV.json")):
        subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentdojo",
                        "--allow-network"], check=True, env=os.environ | {
                            "AGENTPROV_HOME": str(h)})
    return h


def tree_paths(tree: Path | None) -> list[str]:
    """The import roots of another checkout of agentprov (its core, capture library and
    bundled plugins), put first on the driver's path; none for this tree (installed)."""
    if tree is None:
        return []
    return [str(tree), str(tree / "packages" / "capture" / "src"),
            *sorted(str(p) for p in (tree / "plugins").glob("*/src"))]


def run(work: Path, name: str, script: Path, jobs: int, cells: int, by_thread: bool,
        extra: tuple[str, ...], tree: Path | None = None) -> dict[str, Any]:
    """One campaign through the CLI under the driver's probe; its figures."""
    corpus = work / name
    usage = work / f"{name}.cpu.json"
    limit = ("--limit", str(cells)) if cells < CELLS else ()
    load = os.getloadavg()[0]
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", DRIVER, str(usage),
                        "threads" if by_thread else "-", json.dumps(tree_paths(tree)), "run",
                        "agentdojo", "--corpus",
                        str(corpus), "--campaign", name, *PLAN, "--llm-script", str(script),
                        "--model-display-name", "Scripted Model", "--jobs", str(jobs),
                        "--canary", "0", *limit, *extra],
                       capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    partial = corpus.with_name(name + ".partial")
    entries = [json.loads(x) for x in (partial / "ledger.jsonl").read_text().splitlines()
               if x.strip()] if (partial / "ledger.jsonl").exists() else []
    complete = sum(e["status"] == "complete" for e in entries)
    if p.returncode != 0 or complete != cells:
        raise SystemExit(f"{name}: exit {p.returncode}, {complete}/{cells} complete\n"
                         f"{p.stderr[-3000:]}")
    import shutil

    shutil.rmtree(partial, ignore_errors=True)
    u = json.loads(usage.read_text())
    n = len(entries)
    return {"wall_s": round(wall, 2), "cells": n, "complete": complete, "load": load,
            "cpu_ms": 1000 * u["cpu_s"] / n,
            "start_ms": 1000 * u["first_launch"] / n,
            "loop_ms": 1000 * (u["loop_end"] - u["first_launch"]) / n,
            "end_ms": 1000 * (u["cpu_s"] - u["loop_end"]) / n,
            # in the loop: from the first launch to the end of the loop
            "parts_ms": {k: 1000 * (v - u["parts_at_launch"].get(k, 0.0)) / n
                         for k, v in sorted(u["parts_at_end"].items())},
            "threads_ms": {k: 1000 * v / n for k, v in sorted(
                u["threads"].items(), key=lambda kv: -kv[1])}}


def one(arm: str, work: Path, script: Path, a: argparse.Namespace, cells: int,
        tag: str) -> dict[str, Any]:
    """One run of ``arm``: ``local`` or ``rayN`` (N nodes), ``@base`` for ``--base``'s T0."""
    kind, _, base = arm.partition("@")
    tree = a.base if base else None
    name = f"{kind}{'-base' if base else ''}-{tag}"
    if kind == "local":
        return run(work, name, script, a.jobs, cells, a.threads, (), tree)
    from agentprov_ray.testing import local_cluster

    with local_cluster(nodes=int(kind.removeprefix("ray")), cpus=1) as lc:
        return run(work, name, script, a.jobs, cells, a.threads,
                   ("--executor", "ray", "--ray-address", lc.address), tree)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def summary(out: dict[str, Any], arms: list[str]) -> dict[str, Any]:
    runs, ideal = out["runs"], out["ideal_s"]
    s: dict[str, Any] = {}
    for arm in arms:
        rs = runs[arm]
        s[arm] = {k: round(med([r[k] for r in rs]), 2)
                  for k in ("wall_s", "cpu_ms", "start_ms", "loop_ms", "end_ms")}
        s[arm]["vs_ideal"] = round(s[arm]["wall_s"] / ideal, 3)
        s[arm]["cells_per_s"] = round(1000 / s[arm]["loop_ms"], 1)
        if arm != arms[0]:  # paired, round by round, with the first arm
            pairs = list(zip(rs, runs[arms[0]], strict=True))
            for k in ("wall_s", "cpu_ms", "loop_ms"):
                s[arm][f"{k}_vs_first"] = round(med([r[k] / b[k] for r, b in pairs]), 3)
        names = {n for r in rs for n in r["threads_ms"]}
        if names:
            s[arm]["threads_ms"] = dict(sorted(
                ((n, round(med([r["threads_ms"].get(n, 0.0) for r in rs]), 2)) for n in names),
                key=lambda kv: -kv[1]))
    return s


def markdown(out: dict[str, Any], arms: list[str]) -> str:
    s = out["summary"]
    lines = [f"{out['cells']} scripted cells, {CALLS} calls a cell at {out['latency_s']} s, "
             f"`--jobs {out['jobs']}`, ideal {out['ideal_s']} s; {out['rounds']} rounds "
             f"interleaved; load average {out['load_before']} before, {out['load_after']} "
             "after.", "",
             f"| arm | wall s | vs ideal | wall vs {arms[0]} | driver CPU a cell ms | vs {arms[0]} "
             f"| start | loop | end | loop vs {arms[0]} | cells/s a driver core |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in arms:
        x = s[arm]
        lines.append(f"| {arm} | {x['wall_s']} | {x['vs_ideal']} | "
                     f"{x.get('wall_s_vs_first', 1.0)} | {x['cpu_ms']} | "
                     f"{x.get('cpu_ms_vs_first', 1.0)} | {x['start_ms']} | {x['loop_ms']} | "
                     f"{x['end_ms']} | {x.get('loop_ms_vs_first', 1.0)} | "
                     f"{x['cells_per_s']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--limit", type=int, default=CELLS, help="run the first N cells")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", action="store_true", help="the driver's CPU by thread")
    ap.add_argument("--no-warm-up", dest="warm", action="store_false")
    ap.add_argument("--arms", help="comma-separated, of local, rayN (N nodes) and either with "
                                   "@base [local,ray1,ray--nodes]")
    ap.add_argument("--base", type=Path, help="another checkout's T0 for the @base arms")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    h = home()
    os.environ["AGENTPROV_HOME"] = str(h)
    arms = a.arms.split(",") if a.arms else ["local", *(f"ray{n}" for n in sorted({1, a.nodes}))]
    cells = min(a.limit, CELLS)
    out: dict[str, Any] = {"jobs": a.jobs, "latency_s": a.latency, "cells": cells,
                           "rounds": a.rounds, "ideal_s": round(cells * CALLS * a.latency
                                                                / a.jobs, 1),
                           "load_before": load_avg(), "runs": {arm: [] for arm in arms}}
    with tempfile.TemporaryDirectory(prefix="raybench-") as tmp:
        work = Path(tmp)
        script = write_script(work / "script.json", a.latency, cells=cells)
        for arm in arms if a.warm else ():  # warm-up: bytecode and page caches, Ray's first start
            one(arm, work, script, a, min(cells, a.jobs), "warm")
        for r in range(a.rounds):
            for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
                res = one(arm, work, script, a, cells, str(r))
                out["runs"][arm].append(res)
                print(json.dumps({"round": r, "arm": arm} | res), file=sys.stderr, flush=True)
    out["load_after"] = load_avg()
    out["summary"] = summary(out, arms)
    print(json.dumps(out, indent=1) if a.json else markdown(out, arms))


if __name__ == "__main__":
    main()
