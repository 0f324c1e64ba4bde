"""The lock checks ``info`` and ``plugins`` show, cached: an answer is reused only while
every file it was computed from keeps its size, time and content, and never by a build.
Run on a copy of the bundled AgentDojo project (with the worker package and the shared
library its path sources name), checked by the real lock check."""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pytest
from conftest import ROOT

from agentprov_core.backend import lockcache, projects


@pytest.fixture
def project(tmp_path, monkeypatch, home):
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    for name in ("agentdojo", "dojo"):
        shutil.copytree(ROOT / "backends" / name, tmp_path / "backends" / name)
    d = tmp_path / "backends" / "agentdojo"
    entry = SimpleNamespace(project=SimpleNamespace(worker="agentprov-worker-agentdojo"))
    return projects.Located(entry, d, None)  # type: ignore[arg-type]


def _counting():
    calls = []

    def check(loc, seen):
        calls.append(loc.where)
        return projects.lock_problem(loc, seen)

    return check, calls


def test_an_unchanged_project_is_answered_from_the_cache(project, home):
    check, calls = _counting()
    assert lockcache.lock_problem(project, check) is None
    assert lockcache.lock_problem(project, check) is None
    assert len(calls) == 1
    cache = json.loads((home / "cache" / "lock-checks.json").read_text())
    (entry,) = cache["entries"].values()
    # every file the check read: the lock, the project and each path dependency's project
    assert sorted(os.path.relpath(p, project.directory.parent) for p in entry["files"]) == [
        "agentdojo/pyproject.toml", "agentdojo/uv.lock", "agentdojo/worker/pyproject.toml",
        "dojo/pyproject.toml"]


def test_a_changed_file_is_checked_again_even_with_its_old_size_and_time(project):
    check, calls = _counting()
    assert lockcache.lock_problem(project, check) is None
    # a path dependency's pyproject.toml now declares what the lock does not: same size,
    # same modification time, other content
    dep = project.directory.parent / "dojo" / "pyproject.toml"
    st = dep.stat()
    text = dep.read_text()
    changed = text.replace("dependencies = []", 'dependencies = ["x"]', 1).replace(
        "`agentprov backends build` installs", "`agentprov backends build` insta", 1)
    assert len(changed) == len(text) and changed != text
    dep.write_text(changed)
    os.utime(dep, ns=(st.st_atime_ns, st.st_mtime_ns))
    problem = lockcache.lock_problem(project, check)
    assert len(calls) == 2 and problem is not None and problem == projects.lock_problem(project)
    # and the new answer is the one kept
    assert lockcache.lock_problem(project, check) == problem and len(calls) == 2


def test_a_damaged_cache_is_checked_afresh_and_a_build_never_reads_it(project, home):
    check, calls = _counting()
    lockcache.lock_problem(project, check)
    path = home / "cache" / "lock-checks.json"
    doc = json.loads(path.read_text())
    (entry,) = doc["entries"].values()
    entry["problem"] = "a lie"
    path.write_text(json.dumps(doc))
    # the lie is served to a listing (the cache is the user's own file)...
    assert lockcache.lock_problem(project, check) == "a lie"
    # ...never to what builds or runs: they call the check itself
    assert projects.lock_problem(project) is None
    path.write_text("{not json")
    assert lockcache.lock_problem(project, check) is None and len(calls) == 2
