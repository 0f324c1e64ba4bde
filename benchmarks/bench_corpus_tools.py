"""The corpus tools at scale: ``verify``, ``validate --strict`` and ``recompute --dry-run``
over synthetic working corpora (``benchmarks/gen_corpus.py``) of 1,000 and 10,000
executions.

- ``verify`` against ``sha256sum`` over the same bytes (every file under the corpus root:
  the raw store, the executions, the ledger, the index, the manifest), interleaved, median
  of the rounds. Target: within 2x.
- ``validate --strict`` and ``recompute --dry-run``: executions per second on this machine,
  and the peak RSS (GNU ``time``) at both sizes: streaming means memory flat in corpus size.

    python benchmarks/bench_corpus_tools.py [--sizes 1000,10000] [--rounds 3] [--json]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchutil import child_env, forked, gnu_time, read_peak_mib  # noqa: E402

VERIFY_TARGET = 2.0


def _agentprov() -> str:
    exe = Path(sys.executable).with_name("agentprov")
    return str(exe) if exe.exists() else "agentprov"


def _timed(argv: list[str], env: dict[str, str], peak: Path | None = None,
           ok: tuple[int, ...] = (0,)) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run(forked(argv, peak), capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr[-2000:]}")
    return wall, p.stdout + p.stderr


def corpus_bytes(root: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            files += 1
            size += os.path.getsize(os.path.join(dirpath, n))
    return files, size


def measure(size: int, rounds: int, work: Path) -> dict[str, Any]:
    import gen_corpus

    env = child_env(str(work / "home"))
    env["AGENTPROV_LOAD_PLUGINS"] = "agentdojo"
    t = time.perf_counter()
    root = gen_corpus.generate(work / f"c{size}", size)
    gen_s = time.perf_counter() - t
    files, nbytes = corpus_bytes(root)
    ap = _agentprov()
    sha = ["/bin/sh", "-c", f"find '{root}' -type f -print0 | xargs -0 sha256sum > /dev/null"]
    cmds = {
        "verify": [ap, "verify", "--corpus", str(root)],
        "sha256sum": sha,
        "validate": [ap, "validate", "--corpus", str(root), "--strict"],
        "recompute": [ap, "recompute", "--corpus", str(root), "--dry-run"],
    }
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    peaks: dict[str, list[float]] = {k: [] for k in cmds}
    outputs: dict[str, str] = {}
    for argv in cmds.values():  # warm-up: the page cache holds the corpus for every arm
        _timed(argv, env)
    for r in range(rounds):
        order = list(cmds) if r % 2 == 0 else list(reversed(cmds))
        for k in order:
            peak = work / f"peak-{k}"
            w, out = _timed(cmds[k], env, peak)
            walls[k].append(w)
            outputs[k] = out.strip().splitlines()[-1] if out.strip() else ""
            p = read_peak_mib(peak)
            if p is not None:
                peaks[k].append(p)
    return {"size": size, "gen_s": gen_s, "files": files, "bytes": nbytes,
            "median": {k: statistics.median(v) for k, v in walls.items()},
            "peak_mib": {k: (statistics.median(v) if v else None) for k, v in peaks.items()},
            "last_line": outputs}


def markdown(res: list[dict[str, Any]], rounds: int) -> str:
    out = ["### Corpus tools at scale", "",
           "What is measured: synthetic working corpora made by `benchmarks/gen_corpus.py` "
           "(each execution is the committed template session, a real scripted AgentDojo "
           "cell, written again as a new session and mapped by the real T0 path: capture "
           "log, native log, ledger entry, AER, SEM, PROV, validation). Every command is a "
           f"fresh process, {rounds} rounds interleaved after a warm-up run (the page cache "
           "holds the corpus for every arm); `sha256sum` reads every file under the corpus "
           "root (`find … | xargs -0 sha256sum`), the bytes `verify` reads. Peak RSS by GNU "
           "`time`" + ("" if gnu_time() else " (not available here)") + ".", "",
           "| executions | files | MiB | command | median s | executions/s | ÷ sha256sum | "
           "peak RSS MiB |", "|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in res:
        sha = r["median"]["sha256sum"]
        for k in ("sha256sum", "verify", "validate", "recompute"):
            m = r["median"][k]
            pk = r["peak_mib"][k]
            out.append(f"| {r['size']:,} | {r['files']:,} | {r['bytes'] / 2**20:,.0f} | "
                       f"`{k}` | {m:.2f} | {r['size'] / m:,.0f} | {m / sha:.2f} | "
                       f"{'–' if pk is None else f'{pk:.0f}'} |")
    out.append("")
    for r in res:
        ratio = r["median"]["verify"] / r["median"]["sha256sum"]
        out.append(f"- {r['size']:,} executions: `verify` ÷ `sha256sum` = **{ratio:.2f}x**; "
                   f"target within {VERIFY_TARGET:.0f}x: "
                   f"{'met' if ratio <= VERIFY_TARGET else '**missed**'}. Generated in "
                   f"{r['gen_s']:.0f} s.")
    if len(res) >= 2:
        a, b = res[0], res[-1]
        for k in ("verify", "validate", "recompute"):
            pa, pb = a["peak_mib"][k], b["peak_mib"][k]
            if pa and pb:
                out.append(f"- `{k}` peak RSS at {a['size']:,} → {b['size']:,} executions: "
                           f"{pa:.0f} → {pb:.0f} MiB ({pb / pa:.2f}x for "
                           f"{b['size'] / a['size']:.0f}x the executions).")
    out += ["", "Last lines of output at the largest size:", ""]
    out += [f"    {k}: {line}" for k, line in res[-1]["last_line"].items() if k != "sha256sum"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    os.environ.setdefault("AGENTPROV_LOAD_PLUGINS", "agentdojo")
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-corpus-") as d:
        res = [measure(int(s), a.rounds, Path(d)) for s in a.sizes.split(",")]
    print(json.dumps(res, indent=1) if a.json else markdown(res, a.rounds))


if __name__ == "__main__":
    main()
