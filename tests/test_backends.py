"""`agentprov backends build`: plans, builds, markers, offline checks, locks, and dry runs
through the real AgentDojo environment (slow: built once per session by uv)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, child_env, snapshot
from filelock import FileLock

from agentprov_core.base.digests import file_sha256

LOCK8 = file_sha256(ROOT / "backends" / "agentdojo" / "uv.lock")[:8]
ENV_ID = f"agentdojo-{LOCK8}"
DEMO = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
        "--injection-tasks", "0")


def stat_snapshot(root) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time (an environment is too
    large to compare byte for byte on every check), but the environments' lock files
    (``envs/<id>.lock``), which every build, check and run takes."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()
            and not (p.parent.name == "envs" and p.suffix == ".lock")}


# ------------------------------------------------------------------ no environment needed
@pytest.mark.req("R-6.14")
def test_runs_share_the_environment_lock_and_a_build_holds_it_alone(home, monkeypatch):
    """The lock of ``$AGENTPROV_HOME/envs/<id>.lock``: any number of shared holds (runs) at
    once; an exclusive one (a build, a check) refused while one is held, and shared ones
    refused while it is held; filelock's lock on the same file (another agentprov's build)
    excludes both. Each refusal is ``cli.environment.env_busy`` naming the lock, and a
    released lock (closed with its holder) is free again."""
    from agentprov_core.backend import envlock as backends
    from agentprov_core.errors import AgentprovError

    monkeypatch.setenv("AGENTPROV_HOME", str(home))

    def refused(shared: bool) -> AgentprovError:
        with pytest.raises(AgentprovError) as exc:
            backends.hold(ENV_ID, shared=shared)
        assert exc.value.code == "cli.environment.env_busy"
        assert exc.value.spec.exit == 3
        return exc.value

    one = backends.hold(ENV_ID, shared=True)
    two = backends.hold(ENV_ID, shared=True)
    assert str(home / "envs" / f"{ENV_ID}.lock") in refused(False).message
    one.release()
    refused(False)  # one run still holds it
    two.release()
    with backends.hold(ENV_ID):  # the build's exclusive hold
        refused(True)
        refused(False)
    with FileLock(str(home / "envs" / f"{ENV_ID}.lock"), timeout=0):
        refused(True)
    with backends.hold(ENV_ID, shared=True), backends.hold(ENV_ID, shared=True):
        pass
    backends.hold(ENV_ID).release()


@pytest.mark.req("R-6.1", "R-6.2", "R-5.3", "R-6.4", "R-6.5", "R-4.2")
def test_build_dry_run_prints_the_plan_and_writes_nothing(cli, home):
    r = cli("backends", "build", "agentdojo", "--dry-run")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"backend agentdojo: environment {home}/envs/{ENV_ID}"
    assert lines[1].startswith(f"  commit8 {LOCK8} (from lock_sha256); lock sha256 {LOCK8}")
    assert lines[2] == ("  would run: uv sync --locked --no-config --no-dev --link-mode copy "
                        "--compile-bytecode --offline --exclude-newer 2026-10-07T00:00:00Z "
                        "--no-build-package …")
    assert lines[3].startswith(f"  UV_PROJECT_ENVIRONMENT={home}/envs/{ENV_ID}; every other "
                               "UV_* variable is dropped except")
    assert lines[4] == "  network: none (uv --offline: the build uses the uv cache only)"
    assert lines[5] == ("  then: uv pip install the worker host's libraries, T0 identity, "
                        "hello identity, sandbox-exec feasibility probe, marker AGENTPROV_ENV.json")
    assert lines[-1] == ("  host libraries: agentprov-backend from the agentprov 0.1.0 checkout's "
                         "backends/shared; agentprov-capture from the agentprov 0.1.0 checkout's "
                         "packages/capture")
    assert snapshot(home) == {}


@pytest.mark.req("R-5.2")
def test_git_pinned_backends_are_named_by_their_commit(cli, script):
    """An unbuilt environment of a git-pinned backend is named by the commit."""
    r = cli("run", "autodojo", "--dry-run", "--corpus", "/tmp/nowhere/a", "--campaign", "a",
            "--suite", "banking", "--llm-script", script)
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing")
    assert "autodojo-aa458794" in r.error["message"]


def test_unknown_backend(cli):
    r = cli("backends", "build", "nope", "--dry-run")
    assert (r.code, r.error["error"]) == (2, "cli.usage.unknown_backend")
    assert "agentdojo" in r.error["message"]


def test_missing_interpreter_says_what_to_install(cli, home):
    r = cli("backends", "build", "agentdojo", env={"AGENTPROV_PYTHON": "/nonexistent/python3.12"})
    assert (r.code, r.error["error"]) == (3, "cli.environment.python")
    assert "install python3.12" in r.error["message"]
    assert snapshot(home) == {}


def test_a_failed_build_leaves_nothing_that_looks_valid(cli, home, tmp_path):
    # an empty uv cache and --offline: uv cannot install anything, so the build fails
    r = cli("backends", "build", "agentdojo", env={"UV_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert (r.code, r.error["error"]) == (3, "cli.environment.uv")
    envs = home / "envs"
    assert sorted(p.name for p in envs.iterdir()) == [f"{ENV_ID}.lock"]  # no env, no temp dir


def _unmatched_lock(tmp_path):
    """A copy of backends/ whose agentdojo project declares what its lock does not record,
    and the environment that makes agentprov build from it."""
    backends = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", backends)
    py = backends / "agentdojo" / "pyproject.toml"
    py.write_text(py.read_text().replace('"agentdojo==0.1.35"', '"agentdojo>=0.1.34"'))
    return backends, {"AGENTPROV_BACKENDS": str(backends)}


@pytest.mark.parametrize("cache", ["empty", "the user's"])
@pytest.mark.parametrize("how", [(), ("--allow-network",), ("--dry-run",), ("--offline-check",)],
                         ids=["offline", "allow-network", "dry-run", "offline-check"])
def test_a_lock_that_does_not_match_its_project(cli, home, tmp_path, cache, how):
    """T0 finds the mismatch from the two files before uv runs, so the refusal is the same
    whatever uv's cache holds and whether or not the network may be used: uv never runs
    (an empty cache stays empty) and nothing is written."""
    backends, env = _unmatched_lock(tmp_path)
    empty = tmp_path / "empty-cache"
    if cache == "empty":
        empty.mkdir()
        env["UV_CACHE_DIR"] = str(empty)
    r = cli("backends", "build", "agentdojo", *how, env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.lock_mismatch"), r.err
    assert r.error["message"] == (
        f"agentprov: error [cli.environment.lock_mismatch]: "
        f"{backends}/agentdojo/uv.lock does not match {backends}/agentdojo/pyproject.toml "
        "(dependencies: agentdojo>=0.1.34 is declared, the lock records agentdojo==0.1.35): "
        "re-lock the backend project agentdojo (from agentprov-agentdojo 0.1.0)")
    assert snapshot(home) == {}
    if cache == "empty":
        assert list(empty.iterdir()) == []


@pytest.mark.req("R-16.2", "R-14.1")
def test_every_place_that_knows_a_lock_does_not_match_says_so(cli, home, tmp_path):
    """Not only ``plugins`` and ``backends build``: a run of a source whose unbuilt
    backend's lock does not match its project is refused with the mismatch (not told to
    build what cannot be built), and ``info`` shows the project's status as ``plugins``
    does."""
    _, env = _unmatched_lock(tmp_path)
    script = tmp_path / "script.json"
    script.write_text("[]")
    for how in (("--dry-run",), ()):
        r = cli("run", "agentdojo", *how, "--suite", "banking", "--llm-script", script,
                "--corpus", tmp_path / "c", "--campaign", "c", env=env)
        assert (r.code, r.error["error"]) == (3, "cli.environment.lock_mismatch"), r.err
        assert ("(dependencies: agentdojo>=0.1.34 is declared, the lock records "
                "agentdojo==0.1.35): re-lock the backend project agentdojo") in r.error["message"]
    info = {p["name"]: p for p in json.loads(cli("info", "--format", "json", env=env).out)[
        "parts"]}
    project = info["agentdojo"]["backend_project"]
    assert project["status"] == "lock mismatch"
    assert "agentdojo>=0.1.34 is declared" in project["problem"]
    assert snapshot(home) == {} and not (tmp_path / "c").exists()


def test_the_catalogue_command_needs_the_built_environment(cli, home, tmp_path):
    """``backends catalogue`` asks the built worker; before the build it names the build
    (exit 3) and writes nothing (tests/test_example_live.py regenerates the example's
    catalogue.json from its built worker)."""
    out = tmp_path / "catalogue.json"
    r = cli("backends", "catalogue", "agentdojo", "--out", out)
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err
    assert r.error["message"].endswith("run agentprov backends build agentdojo")
    assert not out.exists() and snapshot(home) == {}
    r = cli("backends", "catalogue", "nobench")
    assert (r.code, r.error["error"]) == (2, "cli.usage.unknown_source"), r.err


def test_a_project_whose_lock_lacks_its_worker_package_is_named():
    """A project that names a worker package its lock does not install is a lock problem,
    which ``plugins`` reports and the build refuses before uv runs (the same check): the
    environment would serve nothing of the source."""
    from agentprov_core.backend import projects
    from agentprov_core.backendproject import BackendProject
    from agentprov_core.plugins import BackendEntry, PluginRecord

    rec = PluginRecord("agentdojo", "agentprov-agentdojo", "0.1.0", "loaded")

    def located(worker: str) -> projects.Located:
        project = BackendProject(name="agentdojo", path="agentdojo", worker=worker)
        return projects.Located(BackendEntry(project, rec), ROOT / "backends" / "agentdojo")

    assert projects.lock_problem(located("agentprov-worker-agentdojo")) is None
    assert projects.lock_problem(located("Agentprov_Worker.Agentdojo")) is None  # PEP 503
    assert projects.lock_problem(located("agentprov-worker-other")) == (
        "it does not install the worker package agentprov-worker-other that the project "
        "names (BackendProject.worker): add it to the project's dependencies, with a path "
        "source for a worker package beside it, and lock it again")


# --------------------------------------------------------------- the real environment
pytestmark_slow = pytest.mark.slow


@pytest.mark.slow
@pytest.mark.req("R-4.1", "R-5.3", "R-2.15", "R-3.1", "R-2.1", "R-4.3", "R-6.2")
def test_build_writes_a_marker_with_the_identity(agentdojo_env):
    m = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    assert agentdojo_env.env_id == ENV_ID == m["environment_id"]
    assert m["format"] == "agentprov-env-marker/0.1"
    assert m["lock_sha256"] == file_sha256(ROOT / "backends" / "agentdojo" / "uv.lock")
    assert m["distributions"]["agentdojo"]["version"] == "0.1.35"
    assert "agentprov-backend" in m["distributions"] and "agentprov" not in m["distributions"]
    assert m["hello"]["distributions"] == m["distributions"]
    assert m["hello"]["python"].startswith("3.12.")
    assert m["defence_registry_sha256"] == file_sha256(ROOT / "registry" / "defences.toml")
    assert m["probe"]["sandbox_exec"]["status"] == "not applicable"
    assert m["files_verified"] > 1000
    assert set(m["guarded"]) >= {"pyvenv.cfg", "agentprov/uv.lock", "agentprov/pyproject.toml",
                                 "agentprov/catalogue-agentdojo.json"}


@pytest.mark.slow
@pytest.mark.req("R-6.6", "R-6.7", "R-6.9", "R-6.15")
def test_offline_check_verifies_and_catches_a_changed_file(e2e_cli, agentdojo_env):
    before = stat_snapshot(agentdojo_env.home)
    r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
    assert r.code == 0, r.err
    assert stat_snapshot(agentdojo_env.home) == before  # scratch files only, outside the home
    first, probe = r.out.strip().splitlines()
    assert first == (f"agentprov backends build --offline-check: {ENV_ID} verified "
                     "(marker, lock, RECORD, guarded files, hello identity)")
    assert probe.startswith("  containment probe (recorded at build, not re-run): ")
    target = next(agentdojo_env.env_dir.glob("lib/python3*/site-packages/agentdojo/attacks/"
                                             "base_attacks.py"))
    original = target.read_bytes()
    try:
        target.write_bytes(original + b"\n# tampered\n")
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check")
        assert "agentdojo/attacks/base_attacks.py differs from its RECORD hash" in r.error["message"]
        # and a run refuses to start on it? the dry run's hello is RECORD-based; the offline
        # check is the file-level check (the spec's division of labour)
    finally:
        target.write_bytes(original)
    assert e2e_cli("backends", "build", "agentdojo", "--offline-check").code == 0
    # bytecode is not in RECORD: the marker's digest over every .pyc catches it
    pyc = next(agentdojo_env.env_dir.glob("lib/python3*/site-packages/agentdojo/__pycache__/*.pyc"))
    original = pyc.read_bytes()
    try:
        pyc.write_bytes(original + b"\0")
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check")
        assert "compiled bytecode changed" in r.error["message"]
    finally:
        pyc.write_bytes(original)
    assert e2e_cli("backends", "build", "agentdojo", "--offline-check").code == 0


def _checkout_with_a_changed_byte(tmp_path: Path, package: str) -> Path:
    """A copy of the repository's ``backends/`` and ``packages/`` (the worker code a build
    installs) where one byte of ``package``'s ``__init__.py`` differs; returns its
    ``backends/``."""

    top = tmp_path / "checkout"
    for d in ("backends", "packages"):
        shutil.copytree(ROOT / d, top / d,
                        ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    rel = (WORKER_PACKAGE if package == "worker"
           else _library_sources(f"agentprov_{package}_sources_sha256"))
    init = top / rel / "__init__.py"
    data = bytearray(init.read_bytes())
    assert data[:3] == b'"""' and data[3:4].isalpha()
    data[3] ^= 0x20  # the docstring's first letter in the other case: one byte apart
    init.write_bytes(bytes(data))
    return top / "backends"


#: AgentDojo's worker package, a path dependency of its backend project
WORKER_PACKAGE = "backends/agentdojo/worker/src/agentprov_worker_agentdojo"


def _library_sources(hello_key: str) -> str:
    """A host library's package directory, relative to the checkout, by the hello's field."""
    from agentprov_core.backend import hostlibs

    lib = next(lib for lib in hostlibs.LIBRARIES if lib.hello_key == hello_key)
    return f"{lib.checkout}/{lib.package}"


@pytest.mark.slow
@pytest.mark.req("R-6.8")
@pytest.mark.parametrize("package", ["backend", "capture", "worker"])
def test_a_changed_byte_of_the_worker_code_refuses_the_environment_until_rebuilt(
        agentdojo_env, tmp_path, package):
    """The environment id follows uv.lock, which does not change when the worker's
    libraries do: after a one-byte change to ``agentprov_backend`` (backends/shared), to
    ``agentprov_capture`` (packages/capture) or to the project's path dependency, AgentDojo's
    worker package (backends/agentdojo/worker), the environment built before it fails the
    offline check with the run's refusal (``cli.environment.stale_worker``, exit 3), and
    ``backends build`` replaces it with one whose worker reports the changed sources.
    The environment is a copy of the real one; the build is the real one (offline, from
    the uv cache the first build filled)."""
    from agentprov_core.backend import environments, hostlibs

    backends = _checkout_with_a_changed_byte(tmp_path, package)
    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    shutil.copytree(agentdojo_env.env_dir, home / "envs" / agentdojo_env.env_id, symlinks=True)
    e = child_env() | {"AGENTPROV_HOME": str(home), "AGENTPROV_BACKENDS": str(backends),
                       "AGENTPROV_ERROR_FORMAT": "json"}

    def agentprov(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "agentprov_core", *args],
                              capture_output=True, text=True, env=e, timeout=900)

    r = agentprov("backends", "build", "agentdojo", "--offline-check")
    assert r.returncode == 3, r.stdout + r.stderr
    assert json.loads(r.stderr.strip().splitlines()[-1])["error"] == \
        "cli.environment.stale_worker"
    r = agentprov("backends", "build", "agentdojo")
    assert r.returncode == 0 and f"{agentdojo_env.env_id} built at " in r.stdout, r.stderr
    m = json.loads((home / "envs" / agentdojo_env.env_id / "AGENTPROV_ENV.json").read_text())
    if package == "worker":  # the marker records the path dependency's changed sources
        dist = "agentprov-worker-agentdojo"
        assert m["path_sources"][dist] == environments.path_sources(backends / "agentdojo")[
            dist] != environments.path_sources(ROOT / "backends" / "agentdojo")[dist]
    else:  # the worker reports the host library's changed sources
        key = f"agentprov_{package}_sources_sha256"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AGENTPROV_BACKENDS", str(backends))
            ours = hostlibs.digests()
        assert m["hello"][key] == ours[key] != hostlibs.digests()[key]
    r = agentprov("backends", "build", "agentdojo", "--offline-check")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.req("R-6.7")
def test_offline_check_catches_marker_damage(e2e_cli, agentdojo_env):
    mpath = agentdojo_env.env_dir / "AGENTPROV_ENV.json"
    original = mpath.read_bytes()
    try:
        mpath.write_bytes(original[:50])
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
        assert "is corrupted" in r.error["message"]
        doc = json.loads(original)
        doc["backend"] = "autodojo"
        mpath.write_text(json.dumps(doc))
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
        assert "is of backend autodojo" in r.error["message"]
        doc = json.loads(original)
        doc["lock_sha256"] = "0" * 64  # the marker names another lock than backends/agentdojo's
        mpath.write_text(json.dumps(doc))
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
        assert (f"records lock_sha256 00000000, but backends/agentdojo/uv.lock "
                f"(agentprov-agentdojo 0.1.0) is {LOCK8}") in r.error["message"]
        doc = json.loads(original)
        doc["guarded"]["agentprov/uv.lock"] = "0" * 64
        mpath.write_text(json.dumps(doc))
        r = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check")
        assert "guarded file agentprov/uv.lock changed" in r.error["message"]
    finally:
        mpath.write_bytes(original)
    assert e2e_cli("backends", "build", "agentdojo", "--offline-check").code == 0


@pytest.mark.slow
@pytest.mark.req("R-6.14")
def test_the_environment_lock_excludes_builds_checks_and_runs(e2e_cli, agentdojo_env, tmp_path,
                                                               script):
    lock = FileLock(str(agentdojo_env.home / "envs" / f"{ENV_ID}.lock"))
    with lock:
        for args in (("backends", "build", "agentdojo"),
                     ("backends", "build", "agentdojo", "--offline-check"),
                     ("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "c", "--campaign",
                      "c", *DEMO, "--llm-script", script)):
            r = e2e_cli(*args)
            assert (r.code, r.error["error"]) == (3, "cli.environment.env_busy"), args
    assert e2e_cli("backends", "build", "agentdojo", "--offline-check").code == 0


@pytest.mark.slow
@pytest.mark.req("R-8.1", "R-8.2", "R-8.3", "R-8.4", "R-8.5", "R-8.6", "R-8.9", "R-8.16")
def test_dry_run_of_the_spec_example(e2e_cli, tmp_path, script):
    corpus = tmp_path / "corpora" / "live-demo"
    base = ("run", "agentdojo", "--dry-run", "--corpus", corpus, "--campaign", "demo", *DEMO,
            "--llm-script", script)
    r = e2e_cli(*base, json_errors=False)
    assert r.code == 0, r.err
    assert r.err.startswith("agentprov: finished in ") and r.err.rstrip().endswith("s (exit 0)")
    lines = r.out.splitlines()
    assert lines[0].startswith("plan ") and lines[0].endswith(
        f"...: 4 cell(s) x 1 repeat(s); corpus agentdojo-live-demo; backend {ENV_ID}")
    assert len(lines[0].split()[1]) == len("0123456789abcdef...:")
    assert lines[1].startswith("  config digest sha256:") and lines[1].endswith(
        "...; 0 unit(s) already settled; up to 12 attempt(s) due (--max-attempts 3)")
    assert lines[2:] == ["  cell banking/user_task_0/none/none",
                         "  cell banking/user_task_1/none/none",
                         "  cell banking/user_task_0/important_instructions/injection_task_0",
                         "  cell banking/user_task_1/important_instructions/injection_task_0"]
    again = e2e_cli(*base, json_errors=False)
    assert again.out == r.out  # digests stable run to run
    j = e2e_cli(*base, "--plan-json")
    doc = json.loads(j.out)
    assert doc["plan_sha256"].startswith(lines[0].split()[1][:16])
    assert doc["corpus_id"] == "agentdojo-live-demo" and doc["units"] == 4
    assert "cell banking/user_task_0/none/none" in j.err  # human lines on stderr
    assert not corpus.exists() and not corpus.with_name("live-demo.partial").exists()


@pytest.mark.slow
@pytest.mark.req("R-22.27", "R-22.29")
def test_dry_run_plan_file_and_flags_agree(e2e_cli, tmp_path, script):
    plan = tmp_path / "banking-spotlighting.toml"
    plan.write_text('[plan]\nformat = "agentprov-run-plan/0.1"\nbackend = "agentdojo"\n'
                    'suites = ["banking"]\nuser_tasks = "0-1"\ninjection_tasks = "0"\n'
                    'attacks = ["important_instructions"]\nbenign = "include"\n'
                    'defence = "spotlighting_with_delimiting"\n')
    common = ("--dry-run", "--corpus", tmp_path / "g", "--campaign", "g", "--llm-script", script,
              "--plan-json")
    by_file = json.loads(e2e_cli("run", "agentdojo", "--plan", plan, *common).out)
    by_flags = json.loads(e2e_cli("run", "agentdojo", *DEMO, "--defence",
                                  "spotlighting_with_delimiting", *common).out)
    undefended = json.loads(e2e_cli("run", "agentdojo", *DEMO, *common).out)
    assert by_file["plan_sha256"] == by_flags["plan_sha256"] != undefended["plan_sha256"]
    assert by_file["config_digest"] == undefended["config_digest"]


@pytest.mark.slow
@pytest.mark.req("R-7.11", "R-7.15")
def test_catalogue_is_served_by_the_worker(e2e_cli):
    doc = json.loads(e2e_cli("run", "agentdojo", "--catalogue").out)
    assert doc["provenance"]["kind"] == "worker"
    snap = json.loads((ROOT / "plugins" / "agentprov-agentdojo" / "src" / "agentprov_agentdojo"
                       / "catalogue.snapshot.json").read_text())
    for key in ("suites", "attacks", "benchmark_versions", "default_benchmark_version"):
        assert doc[key] == snap[key], key


@pytest.mark.slow
@pytest.mark.req("R-2.4", "R-2.5", "R-8.1")
def test_worker_protocol_and_its_scrubbed_environment(agentdojo_env, tmp_path):
    from agentprov_core.backend.workerclient import Worker

    with Worker(ENV_ID, agentdojo_env.env_dir, tmp_path, network=False) as w:
        hello = w.request("hello")
        assert hello["protocol"] == "agentprov-worker/0.1"
        assert hello["sources"] == ["agentdojo"]
        res = w.request("plan", source="agentdojo", benchmark_version="v1.2.2",
                        cells=[{"cell_key": "banking/user_task_99/none/none", "suite": "banking",
                                "user_task_id": "user_task_99", "attack": None,
                                "injection_task_id": None}])
        assert res["problems"] == ["banking/user_task_99/none/none: no user task "
                                   "'user_task_99' in banking"]
        with pytest.raises(Exception, match="worker.bad_request: run-cell needs session_id"):
            w.request("run-cell")
        with pytest.raises(Exception, match="worker.unknown_request"):
            w.request("nonsense")
    # the worker ran in the staging directory with a private home
    assert (tmp_path / "home").is_dir()
    env_probe = subprocess.run(
        [sys.executable, "-c", "from agentprov_core.backend.workerclient import scrubbed_env;"
         "from pathlib import Path; import json, os; os.environ['OPENROUTER_API_KEY']='x';"
         f"print(json.dumps(scrubbed_env(Path('{agentdojo_env.env_dir}'), Path('{tmp_path}'))))"],
        capture_output=True, text=True, check=True)
    env = json.loads(env_probe.stdout)
    assert "OPENROUTER_API_KEY" not in env and env["HOME"] == str(tmp_path / "home")
    assert set(env) <= {"HOME", "TMPDIR", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE",
                        "PYTHONSAFEPATH", "PYTHONUTF8", "LANG", "LC_ALL", "TZ"}
    assert env["PYTHONSAFEPATH"] == "1"  # nothing in the staging root is importable


@pytest.mark.slow
@pytest.mark.req("R-8.10", "R-8.11")
def test_digests_are_the_same_for_an_environment_built_elsewhere(e2e_cli, cli, home, tmp_path,
                                                                  script):
    """A second build of the same lock in another home: the same environment id, identity
    and configuration digest (install paths are not identity)."""
    assert cli("backends", "build", "agentdojo", "--allow-network").code == 0
    args = ("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "c", "--campaign", "demo",
            *DEMO, "--llm-script", script, "--plan-json")
    here, there = json.loads(e2e_cli(*args).out), json.loads(cli(*args).out)
    assert (here["plan_sha256"], here["config_digest"]) == (there["plan_sha256"],
                                                          there["config_digest"])


@pytest.mark.slow
def test_a_full_disk_during_the_build(agentdojo_env, cli, tmp_path):
    """A 20 MB tmpfs as $AGENTPROV_HOME (needs root to mount; skipped elsewhere): the build
    fails with exit 3 naming the cause, and leaves no environment behind."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20M", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        r = cli("backends", "build", "agentdojo", env={"AGENTPROV_HOME": str(mnt / "home")})
        assert (r.code, r.error["error"]) == (3, "cli.environment.build_io"), r.err
        assert "no space left on the device" in r.error["message"]
        assert [p.name for p in (mnt / "home" / "envs").iterdir()] == [f"{ENV_ID}.lock"]
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("package", ["backend", "capture"])
def test_an_environment_holding_other_worker_code_is_refused_and_rebuilt(tmp_path, package):
    """The environment id follows uv.lock, which does not change when backends/shared or
    packages/capture does: the hello's digest of each worker library's own sources is
    compared with the sources this agentprov builds from, so an environment built by
    another agentprov is refused (exit 3), and ``backends build`` counts it stale (it
    replaces it), until it is rebuilt."""
    import hashlib

    from agentprov_core.backend import environments, hostlibs, marker, session
    from agentprov_core.errors import AgentprovError

    key = f"agentprov_{package}_sources_sha256"
    # the same algorithm as the worker's (every e2e run checks the two agree)
    src = ROOT / _library_sources(key)
    lines = [f"{p.relative_to(src).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}"
             for p in sorted(src.rglob("*")) if p.suffix in (".py", ".toml") and p.is_file()]
    ours = hostlibs.digests()
    assert sorted(ours) == ["agentprov_backend_sources_sha256",
                            "agentprov_capture_sources_sha256"]
    assert ours[key] == hashlib.sha256("\n".join(lines).encode()).hexdigest()

    hello = {"protocol": session.PROTOCOL, "distributions": {}, "python": "3.12.1",
             "defence_registry_sha256": "d", "agentprov_backend": "0.1.0",
             "agentprov_capture": "0.1.0"}
    m = marker.Marker(
        format=marker.FORMAT, environment_id="agentdojo-0", backend="agentdojo",
        project="backends/agentdojo", built_at="t", agentprov="0.1.0", python="3.12.1",
        uv="uv", lock_sha256="0", exclude_newer=None, pinned_commit=None, distributions={},
        files_verified=0, guarded={}, defence_registry_sha256="d", hello=dict(hello), probe={},
        identity_sha256="0" * 64)
    session.check_hello({**hello, **ours}, m, "agentdojo")
    assert not environments.worker_sources_differ({**hello, **ours})
    for stale in (None, "0" * 64):
        built = {**hello, **ours, key: stale}
        assert environments.worker_sources_differ(built)  # backends build replaces it
        with pytest.raises(AgentprovError) as e:
            session.check_hello(built, m, "agentdojo")
        assert e.value.code == "cli.environment.stale_worker" and e.value.exit_code == 3
