"""What `agentprov backends build` hands to uv, and what it does not touch: the offline
default and `--allow-network`, the build's `UV_*` variables, `--env-file` (accepted, never
read by the AgentDojo build), and a re-lock, which is a new environment beside the old one.

The uv the build runs is a stand-in script that records its argv and environment and fails
(a real install is `tests/test_backends.py`'s, built once per session)."""

from __future__ import annotations

import json
import shutil
import stat
import sys
from pathlib import Path

import pytest
from conftest import ROOT, make_marker, snapshot

from agentprov_core.backend import build as backends
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError

LOCK8 = file_sha256(ROOT / "backends" / "agentdojo" / "uv.lock")[:8]
RECORDER = """#!{python}
import json, os, sys
with open({out!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "env": dict(os.environ)}}) + "\\n")
if sys.argv[1] == "venv":  # the environment's venv is made; what is installed in it fails
    sys.exit(0)
sys.stderr.write("error: the stand-in uv installs nothing\\n")
sys.exit(2)
"""


@pytest.fixture
def recording_uv(tmp_path, monkeypatch):
    """Make the build run a stand-in uv; returns the file its calls go to (a JSON line each,
    its argv and environment)."""
    out = tmp_path / "uv-call.json"
    uv = tmp_path / "uv"
    uv.write_text(RECORDER.format(python=sys.executable, out=str(out)))
    uv.chmod(uv.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(backends, "uv_binary", lambda: str(uv))
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    return out


@pytest.mark.req("R-6.3", "R-6.1", "R-4.2", "R-6.10")
@pytest.mark.parametrize("allow_network", [False, True])
def test_the_build_runs_uv_offline_with_its_own_uv_variables_only(recording_uv, monkeypatch,
                                                                  allow_network):
    monkeypatch.setenv("UV_INDEX_URL", "https://index.invalid/simple")
    monkeypatch.setenv("UV_OFFLINE", "0")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", "/somewhere/else")
    monkeypatch.setenv("UV_CACHE_DIR", "/the/uv/cache")
    bp = backends.plan_build("agentdojo", allow_network=allow_network)
    with pytest.raises(AgentprovError) as e:
        backends.build(bp, "/usr/bin/python3.12")
    assert (e.value.code, e.value.exit_code) == ("cli.environment.uv", 3)
    venv, call = [json.loads(x) for x in recording_uv.read_text().splitlines()]
    uv_vars = {k: v for k, v in call["env"].items() if k.startswith("UV_")}
    target = uv_vars.pop("UV_PROJECT_ENVIRONMENT")
    # the build goes into a temporary directory beside the environment's, renamed at the end,
    # first made a relocatable venv (its console scripts run after the rename)
    assert Path(target).parent == bp.env_dir.parent
    assert Path(target).name.startswith(f".{bp.env_id}.build-")
    assert venv["argv"] == ["venv", "--quiet", "--relocatable", "--no-config", "--python",
                            "/usr/bin/python3.12", target]
    assert uv_vars == {"UV_CACHE_DIR": "/the/uv/cache", "UV_PYTHON_DOWNLOADS": "never",
                       "UV_PYTHON": "/usr/bin/python3.12", "UV_NO_PROGRESS": "1"}
    argv = call["argv"]
    assert argv[:7] == ["sync", "--locked", "--no-config", "--no-dev", "--link-mode", "copy",
                        "--compile-bytecode"]
    assert ("--offline" in argv) is not allow_network
    assert argv[argv.index("--exclude-newer") + 1] == bp.exclude_newer
    assert argv[-2:] == ["--project", str(bp.project)]
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--no-build-package"] == bp.no_build
    assert "agentdojo" in bp.no_build and "agentprov-backend" not in bp.no_build
    # and nothing that looks like an environment is left behind
    assert [p.name for p in bp.env_dir.parent.iterdir()] == [f"{bp.env_id}.lock"]


@pytest.mark.req("R-4.2", "R-6.10")
def test_the_dry_run_says_whether_uv_may_download(cli, home):
    offline = cli("backends", "build", "agentdojo", "--dry-run").out.splitlines()
    online = cli("backends", "build", "agentdojo", "--dry-run", "--allow-network").out.splitlines()
    assert " --offline " in offline[2] and "--offline" not in online[2]
    assert offline[4] == "  network: none (uv --offline: the build uses the uv cache only)"
    assert online[4] == "  network: allowed (--allow-network: uv may download the locked wheels)"
    assert snapshot(home) == {}


@pytest.mark.req("R-6.13")
def test_the_dry_run_names_the_versions_the_environment_pins(cli, home):
    """The specification's table of environments names inspect-ai and inspect-evals; the
    dry run names them as the lock records them, before anything is built."""
    r = cli("backends", "build", "agentharm", "--dry-run")
    assert r.code == 0, r.err
    assert ("  pins: inspect-ai 0.3.263, inspect-evals 0.20.0, openai "
            in r.out), r.out
    dojo = cli("backends", "build", "agentdojo", "--dry-run").out
    assert "  pins: agentdojo 0.1.35 (the project's direct dependencies, as its uv.lock " \
        "records them)" in dojo.splitlines()
    assert snapshot(home) == {}


def test_env_file_is_accepted_and_never_read_by_the_agentdojo_build(cli, home, tmp_path):
    from tests.test_endpoints_consent import audited

    env_file = tmp_path / "build.env"
    env_file.write_text("OPENROUTER_API_KEY=sk-or-v1-BUILDENVSENTINEL\n")
    audit = tmp_path / "audit.json"
    p = audited(cli, audit, env_file, "backends", "build", "agentdojo", "--dry-run",
                "--env-file", env_file, env={"AGENTPROV_HOME": str(home)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"backend agentdojo: environment {home}/envs/agentdojo-{LOCK8}")
    assert json.loads(audit.read_text()) == []  # the file was never opened
    assert "BUILDENVSENTINEL" not in p.stdout + p.stderr
    r = cli("backends", "build", "agentdojo", "--dry-run", "--env-file", tmp_path / "none.env")
    assert (r.code, r.error["error"]) == (2, "cli.usage.env_file")
    assert snapshot(home) == {}


@pytest.mark.slow
@pytest.mark.req("R-6.13")
def test_env_file_is_not_read_by_a_build_of_the_real_environment(agentdojo_env, cli, tmp_path):
    from tests.test_endpoints_consent import audited

    env_file = tmp_path / "build.env"
    env_file.write_text("OPENROUTER_API_KEY=sk-or-v1-BUILDENVSENTINEL\n")
    audit = tmp_path / "audit.json"
    p = audited(cli, audit, env_file, "backends", "build", "agentdojo", "--env-file", env_file,
                env={"AGENTPROV_HOME": str(agentdojo_env.home)})
    assert p.returncode == 0, p.stderr
    assert f"{agentdojo_env.env_id} already built" in p.stdout
    assert json.loads(audit.read_text()) == []


@pytest.mark.req("R-5.4")
def test_a_relock_is_a_new_environment_and_the_old_one_is_left_alone(cli, home, tmp_path,
                                                                     script):
    old = f"agentdojo-{LOCK8}"
    make_marker(home, old)
    (home / "envs" / old / "lib").mkdir()
    (home / "envs" / old / "lib" / "installed.py").write_text("VALUE = 1\n")
    before = snapshot(home / "envs" / old)
    relocked = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", relocked,
                    ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    lock = relocked / "agentdojo" / "uv.lock"
    lock.write_text(lock.read_text() + "\n# re-locked\n")
    new = f"agentdojo-{file_sha256(lock)[:8]}"
    assert new != old
    env = {"AGENTPROV_BACKENDS": str(relocked)}
    r = cli("backends", "build", "agentdojo", "--dry-run", env=env)
    assert r.out.splitlines()[0] == f"backend agentdojo: environment {home}/envs/{new}"
    r = cli("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "corpora" / "c",
            "--campaign", "c", "--suite", "banking", "--user-tasks", "0", "--llm-script",
            script, env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing")
    assert new in r.error["message"] and old not in r.error["message"]
    # a build of the re-locked project goes to the new directory (here it fails at once:
    # an empty uv cache, offline), and the old environment is exactly as it was
    r = cli("backends", "build", "agentdojo",
            env=env | {"UV_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert (r.code, r.error["error"]) == (3, "cli.environment.uv"), r.err
    assert sorted(p.name for p in (home / "envs").iterdir()) == sorted(
        [old, f"{new}.lock"])
    assert snapshot(home / "envs" / old) == before
    # the old environment still serves the unchanged project
    r = cli("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "corpora" / "c",
            "--campaign", "c", "--suite", "banking", "--user-tasks", "0", "--llm-script", script)
    assert (r.code, r.error["error"]) == (3, "cli.environment.worker"), r.err
