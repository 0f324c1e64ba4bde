"""The results table at scale: ``stats --tables results`` and ``stats --compare`` over a
synthetic working corpus of 10,000 executions (``benchmarks/gen_corpus.py``: each one a
real scripted AgentDojo cell mapped by the real T0 path), side by side with what bounds
them from below.

- ``stats --tables counts``: reads the ledger and the index only (no AER): the cost of
  starting the CLI and reading the two line files;
- ``sha256sum`` of every ``aer.json``: reading and hashing the bytes the results table reads
  (it checks each AER's sha256 against the index, then decodes the fields it needs);
- ``stats --tables results``, and ``stats --compare C C`` (the corpus against itself:
  every unit pairs).

Every command is a fresh process, interleaved for ``--rounds`` rounds after a warm-up run
(the page cache holds the corpus for every arm); medians, and peak RSS by GNU ``time``.

    python benchmarks/bench_results.py [--executions 10000] [--rounds 5] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_corpus_tools import _agentprov, _timed  # noqa: E402
from benchutil import child_env, gnu_time, read_peak_mib  # noqa: E402


def measure(n: int, rounds: int, work: Path, corpus: Path | None = None) -> dict[str, Any]:
    import gen_corpus

    env = child_env(str(work / "home"))
    env["AGENTPROV_LOAD_PLUGINS"] = "agentdojo"
    t = time.perf_counter()
    root = corpus if corpus is not None else gen_corpus.generate(work / f"c{n}", n)
    gen_s = time.perf_counter() - t
    ap = _agentprov()
    sha = ["/bin/sh", "-c",
           f"find '{root}/executions' -name aer.json -print0 | xargs -0 sha256sum > /dev/null"]
    cmds = {
        "counts": [ap, "stats", str(root), "--tables", "counts"],
        "sha256sum": sha,
        "results": [ap, "stats", str(root), "--tables", "results"],
        "compare": [ap, "stats", "--compare", str(root), str(root), "--format", "json"],
    }
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    peaks: dict[str, list[float]] = {k: [] for k in cmds}
    out: dict[str, str] = {}
    for argv in cmds.values():
        _timed(argv, env)
    for r in range(rounds):
        for k in (list(cmds) if r % 2 == 0 else list(reversed(cmds))):
            peak = work / f"peak-{k}"
            w, text = _timed(cmds[k], env, peak)
            walls[k].append(w)
            out[k] = text
            p = read_peak_mib(peak)
            if p is not None:
                peaks[k].append(p)
    units = sum(1 for line in (root / "ledger.jsonl").read_bytes().splitlines() if line)
    return {"executions": units, "gen_s": gen_s if corpus is None else None,
            "median": {k: statistics.median(v) for k, v in walls.items()},
            "peak_mib": {k: (statistics.median(v) if v else None) for k, v in peaks.items()},
            "results_out": out["results"].strip().splitlines()}


def markdown(r: dict[str, Any], rounds: int) -> str:
    m, pk = r["median"], r["peak_mib"]
    n = r["executions"]
    lines = ["### The results table at scale", "",
             f"A working corpus of {n:,} executions made by `benchmarks/gen_corpus.py`; every "
             f"command a fresh process, {rounds} rounds interleaved after a warm-up run. "
             "`sha256sum` reads and hashes every `aer.json` (what the results table reads); "
             "`counts` reads only the ledger and the index. Peak RSS by GNU `time`"
             + ("" if gnu_time() else " (not available here)") + ".", "",
             "| command | median s | executions/s | ÷ sha256sum | ÷ counts | peak RSS MiB |",
             "|---|---:|---:|---:|---:|---:|"]
    for k, label in (("counts", "`stats --tables counts`"), ("sha256sum", "`sha256sum` of the AERs"),
                     ("results", "`stats --tables results`"),
                     ("compare", "`stats --compare C C`")):
        p = pk[k]
        lines.append(f"| {label} | {m[k]:.2f} | {n / m[k]:,.0f} | {m[k] / m['sha256sum']:.2f} | "
                     f"{m[k] / m['counts']:.2f} | {'–' if p is None else f'{p:.0f}'} |")
    lines += ["", "The table it printed:", ""] + [f"    {x}" for x in r["results_out"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--corpus", type=Path, help="an existing corpus instead of a new one")
    a = ap.parse_args(argv)
    os.environ.setdefault("AGENTPROV_LOAD_PLUGINS", "agentdojo")
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-results-") as d:
        print(markdown(measure(a.executions, a.rounds, Path(d), a.corpus), a.rounds))


if __name__ == "__main__":
    main()
