"""``agentprov plugin new NAME``: a new source plugin written from the worked example's
template, which passes the contract suite as it is written.

The template is the example with its names as placeholders: rendered with the example's
names it is the example, file for file and byte for byte. A skeleton is generated into a
temporary directory by the real CLI and installed as ``tests/test_contract_sides.py``
installs its plugins (its package and a ``.dist-info`` on ``PYTHONPATH``); the contract
suite runs over it in a subprocess, its worker side (slow) over the backend environment
built from it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, child_env
from test_contract_sides import outcome, run_contract

EXAMPLE = ROOT / "examples" / "agentprov-example-source"


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp / "home").mkdir(exist_ok=True)
    env = child_env() | {"AGENTPROV_HOME": str(tmp / "home")}
    return subprocess.run([sys.executable, "-m", "agentprov_core", "--error-format", "json",
                           *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def generated(tmp: Path, name: str = "mailbench") -> Path:
    """``agentprov plugin new NAME`` run in ``tmp``, its package installed in ``tmp/site``."""
    done = _cli(tmp, "plugin", "new", name)
    assert done.returncode == 0, done.stderr
    out = tmp / f"agentprov-{name}"
    assert done.stdout.startswith(f"plugin {name}: 11 files written to agentprov-{name}\n")
    site = tmp / "site"
    shutil.copytree(out / "src" / f"agentprov_{name}", site / f"agentprov_{name}")
    info = site / f"agentprov_{name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: agentprov-{name}\n"
                                   "Version: 0.1.0\n")
    assert (f'[project.entry-points.agentprov]\n{name} = "agentprov_{name}.plugin"\n'
            in (out / "pyproject.toml").read_text())
    (info / "entry_points.txt").write_text(f"[agentprov]\n{name} = agentprov_{name}.plugin\n")
    return site


def test_the_template_is_the_worked_example() -> None:
    """Every file but the README, which says what a new plugin is and what to do next."""
    from agentprov_core.cli.plugin_cmd import render

    files = render("examplebench", "agentprov-example-source")
    tracked = subprocess.run(["git", "ls-files", "."], cwd=EXAMPLE, capture_output=True,
                             text=True, check=True).stdout.split()
    assert sorted(files) == sorted(tracked)
    assert files.pop("README.md").startswith(
        "# agentprov-example-source\n\nA source plugin for agentprov, written by "
        "`agentprov plugin new examplebench`")
    for rel, text in files.items():
        assert text == (EXAMPLE / rel).read_text(encoding="utf-8"), (
            f"agentprov_core/templates/source_plugin differs from the example's {rel}")


def test_a_new_plugin_is_named_for_its_source(tmp_path: Path) -> None:
    from agentprov_core.cli.plugin_cmd import render

    files = render("mailbench")
    text = "\n".join(files.values())
    assert "examplebench" not in text and "example_source" not in text
    assert 'mailbench = "agentprov_mailbench.plugin"' in files["pyproject.toml"]
    assert json.loads(files["src/agentprov_mailbench/catalogue.json"])["source"] == "mailbench"
    assert "src/agentprov_mailbench/backend/worker/src/mailbench_worker/__init__.py" in files


@pytest.mark.parametrize(("name", "code"), [("My-Bench", "cli.usage.plugin_name"),
                                            ("x", "cli.usage.plugin_name"),
                                            ("agentdojo", "cli.usage.plugin_name")])
def test_a_name_that_cannot_be_a_source_is_refused(tmp_path: Path, name: str,
                                                   code: str) -> None:
    done = _cli(tmp_path, "plugin", "new", name)
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert (done.returncode, error["error"], error["exit"]) == (2, code, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert list((tmp_path / "home").iterdir()) == []


def test_an_existing_directory_is_never_written_to(tmp_path: Path) -> None:
    (tmp_path / "agentprov-mailbench").mkdir()
    (tmp_path / "agentprov-mailbench" / "mine.txt").write_text("kept")
    done = _cli(tmp_path, "plugin", "new", "mailbench")
    error = json.loads(done.stderr.strip().splitlines()[-1])
    assert (done.returncode, error["error"]) == (2, "cli.usage.plugin_out_exists")
    assert [p.name for p in (tmp_path / "agentprov-mailbench").iterdir()] == ["mine.txt"]


def test_a_new_plugin_passes_the_contract_before_it_is_built(tmp_path: Path) -> None:
    site = generated(tmp_path)
    done = run_contract(site, tmp_path, source="mailbench")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("test_metadata", "test_catalogue", "test_catalogue_command",
                  "test_expansion_order", "test_refused_attacks_exit_5",
                  "test_backend_project", "test_backend_project_lock"):
        assert outcome(done, check, "mailbench") == "PASSED", (check, done.stdout)
    assert outcome(done, "test_worker_serves_the_source", "mailbench") == "SKIPPED"


@pytest.mark.slow
def test_a_new_plugin_builds_and_passes_the_whole_contract(tmp_path: Path) -> None:
    site = generated(tmp_path)
    env = child_env() | {"AGENTPROV_HOME": str(tmp_path / "home"), "PYTHONPATH": str(site)}
    built = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build",
                            "mailbench", "--allow-network"], env=env, capture_output=True,
                           text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert built.returncode == 0, built.stdout + built.stderr
    done = run_contract(site, tmp_path, source="mailbench", home=tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("test_worker_serves_the_source", "test_worker_serves_the_committed_catalogue",
                  "test_mapper_maps_a_scripted_session"):
        assert outcome(done, check, "mailbench") == "PASSED", (check, done.stdout)
