"""The environment marker, ``AGENTPROV_ENV.json``: what an environment was built as."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

MARKER = "AGENTPROV_ENV.json"
FORMAT = "agentprov-env-marker/0.1"


class Marker(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str
    environment_id: str
    backend: str
    project: str
    built_at: str
    agentprov: str
    python: str
    uv: str
    lock_sha256: str
    exclude_newer: str | None
    pinned_commit: str | None
    distributions: dict[str, dict[str, str]]
    files_verified: int
    guarded: dict[str, str]
    compiled: dict[str, Any] | None = None
    defence_registry_sha256: str | None
    hello: dict[str, Any]
    probe: dict[str, Any]
    identity_sha256: str
    #: the provisioned defence assets by id (``agentprov_core.backend.defassets.record``): pins,
    #: origin, kind, licence and digest; ``None`` when the build provisioned none
    defence_assets: dict[str, Any] | None = None
    #: the host libraries the build installed (``agentprov_core.backend.hostlibs.record``):
    #: version, where the copy came from, the digest of its sources
    host: dict[str, dict[str, str]] | None = None
    #: each path dependency at build time, by distribution: its ``directory`` relative to
    #: the project and the digest of its sources
    #: (``agentprov_core.backend.environments.path_sources``)
    path_sources: dict[str, dict[str, str]] | None = None
    #: the sha256 of each task file the backend project names, by its path in the
    #: environment (``agentprov_core.backend.identity.task_file_digests``); ``None``: none
    task_files: dict[str, str] | None = None
    #: the dataset the build copied in (``agentprov_core.backend.datasets.Copy.record``):
    #: kind (``copy`` or ``fixture``), revision, whether verified against it, counts and
    #: every file's sha256; ``None`` when the backend takes none
    dataset: dict[str, Any] | None = None
    #: the pinned upstream commit the benchmark was built from
    #: (``agentprov_core.backend.upstream.record``): repository, full commit, tree, the
    #: paths extracted and where it was fetched from; ``None`` for a lock-pinned backend
    upstream: dict[str, Any] | None = None


def path(env_dir: Path) -> Path:
    return env_dir / MARKER


def read(env_dir: Path) -> Marker:
    """Raise ``FileNotFoundError`` or ``ValueError`` (corrupt, foreign format)."""
    raw = path(env_dir).read_bytes()
    try:
        m = msgspec.json.decode(raw, type=Marker)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"is corrupted ({exc})") from None
    if m.format != FORMAT:
        raise ValueError(f"has format {m.format!r}, not {FORMAT!r}")
    return m


def write(env_dir: Path, marker: Marker) -> None:
    p = path(env_dir)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(marker), indent=1) + b"\n")
    tmp.replace(p)
