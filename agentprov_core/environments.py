"""Backend environments as T0 sees them before starting anything: ids and markers.

An environment id is ``<backend>-<8 hex>``: the first 8 hex of the pinned commit for a
git-pinned backend, else of the sha256 of the backend project's ``uv.lock`` (R-5).
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core import paths
from agentprov_core.digests import file_sha256
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta

MARKER = "AGENTPROV_ENV.json"


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
        raise AgentprovError("cli.environment.no_backend_project", backend=meta.backend)
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
