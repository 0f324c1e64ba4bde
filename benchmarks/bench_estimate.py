"""``agentprov estimate`` at scale: the full AutoDojo plan with 16 ``--stats-corpus`` corpora.

The plan is bench_planning_scale.py's main plan (every AutoDojo suite, task and usable
attack, and the benign cells: 37,170 cells), estimated for ``--model openrouter --model-id
example-model`` (no key option: the scripted stand-in plans it, as the CLI does) with a
price override. The corpora are one corpus of N executions made by ``gen_corpus.py`` (the
real mapping path, so its index rows carry their counts) and 15 hard-linked copies of it:
the estimate reads each one's manifest and ``executions.jsonl`` (never an AER). They hold
``agentdojo`` executions (banking ``user_task_0``), so the AutoDojo cells find no match in
them and fall back to the priors: what is measured is reading 16 x N index rows and the
lookup of every cell, not a match.

Each measurement runs in a fresh process (``benchutil.forked``: ``ru_maxrss`` is its own)
with ``environments.require_built`` replaced by a fixed id (no environment is built here)
and times ``read_corpora`` + ``prepare(estimate=True)`` + ``build`` + the text. Two rows,
interleaved: with the 16 corpora, and with none (priors only), so the corpora's share is
a ratio measured side by side.

    python benchmarks/bench_estimate.py [--executions 10000] [--repeats 3]
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

from benchutil import child_env, forked, read_peak_mib

SOURCE = "autodojo"
TARGET_SECONDS, TARGET_MIB = 10.0, 500.0


def child(spec: dict[str, Any]) -> dict[str, Any]:
    from bench_planning_scale import _fixed_environment

    from agentprov_core.backend import environments
    from agentprov_core.estimate import cellstats
    from agentprov_core.estimate import estimate as est
    from agentprov_core.plugins import source_entry
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest

    _fixed_environment(environments)
    source_entry(SOURCE)  # loads every plugin: not part of the measurement
    options = dict(spec["options"])
    req = RunRequest.of(SOURCE, options, set(options))
    t0 = time.perf_counter()
    corpora = cellstats.read_corpora(spec["stats"]) if spec["stats"] else None
    t1 = time.perf_counter()
    prepared = planning.prepare(req, estimate=True)
    t2 = time.perf_counter()
    e = est.build(prepared, corpora=corpora, priors=cellstats.load_priors(),
                  stand_in=planning.estimate_stand_in(req, prepared.endpoint))
    text = est.text(e)
    t3 = time.perf_counter()
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cells": len(prepared.cells), "units_due": e.due_units,
            "rows_read": corpora.executions if corpora else 0, "read_s": t1 - t0,
            "prepare_s": t2 - t1, "estimate_s": t3 - t2, "total_s": t3 - t0,
            "rss_mib": rss, "headline": text.splitlines()[0], "sources": e.sources}


def run_child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak"
        t0 = time.perf_counter()
        p = subprocess.run(forked(argv, report), capture_output=True, text=True, env=env,
                           cwd=env["AGENTPROV_HOME"])
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            raise RuntimeError(f"child exited {p.returncode}:\n{p.stderr[-3000:]}")
        peak = read_peak_mib(report)
    res = json.loads(p.stdout)
    res["process_wall_s"] = wall
    if peak is not None:
        res["rss_mib"] = max(res["rss_mib"], peak)
    return res


def run(executions: int, repeats: int, keep: Path | None = None) -> dict[str, Any]:
    from bench_planning_scale import main_attacks
    from gen_corpus import generate

    from agentprov_core.testing.fixtures import landed_backends

    attacks, expected = main_attacks()
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-est-") as tmp:
        tmpdir = Path(tmp)
        home = tmpdir / "home"
        home.mkdir()
        t = time.perf_counter()
        os.environ.setdefault("AGENTPROV_LOAD_PLUGINS", "agentdojo")
        if keep is not None and (keep.with_name(keep.name + ".partial") / "manifest.json").is_file():
            first, gen_s = keep.with_name(keep.name + ".partial"), None  # made by an earlier run
        else:
            first = generate(keep or tmpdir / "stats-00", executions)
            gen_s = time.perf_counter() - t
        stats = [str(first)]
        for i in range(1, 16):
            dst = tmpdir / f"stats-{i:02d}.partial"
            subprocess.run(["cp", "-al", str(first), str(dst)], check=True)  # same bytes
            stats.append(str(dst))
        landed = landed_backends(tmpdir / "backends")
        env = child_env(str(home)) | {"AGENTPROV_BACKENDS": str(landed)}
        env.pop("AGENTPROV_LOAD_PLUGINS", None)
        os.environ["AGENTPROV_HOME"] = str(home)
        from agentprov_core.estimate import prices

        prices.set_override("openrouter", "example-model", prices.parse_price("in", "0.15"),
                            prices.parse_price("out", "0.60"), "2026-10-28")
        options = {"model": "openrouter", "model_id": "example-model",
                   "corpus": str(tmpdir / "corpus"), "campaign": "bench",
                   "attack": [",".join(attacks)]}
        rows: dict[str, list[dict[str, Any]]] = {"16 corpora": [], "no corpora": []}
        for _ in range(repeats):
            rows["16 corpora"].append(run_child({"options": options, "stats": stats}, env))
            rows["no corpora"].append(run_child({"options": options, "stats": []}, env))
    med = statistics.median
    out: dict[str, Any] = {"executions_per_corpus": executions, "generate_one_corpus_s": gen_s,
                           "expected_cells": expected["expected_cells"], "rows": {}}
    for name, rs in rows.items():
        out["rows"][name] = {
            "cells": rs[0]["cells"], "rows_read": rs[0]["rows_read"],
            "total_s": med(r["total_s"] for r in rs), "read_s": med(r["read_s"] for r in rs),
            "prepare_s": med(r["prepare_s"] for r in rs),
            "estimate_s": med(r["estimate_s"] for r in rs),
            "process_wall_s": med(r["process_wall_s"] for r in rs),
            "rss_mib": med(r["rss_mib"] for r in rs), "headline": rs[0]["headline"],
            "sources": rs[0]["sources"]}
    a, b = out["rows"]["16 corpora"], out["rows"]["no corpora"]
    out["ratio_total_16_vs_none"] = a["total_s"] / b["total_s"]
    out["within_targets"] = a["total_s"] < TARGET_SECONDS and a["rss_mib"] < TARGET_MIB
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child")
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate the corpus here (DIR.partial), or reuse "
                                              "the one an earlier run left there")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(json.loads(a.child))))
        return
    print(json.dumps(run(a.executions, a.repeats, a.keep), indent=1))


if __name__ == "__main__":
    main()
