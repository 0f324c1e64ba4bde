"""The contract suite (agentprov_core.testing.contract) over deliberately broken plugins: it
fails, and the failure names the broken field and the distribution; over a good plugin it
passes.

Each broken plugin is a real distribution found through its entry point: a package and its
``.dist-info`` (METADATA, entry_points.txt) written to a directory on ``PYTHONPATH``, as an
installed wheel leaves them, with its backend project as package data. The suite runs in a
subprocess (pytest), as a plugin author runs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, child_env

CONTRACT = ROOT / "agentprov_core" / "testing" / "contract.py"

CATALOGUE = {
    "format": "agentprov-catalogue/0.1", "source": "mybench", "backend": "mybench",
    "provenance": {"kind": "declared", "note": "written by hand for the contract's tests"},
    "benchmark_versions": ["v1"], "default_benchmark_version": "v1",
    "suites": [{"name": "mail", "benchmark_version": "v1",
                "user_tasks": ["user_task_0", "user_task_1", "user_task_2"],
                "injection_tasks": ["injection_task_0", "injection_task_1"]}],
    "attacks": [{"name": "important_instructions"}],
}

PYPROJECT = """\
[project]
name = "mybench-backend"
version = "0.1.0"
requires-python = "==3.12.*"
dependencies = ["mybench-worker"]

[tool.uv]
package = false

[tool.uv.sources]
mybench-worker = { path = "worker" }
"""

LOCK = """\
version = 1
revision = 3
requires-python = "==3.12.*"

[[package]]
name = "mybench-backend"
version = "0.1.0"
source = { virtual = "." }
dependencies = [
    { name = "mybench-worker" },
]

[package.metadata]
requires-dist = [{ name = "mybench-worker", directory = "worker" }]

[[package]]
name = "mybench-worker"
version = "0.1.0"
source = { directory = "worker" }
"""

WORKER_PYPROJECT = """\
[project]
name = "mybench-worker"
version = "0.1.0"
requires-python = ">=3.12"
dependencies = []
"""

#: the plugin module; {meta}, {backends} and {catalogue} are the variant's
PLUGIN = """\
from pathlib import Path
from types import SimpleNamespace

import msgspec

from agentprov_core.backendproject import BackendProject
from agentprov_core.catalogue import Catalogue, Provenance, Suite
from agentprov_core.plugins import hookimpl
from agentprov_core.source import SourceMeta, SuiteSource

META = dict(name="mybench", label="mybench · test", summary="the contract's test source",
            kind="suites", backend="mybench", live_status="planned")


class MyBench(SuiteSource):
    meta = {meta}
    catalogue_file = Path(__file__).with_name("catalogue.json")
{catalogue}

@hookimpl
def agentprov_sources():
    return [MyBench()]


@hookimpl
def agentprov_backends():
    return {backends}
"""

GOOD_META = "SourceMeta(**META)"
GOOD_BACKENDS = ('[BackendProject(name="mybench", package="mybench_plugin", path="backend", '
                 'worker="mybench-worker")]')


def write_distribution(site: Path, *, dist: str = "agentprov-mybench", version: str = "0.1.0",
                       package: str = "mybench_plugin", entry: str = "mybench",
                       meta: str = GOOD_META, backends: str = GOOD_BACKENDS,
                       catalogue: str = "", pyproject: str = PYPROJECT,
                       lock: str | None = LOCK) -> Path:
    """A source plugin distribution as an install leaves it, under ``site``."""
    pkg = site / package
    (pkg / "backend" / "worker").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(PLUGIN.format(
        meta=meta, backends=backends,
        catalogue=textwrap.indent(textwrap.dedent(catalogue), "    ")))
    (pkg / "catalogue.json").write_text(json.dumps(CATALOGUE, indent=1))
    (pkg / "backend" / "pyproject.toml").write_text(pyproject)
    if lock is not None:
        (pkg / "backend" / "uv.lock").write_text(lock)
    (pkg / "backend" / "worker" / "pyproject.toml").write_text(WORKER_PYPROJECT)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[agentprov]\n{entry} = {package}.plugin\n")
    return site


def run_contract(site: Path, tmp_path: Path, *select: str, source: str = "mybench",
                 home: Path | None = None,
                 extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = child_env() | (extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    env["AGENTPROV_CONTRACT_SOURCE"] = source
    env["AGENTPROV_HOME"] = str(home or tmp_path / "home")
    args = ["-k", " or ".join(select)] if select else []
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rA",
         "--tb=short", str(CONTRACT), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def outcome(done: subprocess.CompletedProcess[str], check: str, source: str = "mybench") -> str:
    """The check's outcome, as pytest's verbose line for it says."""
    found = re.search(rf"^\S*::{check}\[{source}\] (PASSED|FAILED|SKIPPED|ERROR)", done.stdout,
                      re.M)
    return found.group(1) if found else "absent"


def failed_with(done: subprocess.CompletedProcess[str], check: str,
                message: str | tuple[str, ...], source: str = "mybench") -> None:
    """``check`` failed, its failure says ``message`` (each part, in order, on one line),
    and no raw error was the cause."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert outcome(done, check, source) == "FAILED", done.stdout
    parts = (message,) if isinstance(message, str) else message
    assert re.search(".*".join(map(re.escape, parts)), done.stdout), done.stdout
    for raw in ("TypeError", "AttributeError", "KeyError", "msgspec.ValidationError:"):
        assert not re.search(rf"^E\s+{raw}", done.stdout, re.M), done.stdout


@pytest.fixture
def site(tmp_path: Path) -> Path:
    d = tmp_path / "site"
    d.mkdir()
    return d


# --------------------------------------------------------------------- a good plugin
def test_a_good_plugin_passes_every_side(site: Path, tmp_path: Path) -> None:
    done = run_contract(write_distribution(site), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("test_metadata", "test_catalogue", "test_catalogue_command",
                  "test_expansion_order", "test_backend_project", "test_backend_project_lock"):
        assert outcome(done, check) == "PASSED", (check, done.stdout)
    # no environment is built in the empty home: the worker side says how to build one
    assert outcome(done, "test_worker_serves_the_source") == "SKIPPED"
    assert re.search(r"backend environment mybench-[0-9a-f]{8} is not built in "
                     r"\$AGENTPROV_HOME \(.*\): build it with `agentprov backends build "
                     r"mybench`", done.stdout), done.stdout


def test_the_builtin_agentdojo_plugin_passes_the_backend_side(tmp_path: Path) -> None:
    done = run_contract(tmp_path, tmp_path, "backend", source="agentdojo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, "test_backend_project", "agentdojo") == "PASSED", done.stdout
    assert outcome(done, "test_backend_project_lock", "agentdojo") == "PASSED", done.stdout


def test_the_builtin_autodojo_plugin_passes_the_backend_side(tmp_path: Path) -> None:
    done = run_contract(tmp_path, tmp_path, "backend", source="autodojo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, "test_backend_project", "autodojo") == "PASSED", done.stdout
    assert outcome(done, "test_backend_project_lock", "autodojo") == "PASSED", done.stdout


def test_a_slot_skips_the_file_checks_with_its_why(tmp_path: Path, slotted: Path) -> None:
    from conftest import SLOT_SOURCE, SLOT_WHY

    done = run_contract(tmp_path, tmp_path, "backend", source=SLOT_SOURCE,
                        extra_env={"AGENTPROV_BACKENDS": str(slotted)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, "test_backend_project", SLOT_SOURCE) == "PASSED", done.stdout
    assert outcome(done, "test_backend_project_lock", SLOT_SOURCE) == "SKIPPED", done.stdout
    assert "is a slot (" in done.stdout and f"slot.toml): {SLOT_WHY}" in done.stdout


# ----------------------------------------------------------- the backend project's fields
WHAT = "backend 'mybench' (agentprov-mybench 0.1.0)"


@pytest.mark.parametrize(("backends", "message"), [
    ('[BackendProject(name="mybench", package="mybench_plugin", path="nowhere")]',
     f"BackendProject.path of {WHAT}: 'nowhere' is not a directory inside package "
     "mybench_plugin"),
    ('[BackendProject(name="mybench", package="no_such_package_x", path="backend")]',
     f"BackendProject.package of {WHAT}: 'no_such_package_x' cannot be imported"),
    ('[BackendProject(name="mybench", package="mybench_plugin", path=7)]',
     f"BackendProject.path of {WHAT}: 7 is of type int, not a string"),
    ('[BackendProject(name="mybench", package="mybench_plugin", path="backend", '
     'pinned_commit=b"aa45")]',
     f"BackendProject.pinned_commit of {WHAT}: b'aa45' is of type bytes, not a string or None"),
    ('[BackendProject(name=3, package="mybench_plugin", path="backend")]',
     "BackendProject.name of a project of agentprov-mybench 0.1.0: 3 is of type int, not a "
     "string"),
    ('[BackendProject(name="my-bench", package="mybench_plugin", path="backend")]',
     "SourceMeta.backend 'mybench': no distribution contributes a backend project of that "
     "name (agentprov_backends hook); agentprov-mybench 0.1.0 contributes 'my-bench'"),
    ('[dict(name="mybench", package="mybench_plugin", path="backend")]',
     "SourceMeta.backend 'mybench': no distribution contributes a backend project of that "
     "name (agentprov_backends hook); agentprov-mybench 0.1.0: agentprov_backends: returned "
     "dict, not a BackendProject"),
])
def test_a_malformed_backend_project_names_its_field(site: Path, tmp_path: Path, backends: str,
                                                    message: str) -> None:
    done = run_contract(write_distribution(site, backends=backends), tmp_path, "backend")
    failed_with(done, "test_backend_project", message)


def test_two_distributions_of_one_backend_are_a_conflict(site: Path, tmp_path: Path) -> None:
    write_distribution(site)
    # a second distribution contributes a project of the same name (and another source)
    write_distribution(site, dist="agentprov-mybench-fork", version="0.2.0",
                       package="mybench_fork", entry="mybenchfork",
                       meta='SourceMeta(**dict(META, name="mybenchfork"))',
                       backends='[BackendProject(name="mybench", package="mybench_fork", '
                                'path="backend")]')
    done = run_contract(site, tmp_path, "backend")
    failed_with(done, "test_backend_project",
                "backend 'mybench' is contributed by more than one distribution "
                "(agentprov-mybench 0.1.0, agentprov-mybench-fork 0.2.0)")


# ------------------------------------------------------------------- the project's files
@pytest.mark.parametrize(("change", "message"), [
    ({"lock": None},
     (f"{WHAT}: ", "/site/mybench_plugin/backend/ holds no uv.lock (run uv lock there; a "
      "project without one is named by BackendProject.pinned_commit)")),
    ({"pyproject": PYPROJECT.replace('["mybench-worker"]', '["mybench-worker", "requests>=2"]')},
     f"uv.lock of {WHAT} does not record what pyproject.toml declares (run uv lock): "),
    ({"lock": LOCK + '\n[[package]]\nname = "agentprov-backend"\nversion = "0.1.0"\n'
                     'source = { directory = "../../shared" }\n'},
     f"uv.lock of {WHAT} locks agentprov-backend, the worker host's own libraries"),
    ({"backends": '[BackendProject(name="mybench", package="mybench_plugin", path="backend", '
                  'worker="another-worker")]'},
     f"BackendProject.worker of {WHAT}: 'another-worker' is not a distribution "),
    ({"pyproject": "[project\n"},
     f"/pyproject.toml of {WHAT} is not TOML"),
])
def test_a_backend_project_s_files_are_checked(site: Path, tmp_path: Path, change: dict,
                                              message: str | tuple[str, ...]) -> None:
    done = run_contract(write_distribution(site, **change), tmp_path, "backend")
    assert outcome(done, "test_backend_project") == "PASSED", done.stdout
    failed_with(done, "test_backend_project_lock", message)


def test_a_git_pinned_project_without_a_lock_is_skipped(site: Path, tmp_path: Path) -> None:
    backends = ('[BackendProject(name="mybench", package="mybench_plugin", path="backend", '
                'pinned_commit="aa458794")]')
    done = run_contract(write_distribution(site, backends=backends, lock=None), tmp_path,
                        "backend")
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, "test_backend_project_lock") == "SKIPPED", done.stdout
    assert "is pinned to commit aa458794 and not locked yet" in done.stdout


# ------------------------------------------------------------------------ the T0 side
@pytest.mark.parametrize(("change", "check", "message"), [
    ({"meta": "SourceMeta(**dict(META, label=3))"}, "test_metadata",
     "source 'mybench': meta: Expected `str`, got `int` - at `$.label`"),
    ({"meta": "SimpleNamespace(**META)"}, "test_metadata",
     "source 'mybench': meta is a SimpleNamespace, not a agentprov_core.source.SourceMeta"),
    ({"catalogue": "def catalogue(self):\n    return {'format': 'agentprov-catalogue/0.1'}\n"},
     "test_catalogue",
     "source 'mybench': catalogue() is a dict, not a agentprov_core.catalogue.Catalogue"),
    ({"catalogue": "def catalogue(self):\n"
                   "    cat = SuiteSource.catalogue(self)\n"
                   "    bad = msgspec.structs.replace(cat.suites[0], name=3)\n"
                   "    return msgspec.structs.replace(cat, suites=[bad])\n"},
     "test_catalogue",
     "source 'mybench': catalogue(): Expected `str`, got `int` - at `$.suites[0].name`"),
    ({"catalogue": "def catalogue(self):\n    raise TypeError('the plugin has a bug')\n"},
     "test_catalogue", "source 'mybench': catalogue() raised TypeError: the plugin has a bug"),
    ({"catalogue": "def expand(self, doc, cat, ctx):\n    return [{'kind': 'user_task'}]\n"},
     "test_expansion_order", "source 'mybench': expand()[0] is a dict, not a "
     "agentprov_core.plan.plans.Cell"),
])
def test_a_malformed_source_names_its_field(site: Path, tmp_path: Path, change: dict,
                                           check: str, message: str) -> None:
    done = run_contract(write_distribution(site, **change), tmp_path, check)
    failed_with(done, check, message)


def test_a_meta_that_is_no_struct_fails_only_its_plugin(site: Path, tmp_path: Path) -> None:
    """A source whose meta has no name (a dict) is the plugin's failure to load, reported by
    name: the suite still collects and runs."""
    done = run_contract(write_distribution(site, meta="dict(META)"), tmp_path)
    failed_with(done, "test_source_is_installed",
                "its plugin agentprov-mybench 0.1.0 failed to load: agentprov_sources: returned "
                "a MyBench whose meta.name is not a string")


def test_the_worker_catalogue_names_the_bad_field_by_its_json_path() -> None:
    """The conversion of the catalogue a worker serves keeps msgspec's JSON path, prefixed
    with the source and who served it (a real worker serving a bad one needs a broken
    environment: the slow tests below run the real one)."""
    from agentprov_core.testing import contract_worker as contract

    doc = json.loads(json.dumps(CATALOGUE))
    doc["suites"][0]["name"] = 3
    with pytest.raises(pytest.fail.Exception) as failed:
        contract._worker_catalogue("mybench", doc, "mybench-0123abcd")
    assert str(failed.value) == ("source 'mybench': catalogue served by the worker of "
                                 "mybench-0123abcd: Expected `str`, got `int` - at "
                                 "`$.suites[0].name`")
    with pytest.raises(AssertionError, match=r"\$\.source is 'other', not 'mybench'"):
        contract._worker_catalogue("mybench", dict(CATALOGUE, source="other"), "mybench-0123abcd")


# ---------------------------------------------------------------------- the worker side
@pytest.mark.slow
def test_the_worker_side_over_the_built_agentdojo_environment(agentdojo_env, site: Path,
                                                            tmp_path: Path) -> None:
    """Over the real built environment: agentdojo's worker serves it from its worker package,
    its catalogue converts, it takes a plan of each suite's first user task and rejects an
    unknown one; a source of that backend that no worker package serves fails, naming what
    the worker does serve."""
    done = run_contract(tmp_path, tmp_path, source="agentdojo", home=agentdojo_env.home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert outcome(done, "test_worker_serves_the_source", "agentdojo") == "PASSED", done.stdout

    # mybench names the agentdojo backend (contributed by agentprov-agentdojo) but no worker
    # package of that environment registers it
    cat = dict(CATALOGUE, backend="agentdojo")
    write_distribution(site, meta='SourceMeta(**dict(META, backend="agentdojo"))',
                       backends="[]")
    (site / "mybench_plugin" / "catalogue.json").write_text(json.dumps(cat))
    done = run_contract(site, tmp_path, "worker", home=agentdojo_env.home)
    failed_with(done, "test_worker_serves_the_source",
                f"source 'mybench': the worker of {agentdojo_env.env_id} does not serve it "
                "(its hello's sources: agentdojo): no worker package in the environment "
                "registers it (entry-point group agentprov.worker, name mybench)")
