"""Writing the overlay (:mod:`.overlay`) with tomlkit: comments and layout survive, only
the toggled line changes, and a toggle back to the registry's own value removes it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

HEADER = """\
agentprov's registry overlay, written by `agentprov registry …`: read over
{base}
It sets only `{key}` of an entry; a toggle back to that file's value removes the line."""


def _load(path: Path) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what="no such file") from None
    except TOMLKitError as exc:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f"malformed TOML: {exc}") from None


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new(base: Path, fmt: str, key: str) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    for line in HEADER.format(base=paths.display(base), key=key).splitlines():
        doc.add(tomlkit.comment(line))
    doc["format"] = fmt
    return doc


def set_overlay(path: Path, base: Path, fmt: str, table: str, name: str, key: str,
                value: Any, default: Any, check: Callable[[str], object]) -> bool:
    """Set ``[table.name].key = value`` in the overlay ``path`` over ``base`` (``default``:
    ``base``'s own value, which removes the line, and the file once it sets nothing).
    ``check(text)`` refuses an invalid result (raising) before anything is written. Return
    whether the overlay changed."""
    doc = _load(path) if path.is_file() else _new(base, fmt, key)
    entries = doc.get(table)
    entry = entries.get(name) if entries is not None else None
    current = entry[key] if entry is not None and key in entry else default
    if current == value and (entry is None or key not in entry or value != default):
        return False
    if value == default:
        del entry[key]
        if not entry:
            del entries[name]
        if not entries:
            del doc[table]
    else:
        if entries is None:
            doc[table] = entries = tomlkit.table(is_super_table=True)
        if entry is None:
            entries[name] = entry = tomlkit.table()
        entry[key] = value
    text = tomlkit.dumps(doc)
    check(text)
    if table not in doc:
        path.unlink(missing_ok=True)
    else:
        _write(path, text)
    return True
