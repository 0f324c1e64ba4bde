"""Where the registry lives for a normal install: agentprov built as a wheel (with uv) and
installed into a fresh virtual environment reads the registry packaged in site-packages
(``agentprov_core/_registry``) and never edits it: ``agentprov registry …`` writes the
overlay in ``$AGENTPROV_HOME/registry/``, which takes effect at once and survives a
reinstall."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, snapshot
from conftest import venv_env as _env


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A virtual environment holding agentprov, agentprov-capture and agentprov-agentdojo
    as wheels (no checkout on the path): its python and the wheels."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build and install the wheels")
    base = tmp_path_factory.mktemp("wheel-install")
    dist = base / "dist"
    for project in (ROOT, ROOT / "packages" / "capture", ROOT / "plugins" / "agentprov-agentdojo"):
        done = subprocess.run([uv, "build", "--quiet", "--wheel", "--out-dir", str(dist),
                               str(project)], env=_env(), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == [
        "agentprov", "agentprov_agentdojo", "agentprov_capture"]
    venv = base / "venv"
    python = venv / "bin" / "python"
    for cmd in ([uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "--quiet", "--python", str(python), *map(str, wheels)]):
        done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return python, wheels


def test_a_wheel_install_toggles_in_the_overlay_not_in_site_packages(wheel_install, tmp_path):
    python, wheels = wheel_install
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    cwd.mkdir()

    def agentprov(*args: str):
        done = subprocess.run([str(python), "-m", "agentprov_core", *map(str, args)],
                              cwd=cwd, env=_env(AGENTPROV_HOME=str(home),
                                                AGENTPROV_ERROR_FORMAT="json"),
                              capture_output=True, text=True, timeout=120)
        return done

    found = subprocess.run([str(python), "-c", "import agentprov_core, pathlib; print("
                            "pathlib.Path(agentprov_core.__file__).parent)"],
                           capture_output=True, text=True, env=_env(), cwd=cwd)
    packaged = Path(found.stdout.strip()) / "_registry"
    assert packaged.is_relative_to(python.parent.parent) and ROOT not in packaged.parents
    before = snapshot(packaged)
    # every file of the checkout's registry is in the wheel, the presets' folder included
    shipped = sorted(str(f.relative_to(ROOT / "registry")) for f in (ROOT / "registry").rglob("*")
                     if f.is_file())
    assert sorted(before) == shipped
    assert {"defences.toml", "endpoints.toml", "parts.toml", "prices.toml", "priors.json",
            "presets/m5ultra.toml"} <= set(shipped)
    # the packaged copy is the checkout's registry, links resolved
    assert before["defences.toml"] == (ROOT / "registry" / "defences.toml").resolve().read_bytes()

    r = agentprov("registry", "defences", "disable", "melon")
    assert r.returncode == 0, r.stderr
    overlay = home / "registry" / "defences.toml"
    assert r.stdout.splitlines()[0] == (f"defence melon: disabled in {overlay} "
                                        f"(over {packaged / 'defences.toml'})")
    r = agentprov("registry", "parts", "set-status", "agentdojo", "planned")
    assert r.returncode == 0, r.stderr
    assert snapshot(packaged) == before
    assert sorted(snapshot(home)) == ["registry/defences.toml", "registry/parts.toml"]

    def toggled() -> tuple[bool, str]:
        d = agentprov("registry", "defences", "list", "--format", "json")
        p = agentprov("registry", "parts", "list", "--format", "json")
        assert d.returncode == 0 and p.returncode == 0, d.stderr + p.stderr
        return ({e["name"]: e["enabled"] for e in json.loads(d.stdout)}["melon"],
                {e["name"]: e["live_status"] for e in json.loads(p.stdout)}["agentdojo"])

    assert toggled() == (False, "planned")
    # the toggle takes effect: the run is refused before anything starts
    run = agentprov("run", "agentdojo", "--dry-run", "--suite", "banking", "--defence", "melon",
                    "--corpus", tmp_path / "c", "--campaign", "c", "--llm-script",
                    ROOT / "examples" / "scripts" / "live-demo.json")
    err = json.loads(run.stderr.strip().splitlines()[-1])
    assert (run.returncode, err["error"]) == (5, "run.unsupported.defence_disabled")
    # a reinstall replaces the packaged copy and keeps the toggle
    uv = shutil.which("uv")
    done = subprocess.run([uv, "pip", "install", "--quiet", "--reinstall", "--no-deps",
                           "--python", str(python), str(wheels[0])], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert toggled() == (False, "planned") and snapshot(packaged) == before
    # toggled back, the overlay is gone and the packaged values hold
    assert agentprov("registry", "defences", "enable", "melon").returncode == 0
    assert agentprov("registry", "parts", "set-status", "agentdojo", "partial").returncode == 0
    assert snapshot(home) == {} and toggled() == (True, "partial")
    assert snapshot(packaged) == before
