"""Planning at scale: the full AutoDojo plan, expanded and digested.

The main plan is every one of AutoDojo's 17 suites, all user tasks, all injection tasks,
every attack of its catalogue that is neither refused nor in need of options, and the
benign cells. ``autodojo`` needs a cache file and cannot be mixed with other attacks, so
it is a second plan of its own, with a small cache file of a fixture fork (a git repository
made here and fetched into the fetch cache, pinned by ``AGENTPROV_TEST_AUTODOJO_PIN``) and
``--autodojo-variant 0``.

Each measurement runs in a fresh subprocess (so peak memory is that of the measurement
alone) and calls ``agentprov_core.run.prepare.prepare(RunRequest.of("autodojo", ...))`` exactly
as ``agentprov run`` does, with ``environments.require_built`` replaced by a fixed id (no
environment is built here) and a scripted model (``--llm-script``; nothing is read). The
child first imports agentprov and loads the plugins, then times ``prepare``: reading the
catalogue, the checks, the expansion and the digests. Two paths are measured:

* ``prepare``: the plan in memory;
* ``dry run``: ``prepare`` and then what ``agentprov run --dry-run --plan-json`` does
  (``agentprov_core.cli.dryrun.print_dry_run``: the human lines on stderr and the
  ``agentprov-run-dry-plan/0.1`` document on stdout, both to /dev/null), with the worker
  session replaced by an in-process stand-in (see ``_worker_stand_in``).

Every row also gives the wall time of the whole subprocess: interpreter, imports,
plugins, plan, output.

Wall time is the median of the timed runs; memory is the ``tracemalloc`` peak (one run
with tracing on, since tracing slows the run) and the ``ru_maxrss`` growth over the
measured section and the process's whole peak (median of the timed runs). A scaling
series multiplies every suite's user and injection tasks by k (k² as many attacked
cells) to show whether the cost per cell stays flat.
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
TARGET_SECONDS = 10.0  # the targets for the full plan
TARGET_MIB = 500.0


# ------------------------------------------------------------------------------ child
def _maxrss_mib() -> float:
    import resource

    v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return v / (1024 * 1024) if sys.platform == "darwin" else v / 1024


def _fixed_environment(environments) -> None:
    """No environment is built here: the environment check answers a fixed id (and, where
    the check also reads the environment's marker, a stand-in marker with a fixed
    identity digest)."""
    from types import SimpleNamespace

    def fixed_id(meta) -> str:
        return f"{meta.environment_prefix or meta.backend or meta.name}-00000000"

    environments.require_built = fixed_id
    if hasattr(environments, "read_marker"):
        environments.read_marker = lambda meta, env_id: SimpleNamespace(
            environment_id=env_id, backend=meta.backend, identity_sha256="0" * 64,
            hello={}, guarded={})


def _worker_stand_in(timed, notes: list[str], served_catalogue):
    """``session.plan_check`` without the worker process (no environment is built here): what
    it costs T0 and the worker per cell, in this process. The served catalogue is the
    plugin's own (``served_catalogue()``, the one ``prepare`` read), converted as ``session``
    converts the worker's answer; ``run.dryrun`` re-expands the plan from it; the plan
    request carries every cell row as JSON both ways and the worker's ``_plan`` checks each
    cell. Not measured: starting the worker, ``hello``, the pipe itself."""
    import contextlib

    import msgspec

    from agentprov_core.base import paths
    from agentprov_core.catalogue import Catalogue

    check = None
    shared = (paths.backends_dir() or Path("backends")) / "shared" / "src"
    try:
        sys.path.insert(0, str(shared))
        from agentprov_backend import worker

        check = worker._plan
    except Exception as exc:  # the stand-in then measures T0's side only
        notes.append(f"the worker's per-cell check was not measured ({type(exc).__name__}: "
                     f"{exc})")

    class StandIn:
        serves = True

        def __init__(self) -> None:
            self.served = msgspec.to_builtins(served_catalogue())

        def catalogue(self) -> Catalogue:
            return timed(lambda: msgspec.convert(self.served, type=Catalogue),
                         "worker stand-in: the served catalogue, converted")

        def plan_problems(self, benchmark_version, cells, inspect=None) -> list[str]:
            msg = timed(lambda: json.dumps({"id": 3, "type": "plan", "source": SOURCE,
                                            "benchmark_version": benchmark_version,
                                            "cells": [c.row() for c in cells]}),
                        "worker stand-in: the plan request, every cell row as JSON (T0)")
            if check is not None:
                worker._catalogues[SOURCE] = self.served
                req = timed(lambda: json.loads(msg), "worker stand-in: decode the request (worker)")
                res = timed(lambda: check(req), "worker stand-in: check every cell (worker _plan)")
                timed(lambda: json.loads(json.dumps({"id": 3, "ok": True, "result": res})),
                      "worker stand-in: the reply, both ways")
            return []

    @contextlib.contextmanager
    def plan_check(meta, env_id):
        yield StandIn()

    return plan_check


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement, in this (fresh) process. Returns what it measured."""
    from agentprov_core import catalogue as catmod
    from agentprov_core import source as srcmod
    from agentprov_core.backend import environments
    from agentprov_core.cli import dryrun
    from agentprov_core.plan.plans import Plan
    from agentprov_core.plugins import source_entry
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest

    _fixed_environment(environments)
    src = source_entry(SOURCE).source  # loads every plugin: not part of the measurement
    if spec.get("catalogue"):
        type(src).catalogue_file = Path(spec["catalogue"])
    options = dict(spec["options"])
    dry = spec["path"] == "dry run"
    if dry:
        options |= {"dry_run": True, "plan_json": True}
    req = RunRequest.of(SOURCE, options, set(options))
    mode = spec["mode"]
    spent: dict[str, float] = {}  # "section|step" -> seconds
    notes: list[str] = []
    section = ["prepare"]  # then "output": what the dry run does after prepare()

    def timed(fn, label: str):
        t = time.perf_counter()
        try:
            return fn()
        finally:
            key = f"{section[0]}|{label}"
            spent[key] = spent.get(key, 0.0) + time.perf_counter() - t

    def wrap(owner, name: str, label: str) -> None:
        real = getattr(owner, name, None)
        if real is None:
            notes.append(f"{getattr(owner, '__name__', owner)}.{name} is gone: not timed")
            return
        setattr(owner, name, lambda *a, **kw: timed(lambda: real(*a, **kw), label))

    prepared_box: list[Any] = []
    if dry:
        try:
            from agentprov_core.backend import session
        except ImportError:
            session = None
        if session is not None and hasattr(session, "plan_check"):
            session.plan_check = _worker_stand_in(timed, notes,
                                                  lambda: prepared_box[0].catalogue)
        else:
            notes.append("session.plan_check is gone: the dry run's worker check not measured")
    if mode == "time":
        wrap(catmod, "load", "read the catalogue (msgspec)")
        wrap(srcmod, "expand_suites", "expand the cells")
        wrap(planning, "plan_digest", "plan digest (canonical JSON of every cell key)")
        wrap(Plan, "dry_plan", "dry plan document (a dict per cell)")
        wrap(dryrun, "echo_json", "json.dumps(indent=1, sort_keys) and echo")
        wrap(planning, "plan_lines", "human plan lines (the list of strings)")
    rss_before = _maxrss_mib()
    if mode == "tracemalloc":
        import tracemalloc

        tracemalloc.start()
    t0 = time.perf_counter()
    prepared = planning.prepare(req)
    t1 = time.perf_counter()
    prepared_box.append(prepared)
    section[0] = "output"
    if dry:
        null = os.open(os.devnull, os.O_WRONLY)
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(null, 1)
        os.dup2(null, 2)
        try:
            dryrun.print_dry_run(prepared, t0)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(null)
    t2 = time.perf_counter()
    out: dict[str, Any] = {"cells": len(prepared.cells), "plan_sha256": prepared.plan.plan_sha256,
                           "prepare_s": t1 - t0, "output_s": t2 - t1, "total_s": t2 - t0,
                           "notes": notes}
    if mode == "tracemalloc":
        import tracemalloc

        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out |= {"tracemalloc_peak_mib": peak / 2**20, "tracemalloc_retained_mib": current / 2**20}
    else:
        out |= {"rss_before_mib": rss_before, "rss_after_mib": _maxrss_mib(),
                "rss_delta_mib": _maxrss_mib() - rss_before,
                "phases_s": spent}
    return out


# ----------------------------------------------------------------------------- parent
def main_attacks() -> tuple[list[str], dict[str, Any]]:
    """The attacks of the main plan, and what the plan should hold by the formula."""
    from agentprov_core.plugins import source_entry

    cat = source_entry(SOURCE).source.catalogue()
    version = cat.default_benchmark_version
    usable = [a for a in cat.attacks if not a.refused and not a.needs]
    dos = sum(1 for a in usable if a.dos)
    suites = cat.suites_of(version)
    users = sum(len(s.user_tasks) for s in suites)
    pairs = sum(len(s.user_tasks) * len(s.injection_tasks) for s in suites)
    return [a.name for a in usable], {
        "suites": len(suites), "user_tasks": users,
        "injection_tasks": sum(len(s.injection_tasks) for s in suites),
        "attacks": len(usable), "dos_attacks": dos,
        "refused": [a.name for a in cat.attacks if a.refused],
        "needing_options": [a.name for a in cat.attacks if a.needs],
        "expected_cells": users + dos * users + (len(usable) - dos) * pairs,
        "expected_autodojo_cells": users + pairs}


def scaled_catalogue(k: int, into: Path) -> Path:
    """AutoDojo's catalogue with every suite's user and injection tasks multiplied by k."""
    from agentprov_core.plugins import source_entry

    path = source_entry(SOURCE).source.catalogue_file
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    for suite in doc["suites"]:
        for field, stem in (("user_tasks", "user_task_"), ("injection_tasks", "injection_task_")):
            ids = suite[field]
            suite[field] = ids + [f"{stem}{1000 + n}" for n in range(len(ids) * (k - 1))]
    out = into / f"catalogue.x{k}.json"
    out.write_text(json.dumps(doc), encoding="utf-8")
    return out


def run_child(spec: dict[str, Any], env: dict[str, str], cwd: str) -> dict[str, Any]:
    """One measurement in a fresh process, forked by a small one (``benchutil.forked``) so
    that its ru_maxrss is its own; the whole process's wall time as seen from here."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak"
        t0 = time.perf_counter()
        proc = subprocess.Popen(forked(argv, report), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=cwd, text=True)
        stdout, stderr = proc.communicate()
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"child {spec} exited {proc.returncode}:\n{stderr[-3000:]}")
        peak = read_peak_mib(report)
    res = json.loads(stdout)
    res["process_wall_s"] = wall
    if peak is not None and "rss_after_mib" in res:
        res["rss_after_mib"] = max(res["rss_after_mib"], peak)  # GNU time saw the exit too
    return res


def summarise(timed: list[dict[str, Any]], traced: dict[str, Any]) -> dict[str, Any]:
    med = statistics.median
    phases = {name: med(r["phases_s"].get(name, 0.0) for r in timed)
              for name in dict.fromkeys(k for r in timed for k in r["phases_s"])}
    return {
        "cells": timed[0]["cells"], "runs": len(timed),
        "plan_sha256": timed[0]["plan_sha256"],
        "same_digest_every_run": len({r["plan_sha256"] for r in [*timed, traced]}) == 1,
        "prepare_s": med(r["prepare_s"] for r in timed),
        "total_s": med(r["total_s"] for r in timed),
        "total_max_s": max(r["total_s"] for r in timed),
        "output_s": med(r["output_s"] for r in timed),
        "process_wall_s": med(r["process_wall_s"] for r in timed),
        "rss_delta_mib": med(r["rss_delta_mib"] for r in timed),
        "rss_peak_mib": med(r["rss_after_mib"] for r in timed),
        "tracemalloc_peak_mib": traced["tracemalloc_peak_mib"],
        "tracemalloc_retained_mib": traced["tracemalloc_retained_mib"],
        "phases_s": phases,
        # per run, then the median: medians of the parts need not add up to the total's
        "unattributed_s": {sec: med(r[f"{sec}_s"] - sum(v for k, v in r["phases_s"].items()
                                                        if k.startswith(f"{sec}|"))
                                    for r in timed)
                           for sec in ("prepare", "output")},
        "notes": sorted({n for x in [*timed, traced] for n in x["notes"]}),
    }


def fixture_fork(tmpdir: Path, home: Path, cache: Path) -> dict[str, str]:
    """A small attack cache (injection_task_0, which every suite has) in a fixture fork,
    fetched into ``home``'s fetch cache; the variable that pins its commit (tests only)."""
    from agentprov_core.backend.autodojofork import PIN_OVERRIDE
    from agentprov_core.testing.gitrepo import fetch_fork, make_repo

    data = json.dumps({"injection_tasks": {"injection_task_0": {"v": ["bench"]}}}).encode()
    cache.write_bytes(data)
    commit = make_repo(tmpdir / "fork", {"cache/all.json": data})
    fetch_fork(tmpdir / "fork", commit, home)
    return {PIN_OVERRIDE: commit}


def run(repeats: int = 5, scales: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    attacks, expected = main_attacks()
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-") as tmp:
        tmpdir = Path(tmp)
        home = tmpdir / "home"
        home.mkdir()
        cache = tmpdir / "autodojo-cache.json"  # a fixture fork's file, verified at step 5
        pin = fixture_fork(tmpdir, home, cache)
        (tmpdir / "script.json").write_text("[]")  # the usage step loads the script
        base = {"llm_script": str(tmpdir / "script.json"), "corpus": str(tmpdir / "corpus"),
                "campaign": "bench"}
        plans = {
            "main": base | {"attack": [",".join(attacks)]},
            "autodojo": base | {"attack": ["autodojo"], "autodojo_cache": str(cache),
                                "autodojo_variant": 0},
        }
        specs: dict[str, dict[str, Any]] = {}
        for plan, options in plans.items():
            for path in ("prepare", "dry run"):
                specs[f"{plan}/{path}"] = {"options": options, "path": path}
        for k in scales:
            if k != 1:
                specs[f"scale/{k}"] = {"options": plans["main"], "path": "prepare",
                                       "catalogue": str(scaled_catalogue(k, tmpdir))}
        from agentprov_core.testing.fixtures import landed_backends

        # AutoDojo's project as a build that has it would hold it (placeholder projects):
        # this build's slot would refuse every plan before planning (exit 5)
        landed = landed_backends(tmpdir / "backends")
        env = child_env(str(home)) | pin | {"AGENTPROV_BACKENDS": str(landed)}
        cwd = str(home)
        timed: dict[str, list[dict[str, Any]]] = {name: [] for name in specs}
        traced: dict[str, dict[str, Any]] = {}
        for _ in range(repeats):  # interleaved: one run of each measurement per round
            for name, spec in specs.items():
                timed[name].append(run_child(spec | {"mode": "time"}, env, cwd))
        for name, spec in specs.items():
            traced[name] = run_child(spec | {"mode": "tracemalloc"}, env, cwd)
    results = {name: summarise(timed[name], traced[name]) for name in specs}
    if 1 in scales:
        results["scale/1"] = results["main/prepare"]
    return {"attacks": attacks, "expected": expected, "repeats": repeats,
            "scales": list(scales), "results": results,
            "targets": {"seconds": TARGET_SECONDS, "mib": TARGET_MIB}}


# ---------------------------------------------------------------------------- report
def markdown(res: dict[str, Any]) -> str:
    exp, r = res["expected"], res["results"]
    out = ["### Planning at scale", ""]
    out += [f"AutoDojo's full plan: {exp['suites']} suites, {exp['user_tasks']} user tasks, "
            f"{exp['injection_tasks']} injection tasks, {exp['attacks']} attacks "
            f"({exp['dos_attacks']} of them DoS: one cell per user task) and the benign cells. "
            f"Left out: refused ({', '.join(exp['refused']) or 'none'}); needing options "
            f"({', '.join(exp['needing_options']) or 'none'}: its own plan below, with a "
            "small cache file of a fixture fork and `--autodojo-variant 0`). "
            f"Every measurement is a fresh subprocess; wall time is the median of "
            f"{res['repeats']} runs; tracemalloc is the peak of one traced run (tracing "
            "slows it); RSS is the child's ru_maxrss, its growth over the timed section and "
            "its peak, medians (the child is forked by a small process so that the numbers "
            "are its own: `benchmarks/benchutil.py`). The timed section starts after the "
            "imports and the plugin loading; \"whole process\" is the subprocess from start "
            "to exit, as the parent saw it.",
            "",
            "Paths: *prepare* is `planning.prepare(RunRequest.of(\"autodojo\", ...))` with a "
            "scripted model and the environment check answering a fixed id (no environment "
            "is built here). *dry run* is that and then what `agentprov run autodojo "
            "--dry-run --plan-json` does after it (`cli.dryrun.print_dry_run`, output to "
            "/dev/null), where the worker session (`session.plan_check`) is replaced by a "
            "stand-in in the same process: the plugin's catalogue as the served one, the "
            "second check and expansion from it (`run.dryrun.dry_run` through "
            "`planning.with_worker_catalogue`), the "
            "`plan` request with every cell row as JSON both ways and the worker's per-cell "
            "check (`agentprov_backend.worker._plan`). Starting the worker, `hello` and the "
            "pipe are not measured.", ""]
    out += ["| plan | path | cells | timed section s (median) | slowest run s "
            "| whole process s | tracemalloc peak MiB | RSS growth MiB | process peak RSS MiB |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ("main/prepare", "main/dry run", "autodojo/prepare", "autodojo/dry run"):
        x = r[name]
        plan, path = name.split("/")
        out.append(f"| {plan} | {path} | {x['cells']:,} | {x['total_s']:.3f} "
                   f"| {x['total_max_s']:.3f} | {x['process_wall_s']:.3f} "
                   f"| {x['tracemalloc_peak_mib']:.1f} | {x['rss_delta_mib']:.1f} "
                   f"| {x['rss_peak_mib']:.1f} |")
    cells_ok = r["main/prepare"]["cells"] == exp["expected_cells"]
    out += ["", f"Cells by the formula (benign + DoS × users + other attacks × users × "
                f"injections, per suite): {exp['expected_cells']:,} for the main plan "
                f"({'matches' if cells_ok else '**does not match**'} the expansion), "
                f"{exp['expected_autodojo_cells']:,} for the autodojo plan. "
                "The plan digest was the same in every run: "
                f"{'yes' if all(x['same_digest_every_run'] for x in r.values()) else '**no**'}.",
            ""]
    t, m = res["targets"]["seconds"], res["targets"]["mib"]
    worst_s = max(r[n]["process_wall_s"] for n in ("main/prepare", "main/dry run"))
    worst_m = max(max(r[n]["tracemalloc_peak_mib"], r[n]["rss_peak_mib"])
                  for n in ("main/prepare", "main/dry run"))
    out += [f"Targets: under {t:g} s and under {m:g} MB for the full plan. "
            f"Slowest whole process (dry run included): {worst_s:.2f} s, "
            f"{'met' if worst_s < t else '**missed**'}; highest memory (tracemalloc peak or "
            f"process peak RSS): {worst_m:.1f} MiB, {'met' if worst_m < m else '**missed**'}.",
            ""]
    a, b = r["main/prepare"], r["main/dry run"]
    out += ["Where the time of the main plan goes (median s). \"Up to the plan\" is "
            "`prepare()`; \"after the plan\" is the rest of the dry run "
            "(`print_dry_run`, with the worker stand-in described above: its expansion and "
            "digest are the second ones, from the served catalogue).", "",
            "| step | prepare path | dry run: up to the plan | dry run: after the plan |",
            "|---|---:|---:|---:|"]
    steps = dict.fromkeys(k.split("|", 1)[1] for k in [*a["phases_s"], *b["phases_s"]])

    def cell(x: dict[str, Any], sec: str, step: str) -> str:
        v = x["phases_s"].get(f"{sec}|{step}")
        return f"{v:.3f}" if v else "–"

    for step in steps:
        out.append(f"| {step} | {cell(a, 'prepare', step)} | {cell(b, 'prepare', step)} "
                   f"| {cell(b, 'output', step)} |")

    def rest(x: dict[str, Any], sec: str) -> str:
        return f"{x['unattributed_s'][sec]:.3f}"

    out += [f"| not attributed: checks, refusals, registries and the plan object (up to "
            f"the plan); echoing the human lines, one `click.echo` per cell (after) "
            f"| {rest(a, 'prepare')} | {rest(b, 'prepare')} | {rest(b, 'output')} |",
            f"| **total** | **{a['prepare_s']:.3f}** | **{b['prepare_s']:.3f}** "
            f"| **{b['output_s']:.3f}** |", ""]
    notes = sorted({n for x in r.values() for n in x["notes"]})
    if notes:
        out += ["Notes of the run: " + "; ".join(notes) + ".", ""]
    scales = sorted(res["scales"])
    out += ["Scaling (the main plan, `prepare` only, every suite's user and injection tasks "
            "× k):", "", "| k | cells | timed section s | µs per cell | tracemalloc peak MiB "
            "| bytes per cell (tracemalloc) |", "|---:|---:|---:|---:|---:|---:|"]
    for k in scales:
        x = r[f"scale/{k}"]
        out.append(f"| {k} | {x['cells']:,} | {x['total_s']:.3f} "
                   f"| {x['total_s'] / x['cells'] * 1e6:.2f} | {x['tracemalloc_peak_mib']:.1f} "
                   f"| {x['tracemalloc_peak_mib'] * 2**20 / x['cells']:.0f} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scales", default="1,2,4", help="task multipliers of the scaling series")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    ap.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    res = run(args.repeats, tuple(int(k) for k in args.scales.split(",")))
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
