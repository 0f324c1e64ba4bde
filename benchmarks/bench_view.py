"""``agentprov view`` at scale: the site of a working corpus of 10,000 executions
(``benchmarks/gen_corpus.py``: each one a real scripted AgentDojo cell mapped by the real T0
path, with its capture and native log in the raw store).

- building the site: ``agentprov view C --out SITE`` (with verify's checks, the default) and
  ``--no-verify``, each a fresh process, beside ``agentprov verify`` and ``stats --tables
  results`` alone (what the site's overview runs), GNU ``time`` for the peak RSS;
- the first page: the bytes a browser loads to show the overview (``index.html``, its script
  and style, ``data/site.js``), and what the execution list loads on demand
  (``data/list.js``), and one execution's document (``x/<n>.js``); the site's files and bytes;
- headless Chromium (Debian's ``chromium`` through playwright, as the tests drive it; the
  page opened from ``file://``): a fresh page each round, the time until the overview's
  results table is shown, then until the execution list shows its rows, then until one
  execution's trajectory is shown.

    python benchmarks/bench_view.py [--executions 10000] [--rounds 3] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from bench_corpus_tools import _agentprov, _timed  # noqa: E402
from benchutil import child_env, gnu_time, load_avg, read_peak_mib  # noqa: E402

FIRST_PAGE = ("index.html", "assets/view.js", "assets/view.css", "data/site.js")


def _size(site: Path, rels: tuple[str, ...] | list[str]) -> int:
    return sum((site / r).stat().st_size for r in rels)


def browse(site: Path, rounds: int) -> dict[str, list[float]]:
    from tests.view_browser import Watch, launched

    out: dict[str, list[float]] = {"overview": [], "list": [], "execution": []}
    n = len(list((site / "x").iterdir()))
    with launched() as b:
        for r in range(rounds + 1):  # the first round warms the page cache
            w = Watch(b, site)
            t = time.perf_counter()
            w.goto()
            w.page.wait_for_selector("table.results tbody tr", state="visible")
            t_over = time.perf_counter() - t
            t = time.perf_counter()
            w.page.click("#nav-list")
            w.page.wait_for_selector("#rows tr", state="visible")
            t_list = time.perf_counter() - t
            t = time.perf_counter()
            w.page.evaluate(f"() => {{ location.hash = '#/x/{(r * 3331) % n}'; }}")
            w.page.wait_for_selector("#steps .step", state="visible")
            t_exec = time.perf_counter() - t
            assert w.clean() == [], w.clean()
            w.page.close()
            if r:
                out["overview"].append(t_over)
                out["list"].append(t_list)
                out["execution"].append(t_exec)
    return out


def measure(n: int, rounds: int, work: Path, corpus: Path | None = None) -> dict[str, Any]:
    import gen_corpus

    env = child_env(str(work / "home"))
    env["AGENTPROV_LOAD_PLUGINS"] = "agentdojo"
    t = time.perf_counter()
    root = corpus if corpus is not None else gen_corpus.generate(work / f"c{n}", n)
    gen_s = time.perf_counter() - t
    ap = _agentprov()
    site = work / "site"
    cmds = {
        "view": [ap, "view", str(root), "--out", str(site)],
        "view_no_verify": [ap, "view", str(root), "--out", str(work / "site-nv"),
                           "--no-verify"],
        "verify": [ap, "verify", "--corpus", str(root)],
        "results": [ap, "stats", str(root), "--tables", "results"],
    }
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    peaks: dict[str, list[float]] = {k: [] for k in cmds}
    loads = [load_avg()]
    for argv in cmds.values():
        _timed(argv, env)
    for r in range(rounds):
        for k in (list(cmds) if r % 2 == 0 else list(reversed(cmds))):
            peak = work / f"peak-{k}"
            w, _ = _timed(cmds[k], env, peak)
            walls[k].append(w)
            p = read_peak_mib(peak)
            if p is not None:
                peaks[k].append(p)
    files = [p for p in site.rglob("*") if p.is_file()]
    sizes = {"first_page": _size(site, FIRST_PAGE), "list": _size(site, ["data/list.js"]),
             "execution_median": statistics.median(p.stat().st_size
                                                   for p in (site / "x").iterdir()),
             "site_bytes": sum(p.stat().st_size for p in files), "site_files": len(files)}
    times = browse(site, rounds)
    loads.append(load_avg())
    units = sum(1 for line in (root / "ledger.jsonl").read_bytes().splitlines() if line)
    return {"executions": units, "gen_s": gen_s if corpus is None else None,
            "median": {k: statistics.median(v) for k, v in walls.items()},
            "peak_mib": {k: (statistics.median(v) if v else None) for k, v in peaks.items()},
            "sizes": sizes, "browser": {k: statistics.median(v) for k, v in times.items()},
            "loads": loads}


def markdown(r: dict[str, Any], rounds: int) -> str:
    m, pk, s, b = r["median"], r["peak_mib"], r["sizes"], r["browser"]
    n = r["executions"]
    lines = ["### The corpus viewer at scale", "",
             f"`agentprov view` over a working corpus of {n:,} executions made by "
             f"`benchmarks/gen_corpus.py`; every command a fresh process, {rounds} rounds "
             "interleaved after a warm-up run; peak RSS by GNU `time`"
             + ("" if gnu_time() else " (not available here)")
             + f". Load average {r['loads'][0]} before, {r['loads'][1]} after.", "",
             "| command | median s | executions/s | peak RSS MiB |", "|---|---:|---:|---:|"]
    for k, label in (("view", "`view C --out SITE`"), ("view_no_verify", "`view --no-verify`"),
                     ("verify", "`verify --corpus C`"),
                     ("results", "`stats C --tables results`")):
        p = pk[k]
        lines.append(f"| {label} | {m[k]:.2f} | {n / m[k]:,.0f} | "
                     f"{'–' if p is None else f'{p:.0f}'} |")
    lines += ["", "| what a browser loads | bytes |", "|---|---:|",
              f"| the first page (index.html, view.js, view.css, data/site.js) | "
              f"{s['first_page']:,} |",
              f"| the execution list, on demand (data/list.js) | {s['list']:,} |",
              f"| one execution's document, on demand (x/N.js, median) | "
              f"{s['execution_median']:,.0f} |",
              f"| the whole site ({s['site_files']:,} files) | {s['site_bytes']:,} |", "",
              f"Headless Chromium, a fresh page each of {rounds} rounds after a warm-up "
              "(medians): the overview's results table shown "
              f"{1000 * b['overview']:.0f} ms after navigation starts; the execution list's "
              f"rows {1000 * b['list']:.0f} ms after its link is clicked; one execution's "
              f"trajectory {1000 * b['execution']:.0f} ms after its address is set."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", type=Path, help="an existing corpus instead of a new one")
    a = ap.parse_args(argv)
    os.environ.setdefault("AGENTPROV_LOAD_PLUGINS", "agentdojo")
    if shutil.which("chromium") is None:
        sys.exit("bench_view: no chromium binary on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-view-") as d:
        print(markdown(measure(a.executions, a.rounds, Path(d), a.corpus), a.rounds))


if __name__ == "__main__":
    main()
