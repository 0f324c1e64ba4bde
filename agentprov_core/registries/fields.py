"""Reading a registry table into its struct, with every problem named by the file, the
line, the field and the fix: an unknown key (with the nearest known one), a missing or
mistyped field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import tomlfile
from agentprov_core.errors import AgentprovError

_AT = re.compile(r"\s*- at `\$\.?([^`]*)`$")
_MISSING = re.compile(r"missing required field `([^`]+)`")


def table_line(text: str, table: str) -> int | None:
    """The 1-based line of the header ``[table]``."""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("[") and s.strip("[]").strip() == table:
            return n
    return None


def where(path: Path, text: str, table: str, key: str | None = None) -> str:
    """``path:line`` of ``key`` in ``[table]``, else of the table's header, else ``path``."""
    n = tomlfile.line_of(text, key, table) if key else None
    n = n or table_line(text, table)
    return f"{path}:{n}" if n else str(path)


def refuse(path: Path, text: str, table: str, key: str | None, what: str,
           fix: str) -> AgentprovError:
    field = f"[{table}].{key}" if key else f"[{table}]"
    return AgentprovError("cli.usage.registry_field", location=where(path, text, table, key),
                          field=field, what=what, fix=fix)


def _near(key: str, known: list[str]) -> list[str]:
    import difflib  # only for a refusal: start-up time

    return difflib.get_close_matches(key, known, n=1)


def keys_of(kind: type, *skip: str) -> list[str]:
    return [f.name for f in msgspec.structs.fields(kind) if f.name not in skip]


def unknown_key(path: Path, text: str, table: str, key: str, known: list[str],
                kind: str) -> AgentprovError:
    near = _near(key, known)
    fix = (f"did you mean {near[0]}? " if near else "") + f"the keys of {kind} are " \
        + ", ".join(known)
    return refuse(path, text, table, key, f"is not a key of {kind}", fix)


def check_keys(path: Path, text: str, table: str, entry: Any, known: list[str],
               kind: str) -> None:
    if not isinstance(entry, dict):
        raise refuse(path, text, table, None, "is not a table",
                     f"write it as a [{table}] table")
    for key in entry:
        if key not in known:
            raise unknown_key(path, text, table, key, known, kind)


def convert(path: Path, text: str, table: str, entry: dict[str, Any], kind: type,
            what: str, **extra: Any):
    """``entry`` (the table ``[table]``) as a ``kind``; ``extra`` are the fields the table's
    name gives (``name``, ``id``)."""
    check_keys(path, text, table, entry, keys_of(kind, *extra), what)
    try:
        return msgspec.convert(dict(entry, **extra), type=kind)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        missing = _MISSING.search(msg)
        if missing:
            raise refuse(path, text, table, None, f"has no {missing.group(1)}",
                         f"add {missing.group(1)} = … (the file's header says what it is)"
                         ) from None
        at = _AT.search(msg)
        key = at.group(1).split(".")[0].split("[")[0] if at else None
        raise refuse(path, text, table, key or None,
                     "is invalid (" + _AT.sub("", msg).strip() + ")",
                     "give it the type the file's header describes") from None


def check_top(path: Path, text: str, data: dict[str, Any], known: list[str],
              kind: str) -> None:
    """The file's top-level keys and tables are ``known``."""
    for key in data:
        if key not in known:
            n = tomlfile.line_of(text, key) or table_line(text, key) or next(
                (i for i, ln in enumerate(text.splitlines(), 1)
                 if ln.strip().startswith(f"[{key}.")), None)
            near = _near(key, known)
            raise AgentprovError(
                "cli.usage.registry_field", location=f"{path}:{n}" if n else str(path),
                field=key, what=f"is not a key or table of {kind}",
                fix=(f"did you mean {near[0]}? " if near else "") + "it holds "
                    + ", ".join(known))
