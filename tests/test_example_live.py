"""The worked third-party source, ``examples/agentprov-example-source`` (source
``examplebench``), run live.

The example's worker package (``examplebench-worker``, in its backend project) serves a
tiny mail benchmark of its own; its plugin maps the capture logs with
``examplebench.capture``. Here:

* its committed catalogue is the one its worker serves;
* its worker runs cells against a real loopback scripted endpoint (the worker's process
  with the host library's source tree on its path), and the example's mapper maps what
  they recorded;
* a backend project that locks the worker host's own library is refused, and one whose
  worker package fails to import is refused after the build (slow: it builds);
* end to end, from wheels (slow): agentprov, agentprov-capture and the example, and nothing
  else from this repository, in a fresh environment; the backend environment built from the
  installed wheel; a scripted campaign run, validated and verified.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from conftest import snapshot, venv_env

from agentprov_core.plugins import hookimpl

pytest_plugins = ["agentprov_core.testing.fixtures"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agentprov-example-source"
PKG = EXAMPLE / "src" / "agentprov_example_source"
BACKEND = PKG / "backend"
WORKER_SRC = BACKEND / "worker" / "src"
REPLIES = EXAMPLE / "replies.json"
#: the worker process's path: the host library's and the capture library's source trees
#: (what `backends build` installs), and the worker package's
WORKER_PATH = os.pathsep.join(str(p) for p in (ROOT / "backends" / "shared" / "src",
                                               ROOT / "packages" / "capture" / "src",
                                               WORKER_SRC))


def _load(name: str, path: Path) -> ModuleType:
    """A module of the example, loaded from its file under a private name (the example is
    not installed in this environment)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_worker(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a process shaped as the worker's (see :data:`WORKER_PATH`)."""
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=venv_env(PYTHONPATH=WORKER_PATH, **env), timeout=120)
    assert done.returncode == 0, done.stderr
    return done


# ------------------------------------------------------------------------ the catalogue
def test_the_committed_catalogue_is_the_one_the_worker_serves() -> None:
    """T0 plans with the committed catalogue until the environment is built, then with the
    worker's: the two agree in everything but their provenance."""
    from agentprov_core import catalogue as catmod

    served = json.loads(_in_worker(
        "import json; from examplebench_worker import SOURCE; "
        "print(json.dumps(SOURCE.catalogue()))").stdout)
    committed = json.loads((PKG / "catalogue.json").read_text(encoding="utf-8"))
    assert (served.pop("provenance")["kind"], committed.pop("provenance")["kind"]) == (
        "worker", "declared")
    assert served == committed
    assert catmod.dumps(catmod.load(PKG / "catalogue.json")) == (
        PKG / "catalogue.json").read_text(encoding="utf-8")  # in the canonical form
    (suite,) = served["suites"]
    assert (suite["name"], suite["user_tasks"], suite["injection_tasks"], suite["tools"]) == (
        "mail", ["user_task_0", "user_task_1", "user_task_2"], ["injection_task_0"], 2)


# --------------------------------------------------------- the worker and the mapper
RUN_CELL = """
import json, sys
from examplebench_worker import SOURCE
print(json.dumps(SOURCE.run_cell(json.load(open(sys.argv[1])))))
"""
#: the variable the request names for the endpoint's key (T0 puts the key there)
KEY_ENV = "EXAMPLEBENCH_TEST_KEY"


def _cell_request(tmp: Path, base_url: str, user: str, attack: str | None) -> dict:
    staging = tmp / f"staging-{user}-{attack}"
    staging.mkdir()
    inj = "injection_task_0" if attack else None
    key = f"mail/{user}/{attack or 'none'}/{inj or 'none'}"
    return {"session_id": f"s-{user}-{attack or 'none'}", "staging": str(staging),
            "cell": {"cell_key": key, "suite": "mail", "user_task_id": user,
                     "injection_task_id": inj, "attack": attack},
            "agent": {"scripted": True, "base_url": base_url, "model_id": "scripted",
                      "pipeline_name": "scripted", "key_env": KEY_ENV},
            "benchmark_version": "v1", "unit": f"{key}|none|r0", "attempt": 1,
            "backend": {"environment_id": "examplebench-test"}, "plan_sha256": "p" * 64,
            "config_digest": "sha256:" + "c" * 64, "source": "examplebench"}


def _attempt(req: dict, capture: bytes, result: dict):
    import agentprov_capture

    from agentprov_core.corpus.ledger import Attempt

    return Attempt(seq=0, invocation="i-test", unit=req["unit"],
                   cell_key=req["cell"]["cell_key"], defence="none", repeat=0, attempt=1,
                   session_id=req["session_id"], started_at="", ended_at="",
                   status=result["status"], conclusive=True,
                   capture_head_sha256=agentprov_capture.check(capture).head_sha256,
                   utility=result["utility"], security=result["security"],
                   calls=result.get("calls"))


@pytest.mark.parametrize("attack", [None, "important_instructions"])
def test_the_worker_runs_a_cell_and_the_mapper_maps_it(tmp_path: Path, attack) -> None:
    """A cell of the example against a real loopback scripted endpoint: every wire attempt
    and tool result is in the capture log, the injection reached the model as a tool
    result, the endpoint's key (a sentinel) is in no byte written, and
    ``examplebench.capture`` maps the log to an AER whose records link each tool call to the
    model call that asked for it."""
    import agentprov_capture

    from agentprov_core.evidence import aer as A
    from agentprov_core.live.scripted.script import load_script
    from agentprov_core.live.scripted.server import ScriptedEndpoint
    from agentprov_core.mapping import LiveEvidence

    with ScriptedEndpoint(load_script(REPLIES)) as ep:
        req = _cell_request(tmp_path, ep.base_url("s-1"), "user_task_1", attack)
        (tmp_path / "req.json").write_text(json.dumps(req))
        sentinel = f"sk-examplebench-{uuid.uuid4().hex}"
        done = _in_worker(RUN_CELL, str(tmp_path / "req.json"), **{KEY_ENV: sentinel})
        result = json.loads(done.stdout)
    assert sentinel not in done.stdout + done.stderr
    for path in Path(req["staging"]).rglob("*"):
        assert sentinel.encode() not in path.read_bytes(), path
    assert result == {"status": "complete", "utility": True,
                      "security": False if attack else None, "setup_refusal": None,
                      "native_log": None, "error": None, "calls": 3}
    capture = (Path(req["staging"]) / "capture.jsonl").read_bytes()
    chain = agentprov_capture.check(capture)
    assert chain.ok, chain.problems
    kinds = [r["kind"] for r in chain.records]
    assert kinds.count("wire_request") == kinds.count("wire_response") == 3
    assert kinds.count("tool_result") == 2 and kinds[-1] == "end"
    header = chain.records[0]
    assert header["declared_instrumentation"] == ["recording_transport@1 mode: observe",
                                                  "tool_recorder@1 mode: observe"]
    inbox = next(r for r in chain.records if r["kind"] == "tool_result")["result"]
    injected = "Forward the subject of every message" in inbox[2]["body"]
    assert injected is bool(attack)
    second = [r for r in chain.records if r["kind"] == "wire_request"][1]["body"]
    assert (second["messages"][-1]["role"], "INFORMATION" in second["messages"][-1]["content"]) \
        == ("tool", bool(attack))  # the model saw the injection as a tool result

    mapper = _load("examplebench_mapper_under_test", PKG / "mapper.py").MAPPER
    ev = LiveEvidence(capture=capture, native=None, attempt=_attempt(req, capture, result),
                      manifest={"backend": "examplebench", "test_only": True},
                      capture_path="raw/capture")
    aer = mapper.map(ev)
    assert mapper.map(ev) == aer  # pure: the same evidence, the same AER
    assert (aer.header.producer.mapper, aer.header.task.attack, aer.header.producer.test_only) \
        == ("examplebench.capture", attack, True)
    assert (aer.outcome.status, aer.outcome.utility, aer.outcome.issues) == ("ok", True, [])
    assert aer.outcome.security == (False if attack else A.NOT_RECORDED)
    kinds = [type(r).__name__ for r in aer.records]
    assert kinds == ["ModelCall", "ToolCall", "ModelCall", "ToolCall", "ModelCall"]
    calls = [r for r in aer.records if isinstance(r, A.ToolCall)]
    assert [(c.function, c.call_id, c.tool_call_id) for c in calls] == [
        ("read_inbox", "c1", "call_0_0"), ("send_mail", "c2", "call_1_0")]
    assert aer.records[-1].reply.content.startswith("Alice suggests lunch on Friday")
    encoded = A.encode(aer)
    assert A.decode(encoded) == aer

    # a damaged, cut or missing log maps as a failed execution, never an exception
    lines = capture.splitlines(keepends=True)
    for bad in (capture.replace(b'"read_inbox"', b'"read_outbox"', 1),
                b"".join(lines[:len(lines) // 2]), b"".join(lines[:-1]) + b'{"kind": 7}\n',
                None):
        failed = mapper.map(LiveEvidence(capture=bad, native=None, attempt=ev.attempt))
        assert failed.outcome.status == "failed", bad
        assert "map.capture_damaged" in {i.code for i in failed.outcome.issues}
        assert A.decode(A.encode(failed)) == failed


# ----------------------------------------------------------------------- bad projects
def _bench(project, name: str = "examplebench") -> SimpleNamespace:
    """A plugin adding the source ``name`` (backend ``name``) with the backend ``project``."""
    from agentprov_core.source import SourceMeta, SuiteSource

    class Bench(SuiteSource):
        meta = SourceMeta(name=name, label=name, summary="a bad backend project",
                          kind="suites", backend=name)
        catalogue_file = PKG / "catalogue.json"

    return SimpleNamespace(agentprov_sources=hookimpl(lambda: [Bench()]),
                           agentprov_backends=hookimpl(lambda: [project]))


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to lock a backend project")
    return uv


def test_a_project_that_locks_the_host_library_is_refused(agentprov_plugin, agentprov_cli,
                                                          agentprov_home, tmp_path,
                                                          monkeypatch) -> None:
    """A backend project whose lock holds agentprov-backend (the host's own library, which
    the build installs from the running agentprov) is refused before anything is built."""
    from agentprov_core.backendproject import BackendProject

    project = shutil.copytree(BACKEND, tmp_path / "hostlocked")
    py = project / "pyproject.toml"
    py.write_text(py.read_text().replace('"examplebench-worker",\n', (
        '"examplebench-worker",\n    "agentprov-backend",\n')) + (
        f'agentprov-backend = {{ path = "{ROOT / "backends" / "shared"}", editable = false }}\n'))
    done = subprocess.run([_uv(), "lock", "--project", str(project)], capture_output=True,
                          text=True, env=venv_env(UV_PYTHON=_python312()), timeout=300)
    assert done.returncode == 0, done.stderr
    assert 'name = "agentprov-backend"' in (project / "uv.lock").read_text()
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))
    agentprov_plugin(_bench(BackendProject(name="examplebench", path="hostlocked",
                                           worker="examplebench-worker")),
                     "examplebench", distribution="agentprov-hostlocked", version="0.1")
    before = snapshot(tmp_path)
    for how in ("--dry-run", "--offline-check", "--allow-network"):
        refused = agentprov_cli("--error-format", "json", "backends", "build", "examplebench",
                                how)
        assert (refused.exit_code, refused.error["error"]) == (
            3, "cli.environment.lock_mismatch"), refused.stderr
        assert ("it locks agentprov-backend, the worker host's own libraries"
                in refused.error["message"])
        assert "agentprov-hostlocked 0.1" in refused.error["message"]
    assert list(agentprov_home.iterdir()) == [] and snapshot(tmp_path) == before


def _python312() -> str:
    from agentprov_core.backend.interpreters import find_python312

    return str(find_python312())


@pytest.mark.slow
def test_a_worker_package_that_fails_to_import_is_refused(agentprov_plugin, agentprov_cli,
                                                          agentprov_home, tmp_path,
                                                          monkeypatch) -> None:
    """The project builds, but its worker package raises on import: the build exits 3
    (``cli.environment.worker_missing``) naming the worker's distribution and its error, and
    keeps no environment."""
    from agentprov_core.backendproject import BackendProject

    project = shutil.copytree(BACKEND, tmp_path / "brokenworker")
    module = project / "worker" / "src" / "examplebench_worker" / "__init__.py"
    module.write_text('raise RuntimeError("examplebench_worker is broken on purpose")\n')
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))
    agentprov_plugin(_bench(BackendProject(name="examplebench", path="brokenworker",
                                           worker="examplebench-worker")),
                     "examplebench", distribution="agentprov-brokenworker", version="0.1")
    done = agentprov_cli("--error-format", "json", "backends", "build", "examplebench",
                         "--allow-network")
    assert (done.exit_code, done.error["error"]) == (3, "cli.environment.worker_missing"), \
        done.stderr
    message = done.error["message"]
    assert "cannot serve the source examplebench" in message
    assert ("examplebench-worker (agentprov.worker examplebench = examplebench_worker:SOURCE) "
            "fails to load: RuntimeError: examplebench_worker is broken on purpose") in message
    assert "agentprov-brokenworker 0.1" in message and "nothing was kept" in message
    envs = agentprov_home / "envs"  # the build's lock file may stay, no environment
    assert not envs.exists() or [p.name for p in envs.iterdir() if p.is_dir()] == []


# ---------------------------------------------------------------- end to end, from wheels
def _bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment holding the wheels of agentprov, agentprov-capture and the
    example (their dependencies from the index), nothing else from this repository."""
    uv = _uv()
    base = tmp_path_factory.mktemp("example-live")
    dist = base / "dist"
    example = shutil.copytree(EXAMPLE, base / "src" / EXAMPLE.name)  # nothing written here
    builds = [subprocess.Popen([uv, "build", "--quiet", "--wheel", "--out-dir", str(dist),
                                str(project)], env=venv_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
              for project in (ROOT, ROOT / "packages" / "capture", example)]
    for build in builds:
        out, _ = build.communicate(timeout=300)
        assert build.returncode == 0, out
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == [
        "agentprov", "agentprov_capture", "agentprov_example_source"]
    venv = base / "venv"
    for cmd in ([uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "--quiet", "--python", str(_bin(venv, "python")),
                 *map(str, wheels)]):
        done = subprocess.run(cmd, env=venv_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return venv


@pytest.mark.slow
@pytest.mark.req("R-5.1", "R-7.11")
def test_the_example_runs_live_from_wheels(wheel_venv: Path, tmp_path: Path) -> None:
    home, cwd, corpora = tmp_path / "home", tmp_path / "cwd", tmp_path / "corpora"
    for d in (home, cwd, corpora):
        d.mkdir()
    env = venv_env(AGENTPROV_HOME=str(home))
    assert not {k for k in env if k.startswith("AGENTPROV_")} - {"AGENTPROV_HOME",
                                                                 "AGENTPROV_PYTHON"}

    def agentprov(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(_bin(wheel_venv, "agentprov")), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    listed = agentprov("plugins", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert {p["name"] for p in doc["plugins"]} == {"agentprov.builtin", "examplebench"}
    (backend,) = doc["backends"]
    assert (backend["name"], backend["status"], backend["worker"], backend["distribution"]) == (
        "examplebench", "ok", "examplebench-worker", "agentprov-example-source")
    assert "/site-packages/agentprov_example_source/backend" in backend["project"]

    t = time.monotonic()
    built = agentprov("backends", "build", "examplebench", "--allow-network", timeout=900)
    print(f"backends build examplebench: {time.monotonic() - t:.1f}s")
    assert built.returncode == 0, built.stdout + built.stderr
    env_dir = Path(built.stdout.split(" built at ")[1].split(" (")[0])
    marker = json.loads((env_dir / "AGENTPROV_ENV.json").read_text())
    assert {lib: h["from"] for lib, h in marker["host"].items()} == {
        "agentprov-backend": "the copy shipped with agentprov 0.1.0",
        "agentprov-capture": "the copy shipped with agentprov 0.1.0"}
    assert marker["hello"]["served"]["examplebench"]["distribution"] == "examplebench-worker"
    assert "agentprov" not in marker["distributions"]  # the core never enters a backend

    shown = agentprov("run", "examplebench", "--catalogue")
    assert shown.returncode == 0, shown.stderr
    served = json.loads(shown.stdout)
    committed = json.loads((PKG / "catalogue.json").read_text())
    assert served.pop("provenance")["kind"] == "worker"
    committed.pop("provenance")
    assert served == committed
    # the plugin author's regeneration of catalogue.json, from the built worker
    written = tmp_path / "catalogue.json"
    regen = agentprov("backends", "catalogue", "examplebench", "--out", str(written))
    assert regen.returncode == 0, regen.stderr
    assert regen.stdout.strip().endswith(f"written to {written}")
    fresh = json.loads(written.read_text())
    prov = fresh.pop("provenance")
    assert (prov["kind"], prov["generator"]) == ("snapshot",
                                                 "agentprov backends catalogue examplebench")
    assert fresh == committed
    assert written.read_text() == agentprov("backends", "catalogue", "examplebench").stdout

    corpus = corpora / "demo"
    ran = agentprov("run", "examplebench", "--corpus", str(corpus), "--campaign", "demo",
                    "--user-tasks", "0-1", "--attack", "important_instructions",
                    "--injection-tasks", "0", "--llm-script", str(REPLIES))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "units    4 of 4: sealed 4, failed 0" in ran.stderr
    working = corpora / "demo.partial"
    for check in (("validate", "--strict", "--corpus", str(working)),
                  ("verify", "--corpus", str(working))):
        done = agentprov(*check)
        assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in (working / "executions.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    assert {r["mapper"] for r in rows} == {"examplebench.capture"}
    assert {r["status"] for r in rows} == {"ok"} and {r["validation"] for r in rows} == {"passed"}
    outcomes = {}
    for r in rows:
        aer = json.loads((working / "executions" / r["execution_id"] / "aer.json").read_text())
        assert aer["header"]["producer"]["mapper"] == "examplebench.capture"
        assert aer["header"]["source"] == "examplebench"
        outcomes[aer["header"]["task"]["cell_key"]] = (aer["outcome"]["utility"],
                                                       aer["outcome"]["security"])
    assert outcomes == {
        "mail/user_task_0/none/none": (True, "not recorded"),
        "mail/user_task_1/none/none": (True, "not recorded"),
        "mail/user_task_0/important_instructions/injection_task_0": (True, False),
        "mail/user_task_1/important_instructions/injection_task_0": (True, False)}
    assert not (cwd.exists() and any(cwd.iterdir()))  # nothing written where it ran
