"""The digest of a package's sources, which both sides of the worker boundary compute alike:
the worker reports it in its hello for the host libraries it runs
(``agentprov_backend.identity``), and T0 computes it over the copies it builds from
(``agentprov_core.backend.hostlibs``), so an environment built from other worker code (an
older agentprov) is refused until it is rebuilt. Defined here, in the library both sides
install, so that the two can never compute it differently.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def sources_sha256(root: Path) -> str:
    """The sha256 over ``<relative path> <sha256 of its bytes>`` lines (sorted by path,
    joined by newlines) of the ``*.py`` and ``*.toml`` files under ``root``, outside hidden
    and cache directories."""
    lines = []
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts[:-1]):
            continue
        if p.suffix in (".py", ".toml") and p.is_file():
            lines.append(f"{rel.as_posix()} {hashlib.sha256(p.read_bytes()).hexdigest()}")
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
