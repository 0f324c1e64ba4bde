"""An environment's identity as the worker sees it (the hello).

Each installed distribution is identified by its name, version and the sha256 of its
RECORD's own text (read, never stat-ing the files RECORD lists: a sandbox may forbid
reading some of them, such as ``.env.example``). T0 computes the same digests from the
files without importing anything from the environment; ``--offline-check`` compares both.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import agentprov_capture
from agentprov_capture.sources import sources_sha256

from agentprov_backend import __version__

PROTOCOL = "agentprov-worker/0.1"


def _name_version(dist: metadata.Distribution) -> tuple[str, str]:
    """Name and version from METADATA's header lines (the email parser that
    ``dist.metadata`` uses costs four times as much, for the same answer)."""
    name = version = ""
    for line in (dist.read_text("METADATA") or "").splitlines():
        if not line.strip():
            break
        if line.startswith("Name:"):
            name = line[5:].strip()
        elif line.startswith("Version:"):
            version = line[8:].strip()
    return name.lower().replace("_", "-"), version


def distributions() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for dist in metadata.distributions():
        record = dist.read_text("RECORD")
        if record is None:
            continue
        name, version = _name_version(dist)
        out[name] = {
            "version": version,
            "record_sha256": hashlib.sha256(record.encode("utf-8")).hexdigest(),
        }
    return dict(sorted(out.items()))


def defence_registry_sha256() -> str:
    data = resources.files("agentprov_backend").joinpath("defences.toml").read_bytes()
    return hashlib.sha256(data).hexdigest()


def hello() -> dict[str, Any]:
    from agentprov_backend import host

    served = host.served()
    return {
        "protocol": PROTOCOL,
        "agentprov_backend": __version__,
        "agentprov_backend_sources_sha256": sources_sha256(Path(__file__).resolve().parent),
        "agentprov_capture": agentprov_capture.__version__,
        "agentprov_capture_sources_sha256": sources_sha256(
            Path(agentprov_capture.__file__).resolve().parent),
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "distributions": distributions(),
        "defence_registry_sha256": defence_registry_sha256(),
        "sources": sorted(n for n, e in served.items() if "error" not in e),
        "served": served,
    }
