"""Toggling registry entries in place with tomlkit: comments and layout survive, and only
the toggled line changes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError


def _load(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what="no such file") from None
    except TOMLKitError as exc:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f"malformed TOML: {exc}") from None


def _write(path: Path, doc: tomlkit.TOMLDocument) -> None:
    target = path.resolve()  # registry/defences.toml is a link into backends/shared
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(tomlkit.dumps(doc))
        os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def set_value(path: Path, table: str, name: str, key: str, value, kind: str) -> bool:
    """Set ``[table.name].key = value``; return whether the file changed."""
    doc = _load(path)
    entries = doc.get(table)
    if entries is None or name not in entries:
        known = ", ".join(sorted(entries or {}))
        raise AgentprovError("cli.usage.registry_unknown_entry", kind=kind, name=name,
                             registry=paths.display(path), known=known)
    entry = entries[name]
    if key in entry and entry[key] == value:
        return False
    entry[key] = value
    _write(path, doc)
    return True
