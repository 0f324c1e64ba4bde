"""``agentprov import agentdojo`` at scale: AgentDyn's published runs (``runs/`` of
../shared/sources/AgentDyn.git at its pinned commit, 47,723 result files of 76
configurations), extracted with ``git archive`` (the repository is only read).

- the import of a subset (4 configurations, 1,688 files) and of all of them, side by side:
  executions per second and peak RSS (GNU ``time``) of each; memory that grows with the
  import's size shows in the ratio;
- ``verify`` over the full corpus: executions per second;
- the re-import of the full directory (nothing new): files per second.

    python benchmarks/bench_import.py [--repo PATH] [--keep DIR] [--json]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchutil import child_env, forked, load_avg, read_peak_mib  # noqa: E402

COMMIT = "5353cf7615b135cace8d07c8f12dac53a16b6db3"
REPO = HERE.parent.parent / "shared" / "sources" / "AgentDyn.git"
SUBSET = ("meta-llama_llama-3.3-70b-instruct", "gpt-4o-mini-2024-07-18-camel",
          "gpt-4o-2024-08-06-tool_filter", "gpt-5-mini-2025-08-07-tool_filter")


def _agentprov() -> str:
    exe = Path(sys.executable).with_name("agentprov")
    return str(exe) if exe.exists() else "agentprov"


def extract(repo: Path, dest: Path, paths: list[str]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", COMMIT, *paths],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "runs"


def timed(argv: list[str], env: dict[str, str], peak: Path, ok=(0,)) -> tuple[float, str]:
    t = time.perf_counter()
    p = subprocess.run(forked(argv, peak), capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr[-2000:]}")
    return wall, p.stdout


def run(repo: Path, work: Path) -> dict[str, Any]:
    env = child_env(str(work / "home"))
    (work / "home").mkdir(exist_ok=True)
    out: dict[str, Any] = {"load_before": load_avg()}
    exe = _agentprov()
    for label, paths in (("subset", [f"runs/{c}" for c in SUBSET]), ("all", ["runs"])):
        runs = extract(repo, work / f"src-{label}", paths)
        corpus = work / f"corpus-{label}"
        peak = work / f"peak-{label}"
        wall, stdout = timed([exe, "import", "agentdojo", str(runs), "--corpus", str(corpus),
                              "--source", "agentdyn", "--format", "json"], env, peak)
        rep = json.loads(stdout)
        out[label] = {"files": rep["files"], "imported": rep["imported"],
                      "kept_out": len(rep["kept_out"]), "statuses": rep["statuses"],
                      "seconds": round(wall, 1),
                      "executions_per_s": round(rep["imported"] / wall, 1),
                      "peak_rss_mib": read_peak_mib(peak)}
        if label == "all":
            wall, _ = timed([exe, "verify", "--corpus", str(corpus)], env, work / "peak-v")
            out["verify_all"] = {"seconds": round(wall, 1),
                                 "executions_per_s": round(rep["imported"] / wall, 1),
                                 "peak_rss_mib": read_peak_mib(work / "peak-v")}
            wall, stdout = timed([exe, "import", "agentdojo", str(runs), "--corpus",
                                  str(corpus), "--source", "agentdyn", "--format", "json"],
                                 env, work / "peak-r")
            again = json.loads(stdout)
            out["reimport_all"] = {"seconds": round(wall, 1), "already": again["already"],
                                   "imported": again["imported"],
                                   "files_per_s": round(again["already"] / wall, 1),
                                   "peak_rss_mib": read_peak_mib(work / "peak-r")}
    s, a = out["subset"], out["all"]
    if s["peak_rss_mib"] and a["peak_rss_mib"]:
        out["peak_rss_ratio_all_to_subset"] = round(a["peak_rss_mib"] / s["peak_rss_mib"], 2)
    out["rate_ratio_all_to_subset"] = round(a["executions_per_s"] / s["executions_per_s"], 2)
    out["load_after"] = load_avg()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not (a.repo / "HEAD").is_file():
        print(f"bench_import: {a.repo} is absent: AgentDyn's published runs are not here")
        return
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        res = run(a.repo, a.keep)
    else:
        with tempfile.TemporaryDirectory() as d:
            res = run(a.repo, Path(d))
    if a.json:
        print(json.dumps(res, indent=1, sort_keys=True))
        return
    for key in ("subset", "all"):
        r = res[key]
        print(f"import {key:6}: {r['imported']:6d} of {r['files']} file(s) in {r['seconds']}s: "
              f"{r['executions_per_s']} executions/s, peak RSS {r['peak_rss_mib']} MiB")
    v, ri = res["verify_all"], res["reimport_all"]
    print(f"verify all   : {v['seconds']}s, {v['executions_per_s']} executions/s, peak RSS "
          f"{v['peak_rss_mib']} MiB")
    print(f"re-import all: {ri['already']} already, {ri['imported']} new, {ri['seconds']}s, "
          f"{ri['files_per_s']} files/s, peak RSS {ri['peak_rss_mib']} MiB")
    print(f"ratios (all / subset): rate {res['rate_ratio_all_to_subset']}, peak RSS "
          f"{res.get('peak_rss_ratio_all_to_subset')}; load {res['load_before']} -> "
          f"{res['load_after']}")


if __name__ == "__main__":
    main()
