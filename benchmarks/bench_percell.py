"""A cell's cost on one host: where a scripted campaign's CPU goes, and its wall time at the
host's maximum ``--jobs`` against the ideal.

The campaign is AgentDojo's banking suite with ``important_instructions``: 144 attacked
cells and the 16 benign ones, 160 cells, through the real CLI (``python -m agentprov_core
run agentdojo ...``) against agentprov's scripted endpoint with the three replies of
``examples/scripts/live-demo.json`` (two tool calls and a final text: 3 model calls a cell).
The AgentDojo environment is the one built in ``--home`` (else built once in a temporary
``AGENTPROV_HOME``).

Two arms, interleaved (forward order on even rounds, reverse on odd) after an untimed
warm-up run of each: *this tree*, and with ``--base DIR`` the T0 of another checkout of
agentprov (for example a worktree of main: ``git worktree add --detach DIR main``), whose
sources go first on ``sys.path`` of the same interpreter. Both arms use the same backend
environment, so a change of the worker's libraries is not compared this way (the
environment's marker would name it stale).

1. **CPU per cell**, 0 ms a call, ``--jobs`` = the host's maximum: the run's wall time;
   T0's own CPU (``getrusage(RUSAGE_SELF)`` at exit, every thread of T0, the scripted
   endpoint's included); T0's CPU by phase, the thread CPU of its debug-timer spans
   (``AGENTPROV_DEBUG_TIMING``, ``agentprov_core/base/timing.py``: ``map`` is the background
   mapping into AER, SEM, PROV and validation, ``ingest`` the chain check, redaction scan,
   raw store and ledger; an arm whose timer records no CPU gets it patched in by the
   wrapper, alike); and the rest of the process tree, read from ``/proc`` every 50 ms: the
   workers' own CPU, the cell server's own (its preload of the benchmark, once a run) and
   its cells' (the CPU of the cells it has reaped: the benchmark's own work, the capture,
   the confinement; the last 50 ms of cells may be missed).
2. **Mapping the same evidence**: one more campaign of this tree is kept, and each arm maps
   its 160 stored attempts again into a copy (a fresh process of the arm's code): the CPU a
   mapping, and the sha256 over every file written, which must be the same in every arm.
3. **Wall time against the ideal**, this tree only, ``--latency`` (1 s) a call at the
   host's maximum ``--jobs`` (or each of ``--wall-jobs``): the ideal is cells x calls x latency / jobs; also the time before the first
   cell starts (T0's start, the check worker, the campaign worker's start and the cell
   server's preload of the benchmark) from the debug timer.

Every run is checked: exit 0 and 160 complete attempts in the ledger. The machine is
shared: the report gives the load average before and after, and the ratios of the arms.

    python benchmarks/bench_percell.py [--home DIR] [--base DIR] [--rounds 3] \\
        [--wall-rounds 1] [--jobs N] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchutil import child_env, load_avg  # noqa: E402

from agentprov_core.backend import hostlimits  # noqa: E402

DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
CELLS, CALLS = 160, 3
CAMPAIGN = ("--suite", "banking", "--attack", "important_instructions",
            "--model-display-name", "GPT-4")
PHASES = ("map", "ingest", "launch", "wait")

#: T0 under a wrapper: the tree's sources first (argv[1], JSON), its own CPU at exit
#: (argv[2]), spans' thread CPU patched in where the tree's timer has none.
T0_WRAPPER = r'''
import json, resource, sys, time
paths, out = json.loads(sys.argv[1]), sys.argv[2]
sys.path[0:0] = paths
from agentprov_core.base import timing
if "cpu0" not in timing._Span.__slots__:
    class _Span:
        __slots__ = ("name", "detail", "t0", "cpu0")
        def __init__(self, name, detail):
            self.name, self.detail = name, detail
        def __enter__(self):
            self.t0, self.cpu0 = time.time(), time.thread_time()
            return self
        def __exit__(self, *exc):
            timing.emit(self.name, self.t0, time.time(), cpu=time.thread_time() - self.cpu0,
                        **self.detail)
    timing._Span = _Span
import atexit
def _done():
    s = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        json.dump({"user": s.ru_utime, "sys": s.ru_stime}, f)
atexit.register(_done)
from agentprov_core.cli.main import main
sys.argv = ["agentprov", *sys.argv[3:]]
main()
'''

#: The mapping of a stored corpus's attempts, by a tree's code (argv[1], JSON paths), into a
#: copy of the corpus (argv[2]) without its executions; prints the CPU a mapping and the
#: sha256 over every file it wrote.
MAP_CHILD = r'''
import hashlib, json, shutil, sys, tempfile, time
from pathlib import Path
sys.path[0:0] = json.loads(sys.argv[1])
from agentprov_core.corpus.working import WorkingCorpus
from agentprov_core.evidence import live_mapping
out = Path(tempfile.mkdtemp()) / "c"
shutil.copytree(sys.argv[2], out, ignore=shutil.ignore_patterns("executions*"))
wc = WorkingCorpus(out)
entries, manifest = wc.attempts(), wc.manifest()
t = time.process_time()
for e in entries:
    live_mapping.map_attempt(out, e, manifest, mapped_at="2026-01-01T00:00:00Z")
cpu = time.process_time() - t
h = hashlib.sha256()
for p in sorted((out / "executions").rglob("*.json")):
    h.update(p.relative_to(out).as_posix().encode() + b"\0" + p.read_bytes())
shutil.rmtree(out.parent)
print(json.dumps({"cpu": cpu / len(entries), "sha256": h.hexdigest(),
                  "rdflib": "rdflib" in sys.modules}))
'''


def tree_paths(tree: Path) -> list[str]:
    """The import roots of a checkout: the core, the capture library, the bundled plugins."""
    return [str(tree), str(tree / "packages" / "capture" / "src"),
            *sorted(str(p) for p in (tree / "plugins").glob("*/src"))]


class TreeSampler:
    """The CPU of T0's descendants, from ``/proc`` every ``every`` seconds: per process, its
    own utime + stime and (for the cell server) its reaped children's. A forked cell has its
    server's command line; its CPU is counted once, as the server's reaped children's."""

    def __init__(self, root_pid: int, every: float = 0.05) -> None:
        self.root, self.every = root_pid, every
        self.seen: dict[int, dict[str, Any]] = {}
        self.tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.every)

    def _sample(self) -> None:
        stats = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        raw = f.read().decode()
                except OSError:
                    continue
                fields = raw[raw.rindex(")") + 2:].split()
                stats[int(d)] = (int(fields[1]), [int(x) for x in fields[11:15]])
        tree = {self.root}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree - {self.root}:
            _, (ut, st, cut, cst) = stats[pid]
            rec = self.seen.setdefault(pid, {"cmd": "", "ppid": stats[pid][0]})
            # read again each time: a process seen between its fork and its exec still has
            # its parent's command line
            with contextlib.suppress(OSError):
                rec["cmd"] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(
                    b"\0", b" ").decode()
            rec["own"] = (ut + st) / self.tick
            rec["children"] = (cut + cst) / self.tick

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        out = {"workers": 0.0, "cell_server": 0.0, "cells": 0.0, "other": 0.0}
        server = "agentprov_backend.cellserver"
        for rec in self.seen.values():
            if server in rec["cmd"] and server in self.seen.get(rec["ppid"], {}).get("cmd", ""):
                continue  # a forked cell: its CPU is its server's once reaped
            if server in rec["cmd"]:
                out["cell_server"] += rec["own"]
                out["cells"] += rec["children"]
            elif "agentprov_backend.worker" in rec["cmd"]:
                out["workers"] += rec["own"]
            elif rec["cmd"]:
                out["other"] += rec["own"]
        return out


def script(latency: float, scratch: Path) -> Path:
    path = scratch / f"script-{latency}.json"
    path.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": latency,
                                "replies": json.loads(DEMO.read_text(encoding="utf-8"))}))
    return path


def run_once(tree: Path, home: Path, scratch: Path, latency: float, jobs: int,
             pycache: Path, keep: Path | None = None) -> dict[str, Any]:
    """One campaign of the arm ``tree``; its figures."""
    tag = f"{time.monotonic_ns()}"
    corpus, timing_file, cpu_file = (scratch / f"c-{tag}", scratch / f"t-{tag}.jsonl",
                                     scratch / f"cpu-{tag}.json")
    wrapper = scratch / "t0_wrapper.py"
    if not wrapper.exists():
        wrapper.write_text(T0_WRAPPER)
    env = child_env(str(home)) | {"AGENTPROV_DEBUG_TIMING": str(timing_file),
                                  "PYTHONPYCACHEPREFIX": str(pycache)}
    argv = [sys.executable, str(wrapper), json.dumps(tree_paths(tree)), str(cpu_file), "run",
            "agentdojo", "--corpus", str(corpus), "--campaign", "percell", *CAMPAIGN,
            "--llm-script", str(script(latency, scratch)), "--jobs", str(jobs)]
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=scratch)
    sampler = TreeSampler(proc.pid)
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    tree_cpu = sampler.stop()
    ledger = corpus.with_name(corpus.name + ".partial") / "ledger.jsonl"
    complete = sum(1 for line in ledger.read_text().splitlines()
                   if json.loads(line).get("status") == "complete") if ledger.exists() else 0
    if proc.returncode != 0 or complete != CELLS:
        raise RuntimeError(f"{tree}: exit {proc.returncode}, {complete} complete:\n"
                           f"{out.decode()[-2000:]}\n{err.decode()[-2000:]}")
    spans = [json.loads(line) for line in timing_file.read_text().splitlines()]
    phase = {k: sum(s.get("cpu", 0.0) for s in spans if s["span"] == k) for k in PHASES}
    start = min(s["t0"] for s in spans)
    cells = [s for s in spans if s["span"] == "cell.child"]
    t0_cpu = json.loads(cpu_file.read_text())
    import shutil

    if keep is not None:
        corpus.with_name(corpus.name + ".partial").rename(keep)
    shutil.rmtree(corpus.with_name(corpus.name + ".partial"), ignore_errors=True)
    timing_file.unlink()
    return {"wall": wall, "t0_cpu": t0_cpu["user"] + t0_cpu["sys"], "t0_sys": t0_cpu["sys"],
            "phases": phase, "tree": tree_cpu,
            "before_cells": min(c["t0"] for c in cells) - start,
            "cell_phase": max(c["t1"] for c in cells) - min(c["t0"] for c in cells)}


def map_same(arms: dict[str, Path], corpus: Path, rounds: int,
             pycache: dict[Path, Path]) -> dict[str, list[dict[str, Any]]]:
    """Each arm's mapping of the same stored attempts (``MAP_CHILD``), interleaved."""
    def one(tree: Path) -> dict[str, Any]:
        env = child_env(str(corpus.parent)) | {"PYTHONPYCACHEPREFIX": str(pycache[tree])}
        out = subprocess.run([sys.executable, "-c", MAP_CHILD, json.dumps(tree_paths(tree)),
                              str(corpus)], env=env, capture_output=True, text=True,
                             check=True)
        return json.loads(out.stdout)
    return interleave(arms, rounds, one)


def interleave(arms: dict[str, Path], rounds: int, fn,
               warm: bool = True) -> dict[str, list[dict[str, Any]]]:
    for tree in arms.values() if warm else ():
        fn(tree)  # warm-up: bytecode caches, the page cache
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in arms}
    keys = list(arms)
    for r in range(rounds):
        for k in keys if r % 2 == 0 else keys[::-1]:
            out[k].append(fn(arms[k]))
    return out


def med(runs: list[dict[str, Any]], get) -> float:
    return statistics.median(get(r) for r in runs)


def ensure_home(home: Path | None, scratch: Path) -> Path:
    if home is not None:
        return home
    home = scratch / "home"
    subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentdojo",
                    "--allow-network"], check=True, env=child_env(str(home)), cwd=scratch,
                   stdout=subprocess.DEVNULL)
    return home


def markdown(res: dict[str, Any]) -> str:
    arms = list(res["cpu"])
    ms = lambda s: f"{1000 * s / CELLS:.1f}"  # noqa: E731 - seconds of a run, per cell
    lines = [f"{CELLS} scripted AgentDojo cells (banking, `important_instructions` and "
             f"benign), {CALLS} model calls a cell, `--jobs {res['jobs']}`; {res['cpus']} CPUs; "
             f"load average "
             f"{res['load_before']} before, {res['load_after']} after; "
             f"{res['rounds']} rounds interleaved after a warm-up run of each arm.", "",
             "**CPU a cell at 0 ms a call** (median of the rounds; ms of CPU per cell):", "",
             "| arm | wall s | T0 own | T0: map | T0: ingest | T0: launch + wait | T0: rest "
             "| workers | cell server | cells | all |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in arms:
        runs = res["cpu"][arm]
        t0 = med(runs, lambda r: r["t0_cpu"])
        mp = med(runs, lambda r: r["phases"]["map"])
        ing = med(runs, lambda r: r["phases"]["ingest"])
        lw = med(runs, lambda r: r["phases"]["launch"] + r["phases"]["wait"])
        rest = med(runs, lambda r: r["t0_cpu"] - sum(r["phases"].values()))
        tr = {k: med(runs, lambda r, k=k: r["tree"][k]) for k in runs[0]["tree"]}
        total = med(runs, lambda r: r["t0_cpu"] + sum(r["tree"].values()))
        lines.append(f"| {arm} | {med(runs, lambda r: r['wall']):.2f} | {ms(t0)} | {ms(mp)} | "
                     f"{ms(ing)} | {ms(lw)} | {ms(rest)} | {ms(tr['workers'])} | "
                     f"{ms(tr['cell_server'])} | {ms(tr['cells'])} | {ms(total)} |")
    if len(arms) == 2:
        a, b = arms
        pr = lambda get: statistics.median(  # noqa: E731
            get(x) / get(y) for x, y in zip(res["cpu"][b], res["cpu"][a], strict=True))
        lines += ["", f"Paired ratios, {b} ÷ {a}: T0's own CPU "
                  f"**{pr(lambda r: r['t0_cpu']):.2f}x**, T0's mapping "
                  f"{pr(lambda r: r['phases']['map']):.2f}x, ingest "
                  f"{pr(lambda r: r['phases']['ingest']):.2f}x, the whole tree "
                  f"{pr(lambda r: r['t0_cpu'] + sum(r['tree'].values())):.2f}x, wall "
                  f"{pr(lambda r: r['wall']):.2f}x."]
    lines += ["", f"**Mapping the same {CELLS} stored attempts** (AER, SEM, PROV, "
              "validation, the files written and indexed), each arm's code in a fresh "
              f"process, {len(next(iter(res['map'].values())))} rounds interleaved:", "",
              "| arm | CPU a mapping ms | rdflib imported | sha256 of every file written |",
              "|---|---:|---|---|"]
    for arm, runs in res["map"].items():
        lines.append(f"| {arm} | {1000 * med(runs, lambda r: r['cpu']):.2f} | "
                     f"{'yes' if runs[0]['rdflib'] else 'no'} | `{runs[0]['sha256'][:16]}…` |")
    digests = {r["sha256"] for runs in res["map"].values() for r in runs}
    lines.append("")
    lines.append("The files are byte for byte the same in every arm and round." if
                 len(digests) == 1 else "**The arms wrote different bytes.**")
    lat = res["latency"]
    lines += ["", f"**Wall time at {lat:g} s a call**: the ideal is {CELLS} x {CALLS} x "
              f"{lat:g} s / `--jobs` ({res['wall_rounds']} round(s)).", "",
              "| arm | wall s | ideal s | ÷ ideal | before the first cell s | cell phase s |",
              "|---|---:|---:|---:|---:|---:|"]
    for arm, runs in res["wall"].items():
        w = med(runs, lambda r: r["wall"])
        ideal = CELLS * CALLS * lat / runs[0]["jobs"]
        lines.append(f"| {arm} | {w:.2f} | {ideal:.1f} | {w / ideal:.3f} | "
                     f"{med(runs, lambda r: r['before_cells']):.2f} | "
                     f"{med(runs, lambda r: r['cell_phase']):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="an AGENTPROV_HOME with agentdojo built")
    ap.add_argument("--base", type=Path, help="another checkout's T0 to compare against")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--wall-rounds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=hostlimits.max_jobs())
    ap.add_argument("--wall-jobs", default="",
                    help="the --jobs values of the wall-time runs, comma-separated "
                         "[--jobs]")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-percell-") as tmp:
        scratch = Path(tmp)
        home = ensure_home(a.home, scratch)
        arms = {"this tree": ROOT} if a.base is None else {
            "base": a.base.resolve(), "this tree": ROOT}
        caches = {tree: scratch / f"pyc-{i}" for i, tree in enumerate(arms.values())}
        res: dict[str, Any] = {"jobs": a.jobs, "cpus": hostlimits.cpus(), "rounds": a.rounds,
                               "wall_rounds": a.wall_rounds, "latency": a.latency,
                               "load_before": load_avg()}
        res["cpu"] = interleave(arms, a.rounds, lambda tree: run_once(
            tree, home, scratch, 0.0, a.jobs, caches[tree]))
        kept = scratch / "kept.partial"
        run_once(ROOT, home, scratch, 0.0, a.jobs, caches[ROOT], keep=kept)
        res["map"] = map_same(arms, kept, a.rounds + 2, caches)
        res["wall"] = {}
        for jobs in [int(j) for j in a.wall_jobs.split(",") if j] or [a.jobs]:
            runs = interleave({"this tree": ROOT}, a.wall_rounds, lambda tree, jobs=jobs: run_once(
                tree, home, scratch, a.latency, jobs, caches[tree]), warm=False)
            res["wall"].update({f"{arm}, `--jobs {jobs}`": [r | {"jobs": jobs} for r in rs]
                                for arm, rs in runs.items()} if a.wall_rounds else {})
        res["load_after"] = load_avg()
    print(json.dumps(res, indent=1, default=str) if a.json else markdown(res))


if __name__ == "__main__":
    main()
