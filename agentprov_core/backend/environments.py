"""Backend environments as T0 sees them before starting anything: ids and markers.

An environment id is ``<backend>-<8 hex>``: the first 8 hex of the pinned commit for a
git-pinned backend, else of the sha256 of the backend project's ``uv.lock`` (R-5).
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core.backend.marker import MARKER
from agentprov_core.base import paths
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta


def project_dir(meta: SourceMeta) -> Path | None:
    base = paths.backends_dir()
    if base is None or meta.backend_project is None:
        return None
    return base / meta.backend_project


def environment_id(meta: SourceMeta) -> str:
    prefix = meta.environment_prefix or meta.backend or meta.name
    if meta.pinned_commit:
        return f"{prefix}-{meta.pinned_commit[:8]}"
    project = project_dir(meta)
    lock = project / "uv.lock" if project is not None else None
    if lock is None or not lock.is_file():
        why = (f"{paths.display(lock)} is absent" if lock is not None
               else "the source declares no backend project")
        raise AgentprovError("cli.environment.no_backend_project", backend=meta.backend, why=why)
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
    project = project_dir(meta)
    if project is not None and (project / "uv.lock").is_file():
        lock = file_sha256(project / "uv.lock")
        if lock != m.lock_sha256:
            raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                                 what=f"records lock_sha256 {m.lock_sha256[:8]}, but "
                                      f"backends/{meta.backend_project}/uv.lock is {lock[:8]}")
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


def shared_sources_sha256() -> str | None:
    """The digest of the worker code this agentprov builds environments from
    (``backends/shared/src/agentprov_backend``: ``*.py`` and ``*.toml`` by relative path),
    the same algorithm as ``agentprov_backend.identity.sources_sha256``; ``None`` when no
    backends directory is at hand (nothing to compare with)."""
    import hashlib

    base = paths.backends_dir()
    root = base / "shared" / "src" / "agentprov_backend" if base is not None else None
    if root is None or not root.is_dir():
        return None
    lines = [f"{p.relative_to(root).as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}"
             for p in sorted(root.rglob("*")) if p.suffix in (".py", ".toml") and p.is_file()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def check_worker_sources(hello: dict, env_id: str, backend: str) -> None:
    """The worker code in the environment must be the code this agentprov builds from
    (``backends/shared``): the environment id follows ``uv.lock``, which does not change when
    the worker's sources do (``cli.environment.stale_worker``, exit 3)."""
    ours = shared_sources_sha256()
    if ours is not None and hello.get("agentprov_backend_sources_sha256") != ours:
        raise AgentprovError("cli.environment.stale_worker", env_id=env_id, backend=backend)
