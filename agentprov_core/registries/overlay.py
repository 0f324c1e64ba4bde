"""The overlay: ``$AGENTPROV_HOME/registry/<file>``, what the ``agentprov registry`` commands
write, read over the packaged or checked-out registry file of the same name.

It holds one key per entry and nothing else: ``enabled`` of a defence, ``live_status`` of a
part. Those are T0's policy, checked when a run is planned; the registry file itself (for
the defences, part of what a backend environment is built from) is never edited by a
command, so a toggle changes no file an environment was built from or holds.

An overlay that is not valid (a hand edit: a misspelt key, a value of the wrong type, an
entry the registry does not have, malformed TOML, or a directory or FIFO in its place) is
refused wherever it is read, naming the file, the line, the field and the fix, and the fix
always includes the command that repairs it: a toggle rewrites its own entry whole, and
``agentprov registry defences|parts reset [NAME]`` removes an entry, or the whole overlay.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentprov_core.base import paths, tomlfile
from agentprov_core.errors import AgentprovError
from agentprov_core.registries import fields


def path_of(base: Path) -> Path:
    return paths.overlay_dir() / base.name


def repair_hint(table: str) -> str:
    """The commands that repair an overlay of the registry ``table`` (defences, parts)."""
    return (f"or repair it with agentprov registry {table} reset NAME (removes that entry) "
            f"or agentprov registry {table} reset (removes the overlay)")


def _with_hint(exc: AgentprovError, table: str) -> AgentprovError:
    if exc.code == "cli.usage.registry_field":
        return AgentprovError(exc.code, **dict(exc.params,
                                               fix=f"{exc.params['fix']}; {repair_hint(table)}"))
    return AgentprovError(exc.code, **dict(exc.params,
                                           what=f"{exc.params['what']}; {repair_hint(table)}"))


def read(path: Path, text: str | None, fmt: str, table: str, key: str,
         names: list[str], valid: Callable[[Any], str | None]) -> dict[str, Any]:
    """The overlay's values of ``key`` by entry name (``{}`` when there is no overlay).

    :param text: the overlay's text (read from ``path`` when ``None``).
    :param names: the entries of the file it lies over; any other is refused.
    :param valid: a value's problem, with its fix, or ``None``."""
    try:
        return _read(path, text, fmt, table, key, names, valid)
    except AgentprovError as exc:
        raise _with_hint(exc, table) from None


def _read(path: Path, text: str | None, fmt: str, table: str, key: str,
          names: list[str], valid: Callable[[Any], str | None]) -> dict[str, Any]:
    if text is None:
        if not os.path.lexists(path):
            return {}
        data, text = tomlfile.read(path, "cli.usage.registry_file")
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:  # text this module wrote: a bug if reached
            raise AgentprovError("cli.usage.registry_file", location=str(path),
                                 what=f"malformed TOML: {exc}") from None
    if data.get("format") != fmt:
        raise AgentprovError(
            "cli.usage.registry_field", location=tomlfile.location(path, text, "format"),
            field="format", what=f"is {data.get('format')!r}", fix=f'set format = "{fmt}"')
    fields.check_top(path, text, data, ["format", table], f"an overlay of {path.name}")
    out: dict[str, Any] = {}
    for name, entry in (data.get(table) or {}).items():
        where = f"{table}.{name}"
        if name not in names:
            raise fields.refuse(path, text, where, None, f"is not an entry of {path.name}",
                                "remove the table, or use one of " + ", ".join(sorted(names)))
        fields.check_keys(path, text, where, entry, [key], "an overlay entry")
        if key in entry:
            problem = valid(entry[key])
            if problem:
                raise fields.refuse(path, text, where, key, f"is {entry[key]!r}", problem)
            out[name] = entry[key]
    return out
