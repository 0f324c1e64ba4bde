"""Local vs Ray at equal cells in flight (docs/performance.md, "Local vs Ray at equal cells
in flight"; docs/cluster.md).

One scripted AgentDojo campaign of ``--cells`` cells (``--suite banking --attack
important_instructions``: its 16 benign and 144 attacked cells, 160) through the real CLI,
every model call answered by the scripted endpoint after ``--latency`` seconds (three calls
a cell: the replies of ``examples/scripts/live-demo.json``), at the same ``--jobs``: with the
local executor, and with ``--executor ray`` on a local cluster
(``agentprov_ray.testing.local_cluster``) of 1 node and of ``--nodes`` nodes. For each: the
wall time against the ideal (cells x calls x latency / cells in flight), and the driver's
own CPU time (T0's process alone, ``RUSAGE_SELF`` at its exit: its ingest, mapping, ledger
and, under Ray, the driver's share of Ray) per cell. The environment is the one built in
``$AGENTPROV_HOME`` (built with ``--allow-network`` when absent).

``python benchmarks/ray_cluster.py [--jobs 8] [--latency 1.0] [--nodes 3]`` (``tox -e ray``).
The ratios are the result; the absolute times belong to the machine that measured them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_campaign import write_script  # noqa: E402
from benchutil import load_avg  # noqa: E402

PLAN = ("--suite", "banking", "--attack", "important_instructions")
CALLS = 3
#: T0 with its own CPU time written at exit (RUSAGE_SELF: its process alone, no worker)
T0 = ("import atexit, json, os, resource, runpy, sys\n"
      "def _out():\n"
      "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
      "    open(os.environ['RAYBENCH_RUSAGE'], 'w').write(json.dumps("
      "{'cpu_s': r.ru_utime + r.ru_stime}))\n"
      "atexit.register(_out)\n"
      "sys.argv = ['agentprov', *sys.argv[1:]]\n"
      "runpy.run_module('agentprov_core', run_name='__main__')\n")


def home() -> Path:
    h = Path(os.environ.get("AGENTPROV_HOME") or Path.home() / ".agentprov")
    if not any((h / "envs").glob("agentdojo-*/AGENTPROV_ENV.json")):
        subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentdojo",
                        "--allow-network"], check=True, env=os.environ | {
                            "AGENTPROV_HOME": str(h)})
    return h


def run(work: Path, name: str, script: Path, jobs: int, extra: tuple[str, ...]) -> dict:
    corpus = work / name
    usage = work / f"{name}.rusage.json"
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", T0, "run", "agentdojo", "--corpus", str(corpus),
                        "--campaign", name, *PLAN, "--llm-script", str(script),
                        "--model-display-name", "Scripted Model", "--jobs", str(jobs),
                        "--canary", "0", *extra],
                       capture_output=True, text=True, env=os.environ | {
                           "RAYBENCH_RUSAGE": str(usage)}, cwd=ROOT)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{name}: exit {p.returncode}\n{p.stderr[-3000:]}")
    entries = [json.loads(x) for x in (corpus.with_name(name + ".partial") / "ledger.jsonl")
               .read_text().splitlines() if x.strip()]
    cpu = json.loads(usage.read_text())["cpu_s"]
    return {"wall_s": round(wall, 1), "cells": len(entries),
            "complete": sum(e["status"] == "complete" for e in entries),
            "t0_cpu_ms_per_cell": round(1000 * cpu / max(1, len(entries)), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--cells", type=int, default=160)
    a = ap.parse_args()
    from agentprov_ray.testing import local_cluster

    h = home()
    os.environ["AGENTPROV_HOME"] = str(h)
    out = {"jobs": a.jobs, "latency_s": a.latency, "load_before": load_avg()}
    with tempfile.TemporaryDirectory(prefix="raybench-") as tmp:
        work = Path(tmp)
        script = write_script(work / "script.json", a.latency, cells=a.cells)
        ideal = a.cells * CALLS * a.latency / a.jobs
        out["ideal_s"] = round(ideal, 1)
        out["local"] = run(work, "local", script, a.jobs, ())
        print(json.dumps({"local": out["local"]}), file=sys.stderr, flush=True)
        for nodes in sorted({1, a.nodes}):
            with local_cluster(nodes=nodes, cpus=1) as lc:
                out[f"ray_{nodes}"] = run(work, f"ray{nodes}", script, a.jobs,
                                          ("--executor", "ray", "--ray-address", lc.address))
            print(json.dumps({f"ray_{nodes}": out[f"ray_{nodes}"]}), file=sys.stderr,
                  flush=True)
        for k in ("local", *(f"ray_{n}" for n in sorted({1, a.nodes}))):
            out[k]["vs_ideal"] = round(out[k]["wall_s"] / ideal, 2)
            out[k]["vs_local"] = round(out[k]["wall_s"] / out["local"]["wall_s"], 2)
    out["load_after"] = load_avg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
