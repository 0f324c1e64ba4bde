"""The contract suite's worker side: what a source's built backend environment serves,
and what its mapper makes of a session of it (see :mod:`agentprov_core.testing.contract`).

Each check needs the backend environment built in ``$AGENTPROV_HOME`` and is skipped,
saying how to build it, when it is not. Nothing is written to ``$AGENTPROV_HOME``: the
scripted run of the mapper's check runs with a home of its own that sees the built
environment (``envs/``) and nothing else.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentprov_core.backend import projects
from agentprov_core.base import paths
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.plan import taskspec
from agentprov_core.plan.plandoc import InspectPlan
from agentprov_core.source import INSPECT_LIMITS
from agentprov_core.testing.contract_select import SUITES, WITH_BACKEND, converted, source
from agentprov_core.testing.contract_select import expand as _expand
from agentprov_core.testing.contract_select import plan as _plan


def _built(name: str) -> str:
    """The id of the source's backend environment built in ``$AGENTPROV_HOME``, or skip
    saying how to build it."""
    from agentprov_core.backend import environments, slots
    from agentprov_core.backend.marker import MARKER

    meta = source(name).meta
    try:
        loc = projects.locate(meta.backend) if meta.backend else None
    except AgentprovError:  # contributed twice: the project checks name it
        loc = None
    unpublished = loc.entry.project.unpublished if loc is not None else None
    build = (f"build it with `agentprov backends build {meta.backend}"
             + (f" --source-repo URL` (a copy of its upstream: {unpublished})" if unpublished
                else "`"))
    try:
        why = slots.unbuildable(meta)
    except AgentprovError as exc:  # a malformed slot file: the lock check names it
        why = exc.message
    if why is not None:
        pytest.skip(f"source {name!r}: backend {meta.backend!r} cannot be built in this "
                    f"build: {why}")
    try:
        env_id = environments.environment_id(meta)
    except AgentprovError as exc:
        pytest.skip(f"source {name!r}: no environment id for backend {meta.backend!r} "
                    f"({exc.message})")
    env_dir = environments.environment_dir(env_id)
    if not (env_dir / MARKER).is_file():
        pytest.skip(f"source {name!r}: backend environment {env_id} is not built in "
                    f"$AGENTPROV_HOME ({paths.home()}): {build}, then run the suite again")
    return env_id


def _worker_catalogue(name: str, doc: Any, env_id: str) -> Catalogue:
    """The catalogue the worker served, converted (the bad field named by its JSON path)."""
    cat = converted(doc, Catalogue,
                     f"source {name!r}: catalogue served by the worker of {env_id}")
    assert cat.source == name, (
        f"source {name!r}: catalogue served by the worker of {env_id}: $.source is "
        f"{cat.source!r}, not {name!r}")
    return cat


#: a user task id no catalogue holds, for the plan the worker must reject
UNKNOWN_TASK = "user_task_contract_unknown_0"


@pytest.mark.parametrize("name", WITH_BACKEND)
def test_worker_serves_the_source(name: str) -> None:
    """The built environment's worker (no keys, no network, its hello checked against the
    marker) serves the source from the project's worker package, serves a catalogue of it,
    accepts a plan of each suite's first user task and rejects an unknown user task."""
    from packaging.utils import canonicalize_name

    from agentprov_core.backend import session
    from agentprov_core.plan.plans import Cell

    env_id = _built(name)
    src = source(name)
    meta = src.meta
    want = getattr(projects.locate(meta.backend), "entry", None)
    worker = want.project.worker if want is not None else None
    try:
        with session.plan_check(meta, env_id) as pc:
            served = pc.hello.get("served")
            mine = served.get(name) if isinstance(served, dict) else None
            mine = mine if isinstance(mine, dict) else {}
            if mine.get("error"):
                pytest.fail(f"source {name!r}: the worker of {env_id} cannot serve it: "
                            f"{mine['error']}", pytrace=False)
            assert pc.serves, (
                f"source {name!r}: the worker of {env_id} does not serve it (its hello's "
                f"sources: {', '.join(pc.hello.get('sources') or []) or 'none'}): no worker "
                "package in the environment registers it (entry-point group "
                f"agentprov.worker, name {name})")
            if worker is not None:
                assert mine.get("distribution") == canonicalize_name(worker), (
                    f"source {name!r}: the worker of {env_id} serves it from "
                    f"{mine.get('distribution')} ({mine.get('entry_point')}), not from "
                    f"BackendProject.worker {worker!r}")
            cat = _worker_catalogue(name, pc.catalogue_document(), env_id)
            if meta.kind == "suites":
                version = cat.default_benchmark_version
                suites = [s for s in cat.suites_of(version or "") if s.user_tasks]
                assert suites, (f"source {name!r}: the catalogue served by the worker of "
                                f"{env_id} has no suite with user tasks at {version!r}")
                cells = [Cell.suite_cell("user_task", s.name,
                                         taskspec.sort_tasks(s.user_tasks)[0], None, None)
                         for s in suites]
                bad = Cell.suite_cell("user_task", suites[0].name, UNKNOWN_TASK, None, None)
                asked = None
            else:
                assert cat.tasks, (f"source {name!r}: the catalogue served by the worker of "
                                   f"{env_id} has no task")
                task = cat.tasks[0]
                doc = _plan(name, inspect=InspectPlan(
                    task=task.name, samples="limit:1", cell_size=1,
                    limits={k: lo for k, (lo, _hi) in INSPECT_LIMITS.items()},
                    judges={role: "scripted" for role in task.judge_roles}))
                version, cells, bad = None, _expand(src, doc, cat), None
                asked = session.inspect_request(doc)
            problems = pc.plan_problems(version, cells, asked)
            assert problems == [], (
                f"source {name!r}: the worker of {env_id} rejects a plan of "
                + ", ".join(c.key for c in cells) + ": " + "; ".join(map(str, problems)))
            if bad is not None:
                problems = pc.plan_problems(version, [bad])
                assert any(UNKNOWN_TASK in str(p) for p in problems), (
                    f"source {name!r}: the worker of {env_id} accepts the cell {bad.key}, "
                    f"whose user task {UNKNOWN_TASK!r} its catalogue does not hold "
                    f"(problems: {problems})")
    except AgentprovError as exc:
        pytest.fail(f"source {name!r}: the worker of {env_id}: [{exc.code}] {exc.message}",
                    pytrace=False)



# ------------------------------------------------------- the committed catalogue
#: what a committed catalogue may differ in from the worker's: where it comes from, and the
#: defences, for which the defence registry is authoritative
NOT_COMPARED = ("provenance", "defences")


def first_difference(committed: Any, served: Any, path: str = "$") -> str | None:
    """Where two JSON documents first differ, as ``$.suites[0].user_tasks[2]: committed
    'user_task_2', served (absent)``; ``None`` when they are equal."""
    if isinstance(committed, dict) and isinstance(served, dict):
        for key in [*committed, *(k for k in served if k not in committed)]:
            if key not in served or key not in committed:
                mine = json.dumps(committed[key]) if key in committed else "(absent)"
                theirs = json.dumps(served[key]) if key in served else "(absent)"
                return f"{path}.{key}: committed {mine}, served {theirs}"
            found = first_difference(committed[key], served[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(committed, list) and isinstance(served, list):
        for i, (a, b) in enumerate(zip(committed, served, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(committed) != len(served):
            i = min(len(committed), len(served))
            mine = json.dumps(committed[i]) if i < len(committed) else "(absent)"
            theirs = json.dumps(served[i]) if i < len(served) else "(absent)"
            return f"{path}[{i}]: committed {mine}, served {theirs}"
        return None
    if committed != served or type(committed) is not type(served):
        return f"{path}: committed {json.dumps(committed)}, served {json.dumps(served)}"
    return None


@pytest.mark.parametrize("name", WITH_BACKEND)
def test_worker_serves_the_committed_catalogue(name: str) -> None:
    """The catalogue the plugin commits (what T0 plans with before the environment is
    built) is the one the built environment's worker serves, provenance and defences aside:
    else a dry run plans from one and a run from the other."""
    from agentprov_core.backend import session

    env_id = _built(name)
    src = source(name)
    try:
        committed = msgspec.to_builtins(src.catalogue())
        with session.plan_check(src.meta, env_id) as pc:
            served = msgspec.to_builtins(_worker_catalogue(name, pc.catalogue_document(),
                                                           env_id))
    except AgentprovError as exc:
        pytest.fail(f"source {name!r}: the worker of {env_id}: [{exc.code}] {exc.message}",
                    pytrace=False)
    for key in NOT_COMPARED:
        committed.pop(key, None)
        served.pop(key, None)
    found = first_difference(committed, served)
    assert found is None, (
        f"source {name!r}: the committed catalogue is not the one the worker of {env_id} "
        f"serves, first at {found} (commit what `agentprov backends catalogue "
        f"{src.meta.backend}` writes)")


# ------------------------------------------------------------------ the mapper
#: the scripted agent of the mapper's check: it answers once, in plain text, so that an
#: AgentDojo-shaped loop ends after one model call and scores the cell
SCRIPT = [{"content": "Done: that is my final answer."}]


def _scripted_home(tmp: Path) -> Path:
    """A home of its own that sees the built environments of ``$AGENTPROV_HOME``."""
    home = tmp / "home"
    home.mkdir()
    (home / "envs").symlink_to(paths.home() / "envs", target_is_directory=True)
    return home


@pytest.mark.parametrize("name", SUITES)
def test_mapper_maps_a_scripted_session(name: str, tmp_path: Path) -> None:
    """A scripted run of the first user task of the catalogue's first suite, through the
    built environment's worker (no keys, no network), leaves a well-formed session; the
    source's mapper maps it without raising, as ``agentprov run`` maps it."""
    _built(name)
    src = source(name)
    suite = next(s for s in src.catalogue().suites if s.user_tasks)
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    corpus = tmp_path / "corpora" / "contract"
    env = dict(os.environ, AGENTPROV_HOME=str(_scripted_home(tmp_path)))
    env.pop("AGENTPROV_ERROR_FORMAT", None)
    (tmp_path / "cwd").mkdir()
    args = ["run", name, "--suite", suite.name, "--user-tasks",
            taskspec.sort_tasks(suite.user_tasks)[0], "--llm-script",
            str(tmp_path / "script.json"), "--corpus", str(corpus), "--campaign", "contract"]
    done = subprocess.run([sys.executable, "-m", "agentprov_core", "--error-format", "json",
                           *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path / "cwd", timeout=600, stdin=subprocess.DEVNULL)
    working = next((p for p in (corpus.with_name("contract.partial"), corpus)
                    if (p / "manifest.json").is_file()), None)
    assert working is not None, (
        f"source {name!r}: `agentprov {' '.join(args)}` wrote no corpus (exit "
        f"{done.returncode}): {done.stderr.strip()[-2000:]}")
    manifest = json.loads((working / "manifest.json").read_text(encoding="utf-8"))
    mapper = src.meta.mapper or "the capture/0.1 mapper"
    failures = manifest.get("mapping_failures") or []
    assert not failures, (
        f"source {name!r}: its mapper {mapper} raised {failures[0].get('error')} on session "
        f"{failures[0].get('session_id')}, a well-formed session of a scripted run of "
        f"{suite.name}/{args[5]} (a mapper maps every session, a failed one included, and "
        "never raises)")
    index = working / "executions.jsonl"
    rows = index.read_text(encoding="utf-8").splitlines() if index.is_file() else []
    assert rows, (f"source {name!r}: the scripted run of {suite.name}/{args[5]} mapped no "
                  f"session (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
