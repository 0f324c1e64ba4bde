"""A backend project's uv.lock against its pyproject.toml, compared by T0 from the two files
(no uv, no cache, no network): each kind of change a re-lock would record is named, and
edits uv accepts are not refused. The slow test asks uv itself about the same edits."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

from agentprov_core.backend.lockcheck import differences, same_marker

DEP = '"agentdojo==0.1.35",'
WORKER_DEPS = 'dependencies = ["agentprov-dojo"]'

#: (edit id, file under backends/, old text, new text, what the difference says: {B} is
#: the copy's backends/, {P} its packages/)
CHANGES = [
    ("dependency-changed", "agentdojo/pyproject.toml", DEP, '"agentdojo>=0.1.34",',
     "dependencies: agentdojo>=0.1.34 is declared, the lock records agentdojo==0.1.35"),
    ("dependency-added", "agentdojo/pyproject.toml", DEP, DEP + ' "httpx>=0.27",',
     "dependencies: httpx>=0.27 is declared, the lock does not record it"),
    ("dependency-removed", "agentdojo/pyproject.toml", DEP, "",
     "dependencies: the lock records agentdojo==0.1.35, which is not declared"),
    ("marker-added", "agentdojo/pyproject.toml", DEP,
     "\"agentdojo==0.1.35; sys_platform == 'linux'\",",
     "dependencies: agentdojo==0.1.35; sys_platform == \"linux\" is declared, the lock "
     "records agentdojo==0.1.35"),
    ("extra-added", "agentdojo/pyproject.toml", DEP, '"agentdojo[transformers]==0.1.35",',
     "dependencies: agentdojo[transformers]==0.1.35 is declared, the lock records "
     "agentdojo==0.1.35"),
    ("constraint-changed", "agentdojo/pyproject.toml", '["anthropic<1"]', '["anthropic<2"]',
     "constraint-dependencies: anthropic<2 is declared, the lock records anthropic<1"),
    ("override-added", "agentdojo/pyproject.toml", "[tool.uv.sources]",
     'override-dependencies = ["httpx<1"]\n\n[tool.uv.sources]',
     "override-dependencies: httpx<1 is declared, the lock does not record it"),
    ("group-added", "agentdojo/pyproject.toml", "[tool.uv]",
     '[dependency-groups]\ndocs = ["mkdocs>=1"]\n\n[tool.uv]',
     "dependency group docs is declared, the lock does not record it"),
    ("extras-added", "agentdojo/pyproject.toml", "[tool.uv]",
     '[project.optional-dependencies]\nfast = ["orjson"]\n\n[tool.uv]',
     "dependencies: orjson; extra == \"fast\" is declared, the lock does not record it\n"
     "optional-dependencies: extras ['fast'] are declared, the lock records []"),
    ("requires-python", "agentdojo/pyproject.toml", 'requires-python = "==3.12.*"',
     'requires-python = ">=3.12"',
     "requires-python: >=3.12 is declared, the lock records ==3.12.*"),
    ("source-editable", "agentdojo/pyproject.toml", 'path = "worker", editable = false',
     'path = "worker", editable = true',
     "dependencies: agentprov-worker-agentdojo (editable {B}/agentdojo/worker) is declared, "
     "the lock records agentprov-worker-agentdojo (directory {B}/agentdojo/worker)"),
    ("exclude-newer", "agentdojo/pyproject.toml", 'exclude-newer = "2026-10-07T00:00:00Z"',
     'exclude-newer = "2026-09-01T00:00:00Z"',
     "exclude-newer: 2026-09-01T00:00:00Z is declared (the build passes it to uv), the lock "
     "records 2026-10-07T00:00:00Z"),
    ("path-dependency-requirement", "agentdojo/worker/pyproject.toml", WORKER_DEPS,
     'dependencies = ["agentprov-dojo", "msgspec>=0.18"]',
     "{B}/agentdojo/worker/pyproject.toml: dependencies: msgspec>=0.18 is declared, the lock "
     "does not record it"),
    # backends/dojo: the path dependency of the worker package
    ("path-dependency-of-a-path-dependency", "dojo/pyproject.toml",
     "dependencies = []", 'dependencies = ["msgspec>=0.18"]',
     "{B}/dojo/pyproject.toml: dependencies: msgspec>=0.18 is declared, the lock does "
     "not record it"),
]

#: Edits uv accepts without re-locking (checked against uv by the slow test below)
SAME = [
    ("spacing", "agentdojo/pyproject.toml", DEP, '"agentdojo == 0.1.35",'),
    ("name-spelling", "agentdojo/pyproject.toml", DEP, '"AgentDojo==0.1.35",'),
    ("editable-unsaid", "agentdojo/pyproject.toml", 'path = "worker", editable = false',
     'path = "worker"'),
    ("path-specifier", "agentdojo/pyproject.toml", '"agentprov-worker-agentdojo",',
     '"agentprov-worker-agentdojo>=0.1",'),
    ("comment", "agentdojo/pyproject.toml", "[tool.uv]", "# a comment\n[tool.uv]"),
    ("later-exclude-newer", "agentdojo/pyproject.toml", 'exclude-newer = "2026-10-07T00:00:00Z"',
     'exclude-newer = "2026-11-01T00:00:00Z"'),
    ("path-dependency-description", "dojo/pyproject.toml", 'description = "',
     'description = "(edited) '),
]


def copy_of_backends(tmp_path: Path, file: str, old: str, new: str) -> Path:
    backends = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", backends, symlinks=True)
    shutil.copytree(ROOT / "packages", tmp_path / "packages", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    f = backends / file
    text = f.read_text(encoding="utf-8")
    assert text.count(old) == 1, (file, old)
    f.write_text(text.replace(old, new), encoding="utf-8")
    return backends


def test_the_committed_lock_matches_its_project():
    assert differences(ROOT / "backends" / "agentdojo") == []


@pytest.mark.parametrize(("edit", "file", "old", "new", "says"), CHANGES,
                         ids=[c[0] for c in CHANGES])
def test_each_change_a_relock_would_record_is_named(tmp_path, edit, file, old, new, says):
    backends = copy_of_backends(tmp_path, file, old, new)
    diffs = differences(backends / "agentdojo")
    assert diffs == says.replace("{B}", str(backends.resolve())).replace(
        "{P}", str(backends.resolve().parent / "packages")).split("\n"), diffs


@pytest.mark.parametrize(("edit", "file", "old", "new"), SAME, ids=[c[0] for c in SAME])
def test_edits_uv_accepts_are_not_refused(tmp_path, edit, file, old, new):
    backends = copy_of_backends(tmp_path, file, old, new)
    assert differences(backends / "agentdojo") == []


def test_markers_are_compared_by_meaning():
    # uv writes python_version as python_full_version and reorders clauses
    assert same_marker("python_version > '3.11'", "python_full_version >= '3.12'")
    assert same_marker("python_version == '3.12' and sys_platform == 'linux'",
                       "python_full_version == '3.12.*' and sys_platform == 'linux'")
    assert same_marker("sys_platform == 'linux' and os_name == 'posix'",
                       "os_name == 'posix' and sys_platform == 'linux'")
    assert same_marker("(sys_platform == 'linux') and extra == 'fast'",
                       "sys_platform == 'linux' and extra == 'fast'")
    assert not same_marker("python_version >= '3.12'", "python_full_version >= '3.12.1'")
    assert not same_marker("sys_platform == 'linux'", None)
    assert not same_marker("sys_platform == 'linux'", "sys_platform == 'darwin'")
    assert not same_marker("extra == 'a'", "extra == 'b'")


@pytest.mark.slow
@pytest.mark.parametrize(("edit", "file", "old", "new", "mismatch"),
                         [(*c[:4], True) for c in CHANGES] + [(*c, False) for c in SAME],
                         ids=[c[0] for c in CHANGES + SAME])
def test_uv_agrees_on_every_edit(tmp_path, edit, file, old, new, mismatch):
    """``uv lock --check`` (as the build runs uv: ``--no-config`` and the project's
    ``--exclude-newer``) reaches the same verdict. uv resolves to decide, so this needs the
    changed packages in its cache or PyPI: it asks offline first, then online."""
    import tomllib

    from agentprov_core.backend.build import uv_binary
    from agentprov_core.backend.interpreters import find_python312

    backends = copy_of_backends(tmp_path, file, old, new)
    project = backends / "agentdojo"
    assert bool(differences(project)) is mismatch
    tool = tomllib.loads((project / "pyproject.toml").read_text())["tool"]["uv"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k == "UV_CACHE_DIR"}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    argv = [uv_binary(), "lock", "--check", "--no-config", "--project", str(project),
            "--python", find_python312(), "--exclude-newer", tool["exclude-newer"]]
    p = subprocess.run([*argv, "--offline"], capture_output=True, text=True, env=env,
                       timeout=300)
    if p.returncode != 0 and "needs to be updated" not in p.stderr:
        p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0 and "needs to be updated" not in p.stderr:
        pytest.skip(f"uv could not decide without PyPI: {p.stderr.strip()[-300:]}")
    assert (p.returncode != 0) is mismatch, p.stderr


def test_the_lock_as_the_checks_read_it_is_the_whole_lock_where_they_read_it():
    """read_lock leaves out what no check reads (registry packages' wheels, dependencies);
    everything a check does read is what parsing the whole file gives."""
    import tomllib

    from agentprov_core.backend.lockcheck import read_lock

    locks = sorted((ROOT / "backends").glob("*/uv.lock"))
    assert locks, "the committed backend projects' locks"
    for lock in locks:
        text = lock.read_text(encoding="utf-8")
        whole, read = tomllib.loads(text), read_lock(text)
        assert {k: v for k, v in whole.items() if k != "package"} == \
            {k: v for k, v in read.items() if k != "package"}, lock
        assert [(p["name"], p.get("version"), p["source"]) for p in whole["package"]] == \
            [(p["name"], p.get("version"), p["source"]) for p in read["package"]], lock
        paths = [p for p in whole["package"]
                 if set(p["source"]) & {"directory", "editable", "virtual", "path"}]
        assert paths and paths == [p for p in read["package"]
                                   if set(p["source"]) & {"directory", "editable", "virtual",
                                                          "path"}], lock
    with pytest.raises(tomllib.TOMLDecodeError):  # a damaged lock is refused as before
        read_lock('version = 1\nrequires-python = ">=3.12\n')
