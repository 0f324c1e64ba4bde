"""Backend environments as T0 sees them before starting anything: ids and markers.

An environment id is ``<backend>-<8 hex>``: the first 8 hex of the pinned commit for a
git-pinned backend, else of the sha256 of the backend project's ``uv.lock`` (R-5).
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core.backend import projects
from agentprov_core.backend.marker import MARKER
from agentprov_core.base import paths
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta


def pinned_commit(meta: SourceMeta) -> str | None:
    """The commit a git-pinned backend is named by: its project's pin, else the source's."""
    loc = projects.locate(meta.backend)
    if loc is not None and loc.entry.project.pinned_commit:
        return loc.entry.project.pinned_commit
    return meta.pinned_commit


def environment_id(meta: SourceMeta) -> str:
    prefix = meta.environment_prefix or meta.backend or meta.name
    commit = pinned_commit(meta)
    if commit:
        return f"{prefix}-{commit[:8]}"
    loc = projects.require(meta.backend)
    lock = loc.directory / "uv.lock"
    if not lock.is_file():
        raise AgentprovError("cli.environment.no_backend_project", backend=meta.backend,
                             why=f"{loc.where}/uv.lock is absent (the project {loc.origin} "
                                 "contributes is not locked)")
    return f"{prefix}-{file_sha256(lock)[:8]}"


def environment_dir(env_id: str) -> Path:
    return paths.home() / "envs" / env_id


def require_built(meta: SourceMeta) -> str:
    """The environment id, or exit 3 telling the user to build it (R-16.2)."""
    env_id = environment_id(meta)
    if not (environment_dir(env_id) / MARKER).is_file():
        raise AgentprovError("cli.environment.backend_missing", env_id=env_id,
                             backend=meta.backend)
    return env_id


def read_marker(meta: SourceMeta, env_id: str):
    """The environment's marker, checked against the backend and the repository's lock and
    defence registry (exit 3 naming what differs)."""
    from agentprov_core.backend import marker as markermod
    from agentprov_core.base import paths

    env_dir = environment_dir(env_id)
    where = markermod.path(env_dir)
    try:
        m = markermod.read(env_dir)
    except FileNotFoundError:
        raise AgentprovError("cli.environment.backend_missing", env_id=env_id,
                             backend=meta.backend) from None
    except ValueError as exc:
        raise AgentprovError("cli.environment.marker", marker=where, what=str(exc),
                             backend=meta.backend) from None
    if m.backend != meta.backend or m.environment_id != env_id:
        raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                             what=f"is of backend {m.backend} ({m.environment_id}), not "
                                  f"{meta.backend} ({env_id})")
    loc = projects.locate(meta.backend)
    if loc is not None and loc.directory is not None and (loc.directory / "uv.lock").is_file():
        lock = file_sha256(loc.directory / "uv.lock")
        if lock != m.lock_sha256:
            raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                                 what=f"records lock_sha256 {m.lock_sha256[:8]}, but "
                                      f"{loc.where}/uv.lock ({loc.origin}) is {lock[:8]}")
    reg = paths.defence_registry()
    if m.defence_registry_sha256 is not None and reg.is_file() and (
            file_sha256(reg) != m.defence_registry_sha256):
        raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                             what="records a defence registry that differs from the "
                                  "repository's (registry/defences.toml)")
    return m


def backend_identity(meta: SourceMeta) -> tuple[str, dict]:
    """Step 2's environment check: the environment id and the identity the configuration
    digest hashes (the marker's identity digest), or exit 3."""
    env_id = require_built(meta)
    m = read_marker(meta, env_id)
    return env_id, {"environment_id": env_id, "identity_sha256": m.identity_sha256}


#: The worker code an environment is built from, as (the hello's field holding the worker's
#: digest of it, the package's source directory relative to the directory that holds
#: ``backends/``): the worker library and the capture/0.1 library it writes with. The
#: backend projects install both by path (``../shared``, ``../../packages/capture``).
WORKER_SOURCES = (
    ("agentprov_backend_sources_sha256", "backends/shared/src/agentprov_backend"),
    ("agentprov_capture_sources_sha256", "packages/capture/src/agentprov_capture"),
)


def sources_sha256(root: Path) -> str:
    """The digest of a package's sources (``*.py`` and ``*.toml`` by relative path), the
    same algorithm as ``agentprov_backend.identity.sources_sha256``."""
    import hashlib

    lines = [f"{p.relative_to(root).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}"
             for p in sorted(root.rglob("*")) if p.suffix in (".py", ".toml") and p.is_file()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def worker_sources_sha256() -> dict[str, str]:
    """The digests of the worker code this agentprov builds environments from, by the
    hello's field (:data:`WORKER_SOURCES`); a package whose sources are not at hand (no
    ``backends/`` directory) is left out: there is nothing to compare with."""
    base = paths.backends_dir()
    if base is None:
        return {}
    top = base.parent
    return {key: sources_sha256(top / rel) for key, rel in WORKER_SOURCES
            if (top / rel).is_dir()}


def worker_sources_differ(hello: dict) -> bool:
    """Whether the worker that answered ``hello`` runs other worker code than this agentprov
    builds from."""
    return any(hello.get(key) != ours for key, ours in worker_sources_sha256().items())


def check_worker_sources(hello: dict, env_id: str, backend: str) -> None:
    """The worker code in the environment must be the code this agentprov builds from
    (``backends/shared`` and ``packages/capture``): the environment id follows ``uv.lock``,
    which does not change when the worker's sources do (``cli.environment.stale_worker``,
    exit 3)."""
    if worker_sources_differ(hello):
        raise AgentprovError("cli.environment.stale_worker", env_id=env_id, backend=backend)
