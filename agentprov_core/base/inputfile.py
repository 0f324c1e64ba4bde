"""Reading a file a user names (``--plan``, ``--llm-script``, ``--env-file``, a registry or
its overlay, settings, a preset, prices, an import's result file) or a corpus holds (its
manifest, index, ledger, stored logs and executions) without trusting it: a regular file
only, checked by ``fstat`` after a non-blocking open (a FIFO, a device or a directory would
block or never end), and for a corpus's own files by ``lstat`` first, a link never followed
(:func:`open_regular`); at most :data:`MAX_BYTES` (:data:`MAX_STORED` for a stored file);
decoded as UTF-8 and strict JSON (:func:`load_json`); nested at most :data:`MAX_DEPTH`
levels deep before any parser recurses into it (Python's parsers, and msgspec's, raise
``RecursionError`` at about a thousand levels). And the one check of a path an output is
written to, before anything is (:func:`check_output`, :func:`output_dir`).

Each reader raises :class:`Unreadable` (:class:`Missing` when there is no file) with what
is wrong; its caller turns that into its own error naming the file, the field and the fix."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: The largest input file read (a plan, a script, a .env, a registry, a manifest).
MAX_BYTES = 16 * 1024 * 1024
#: The largest file of a corpus read whole (a capture log, a native log, an AER).
MAX_STORED = 1 << 31
#: The deepest nesting of arrays and objects (tables) an input may hold.
MAX_DEPTH = 64


class Unreadable(ValueError):
    """The file cannot be used; ``str()`` says why, without its contents."""


class Missing(Unreadable):
    """The file does not exist (a caller may treat that as "none given")."""


#: The longest name of one path component (Linux's NAME_MAX).
NAME_MAX = 255
_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))


def _oserror(exc: OSError) -> Unreadable:
    """What an ``open`` or ``stat`` failure means, in a user's words."""
    if isinstance(exc, FileNotFoundError):
        return Missing("no such file")
    if isinstance(exc, IsADirectoryError):
        return Unreadable("is a directory, not a file")
    if isinstance(exc, NotADirectoryError):
        return Unreadable("a part of its path is a file, not a directory")
    if exc.errno == errno.ELOOP:
        return Unreadable("is a symbolic link (a loop, or a link where none is followed)")
    if exc.errno == errno.ENAMETOOLONG:
        return Unreadable(f"its name is too long (a part of a path is at most {NAME_MAX} bytes)")
    return Unreadable(f"cannot be read ({exc.strerror or exc})")


def _kind(mode: int) -> str | None:
    """Why a file of ``mode`` is never read (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISLNK(mode):
        return "is a symbolic link; a link is never followed here"
    return "is not a regular file (a FIFO, socket or device is never read)"


def open_regular(path: str | Path, *, follow: bool = True) -> int:
    """A read-only descriptor of the regular file ``path``: opened without blocking (a FIFO
    with no writer is refused at once instead of waiting forever) and checked by ``fstat``;
    with ``follow=False`` (a corpus's own files) a symbolic link is refused too, by ``lstat``
    before the open and ``O_NOFOLLOW`` in it. The caller closes it."""
    if not follow:
        try:
            why = _kind(os.lstat(path).st_mode)
        except OSError as exc:
            raise _oserror(exc) from None
        if why is not None:
            raise Unreadable(why)
    try:
        fd = os.open(path, _READ_FLAGS | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    except OSError as exc:
        raise _oserror(exc) from None
    try:
        why = _kind(os.fstat(fd).st_mode)
    except OSError as exc:
        os.close(fd)
        raise _oserror(exc) from None
    if why is not None:
        os.close(fd)
        raise Unreadable(why)
    return fd


def read_fd(fd: int, limit: int = MAX_BYTES, chunk: int = 1 << 20) -> bytes:
    """The bytes of the open regular file ``fd``, at most ``limit`` of them."""
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise Unreadable(f"is {size:,} bytes; the limit is {limit:,}")
        chunks, size = [], 0
        while data := os.read(fd, chunk):
            chunks.append(data)
            size += len(data)
            if size > limit:  # it grew while being read
                raise Unreadable(f"is more than {limit:,} bytes; the limit is {limit:,}")
    except OSError as exc:
        raise Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_bytes(path: str | Path, limit: int = MAX_BYTES, *, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), at most ``limit``."""
    fd = open_regular(path, follow=follow)
    try:
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int = MAX_BYTES, *, follow: bool = True) -> str:
    """:func:`read_bytes`, decoded as UTF-8 (a byte that is not is refused, with where)."""
    return decode(read_bytes(path, limit, follow=follow))


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text, or :class:`Unreadable` saying where it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"is not UTF-8 text (byte {exc.start:,} is not)") from None


def load_json(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """Strict JSON of ``data`` (UTF-8, nested at most ``limit`` deep, no NaN or Infinity,
    no string that is not valid Unicode, such as a lone surrogate), or :class:`Unreadable`
    saying why."""
    text = decode(data) if isinstance(data, bytes) else data
    check_json_depth(text, limit)
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Unreadable(f"nests more than {limit} levels deep") from None
    except ValueError as exc:
        raise Unreadable(f"is not JSON ({number_error(exc)})") from None
    if _SURROGATE.search(text) and _has_surrogate(doc):
        raise Unreadable("holds a string that is not valid Unicode (a lone surrogate, "
                         "such as \\ud800)")
    return doc


_SURROGATE = re.compile(r"\\[uU][dD][89a-fA-F]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def stored_lines(path: str | Path) -> list[bytes]:
    """The lines of a corpus's appended file ``path`` (its index or ledger; none when it
    does not exist), read as a stored file: one that is not a regular file is
    ``cli.environment.corpus`` (exit 3), never waited on."""
    from agentprov_core.errors import AgentprovError

    try:
        return read_bytes(path, MAX_STORED, follow=False).split(b"\n")
    except Missing:
        return []
    except Unreadable as exc:
        p = Path(path)
        raise AgentprovError("cli.environment.corpus", corpus=p.parent,
                             what=f"its {p.name} {exc}") from None


def output_dir(option: str, path: str | Path, fix: str, *, links: bool = False) -> None:
    """:func:`check_output` of the directory an option names, as its usage error
    (``cli.usage.option_value``, exit 2: the option, the path, what is wrong, ``fix``)."""
    from agentprov_core.errors import AgentprovError

    try:
        check_output(path, directory=True, links=links)
    except Unreadable as exc:
        raise AgentprovError("cli.usage.option_value", option=option, value=str(path),
                             what=f"{exc}; {fix}") from None


def check_output(path: str | Path, *, directory: bool, links: bool = False) -> None:
    """Refuse an output path before anything is written to it: a component longer than
    :data:`NAME_MAX`, a symbolic link (dangling, a loop, or, unless ``links``, any: an
    output that is replaced is never replaced through one), an existing entry of the other
    kind (a file, FIFO or device where a directory is wanted, or the reverse), or a path
    under something that is not a directory. An absent ``path`` under an existing directory
    passes (it is created)."""
    p = Path(path)
    for part in p.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise Unreadable(f"a part of the path is {len(os.fsencode(part))} bytes long; "
                             f"the limit is {NAME_MAX}")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _oserror(exc) from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            if not links:
                raise Unreadable("is a symbolic link; an output is never written through one")
            try:
                st = os.stat(p)
            except OSError:
                raise Unreadable("is a symbolic link to nothing (dangling, or a loop)") from None
        if directory and not stat.S_ISDIR(st.st_mode):
            raise Unreadable("exists and is not a directory")
        if not directory and not stat.S_ISREG(st.st_mode):
            raise Unreadable("exists and is not a regular file")
        return
    parent = p.absolute().parent
    while True:
        try:
            st = os.stat(parent)
        except FileNotFoundError:
            parent = parent.parent
            continue
        except OSError as exc:
            raise Unreadable(f"its parent {parent} cannot be used: "
                             f"{_oserror(exc)}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise Unreadable(f"{parent} is not a directory, so nothing can be made under it")
        return


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
