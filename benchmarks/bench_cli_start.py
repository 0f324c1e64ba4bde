"""CLI start-up: agentprov's commands against a bare click app, side by side in one run.

Every command is a fresh subprocess of the same interpreter. The commands are run
interleaved, one of each per round, in forward order on even rounds and reverse order on
odd ones, so that a slow spell of the machine hits every command alike; the report gives
the median and p90 wall time of each and its ratios to (a) ``python -c pass`` and to (b)
a bare click app that imports click, pluggy and msgspec and prints its help.

Besides the wall times this module measures, for ``agentprov info`` and
``agentprov --help``, the ten most expensive imports (``python -X importtime``, median of
several runs) and, for ``info``, where its time goes phase by phase (in-process, in a
fresh subprocess per run).

Run it alone (``python benchmarks/bench_cli_start.py``) or through ``run_all.py``. The
ratios are the result; the absolute times belong to the machine that measured them.
``--against PYTHON`` adds ``--help``, ``info`` and ``--version`` of another environment
(the console script beside that interpreter, e.g. one installed from ``main``) to the same
interleaved rounds, so a change is measured before and after under one load.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchutil import child_env, display, forked, gnu_time, load_avg, read_peak_mib

TARGET_RATIO = 2.0  # the target: `agentprov --help` and `agentprov info` within 2x of (b)

BARE_APP = '''\
"""A bare click app of the same shape as agentprov's group: click, pluggy and msgspec
imported at the top, a group with two options and four one-line commands."""
import click
import msgspec  # noqa: F401
import pluggy  # noqa: F401


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, help="Show the version.")
@click.option("--error-format", type=click.Choice(["text", "json"]), default=None,
              help="How errors are printed.")
def cli(version, error_format):
    """bare: a click app that does nothing."""


for _name in ("info", "plugins", "registry", "run"):
    cli.command(name=_name, help=f"The {_name} command.")(lambda: None)

cli(prog_name="bare")
'''

# key -> (label, argv after the launcher); the launcher is filled in by commands()
_AGENTPROV = [
    ("c", "`agentprov --help`", ["--help"]),
    ("d", "`agentprov info`", ["info"]),
    ("e", "`agentprov --version`", ["--version"]),
    ("f", "`agentprov run agentdojo --catalogue`", ["run", "agentdojo", "--catalogue"]),
]
_WITH_M = {"c", "d"}  # also measured as `python -m agentprov_core ...`

#: what ``agentprov backends build`` leaves for ``info``: each contributed backend project's
#: lock check, recorded (the measured home is one whose backends are built; row d0 is one
#: where nothing is built, so that every lock is parsed)
PRIME = """
from agentprov_core.backend import lockcache, projects
from agentprov_core.plugins import manager
for name in manager().backends():
    loc = projects.locate(name)
    if loc is not None and loc.present and (loc.directory / "uv.lock").is_file():
        lockcache.record(loc, projects.lock_problem)
"""


# --------------------------------------------------------------------------- helpers
def console_script() -> str | None:
    """The ``agentprov`` console script of this interpreter's environment (what users run)."""
    here = Path(sys.executable).parent / ("agentprov.exe" if os.name == "nt" else "agentprov")
    if here.is_file():
        return str(here)
    return shutil.which("agentprov")


#: the rows measured in the environment of ``--against`` too
_AGAINST = ("c", "d", "e")


def against_script(python: str) -> str:
    """The ``agentprov`` console script beside the interpreter ``python``."""
    script = Path(python).parent / ("agentprov.exe" if os.name == "nt" else "agentprov")
    if not script.is_file():
        raise SystemExit(f"--against: no agentprov console script beside {python}")
    return str(script)


def commands(bare: Path, unbuilt: Path | None = None, against: str | None = None
             ) -> list[tuple[str, str, list[str]]]:
    py = sys.executable
    script = console_script()
    out = [("a", "`python -c pass`", [py, "-c", "pass"]),
           ("b", "bare click app `--help` (click + pluggy + msgspec)", [py, str(bare), "--help"])]
    for key, label, args in _AGENTPROV:
        if script is not None:
            out.append((key, label, [script, *args]))
        else:  # no console script: -m stands in, and the report says so
            out.append((key, label + " (via -m)", [py, "-m", "agentprov_core", *args]))
    if unbuilt is not None:  # the same `info` in a home where no build recorded a lock check
        out.append(("d0", "`agentprov info`, nothing built (every lock parsed)",
                    ["env", f"AGENTPROV_HOME={unbuilt}",
                     *([script] if script is not None else [py, "-m", "agentprov_core"]),
                     "info"]))
    if script is not None:
        for key, label, args in _AGENTPROV:
            if key in _WITH_M:
                out.append((key + "-m", label.replace("`agentprov", "`python -m agentprov_core"),
                            [py, "-m", "agentprov_core", *args]))
    if against is not None:
        other = against_script(against)
        for key, label, args in _AGENTPROV:
            if key in _AGAINST:
                out.append((key + "-was", f"{label}, against: `{display(other)}`",
                            [other, *args]))
    return out


def run_once(argv: list[str], env: dict[str, str], cwd: str) -> dict[str, float | None]:
    """Wall time (s) of one subprocess and its CPU time (user + system) where the OS says."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    if hasattr(os, "wait4"):
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        cpu = ru.ru_utime + ru.ru_stime
    else:  # pragma: no cover - Windows
        code = proc.wait()
        wall, cpu = time.perf_counter() - t0, None
    if code != 0:
        err = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd).stderr
        raise RuntimeError(f"{' '.join(argv)} exited {code}:\n{err[-2000:]}")
    return {"wall": wall, "cpu": cpu}


def peak_rss(argv: list[str], env: dict[str, str], cwd: str, runs: int) -> float | None:
    """Median peak RSS (MiB) of ``argv`` over ``runs`` runs through GNU time (untimed
    runs: the wrapper would add its own start to the wall time); None without GNU time."""
    if gnu_time() is None:
        return None
    peaks = []
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak"
        for _ in range(runs):
            subprocess.run(forked(argv, report), stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           cwd=cwd, check=True)
            peak = read_peak_mib(report)
            if peak is not None:
                peaks.append(peak)
    return statistics.median(peaks) if peaks else None


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


# ---------------------------------------------------------------------- wall times
def measure_walls(rounds: int, bare: Path, env: dict[str, str], cwd: str,
                  rss_runs: int = 3, unbuilt: Path | None = None,
                  against: str | None = None) -> dict[str, Any]:
    cmds = commands(bare, unbuilt, against)
    samples: dict[str, list[dict[str, float | None]]] = {k: [] for k, _, _ in cmds}
    for _warm in range(2):  # warm the page cache and write the bytecode caches; not timed
        for _, _, argv in cmds:
            run_once(argv, env, cwd)
    for r in range(rounds):
        for key, _, argv in (cmds if r % 2 == 0 else list(reversed(cmds))):
            samples[key].append(run_once(argv, env, cwd))
    rows = {}
    for key, label, argv in cmds:
        walls = [s["wall"] for s in samples[key]]
        cpus = [s["cpu"] for s in samples[key] if s["cpu"] is not None]
        rows[key] = {"label": label, "argv": argv, "median": statistics.median(walls),
                     "p90": p90(walls), "min": min(walls),
                     "cpu_median": statistics.median(cpus) if cpus else None,
                     "rss_median": peak_rss(argv, env, cwd, rss_runs)}
    a, b = rows["a"]["median"], rows["b"]["median"]
    for row in rows.values():
        row["vs_b"] = row["median"] / b
        row["vs_a"] = row["median"] / a
        row["own_vs_b"] = (row["median"] - a) / (b - a) if b > a else None
        if row["cpu_median"] is not None and rows["b"]["cpu_median"]:
            row["cpu_vs_b"] = row["cpu_median"] / rows["b"]["cpu_median"]
    return {"rounds": rounds, "rows": rows}


# ------------------------------------------------------------------------ importtime
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)\s*$")


def parse_importtime(stderr: str) -> dict[str, tuple[int, int, int]]:
    """module -> (self us, cumulative us, depth) of one ``-X importtime`` run."""
    out = {}
    for line in stderr.splitlines():
        m = _IMPORT_LINE.match(line)
        if m:
            out[m.group(4)] = (int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2)
    return out


def measure_importtime(argv: list[str], env: dict[str, str], cwd: str,
                       runs: int) -> dict[str, Any]:
    per_run = []
    for _ in range(runs):
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                              check=True)
        per_run.append(parse_importtime(proc.stderr))
    modules = set().union(*per_run)
    merged = {}
    for mod in modules:
        seen = [r[mod] for r in per_run if mod in r]
        merged[mod] = (statistics.median(s[0] for s in seen),
                       statistics.median(s[1] for s in seen), seen[0][2])
    totals = [sum(s for s, _, _ in r.values()) for r in per_run]
    by_cum = sorted(merged.items(), key=lambda kv: -kv[1][1])[:10]
    by_self = sorted(merged.items(), key=lambda kv: -kv[1][0])[:10]
    core = [sum(s for m, (s, _, _) in r.items() if m.startswith("agentprov")) for r in per_run]

    def rows(items):
        return [{"module": m, "self_ms": s / 1000, "cumulative_ms": c / 1000, "depth": d}
                for m, (s, c, d) in items]

    return {"argv": argv, "runs": runs, "modules": len(modules),
            "total_ms": statistics.median(totals) / 1000,
            "agentprov_self_ms": statistics.median(core) / 1000,
            "top_cumulative": rows(by_cum), "top_self": rows(by_self)}


def importtime_argv(args: list[str]) -> list[str]:
    script = console_script()
    head = [script] if script is not None else ["-m", "agentprov_core"]
    return [sys.executable, "-X", "importtime", *head, *args]


# ------------------------------------------------------------- info, phase by phase
def measure_info_phases(runs: int, env: dict[str, str], cwd: str) -> dict[str, Any]:
    """``info_phases_child.py`` in a fresh subprocess ``runs`` times; medians per phase.

    The child reports the wall clock at its first and last line, so the interpreter's
    start (before the first line) and its shutdown (after the last: module teardown) are
    rows of the table too, and the rows add up to the process's wall time.
    """
    argv = [sys.executable, str(Path(__file__).with_name("info_phases_child.py"))]
    results, walls = [], []
    for _ in range(runs):
        began = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd,
                             check=True).stdout
        ended = time.time()
        doc = json.loads(out)
        steps = [["interpreter start (to the script's first line)",
                  (doc["started"] - began) * 1000, True], *doc["phases"],
                 ["interpreter shutdown (after the last line: module teardown)",
                  (ended - doc["finished"]) * 1000, True]]
        results.append(steps)
        walls.append((ended - began) * 1000)
    return {"runs": runs, "wall_ms": statistics.median(walls),
            "phases": [{"phase": name, "counted": counted,
                        "ms": statistics.median(r[i][1] for r in results)}
                       for i, (name, _, counted) in enumerate(results[0])]}


# ----------------------------------------------------------------------------- driver
def run(rounds: int = 30, importtime_runs: int = 5, phase_runs: int = 10,
        against: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-") as tmp:
        bare = Path(tmp) / "bare_click_app.py"
        bare.write_text(BARE_APP, encoding="utf-8")
        home = Path(tmp) / "home"
        home.mkdir()
        env = child_env(str(home))
        cwd = str(home)  # not the checkout: `-m` puts the working directory on sys.path
        for python in (sys.executable, *([against] if against else [])):
            subprocess.run([python, "-c", PRIME], env=env, cwd=cwd, check=True)
        unbuilt = Path(tmp) / "unbuilt-home"
        unbuilt.mkdir()
        walls = measure_walls(rounds, bare, env, cwd, unbuilt=unbuilt, against=against)
        imports = {name: measure_importtime(importtime_argv(args), env, cwd, importtime_runs)
                   for name, args in (("info", ["info"]), ("--help", ["--help"]))}
        imports["bare"] = measure_importtime([sys.executable, "-X", "importtime", str(bare),
                                              "--help"], env, cwd, importtime_runs)
        phases = measure_info_phases(phase_runs, env, cwd)
    script = console_script()
    return {"walls": walls, "imports": imports, "info_phases": phases,
            "console_script": script, "target_ratio": TARGET_RATIO,
            "gnu_time": gnu_time(), "against": against, "load": load_avg()}


def _ms(v: float) -> str:
    return f"{v * 1000:.1f}"


def markdown(res: dict[str, Any]) -> str:
    w = res["walls"]
    rows = w["rows"]
    out = ["### CLI start-up", ""]
    via = ("the console script `" + display(res["console_script"]) + "`"
           if res["console_script"]
           else "`python -m agentprov_core` (no console script was found)")
    out += [f"{w['rounds']} rounds, interleaved (forward order on even rounds, reverse on "
            "odd), after two untimed warm-up rounds; every command a fresh subprocess, "
            f"output to /dev/null. `agentprov` is {via}; the `python -m agentprov_core` rows "
            "are the same commands through `-m`. The ratios use medians. "
            "\"Own time vs (b)\" is (x − a) / (b − a): the command's time above a bare "
            "interpreter start, against the bare click app's. CPU is user + system time "
            "(median). Peak RSS is the median of three further, untimed runs under GNU "
            "`time`, which forks the command so that the peak is the command's own "
            "(`benchmarks/benchutil.py` says why)"
            + ("." if res.get("gnu_time") else "; GNU time was not found, so it is "
               "not measured."), ""]
    if res.get("load"):
        out += [f"Load average (1, 5, 15 min) when the rounds ended: {res['load']}.", ""]
    out += ["| | command | median ms | p90 ms | ÷ (b) | ÷ (a) | own time vs (b) "
            "| CPU ms | CPU ÷ (b) | peak RSS MiB |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, r in rows.items():
        own = f"{r['own_vs_b']:.2f}" if r["own_vs_b"] is not None else "–"
        cpu = _ms(r["cpu_median"]) if r["cpu_median"] is not None else "–"
        cpu_b = f"{r['cpu_vs_b']:.2f}" if r.get("cpu_vs_b") is not None else "–"
        rss = f"{r['rss_median']:.1f}" if r["rss_median"] is not None else "–"
        out.append(f"| ({key}) | {r['label']} | {_ms(r['median'])} | {_ms(r['p90'])} "
                   f"| {r['vs_b']:.2f} | {r['vs_a']:.2f} | {own} | {cpu} | {cpu_b} | {rss} |")
    out += ["", f"Target: `agentprov --help` and `agentprov info` (and `agentprov --version`, "
                f"which loads the same plugins) within {res['target_ratio']:g}x of (b), by "
                "the median wall time (CPU time in brackets)."]
    for key in ("c", "d", "e", "c-m", "d-m", "d0", "c-was", "d-was", "e-was"):
        if key in rows:
            r = rows[key]
            verdict = "met" if r["vs_b"] <= res["target_ratio"] else "**missed**"
            cpu = f" (CPU {r['cpu_vs_b']:.2f}x)" if r.get("cpu_vs_b") is not None else ""
            out.append(f"- {r['label']}: {r['vs_b']:.2f}x of (b){cpu}, {verdict}")
    out.append("")
    for name, label in (("info", "`agentprov info`"), ("--help", "`agentprov --help`")):
        imp = res["imports"][name]
        out += [f"#### Imports of {label}", "",
                f"`{' '.join(_short(a) for a in imp['argv'])}`, median of {imp['runs']} runs: "
                f"{imp['modules']} modules, {imp['total_ms']:.1f} ms of import time in all "
                f"({imp['agentprov_self_ms']:.1f} ms in agentprov's own modules' bodies). "
                f"The bare app's imports take {res['imports']['bare']['total_ms']:.1f} ms. "
                "Depth 0 is a top-level import; a module's cumulative time includes the "
                "modules nested under it.", "",
                "Top 10 by cumulative time:", "",
                "| module | depth | cumulative ms | self ms |", "|---|---:|---:|---:|"]
        out += [f"| `{r['module']}` | {r['depth']} | {r['cumulative_ms']:.1f} | "
                f"{r['self_ms']:.1f} |" for r in imp["top_cumulative"]]
        out += ["", "Top 10 by self time (the module's own body):", "",
                "| module | self ms | cumulative ms |", "|---|---:|---:|"]
        out += [f"| `{r['module']}` | {r['self_ms']:.1f} | {r['cumulative_ms']:.1f} |"
                for r in imp["top_self"]]
        out.append("")
    ph = res["info_phases"]
    total = sum(p["ms"] for p in ph["phases"] if p["counted"])
    out += ["#### `agentprov info`, phase by phase", "",
            "`benchmarks/info_phases_child.py` does what `agentprov info` does, step by "
            f"step, in a fresh subprocess; median of {ph['runs']} runs per row. A module "
            "imported by two phases is charged to the first. Medians of rows need not add "
            f"up exactly to the median wall time of the process ({ph['wall_ms']:.1f} ms).",
            "", "| phase | ms |", "|---|---:|"]
    out += [f"| {p['phase']} | {p['ms']:.1f} |" for p in ph["phases"]]
    out += [f"| **sum of the rows** | **{total:.1f}** |", ""]
    return "\n".join(out)


def _short(arg: str) -> str:
    """Paths in the report: the console script and interpreter by name, temp files by name."""
    if arg == sys.executable:
        return "python"
    p = Path(arg)
    return p.name if p.is_absolute() else arg


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--importtime-runs", type=int, default=5)
    ap.add_argument("--phase-runs", type=int, default=10)
    ap.add_argument("--against", metavar="PYTHON",
                    help="also measure --help, info and --version of the agentprov console "
                         "script beside this interpreter (another environment), interleaved")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = ap.parse_args(argv)
    res = run(args.rounds, args.importtime_runs, args.phase_runs, args.against)
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
