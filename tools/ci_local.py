"""The local CI: the live machinery checked without a model (D-723, D-462).

    uv run python tools/ci_local.py [--allow-network] [--job NAME ...] [--list]

Each job builds what it checks in a temporary ``AGENTPROV_HOME`` (never the user's) and
runs real commands: ``agentprov backends build``, ``--offline-check``, a scripted ``run``,
and the tests of the part it checks. A job that needs the network is skipped without
``--allow-network`` (R-28.5); a dispatch-only job runs only when named with ``--job``.

Jobs (``--list`` prints them):

``backend-agentdojo``   a locked sync of the AgentDojo backend on Python 3.12 from the uv
                        cache (``--offline``), confirms ``agentdojo==0.1.35`` in it, runs
                        the backend's fast tests; no network (a cold uv cache fails it:
                        say ``--allow-network`` to ``live-run`` first, or warm the cache)
``live-run``            builds the AgentDojo backend in a temporary home, ``--offline-check``,
                        a scripted ``run`` of the demo's banking cells, then the mapping,
                        differential (live versus native) and end-to-end tests; network
``backend-agentdyn``    builds AgentDyn at its pinned commit from ``--source-repo`` (by
                        default ``../shared/sources/AgentDyn.git`` when it exists, else the
                        upstream), ``--offline-check``, and its tests; network
``inspect-agentharm``   builds the inspect-agentharm backend with the project's fixture
                        dataset, ``--offline-check``, and the Inspect harness's tests
                        (cells, the ``inspect.eval`` mapper, the wire-versus-eval check,
                        the preflight through Inspect); network
``backend-autodojo``    AutoDojo's machinery: ``backends build autodojo`` (which says the
                        fork is not cached: it is not public), the backend built from a
                        fixture fork (build, ``--offline-check``, the worker's catalogue,
                        an attack-cache dry run) and the attack-cache tests; network;
                        dispatch-only

Exit 0 when every job that ran passed, 1 when one failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENTDYN_SOURCES = ROOT.parent / "shared" / "sources" / "AgentDyn.git"


@dataclass
class Job:
    name: str
    what: str
    network: bool
    steps: list[list[str]] = field(default_factory=list)
    dispatch_only: bool = False


def agentprov(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentprov_core", *args]


def pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def jobs(source_repo: str | None) -> list[Job]:
    dyn = source_repo or (str(AGENTDYN_SOURCES) if AGENTDYN_SOURCES.is_dir() else None)
    script = str(ROOT / "examples" / "scripts" / "live-demo.json")
    return [
        Job("backend-agentdojo", "a locked sync on Python 3.12 (offline), agentdojo==0.1.35, "
            "the backend's tests", network=False, steps=[
                agentprov("backends", "build", "agentdojo"),
                agentprov("backends", "build", "agentdojo", "--offline-check"),
                ["{env}/bin/python", "-c", "import importlib.metadata as m, sys; "
                 "v = m.version('agentdojo'); print('agentdojo', v); "
                 "sys.exit(v != '0.1.35')"],
                pytest("-m", "not slow", "tests/test_backends.py",
                       "tests/test_backend_build_plan.py", "tests/test_capture_backend.py"),
            ]),
        Job("live-run", "build, --offline-check, a scripted run, the mapping, differential "
            "and end-to-end tests", network=True, steps=[
                agentprov("backends", "build", "agentdojo", "--allow-network"),
                agentprov("backends", "build", "agentdojo", "--offline-check"),
                agentprov("run", "agentdojo", "--corpus", "{home}/corpora/ci", "--campaign",
                          "ci", "--suite", "banking", "--user-tasks", "0-1", "--attack",
                          "important_instructions", "--injection-tasks", "0",
                          "--model-display-name", "Scripted Model", "--llm-script", script),
                agentprov("validate", "--strict", "--corpus", "{home}/corpora/ci"),
                agentprov("verify", "--corpus", "{home}/corpora/ci"),
                pytest("-m", "slow or not slow", "tests/test_mapping.py",
                       "tests/test_campaign_mappings.py", "tests/test_campaign.py",
                       "tests/test_incomplete_session.py"),
            ]),
        Job("backend-agentdyn", "AgentDyn at 5353cf76 from the fetch cache, --offline-check, "
            "its tests", network=True, steps=[
                agentprov("backends", "build", "agentdyn", "--allow-network",
                          *(["--source-repo", dyn] if dyn else [])),
                agentprov("backends", "build", "agentdyn", "--offline-check"),
                pytest("-m", "slow or not slow", "tests/test_agentdyn_backend.py"),
            ]),
        Job("inspect-agentharm", "the inspect-agentharm backend on the fixture dataset, "
            "--offline-check, the Inspect harness's tests", network=True, steps=[
                [sys.executable, "-m", "agentprov_core.testing.agentharm_fixture",
                 "{home}/agentharm-fixture"],
                agentprov("backends", "build", "agentharm", "--dataset",
                          "{home}/agentharm-fixture", "--allow-network"),
                agentprov("backends", "build", "agentharm", "--offline-check"),
                pytest("-m", "slow or not slow", "tests/test_agentharm_backend.py",
                       "tests/test_agentharm_cells.py", "tests/test_agentharm_run.py",
                       "tests/test_eval_mapper.py", "tests/test_inspect_preflight.py",
                       "tests/test_restricted_corpus.py"),
            ]),
        Job("backend-autodojo", "AutoDojo's machinery: the fork's refusal, the backend and the "
            "attack-cache checks against a fixture fork", network=True, dispatch_only=True,
            steps=[
                agentprov("backends", "build", "autodojo"),
                pytest("-m", "slow or not slow", "tests/test_autodojo_backend.py",
                       "tests/test_autodojo_cache.py", "tests/test_fetchcache.py"),
            ]),
    ]


def run_job(job: Job, home: Path, log) -> tuple[bool, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPROV_")
           or k == "AGENTPROV_PYTHON"} | {"AGENTPROV_HOME": str(home),
                                          "UV_PYTHON_DOWNLOADS": "never"}
    for n, argv in enumerate(job.steps, 1):
        envs = sorted((home / "envs").glob("agentdojo-*")) if (home / "envs").is_dir() else []
        subst = {"home": str(home), "env": str(envs[0]) if envs else "{env}"}
        argv = [a.format(**subst) for a in argv]
        # the backend-autodojo job's build says the fork is not cached: that is its check
        expect = 3 if argv[-2:] == ["build", "autodojo"] else 0
        shown = shlex.join(argv).replace(sys.executable, "python")
        log(f"  [{job.name} {n}/{len(job.steps)}] $ {shown}")
        t = time.monotonic()
        p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
        for line in tail:
            log(f"      {line}")
        log(f"      [exit {p.returncode}, {time.monotonic() - t:.1f} s]")
        if p.returncode != expect:
            return False, f"step {n} exited {p.returncode}: {shown}"
    return True, f"{len(job.steps)} step(s)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--allow-network", action="store_true",
                    help="run the jobs that need the network (PyPI, an upstream)")
    ap.add_argument("--job", action="append", metavar="NAME",
                    help="run this job only (repeatable); a dispatch-only job runs only so")
    ap.add_argument("--source-repo", metavar="URL",
                    help="backend-agentdyn: where to fetch AgentDyn's pinned commit from")
    ap.add_argument("--list", action="store_true", help="list the jobs and exit")
    args = ap.parse_args(argv)
    all_jobs = jobs(args.source_repo)
    names = {j.name for j in all_jobs}
    if args.list:
        for j in all_jobs:
            flags = ", ".join(f for f, on in (("network", j.network),
                                              ("dispatch-only", j.dispatch_only)) if on)
            print(f"{j.name:<20} {j.what}" + (f" ({flags})" if flags else ""))
        return 0
    unknown = sorted(set(args.job or ()) - names)
    if unknown:
        print(f"ci_local: no job {', '.join(unknown)}; jobs: {', '.join(sorted(names))}",
              file=sys.stderr)
        return 2
    chosen = [j for j in all_jobs if (j.name in args.job) if args.job] if args.job else \
        [j for j in all_jobs if not j.dispatch_only]
    results = []
    for job in chosen:
        if job.network and not args.allow_network:
            results.append((job.name, "skipped", "needs the network: --allow-network"))
            continue
        print(f"{job.name}: {job.what}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"agentprov-ci-{job.name}-") as tmp:
            ok, why = run_job(job, Path(tmp) / "home", lambda s: print(s, flush=True))
        results.append((job.name, "passed" if ok else "FAILED", why))
    print("\nci_local:")
    for name, status, why in results:
        print(f"  {status:<8} {name}: {why}")
    return 1 if any(s == "FAILED" for _, s, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
