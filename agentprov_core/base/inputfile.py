"""Reading a file a user names (``--plan``, ``--llm-script``, ``--env-file``, a registry, a
corpus's manifest) without trusting it: a regular file only (a FIFO, a device or a
directory would block or never end), at most :data:`MAX_BYTES`, and nested at most
:data:`MAX_DEPTH` levels deep before any parser recurses into it (Python's parsers, and
msgspec's, raise ``RecursionError`` at about a thousand levels).

Each reader raises :class:`Unreadable` with what is wrong; its caller turns that into its
own usage error naming the file, the field and the fix."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

#: The largest input file read (a plan, a script, a .env, a registry, a manifest).
MAX_BYTES = 16 * 1024 * 1024
#: The deepest nesting of arrays and objects (tables) an input may hold.
MAX_DEPTH = 64


class Unreadable(ValueError):
    """The file cannot be used; ``str()`` says why, without its contents."""


def read_bytes(path: str | Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them. Opened without
    blocking, so a FIFO with no writer is refused at once instead of waiting forever."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise Unreadable("no such file") from None
    except IsADirectoryError:
        raise Unreadable("is a directory, not a file") from None
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Unreadable("is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("is not a regular file (a FIFO, socket or device is never read)")
        if st.st_size > limit:
            raise Unreadable(f"is {st.st_size:,} bytes; the limit is {limit:,}")
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew while being read
                raise Unreadable(f"is more than {limit:,} bytes; the limit is {limit:,}")
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_TOML_SKIP = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _depth(text: str, skip: re.Pattern[str], limit: int) -> int:
    """The deepest nesting of ``text`` (0 when it cannot exceed ``limit``)."""
    brackets = _NOT_BRACKET.sub("", skip.sub("", text))
    if brackets.count("[") + brackets.count("{") <= limit:
        return 0
    depth = deepest = 0
    for c in brackets:
        depth += _STEP[c]
        deepest = max(deepest, depth)
    return deepest


def check_json_depth(text: str | bytes, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`Unreadable` when the JSON ``text`` nests arrays and objects more than
    ``limit`` levels deep (strings are skipped: a bracket inside one is not nesting)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    if (d := _depth(text, _JSON_STRING, limit)) > limit:
        raise Unreadable(f"nests arrays and objects {d} levels deep; the limit is {limit}")


def check_toml_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """As :func:`check_json_depth`, for TOML (arrays and inline tables; strings and
    comments skipped)."""
    if (d := _depth(text, _TOML_SKIP, limit)) > limit:
        raise Unreadable(f"nests arrays and tables {d} levels deep; the limit is {limit}")


def number_error(exc: ValueError) -> str:
    """What a parser's ``ValueError`` says, in the words of a user's file: Python refuses
    to read an integer of more than 4,300 digits."""
    if "integer string conversion" in str(exc):
        return "a number has more than 4,300 digits"
    return str(exc)
