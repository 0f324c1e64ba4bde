"""Where agentprov finds its registries, backends and home directory."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent.parent  # the agentprov_core package


@cache
def repo_root() -> Path | None:
    """The source checkout agentprov runs from, or ``None`` for an installed wheel."""
    root = _PKG.parent
    if (root / "registry").is_dir() and (root / "backends").is_dir():
        return root
    return None


def registry_dir() -> Path:
    """``$AGENTPROV_REGISTRY``, else the checkout's ``registry/``, else the packaged copy."""
    env = os.environ.get("AGENTPROV_REGISTRY")
    if env:
        return Path(env)
    root = repo_root()
    if root is not None:
        return root / "registry"
    return _PKG / "_registry"


#: the defence registry inside the worker library that backends install (R-22.2), from a
#: checkout's root and inside a wheel's ``agentprov_core/``
SHIPPED_DEFENCES = ("backends/shared/src/agentprov_backend/defences.toml",
                    "_worker/agentprov-backend/src/agentprov_backend/defences.toml")


def defence_registry() -> Path:
    """The defence registry file (R-22.2): the registry directory's ``defences.toml``. In a
    checkout it holds the bytes of the worker library's
    (``backends/shared/src/agentprov_backend/defences.toml``, which every backend
    environment installs; a test keeps the two equal), so that a copy of ``registry/``
    (``cp -r``) carries it. A registry directory without one reads the shipped file."""
    path = registry_dir() / "defences.toml"
    if path.is_file():
        return path
    root = repo_root()
    shipped = [root / SHIPPED_DEFENCES[0]] if root is not None else []
    shipped.append(_PKG / SHIPPED_DEFENCES[1])
    return next((p for p in shipped if p.is_file()), path)


def overlay_dir() -> Path:
    """``$AGENTPROV_HOME/registry/``: what ``agentprov registry … enable|disable|set-status``
    writes, read over :func:`registry_dir` (the packaged or checked-out files are never
    edited by a command: a wheel's copy would be undone by the next install, and the
    defence registry is part of what a backend environment is built from)."""
    return home() / "registry"


def backends_dir() -> Path | None:
    env = os.environ.get("AGENTPROV_BACKENDS")
    if env:
        return Path(env)
    root = repo_root()
    return root / "backends" if root is not None else None


def home() -> Path:
    """``$AGENTPROV_HOME`` (made absolute: workers run in other directories), else
    ``~/.agentprov``."""
    env = os.environ.get("AGENTPROV_HOME")
    return Path(env).absolute() if env else Path.home() / ".agentprov"


def display(path: Path) -> str:
    """``path`` relative to the checkout when it lies inside it (stable across machines)."""
    root = repo_root()
    if root is not None:
        try:
            return str(path.absolute().relative_to(root))
        except ValueError:
            pass
    return str(path)
