"""The lock checks ``info`` and ``plugins`` show, remembered from the last build: a match
is reused only while every file it was computed from keeps its size, time and content;
a listing never writes the cache and a build never reads it. Run on a copy of the bundled
AgentDojo project (with the library its path sources name), checked by the real check."""

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


def test_a_built_project_is_answered_from_the_cache_and_a_listing_writes_nothing(
        project, home):
    check, calls = _counting()
    assert lockcache.lock_problem(project, check) is None and len(calls) == 1
    assert not (home / "cache").exists()  # a listing leaves the home as it found it
    lockcache.record(project, check)  # what a build does
    assert len(calls) == 2
    assert lockcache.lock_problem(project, check) is None
    assert lockcache.lock_problem(project, check) is None
    assert len(calls) == 2
    cache = json.loads((home / "cache" / "lock-checks.json").read_text())
    (entry,) = cache["entries"].values()
    # every file the check read: the lock, the project and each path dependency's project
    assert sorted(os.path.relpath(p, project.directory.parent) for p in entry["files"]) == [
        "agentdojo/pyproject.toml", "agentdojo/uv.lock", "agentdojo/worker/pyproject.toml",
        "dojo/pyproject.toml"]


def test_a_changed_file_is_checked_again_even_with_its_old_size_and_time(project):
    check, calls = _counting()
    lockcache.record(project, check)
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
    # a mismatch is never recorded
    lockcache.record(project, check)
    assert lockcache.lock_problem(project, check) == problem and len(calls) == 4


def test_a_damaged_cache_is_checked_afresh_and_a_build_never_reads_it(project, home):
    check, calls = _counting()
    lockcache.record(project, check)
    path = home / "cache" / "lock-checks.json"
    (project.directory / "uv.lock").write_text("not a lock")
    # the build's own check reads the files, whatever the cache says
    assert projects.lock_problem(project).startswith("its uv.lock cannot be read")
    # and the listing sees the lock changed
    assert lockcache.lock_problem(project, check).startswith("its uv.lock cannot be read")
    path.write_text("{not json")
    assert lockcache.lock_problem(project, check).startswith("its uv.lock cannot be read")
