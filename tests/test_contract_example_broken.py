"""The contract suite over broken copies of the worked example (examples/agentprov-example-
source): an entry point not named as its source, a committed catalogue that is not the one
its worker serves, a mapper that raises on a well-formed session. Each copy is written to a
directory on ``PYTHONPATH`` with its ``.dist-info``, as ``tests/test_contract_sides.py``
installs its plugins, and the suite runs in a subprocess, as a plugin author runs it.

The worker side needs the example's backend environment: it is built once for this module
(slow) in a home of its own, from the unbroken copy; a broken copy keeps the same backend
project, so the same environment serves it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, child_env
from test_contract_sides import failed_with, outcome, run_contract

EXAMPLE_PKG = ROOT / "examples" / "agentprov-example-source" / "src" / "agentprov_example_source"

#: a mapper that raises on every session that completes, as a mapper with a bug does
RAISING_MAPPER = '''
from agentprov_core.api import DojoCaptureMapper


class CaptureMapper(DojoCaptureMapper):
    name = "examplebench.capture"
    version = "0.2.0"
    source = "examplebench"

    def live_vs_native(self, view, records, native, ev):
        return {}["native_log"]


MAPPER = CaptureMapper()
'''


def example_copy(site: Path, *, entry: str = "examplebench") -> Path:
    """The example's package under ``site``, with the ``.dist-info`` an install leaves,
    registered under the entry-point name ``entry``."""
    site.mkdir(parents=True, exist_ok=True)
    pkg = shutil.copytree(EXAMPLE_PKG, site / EXAMPLE_PKG.name,
                          ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    info = site / "agentprov_example_source-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentprov-example-source\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[agentprov]\n{entry} = agentprov_example_source.plugin\n")
    return pkg


def test_an_entry_point_not_named_as_its_source_fails(tmp_path: Path) -> None:
    """Selected by its source's name or by its entry point's, the copy fails, with the fix."""
    example_copy(tmp_path / "site", entry="examplebench-plugin")
    fix = ("source 'examplebench' comes from the entry point 'examplebench-plugin': the "
           "entry-point name must be the source's name (name the entry point examplebench in "
           "the distribution's [project.entry-points.agentprov] table)")
    for name in ("examplebench", "examplebench-plugin"):
        done = run_contract(tmp_path / "site", tmp_path, source=name)
        assert done.returncode == 1, done.stdout + done.stderr
        assert outcome(done, "test_source_is_installed", name) == "FAILED", done.stdout
        assert (f"source {name!r}: its plugin agentprov-example-source 0.1.0 failed to load: "
                + fix) in done.stdout, done.stdout


# ------------------------------------------------------------------- the worker side
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home holding the example's backend environment, built from an unbroken copy."""
    base = tmp_path_factory.mktemp("example-env")
    example_copy(base / "site")
    env = child_env() | {"AGENTPROV_HOME": str(base / "home"), "PYTHONPATH": str(base / "site")}
    done = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build",
                           "examplebench", "--allow-network"], env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return base / "home"


def _worker_side(site: Path, tmp_path: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return run_contract(site, tmp_path, "worker", "mapper", source="examplebench", home=home)


@pytest.mark.slow
def test_the_example_passes_the_worker_side(built: Path, tmp_path: Path) -> None:
    """The unbroken copy: its worker serves the committed catalogue, and its mapper maps a
    scripted session; nothing is written to the home but what the build wrote."""
    example_copy(tmp_path / "site")
    before = sorted(p.relative_to(built) for p in built.rglob("*"))
    done = _worker_side(tmp_path / "site", tmp_path, built)
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("test_worker_serves_the_source", "test_worker_serves_the_committed_catalogue",
                  "test_mapper_maps_a_scripted_session"):
        assert outcome(done, check, "examplebench") == "PASSED", (check, done.stdout)
    assert sorted(p.relative_to(built) for p in built.rglob("*")) == before


@pytest.mark.slow
def test_a_committed_catalogue_that_is_not_the_worker_s_fails(built: Path,
                                                             tmp_path: Path) -> None:
    pkg = example_copy(tmp_path / "site")
    doc = json.loads((pkg / "catalogue.json").read_text())
    doc["suites"][0]["user_tasks"].remove("user_task_2")
    (pkg / "catalogue.json").write_text(json.dumps(doc, indent=2))
    done = _worker_side(tmp_path / "site", tmp_path, built)
    failed_with(done, "test_worker_serves_the_committed_catalogue", (
        "source 'examplebench': the committed catalogue is not the one the worker of "
        "examplebench-", " serves, first at $.suites[0].user_tasks[2]: committed (absent), "
        'served "user_task_2" (commit what `agentprov backends catalogue examplebench` '
        "writes)"), source="examplebench")
    assert outcome(done, "test_worker_serves_the_source", "examplebench") == "PASSED"


@pytest.mark.slow
def test_a_mapper_that_raises_on_a_scripted_session_fails(built: Path, tmp_path: Path) -> None:
    pkg = example_copy(tmp_path / "site")
    (pkg / "mapper.py").write_text(RAISING_MAPPER)
    done = _worker_side(tmp_path / "site", tmp_path, built)
    failed_with(done, "test_mapper_maps_a_scripted_session", (
        "source 'examplebench': its mapper examplebench.capture raised KeyError: "
        "'native_log' on session ", ", a well-formed session of a scripted run of "
        "mail/user_task_0"), source="examplebench")
    assert outcome(done, "test_worker_serves_the_committed_catalogue", "examplebench") == \
        "PASSED"


def test_the_first_difference_is_named_by_its_json_path() -> None:
    from agentprov_core.testing.contract_worker import first_difference

    doc = {"suites": [{"name": "mail", "user_tasks": ["user_task_0", "user_task_1"]}],
           "attacks": [{"name": "a", "dos": False}]}
    same = json.loads(json.dumps(doc))
    assert first_difference(doc, same) is None
    same["suites"][0]["user_tasks"][1] = "user_task_2"
    same["attacks"][0]["dos"] = True
    assert first_difference(doc, same) == (
        '$.suites[0].user_tasks[1]: committed "user_task_1", served "user_task_2"')
    assert first_difference({"a": 1}, {"a": 1, "b": [2]}) == "$.b: committed (absent), served [2]"
    assert first_difference({"a": 1}, {"a": True}) == "$.a: committed 1, served true"
    assert first_difference({"a": [1, 2]}, {"a": [1]}) == "$.a[1]: committed 2, served (absent)"
