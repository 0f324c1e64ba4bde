"""Shared fixtures: the real CLI in a subprocess, a private AGENTPROV_HOME, and proof that
a refusal wrote nothing."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> dict:
        """The JSON error object (the CLI ran with --error-format json)."""
        return json.loads(self.err.strip().splitlines()[-1])


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (for 'nothing was written' proofs)."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


#: ``AGENTPROV_*`` variables that describe the machine rather than agentprov's state: the
#: CLI the tests start keeps them (a Python 3.12 named by the user, README).
MACHINE_VARS = ("AGENTPROV_PYTHON",)


def child_env() -> dict[str, str]:
    """This process's environment without agentprov's own settings (home, registry, error
    format, …), keeping the machine's (:data:`MACHINE_VARS`)."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("AGENTPROV_") or k in MACHINE_VARS}


def venv_env(**extra: str) -> dict[str, str]:
    """The environment for a command run in another virtual environment: :func:`child_env`
    without this one's (``VIRTUAL_ENV``, ``PYTHONPATH``, ``PYTHONHOME``), uv never
    downloading a Python, plus ``extra``."""
    env = {k: v for k, v in child_env().items()
           if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    env.update(extra)
    return env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def corpora(tmp_path: Path) -> Path:
    c = tmp_path / "corpora"
    c.mkdir()
    return c


@pytest.fixture
def script(tmp_path: Path) -> Path:
    s = tmp_path / "script.json"
    s.write_text("[]")
    return s


#: the sources whose backend this build lacks (a slot under backends/): their own refusals
#: are checked against :func:`landed` backends (none: every backend has its project)
SLOTTED: tuple[str, ...] = ()
#: the part a :func:`slotted` copy of backends/ lacks the backend of, and why its slot says
SLOT_SOURCE = "agentdyn"
SLOT_WHY = "a fixture slot: this copy of backends/ holds no agentdyn project"


@pytest.fixture(scope="session")
def landed(tmp_path_factory) -> Path:
    """backends/ as a build that has added every slot's project would hold it (placeholder
    projects: enough for the checks before the environment), for ``AGENTPROV_BACKENDS``."""
    from agentprov_core.testing.fixtures import landed_backends

    return landed_backends(tmp_path_factory.mktemp("landed") / "backends")


@pytest.fixture(scope="session")
def slotted(tmp_path_factory) -> Path:
    """backends/ as a build that lacks :data:`SLOT_SOURCE`'s project would hold it (a slot
    saying :data:`SLOT_WHY`), for ``AGENTPROV_BACKENDS``."""
    from agentprov_core.testing.fixtures import slotted_backends

    return slotted_backends(tmp_path_factory.mktemp("slotted") / "backends", SLOT_SOURCE,
                            SLOT_WHY)


@pytest.fixture
def landed_env(landed: Path, monkeypatch) -> dict[str, str]:
    """``AGENTPROV_BACKENDS`` set to :func:`landed`, in this process and for the CLI."""
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(landed))
    return {"AGENTPROV_BACKENDS": str(landed)}


@pytest.fixture
def registry_copy(tmp_path: Path) -> Path:
    """A private copy of registry/ (links resolved), used through AGENTPROV_REGISTRY."""
    d = tmp_path / "registry"
    d.mkdir()
    for f in (ROOT / "registry").iterdir():
        if f.is_dir():  # presets/
            shutil.copytree(f, d / f.name)
        else:
            shutil.copyfile(f.resolve(), d / f.name)
    return d


@pytest.fixture
def cli(home: Path):
    """Run ``agentprov ARGS`` as a subprocess with a private home; JSON errors by default."""

    def run(*args: str, env: dict[str, str] | None = None, json_errors: bool = True,
            stdin: str | None = None, cwd: Path | None = None) -> Result:
        e = child_env()
        e["AGENTPROV_HOME"] = str(home)
        if json_errors:
            e["AGENTPROV_ERROR_FORMAT"] = "json"
        e.update(env or {})
        p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                           capture_output=True, text=True, env=e, input=stdin,
                           cwd=cwd or ROOT, timeout=120)
        return Result(p.returncode, p.stdout, p.stderr)

    return run


def install_worker_libraries(site: Path) -> None:
    """Copy the worker's libraries, ``agentprov_backend`` and ``agentprov_capture``, from the
    source tree into the site-packages directory ``site`` (as a backend environment holds
    them)."""
    import shutil

    for src in (ROOT / "backends/shared/src/agentprov_backend",
                ROOT / "packages/capture/src/agentprov_capture"):
        shutil.copytree(src, site / src.name, ignore=shutil.ignore_patterns("__pycache__"))


def install_worker_source(site: Path, name: str, body: str,
                          distribution: str = "agentprov-test-worker") -> None:
    """Register a stand-in worker source ``name`` in the site-packages directory ``site``,
    as a worker package does (a module and a ``.dist-info`` whose entry point in the group
    ``agentprov.worker`` names it): ``body`` defines ``child_main(request)``, which runs
    the cell and stages its own ``result.json``."""
    module = f"{distribution.replace('-', '_')}_{name}"
    (site / f"{module}.py").write_text(body + f"""

from agentprov_backend.source import WorkerSource as _WorkerSource


class _Source(_WorkerSource):
    name = {name!r}

    def run_cell(self, request):
        child_main(request)
        return {{"status": "errored", "error": "the stand-in staged no result"}}


SOURCE = _Source()
""", encoding="utf-8")
    info = site / f"{distribution.replace('-', '_')}-0.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   "Version: 0.0.0\n", encoding="utf-8")
    eps = info / "entry_points.txt"
    old = eps.read_text(encoding="utf-8") if eps.is_file() else "[agentprov.worker]\n"
    eps.write_text(old + f"{name} = {module}:SOURCE\n", encoding="utf-8")


def load_backend_module(name: str, library: str = "agentprov_backend"):
    """A module of a worker-side library (``agentprov_backend``: backends/shared,
    ``agentprov_dojo``: backends/dojo) loaded from the source tree, for tests of its
    standard-library-only parts."""
    import importlib.util

    where = {"agentprov_backend": "shared", "agentprov_dojo": "dojo"}[library]
    spec = importlib.util.spec_from_file_location(
        f"_{library}_{name}_from_source",
        ROOT / "backends" / where / "src" / library / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_marker(home: Path, env_id: str) -> Path:
    """A marker as `backends build` writes it, for tests of the checks that come before the
    worker starts (steps 1-3): nothing reads the environment's files there. Tests of the
    environment itself use the real build (`agentdojo_env`)."""
    from agentprov_core.backend import marker
    from agentprov_core.base.digests import file_sha256

    d = home / "envs" / env_id
    d.mkdir(parents=True)
    marker.write(d, marker.Marker(
        format=marker.FORMAT, environment_id=env_id, backend="agentdojo",
        project="backends/agentdojo", built_at="2026-11-29T00:00:00Z", agentprov="0.1.0",
        python="3.12.1", uv="uv", lock_sha256=file_sha256(ROOT / "backends/agentdojo/uv.lock"),
        exclude_newer=None, pinned_commit=None, distributions={}, files_verified=0, guarded={},
        defence_registry_sha256=file_sha256(ROOT / "registry/defences.toml"),
        hello={}, probe={}, identity_sha256="0" * 64))
    return marker.path(d)


@dataclass
class BuiltEnv:
    home: Path
    env_id: str
    env_dir: Path


def build_env(home: Path, *args: str, timeout: int = 1200) -> BuiltEnv:
    """``agentprov backends build ARGS`` in ``home``, which must succeed: the built
    environment."""
    e = child_env()
    e["AGENTPROV_HOME"] = str(home)
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", *args],
                       capture_output=True, text=True, env=e, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    env_dir = Path(p.stdout.split(" built at ")[1].split(" (")[0])
    return BuiltEnv(home, env_dir.name, env_dir)


@pytest.fixture(scope="session")
def agentdojo_env(tmp_path_factory) -> BuiltEnv:
    """The real AgentDojo backend environment, built once per session with
    `agentprov backends build agentdojo --allow-network` (uv downloads only what its cache
    lacks). Tests that take it are marked slow and run in `tox -e e2e`."""
    return build_env(tmp_path_factory.mktemp("e2e-home"), "agentdojo", "--allow-network",
                     timeout=900)


#: AgentDyn's pinned commit, as the project's shared sources hold it (a bare repository)
AGENTDYN_SOURCES = ROOT.parent / "shared" / "sources" / "AgentDyn.git"


def agentdyn_sources() -> Path:
    """The bare repository holding AgentDyn's pinned commit, or skip naming what is absent."""
    if not (AGENTDYN_SOURCES / "HEAD").is_file():
        pytest.skip(f"{AGENTDYN_SOURCES} is absent: AgentDyn's pinned commit cannot be fetched "
                    "here (backends build agentdyn needs --source-repo or --allow-network)")
    return AGENTDYN_SOURCES


@pytest.fixture(scope="session")
def agentdyn_env(tmp_path_factory) -> BuiltEnv:
    """The real AgentDyn backend environment (agentdyn-5353cf76), built once per session
    with `agentprov backends build agentdyn --source-repo ../shared/sources/AgentDyn.git
    --allow-network` (the commit from the shared bare repository into the session's fetch
    cache; uv downloads only what its cache lacks)."""
    sources = agentdyn_sources()
    return build_env(tmp_path_factory.mktemp("e2e-agentdyn-home"), "agentdyn",
                     "--source-repo", str(sources), "--allow-network")


@pytest.fixture(scope="session")
def agentharm_env(tmp_path_factory) -> BuiltEnv:
    """The real inspect-agentharm backend environment (inspect-ai 0.3.263, inspect-evals
    0.20.0, about 550 MB), built once per session with the project's fixture dataset
    (`agentprov backends build agentharm --dataset FIXTURE --allow-network`; uv downloads
    only what its cache lacks). Its home also holds the fixture, as ``home/fixture``."""
    from agentprov_core.testing import agentharm_fixture

    home = tmp_path_factory.mktemp("e2e-agentharm-home")
    agentharm_fixture.write(home / "fixture")
    e = child_env()
    e["AGENTPROV_HOME"] = str(home)
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentharm",
                        "--dataset", str(home / "fixture"), "--allow-network"],
                       capture_output=True, text=True, env=e, timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    env_dir = Path(p.stdout.split(" built at ")[1].split(" (")[0])
    return BuiltEnv(home, env_dir.name, env_dir)


@pytest.fixture
def e2e_cli(agentdojo_env):
    """`cli` against the session's built environment."""

    def run(*args: str, env: dict[str, str] | None = None, json_errors: bool = True,
            cwd: Path | None = None) -> Result:
        e = child_env()
        e["AGENTPROV_HOME"] = str(agentdojo_env.home)
        if json_errors:
            e["AGENTPROV_ERROR_FORMAT"] = "json"
        e.update(env or {})
        p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                           capture_output=True, text=True, env=e, cwd=cwd or ROOT, timeout=600)
        return Result(p.returncode, p.stdout, p.stderr)

    return run


@functools.cache
def bwrap_unusable() -> str | None:
    """Why bubblewrap cannot confine a process on this machine, or ``None`` when it can:
    Linux, ``bwrap`` on PATH, and it creates the profile's namespaces (as this user: root
    needs no unprivileged user namespaces, another user does). Tests that need it skip with
    this reason; ``.ci/run`` installs bubblewrap so that CI runs them."""
    if not sys.platform.startswith("linux"):
        return "bubblewrap is Linux only"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed here (apt-get install bubblewrap)"
    from agentprov_core.backend.sandbox.profile import NAMESPACES

    p = subprocess.run([bwrap, *NAMESPACES, "--ro-bind", "/", "/", "true"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return f"bubblewrap cannot create its namespaces here: {p.stderr.strip()[:200]}"
    return None


def path_without(tool: str, shadow: Path) -> str:
    """``$PATH`` as on a machine where ``tool`` is not installed: each directory on it that
    holds ``tool`` is replaced by a directory under ``shadow`` linking everything else it
    holds."""
    out = []
    for i, d in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not d or not (Path(d) / tool).exists():
            out.append(d)
            continue
        copy = shadow / str(i)
        copy.mkdir(parents=True, exist_ok=True)
        for entry in Path(d).iterdir():
            if entry.name != tool and not (copy / entry.name).exists():
                (copy / entry.name).symlink_to(entry)
        out.append(str(copy))
    return os.pathsep.join(out)


def fake_identity(digits: str):
    """A stand-in for `environments.backend_identity` in in-process planning tests."""

    def identity(meta):
        env_id = f"{meta.environment_prefix}-{digits}"
        return env_id, {"environment_id": env_id}

    return identity


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for the viewer's tests (tests/view_browser.py); the test is skipped,
    saying why, when Chromium or playwright is missing."""
    from tests.view_browser import launched, skip_reason

    why = skip_reason()
    if why:
        pytest.skip(why)
    with launched() as b:
        yield b
