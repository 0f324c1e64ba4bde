"""Reading TOML inputs (plans, registries) with errors that name the file, line and fix."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from agentprov_core.errors import AgentprovError

_AT_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")


def read(path: Path, code: str) -> tuple[dict[str, Any], str]:
    """Parse ``path``; raise ``code`` (a usage error with ``location`` and ``what``)."""
    from agentprov_core.base import inputfile

    try:
        text = inputfile.read_bytes(path).decode("utf-8")
    except inputfile.Unreadable as exc:
        raise AgentprovError(code, location=str(path), what=str(exc)) from None
    except UnicodeDecodeError as exc:
        raise AgentprovError(code, location=str(path),
                             what=f"is not UTF-8 text (byte {exc.start})") from None
    try:
        inputfile.check_toml_depth(text)
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _AT_LINE.search(msg)
        where = f"{path}:{m.group(1)}" if m else str(path)
        what = _AT_LINE.sub("", msg).strip()
        raise AgentprovError(code, location=where, what=f"malformed TOML: {what}") from None
    except inputfile.Unreadable as exc:
        raise AgentprovError(code, location=str(path), what=f"malformed TOML: it {exc}") from None
    except RecursionError:
        raise AgentprovError(code, location=str(path), what="malformed TOML: nested too "
                             f"deeply (the limit is {inputfile.MAX_DEPTH} levels)") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise AgentprovError(code, location=str(path),
                             what=f"malformed TOML: {inputfile.number_error(exc)}") from None


def line_of(text: str, key: str, table: str | None = None) -> int | None:
    """The 1-based line where ``key`` is assigned (inside ``[table]`` when given)."""
    in_table = table is None
    key_re = re.compile(rf"^\s*(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*=")
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            name = stripped.strip("[]").strip()
            in_table = table is None or name == table
            if table is not None and name == table and key is None:
                return n
            continue
        if in_table and key_re.match(line):
            return n
    return None


def location(path: Path, text: str, key: str, table: str | None = None) -> str:
    n = line_of(text, key, table)
    return f"{path}:{n}" if n else str(path)
