"""Writing the overlay (:mod:`.overlay`) with tomlkit: comments and layout survive, only
the toggled line changes, and a toggle back to the registry's own value removes it. A
toggle rewrites its entry whole (a misspelt key a hand edit left in it goes), and
:func:`reset_overlay` removes an entry or the whole overlay: the commands repair what they
write."""

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


def _load(path: Path, table: str) -> tomlkit.TOMLDocument:
    from agentprov_core.base import inputfile
    from agentprov_core.registries.overlay import repair_hint

    try:
        return tomlkit.parse(inputfile.read_text(path))
    except inputfile.Unreadable as exc:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f"{exc}; {repair_hint(table)}") from None
    except TOMLKitError as exc:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f"malformed TOML: {exc}; {repair_hint(table)}") from None


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
    doc = _load(path, table) if os.path.lexists(path) else _new(base, fmt, key)
    entries = doc.get(table)
    if entries is not None and not isinstance(entries, dict):
        del doc[table]  # not a table of entries: a hand edit this toggle replaces
        entries = None
    entry = entries.get(name) if entries is not None else None
    if entry is not None and (not isinstance(entry, dict) or set(entry) - {key}):
        del entries[name]  # the toggle writes its entry whole: a misspelt key goes
        entry = None
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
    _store(path, doc, table, check)
    return True


def _store(path: Path, doc: tomlkit.TOMLDocument, table: str,
           check: Callable[[str], object]) -> None:
    """Write ``doc`` to ``path`` once ``check`` accepts it; remove the overlay when it sets
    nothing."""
    text = tomlkit.dumps(doc)
    check(text)
    if not doc.get(table):
        path.unlink(missing_ok=True)
    else:
        _write(path, text)


def reset_overlay(path: Path, table: str, name: str | None,
                  check: Callable[[str], object]) -> str:
    """Remove ``[table.name]`` from the overlay ``path`` (the rest checked by ``check``
    before it is written), or with ``name`` None the whole overlay, whatever it holds (a
    regular file or a link; anything else is refused, since no command wrote it). Returns
    what it did, in words."""
    import stat

    from agentprov_core.registries.overlay import repair_hint

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f"{paths.display(path)}: no overlay; nothing to reset"
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what="is not a file (no agentprov command wrote it): remove "
                                  "it by hand")
    if name is None:
        path.unlink()
        return f"removed the overlay {paths.display(path)}"
    try:
        doc = _load(path, table)
    except AgentprovError:
        raise AgentprovError("cli.usage.registry_file", location=str(path),
                             what=f"cannot be read as TOML, so no entry of it can be "
                                  f"removed; agentprov registry {table} reset removes the "
                                  "overlay") from None
    entries = doc.get(table)
    if not isinstance(entries, dict) or name not in entries:
        try:
            check(tomlkit.dumps(doc))
        except AgentprovError as exc:
            raise AgentprovError("cli.usage.registry_file", location=str(path),
                                 what=f"sets nothing for {name}, and is invalid: "
                                      f"{exc.message}; {repair_hint(table)}") from None
        return f"{paths.display(path)} sets nothing for {name}; nothing to reset"
    del entries[name]
    if not entries:
        del doc[table]
    _store(path, doc, table, check)
    return f"removed {name} from the overlay {paths.display(path)}"
