"""A real-endpoint run against agentdojo's own runner, and where a real-endpoint cell's
time goes.

Both sides run AgentDojo's 16 benign banking cells against the same local OpenAI-style
server on loopback (``benchmarks/standin_server.py``, a separate process started before
and stopped after each timed run), which answers every cell with the three replies of
``examples/scripts/live-demo.json`` and adds a fixed latency to every chat completion (0 ms
and 200 ms):

* (a) agentdojo's runner, ``<env>/bin/python -m agentdojo.scripts.benchmark --model
  VLLM_PARSED -s banking --logdir DIR -f`` with ``LOCAL_LLM_PORT`` (its ``vllm_parsed``
  provider drives AgentDojo's own ``OpenAILLM`` against ``http://localhost:PORT/v1`` after
  one ``GET /v1/models``), with ``PYTHONDONTWRITEBYTECODE=1`` as agentprov's worker runs;
* (b) ``agentprov run agentdojo --endpoint KIND --base-url URL --model-id m --containment
  bwrap --i-consent-to-local-run --corpus DIR --campaign bench --suite banking --benign only
  --jobs 1``: the real endpoint path (no ``--llm-script``), a fresh corpus per run.

Every run is checked: exit 0; 16 native logs (a) or 16 complete, conclusive attempts of 3
calls (b); the server answered 48 cell calls (16 of each of the three), (a) one listing and
no probe, (b) the one preflight probe call. The arms run interleaved (forward order on even
rounds, reverse on odd), after an untimed warm-up round, both latencies in every round;
the load average is recorded around every round.

Where (b)'s time goes: further runs of (b) with ``AGENTPROV_DEBUG_TIMING`` (T0's debug
timer, ``agentprov_core/base/timing.py``: spans of T0, of the worker, its forkserver and its
cells), joined with the native logs' ``duration`` from the corpus.

    python benchmarks/bench_realpath.py [--rounds 5] [--instrumented 3] [--json]
    python benchmarks/bench_realpath.py --home DIR    # reuse a built environment in DIR

The endpoint kind the stand-in plays and agentprov is given is :data:`ENDPOINT`, chosen in
one place (:func:`endpoint_args`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_backend import Skip, agentprov_argv, env_python_env, t0_env  # noqa: E402
from bench_campaign import ChildServer, build, fs_of, run_cli  # noqa: E402
from bench_cli_start import p90  # noqa: E402
from benchutil import load_avg  # noqa: E402

ROOT = HERE.parent
STANDIN = HERE / "standin_server.py"
TARGET = 1.15          # within 1.15x of agentdojo's runner, at 0 ms and at 200 ms a call
CELLS = 16
CALLS = 3
LATENCIES = (0.0, 0.2)
MODEL = "m"
#: The local endpoint kind the stand-in plays (its fingerprint routes) and agentprov runs
#: against. ``openai_compat`` (a generic OpenAI-style server, ``--endpoint openai_compat
#: --base-url URL``) needs that kind in agentprov_core/live/local/kinds.py.
ENDPOINT = "llamacpp"


def endpoint_args(port: int) -> list[str]:
    """agentprov's endpoint options for the stand-in on ``port``."""
    return ["--endpoint", ENDPOINT, "--base-url", f"http://127.0.0.1:{port}/v1",
            "--model-id", MODEL]


# --------------------------------------------------------------------------- helpers
def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values),
            "p90": p90(values) if len(values) > 1 else values[0], "values": values}


class StandIn(ChildServer):
    """standin_server.py in its own process of this interpreter; :meth:`close` returns the
    requests it answered, by route and by what each chat completion was."""

    def __init__(self, latency: float, weights: Path, cwd: Path) -> None:
        super().__init__([sys.executable, str(STANDIN), "--kind", ENDPOINT, "--latency",
                          str(latency), "--weights", str(weights)], None, str(cwd))


def check_counts(counts: dict[str, int], what: str, probe: int, listing: int | None) -> None:
    want = {f"cell call {i}": CELLS for i in range(1, CALLS + 1)}
    got = {k: counts.get(k, 0) for k in want}
    problems = []
    if got != want:
        problems.append(f"cell calls {got}, expected {want}")
    if counts.get("probe", 0) != probe:
        problems.append(f"{counts.get('probe', 0)} probe call(s), expected {probe}")
    if listing is not None and counts.get("GET /v1/models", 0) != listing:
        problems.append(f"{counts.get('GET /v1/models', 0)} listing(s), expected {listing}")
    if problems:
        raise RuntimeError(f"{what}: the server saw {counts}: " + "; ".join(problems))


def native_durations(root: Path) -> list[float]:
    return [json.loads(p.read_text())["duration"] for p in sorted(root.rglob("none.json"))
            if p.parent.name == "none"]


def _partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def corpus_entries(corpus: Path) -> list[dict[str, Any]]:
    """The ledger, checked: 16 complete, conclusive attempts of 3 calls."""
    lines = (_partial(corpus) / "ledger.jsonl").read_text().splitlines()
    entries = [json.loads(x) for x in lines]
    bad = [e for e in entries if not (e["status"] == "complete" and e["conclusive"]
                                      and e.get("calls") == CALLS)]
    if len(entries) != CELLS or bad:
        raise RuntimeError(f"{corpus}: {len(entries)} attempts, {len(bad)} not complete with "
                           f"{CALLS} calls: {json.dumps(bad[:2])[:2000]}")
    return entries


def raw(corpus: Path, sha: str) -> bytes:
    return (_partial(corpus) / "raw" / "sha256" / sha[:2] / sha).read_bytes()


def interleave(rounds: int, cmds: dict[str, Callable[[], float]],
               loads: list[tuple[str, str]]) -> dict[str, list[float]]:
    """An untimed warm-up of every command, then ``rounds`` rounds, forward order on even
    rounds and reverse on odd ones; the load average before and after each round."""
    keys = list(cmds)
    for key in keys:
        cmds[key]()
    samples: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        before = load_avg()
        for key in (keys if r % 2 == 0 else list(reversed(keys))):
            samples[key].append(cmds[key]())
        loads.append((before, load_avg()))
    return samples


# ------------------------------------------------------------------------- the arms
class Arms:
    def __init__(self, built: dict[str, Any], home: Path, work: Path) -> None:
        self.py = str(Path(built["env_dir"]) / "bin" / "python")
        self.home, self.work = home, work
        self.tenv = t0_env(home)
        self.weights = work / "model-00001-of-00001.gguf"
        if not self.weights.exists():
            self.weights.write_bytes(os.urandom(1 << 20))  # 1 MiB: hashed once, then cached
        self.extra: dict[str, list[dict[str, Any]]] = {}

    def runner(self, latency: float) -> float:
        run_dir = self.work / "runner" / uuid.uuid4().hex[:8]
        run_dir.mkdir(parents=True)
        env = env_python_env(self.home)
        with StandIn(latency, self.weights, self.work) as s:
            env["LOCAL_LLM_PORT"] = str(s.port)
            argv = [self.py, "-m", "agentdojo.scripts.benchmark", "--model", "VLLM_PARSED",
                    "-s", "banking", "--logdir", str(run_dir / "runs"), "-f"]
            wall = run_cli(argv, env, str(run_dir), run_dir / "out.log")
            counts = s.close()
        check_counts(counts, "agentdojo's runner", probe=0, listing=1)
        durations = native_durations(run_dir / "runs")
        if len(durations) != CELLS:
            raise RuntimeError(f"agentdojo's runner: {len(durations)} native logs")
        self.extra.setdefault(f"runner@{latency}", []).append(
            {"wall": wall, "timer": sum(durations)})
        shutil.rmtree(run_dir)
        return wall

    def argv(self, port: int, corpus: Path) -> list[str]:
        return ["run", "agentdojo", *endpoint_args(port), "--containment", "bwrap",
                "--i-consent-to-local-run", "--corpus", str(corpus), "--campaign", "bench",
                "--suite", "banking", "--benign", "only", "--jobs", "1"]

    def agentprov(self, latency: float, timing: Path | None = None) -> float:
        corpus = self.work / "corpora" / f"rp-{uuid.uuid4().hex[:8]}"
        env = dict(self.tenv)
        if timing is not None:
            env["AGENTPROV_DEBUG_TIMING"] = str(timing)
        with StandIn(latency, self.weights, self.work) as s:
            argv = agentprov_argv(*self.argv(s.port, corpus))
            began = time.time()
            wall = run_cli(argv, env, str(self.work), self.work / f"{corpus.name}.log")
            ended = time.time()
            counts = s.close()
        check_counts(counts, "agentprov run", probe=1, listing=None)
        entries = corpus_entries(corpus)
        timer = [json.loads(raw(corpus, e["native_sha256"]))["duration"] for e in entries]
        self.extra.setdefault(f"agentprov@{latency}", []).append(
            {"wall": wall, "timer": sum(timer)})
        if timing is not None:
            self.last = {"began": began, "ended": ended, "timers": {
                e["session_id"]: t for e, t in zip(entries, timer, strict=True)},
                "counts": counts}
        shutil.rmtree(_partial(corpus))
        return wall


def bwrap_passed(env_dir: Path) -> str | None:
    m = json.loads((env_dir / "AGENTPROV_ENV.json").read_text(encoding="utf-8"))
    probe = (m.get("probe") or {}).get("bwrap") or {}
    if probe.get("passed") is not True:
        return f"bwrap's build-time probe did not pass here ({probe.get('status')})"
    return None


# ------------------------------------------------------------------------ breakdown
def breakdown(spans: list[dict[str, Any]], began: float, ended: float,
              timers: dict[str, float]) -> dict[str, Any]:
    """One instrumented run's phases (they add up to its wall time) and, per cell, the
    segments of T0's loop from the cell's A14 to the next cell's."""
    def one(name: str) -> dict[str, Any]:
        found = [s for s in spans if s["span"] == name]
        if not found:
            raise RuntimeError(f"no {name!r} span in the instrumented run")
        return found[0]

    def dur(s: dict[str, Any]) -> float:
        return s["t1"] - s["t0"]

    by = lambda name: sorted((s for s in spans if s["span"] == name),  # noqa: E731
                             key=lambda s: s["t0"])
    prep, obs = one("prepare"), one("prepare.observe_local")
    check, opened, live = one("check"), one("campaign.open"), one("live.start")
    pre, close, finish = one("preflight"), one("campaign.close"), one("campaign.finish")
    forks = by("worker.fork")
    first_fork = forks[0]
    check_w = [s for s in spans if check["t0"] <= s["t0"] <= check["t1"]]
    a14s, launches, ingests, maps = by("a14"), by("launch"), by("ingest"), by("map")
    submits = by("submit")
    child = {s["session"]: s for s in by("cell.child")}
    fork_of = {s["session"]: s for s in forks}
    ingest_of = {s["session"]: s for s in ingests}
    map_of = {s["session"]: s for s in maps}
    probe_child = next(s for s in by("cell.child") if s["session"].startswith("pf-"))
    n = len(submits)
    if not (len(a14s) == len(launches) == n == CELLS):
        raise RuntimeError(f"{len(a14s)} A14 spans, {len(launches)} launches, {n} submits")
    cells: list[dict[str, float]] = []
    for i, sub in enumerate(submits):
        sid = sub["session"]
        a14, la, ch, ing = a14s[i], launches[i], child[sid], ingest_of[sid]
        nxt = a14s[i + 1]["t0"] if i + 1 < n else close["t0"]
        timer = timers.get(sid, 0.0)
        m = map_of.get(sid)
        inline_map = m is not None and ing["t1"] - 1e-4 <= m["t0"] and m["t1"] <= nxt + 1e-4
        cells.append({
            "a14": dur(a14),
            "launch": dur(la),
            "to_child": ch["t0"] - la["t1"],
            "fork": dur(fork_of[sid]) if sid in fork_of else 0.0,
            "child_rest": dur(ch) - timer,
            "timer": timer,
            "to_ingest": ing["t0"] - ch["t1"],
            "ingest": dur(ing),
            "map": dur(m) if m is not None else 0.0,
            "map_inline": dur(m) if inline_map else 0.0,
            "loop": nxt - ing["t1"] - (dur(m) if inline_map else 0.0),
            "total": nxt - a14["t0"],
        })
    ingest_parts = {}
    for name in ("ingest.chain", "ingest.scan", "ingest.store", "ingest.ledger",
                 "ingest.drop"):
        got = [s for s in by(name) if s["t0"] >= pre["t1"]]
        ingest_parts[name] = statistics.median(map(dur, got)) if got else 0.0
    cell_phase = close["t0"] - pre["t1"]
    rows = [
        ("T0 start: interpreter, imports, plugins, options (to the plan)",
         prep["t0"] - began),
        ("prepare: usage, plan, key, URL and containment checks (steps 1-3, 6)",
         dur(prep) - dur(obs)),
        ("prepare: step 4, the local server listed, fingerprinted, the model observed",
         dur(obs)),
        ("corpus checks, consent", check["t0"] - prep["t1"]),
        ("check worker (network blocked): start, hello, catalogue, plan, close", dur(check)),
        ("campaign: corpus lock, manifest, caps account, ledger", opened["t1"] - check["t1"]),
        ("campaign worker under bwrap: bridge, profile, start", live["t1"] - opened["t1"]),
        ("preflight: the forkserver's start and preload (its first fork)", dur(first_fork)),
        ("preflight: the rest (the probe's request, cell, verdict, kept under preflight/)",
         pre["t1"] - live["t1"] - dur(first_fork)),
        (f"{n} cells (see the next table)", cell_phase),
        ("after the last cell: worker shutdown, relay stop", dur(close)),
        ("campaign: manifest, summary", finish["t1"] - close["t1"]),
        ("process exit (after the summary)", ended - finish["t1"]),
    ]
    check_parts = {
        "start": sum(dur(s) for s in check_w if s["span"] == "worker.start"),
        "hello": sum(dur(s) for s in check_w if s["span"] == "worker.call"
                     and s.get("kind") == "hello"),
        "close": sum(dur(s) for s in check_w if s["span"] == "worker.close"),
    }
    return {"rows": rows, "wall": ended - began, "cells": cells, "ingest": ingest_parts,
            "check": check_parts, "probe_child": dur(probe_child),
            "preload": dur(one("forkserver.preload"))}


CELL_ROWS = [
    ("a14", "A14: the local server re-observed (T0)"),
    ("launch", "launch: the request, its staging directory, sent to the worker (T0)"),
    ("to_child", "to the cell's process: the worker's fork from its forkserver"),
    ("child_rest", "the cell's process, outside agentdojo's timer (capture header, suite, "
                   "client, pipeline, end, result)"),
    ("timer", "the cell's process: agentdojo's task timer (native log `duration`)"),
    ("to_ingest", "the cell's exit to T0's ingest (reap, result, reply, T0 wakes)"),
    ("ingest", "ingest: chain check, redaction scan, raw store, ledger, staging dropped (T0)"),
    ("map_inline", "mapping: AER, SEM, PROV, validation (T0, before the next cell)"),
    ("loop", "T0's loop to the next cell's A14 (counting, canary, scheduling)"),
]


def median_breakdown(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [(name, statistics.median(r["rows"][i][1] for r in runs))
            for i, (name, _) in enumerate(runs[0]["rows"])]
    cell = {}
    for key, _ in [*CELL_ROWS, ("map", ""), ("total", "")]:
        per = [statistics.median(c[key] for c in r["cells"]) for r in runs]
        tot = [sum(c[key] for c in r["cells"]) for r in runs]
        cell[key] = {"median": statistics.median(per), "sum": statistics.median(tot)}
    return {"rows": rows, "wall": statistics.median(r["wall"] for r in runs), "cell": cell,
            "ingest": {k: statistics.median(r["ingest"][k] for r in runs)
                       for k in runs[0]["ingest"]},
            "check": {k: statistics.median(r["check"][k] for r in runs)
                      for k in runs[0]["check"]},
            "probe_child": statistics.median(r["probe_child"] for r in runs),
            "preload": statistics.median(r["preload"] for r in runs)}


# ----------------------------------------------------------------------------- driver
def run(rounds: int = 5, instrumented: int = 3, home: Path | None = None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="agentprov-bench-realpath-"))
    own_home = home is None
    home = home or tmp / "home"
    work = tmp / "work"
    work.mkdir(parents=True)
    res: dict[str, Any] = {"machine_load_before": load_avg(), "scratch_fs": fs_of(tmp)}
    try:
        if own_home:
            built = build(home, str(work))
        else:
            envs = sorted(p for p in (home / "envs").iterdir()
                          if p.is_dir() and p.name.startswith("agentdojo-"))
            built = {"env_id": envs[-1].name, "env_dir": str(envs[-1]), "build_s": None}
        why = bwrap_passed(Path(built["env_dir"]))
        if why:
            raise Skip(why)
        res["built"] = built
        arms = Arms(built, home, work)
        cmds: dict[str, Callable[[], float]] = {}
        for lat in LATENCIES:
            cmds[f"runner@{lat}"] = lambda lat=lat: arms.runner(lat)
            cmds[f"agentprov@{lat}"] = lambda lat=lat: arms.agentprov(lat)
        loads: list[tuple[str, str]] = []
        samples = interleave(rounds, cmds, loads)
        rows = {}
        for k, v in samples.items():
            rows[k] = _stats(v)
            rows[k]["timer"] = _stats([x["timer"] for x in arms.extra[k][-rounds:]])
        paired = {}
        for lat in LATENCIES:
            a, b = samples[f"runner@{lat}"], samples[f"agentprov@{lat}"]
            paired[lat] = statistics.median(y / x for x, y in zip(a, b, strict=True))
        res.update(rounds=rounds, rows=rows, paired=paired, loads=loads)
        phases: dict[float, list[dict[str, Any]]] = {lat: [] for lat in LATENCIES}
        for _ in range(instrumented):
            for lat in LATENCIES:
                tfile = work / f"timing-{uuid.uuid4().hex[:8]}.jsonl"
                arms.agentprov(lat, timing=tfile)
                spans = [json.loads(x) for x in tfile.read_text().splitlines()]
                phases[lat].append(breakdown(spans, arms.last["began"], arms.last["ended"],
                                             arms.last["timers"]))
        res["breakdown"] = {lat: median_breakdown(v) for lat, v in phases.items()}
        res["instrumented"] = instrumented
    except Skip as exc:
        res["skipped"] = str(exc)
    finally:
        res["machine_load_after"] = load_avg()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


# ---------------------------------------------------------------------------- report
def _s(v: float) -> str:
    return f"{v:.2f}"


def _ms(v: float) -> str:
    return f"{v * 1000:.1f}"


def markdown(res: dict[str, Any]) -> str:
    out = ["### A real-endpoint run against agentdojo's own runner", ""]
    if "skipped" in res:
        return "\n".join(out + [f"Skipped: {res['skipped']}.", ""])
    b = res["built"]
    out += [
        f"What is measured: AgentDojo's 16 benign banking cells against one local "
        f"OpenAI-style server on loopback (`benchmarks/standin_server.py`, a separate "
        f"process playing a `{ENDPOINT}` server: its listing and fingerprint routes, and "
        "every cell answered with the three replies of `examples/scripts/live-demo.json`), "
        "with 0 ms and 200 ms added to every chat completion. (a) is agentdojo's runner, "
        "`<env>/bin/python -m agentdojo.scripts.benchmark --model VLLM_PARSED -s banking "
        "--logdir DIR -f` with `LOCAL_LLM_PORT` (`PYTHONDONTWRITEBYTECODE=1`, as agentprov's "
        "worker runs); (b) is `agentprov run agentdojo "
        + " ".join(endpoint_args(0)).replace(":0/", ":PORT/")
        + " --containment bwrap --i-consent-to-local-run --corpus DIR --campaign bench "
        "--suite banking --benign only --jobs 1` (the console script, a fresh corpus per "
        "run). Every run was checked: exit 0, 16 cells (native logs, or complete conclusive "
        "attempts of 3 calls), the server's 48 cell calls; (a) one listing, (b) its one "
        f"preflight probe call. Environment `{b['env_id']}`; {res['rounds']} rounds, both "
        "arms and both latencies in every round (forward order on even rounds, reverse on "
        "odd), after an untimed warm-up round. agentdojo's timer is the sum of the native "
        "logs' `duration`.", "",
        "| latency | | command | median s | p90 s | agentdojo's timer s | the rest s | "
        "÷ (a), medians | ÷ (a), paired |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for lat in LATENCIES:
        a = res["rows"][f"runner@{lat}"]
        bb = res["rows"][f"agentprov@{lat}"]
        for key, lab, name, ratio in (("runner", "(a)", "agentdojo's runner", "1.00"),
                                      ("agentprov", "(b)", "`agentprov run ... --jobs 1`",
                                       f"{bb['median'] / a['median']:.2f}")):
            r = res["rows"][f"{key}@{lat}"]
            paired = f"{res['paired'][lat]:.2f}" if key == "agentprov" else ""
            out.append(f"| {lat * 1000:.0f} ms | {lab} | {name} | {_s(r['median'])} | "
                       f"{_s(r['p90'])} | {_s(r['timer']['median'])} | "
                       f"{_s(r['median'] - r['timer']['median'])} | {ratio} | {paired} |")
    out += ["", f"Target: (b) within {TARGET}x of (a) at 0 ms and at 200 ms."]
    for lat in LATENCIES:
        ratio = res["paired"][lat]
        out.append(f"- {lat * 1000:.0f} ms: (b) ÷ (a) = **{ratio:.2f}** (the median of the "
                   f"rounds' ratios): {'met' if ratio <= TARGET else '**missed**'}")
    loads = ", ".join(f"{x} → {y}" for x, y in res["loads"])
    out += ["", f"Load average (1, 5, 15 min) before and after each round: {loads}; before "
            f"the benchmark {res['machine_load_before']}, after it "
            f"{res['machine_load_after']}.", ""]
    for lat, bd in res["breakdown"].items():
        out += _md_breakdown(lat, bd, res["instrumented"])
    return "\n".join(out)


def _md_breakdown(lat: float, bd: dict[str, Any], n: int) -> list[str]:
    out = [f"Where (b)'s time goes at {lat * 1000:.0f} ms: {n} further runs with "
           "`AGENTPROV_DEBUG_TIMING` (T0's debug timer: spans of T0, of the worker, its "
           "forkserver and its cells), joined with the native logs' `duration`; medians. "
           "In each run the rows add up to its wall time; their medians need not add up to "
           f"the median wall time ({_s(bd['wall'])} s).", "",
           "| phase | s | share |", "|---|---:|---:|"]
    wall = bd["wall"]
    for name, v in bd["rows"]:
        out.append(f"| {name} | {_s(v)} | {v / wall:.0%} |")
    out.append(f"| **sum of the rows** | **{_s(sum(v for _, v in bd['rows']))}** | |")
    c = bd["cell"]
    out += ["", f"Per cell at {lat * 1000:.0f} ms (the median cell, and the 16 cells' sum): "
            "the segments of T0's loop from a cell's A14 to the next cell's, which add up "
            "to the cell phase (the last cell's, to the worker's shutdown).", "",
            "| segment | median cell ms | 16 cells s |", "|---|---:|---:|"]
    for key, label in CELL_ROWS:
        out.append(f"| {label} | {_ms(c[key]['median'])} | {_s(c[key]['sum'])} |")
    out.append(f"| **a cell, A14 to the next A14** | **{_ms(c['total']['median'])}** | "
               f"**{_s(c['total']['sum'])}** |")
    ing = bd["ingest"]
    chk = bd["check"]
    out += ["", f"- Mapping took {_ms(c['map']['median'])} ms a cell "
            f"({_s(c['map']['sum'])} s for the 16), of which {_s(c['map_inline']['sum'])} s "
            "before the next cell's start.",
            "- Ingest, median parts (ms): chain check " + _ms(ing["ingest.chain"])
            + ", redaction scan " + _ms(ing["ingest.scan"]) + ", raw store "
            + _ms(ing["ingest.store"]) + ", ledger " + _ms(ing["ingest.ledger"])
            + ", staging dropped " + _ms(ing["ingest.drop"]) + ".",
            f"- The check worker: start {_ms(chk['start'])} ms, `hello` {_ms(chk['hello'])} "
            f"ms, close {_ms(chk['close'])} ms. The forkserver's preload alone (inside its "
            f"first fork): {_s(bd['preload'])} s; the probe's cell process "
            f"{_ms(bd['probe_child'])} ms.", ""]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--instrumented", type=int, default=3)
    ap.add_argument("--home", type=Path, help="an AGENTPROV_HOME with agentdojo built")
    ap.add_argument("--json", action="store_true", help="print the raw figures")
    args = ap.parse_args(argv)
    res = run(args.rounds, args.instrumented, args.home)
    print(json.dumps(res, indent=1, default=str) if args.json else markdown(res))


if __name__ == "__main__":
    main()
