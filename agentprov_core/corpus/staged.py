"""What T0 reads from, and writes into, a session's staging directory, and what it takes
of the worker's result: everything the worker stages or returns is hostile input.

A session's directory is opened without following a link (``O_DIRECTORY | O_NOFOLLOW``)
and everything in it is reached one path component at a time relative to the descriptor of
the directory above (``dir_fd``): a symlink, to a host file, to the corpus or to another
session, is refused and never followed. An entry is classified by ``lstat`` before it is
opened and again by ``fstat`` of the descriptor once opened (``O_NOFOLLOW | O_NONBLOCK``,
so a FIFO swapped in between never blocks): only a regular file with a single link
(``st_nlink == 1``; a hard link can name a file outside staging) and within its size cap is
read; a FIFO, a socket, a device or a file over its cap is refused from its metadata,
without reading a byte of it (a sparse file of several GB is refused from its size).

A path the worker returns (the native log) is a relative POSIX path of plain components
(no ``..``, no ``.``, no empty component, not absolute, no NUL or control character, at
most :data:`PATH_MAX` characters, each component at most :data:`NAME_MAX` bytes); it names
a file read as above, never a path opened on its own.

A refusal is a text ``name: why`` (names shown with key-shaped strings replaced); the
caller seals the session ``errored`` with ``map.staging_refused`` (docs/containment.md,
"What T0 refuses from staging").
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIB = 1 << 20
#: the capture/0.1 log (``capture.jsonl``): a cell's wire log of every model call
CAPTURE_MAX = 256 * MIB
#: the benchmark's native log (the file the result names)
NATIVE_MAX = 64 * MIB
#: any other staged file (``result.json``, …): read for the redaction scan only
OTHER_MAX = 16 * MIB
#: all of one session's files together
TOTAL_MAX = 512 * MIB
#: entries (files and directories) in one session's directory tree
MAX_ENTRIES = 1000
#: directory levels below the session's directory
MAX_DEPTH = 16
#: a returned path, in characters; and one component of a name, in bytes
PATH_MAX = 1024
NAME_MAX = 255
#: a text field of the worker's result (``reason``, ``error``, a setup refusal's message)
TEXT_MAX = 2000

CAPTURE = "capture.jsonl"
END_STATUSES = ("complete", "incomplete", "errored", "aborted")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Refused(Exception):
    """A staged entry T0 does not read or write (the message says why)."""


@dataclass
class Staged:
    """What :func:`read` found: the files read (``{relative POSIX path: bytes}``, sorted)
    and the refusals (``name: why``)."""

    files: dict[str, bytes] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def shown(name: str) -> str:
    """``name`` as a refusal shows it: printable, at most 80 characters, key-shaped strings
    replaced (a name is the worker's text, and a refusal is written to the ledger)."""
    from agentprov_core.base.redaction import redact_text

    text = redact_text("".join(c if c.isprintable() else repr(c)[1:-1] for c in name[:200]))
    return text if len(text) <= 80 else text[:60] + f"… ({len(name)} characters)"


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "not a regular file"


def _not_regular(st: os.stat_result, cap: int) -> str | None:
    """Why a file with metadata ``st`` is not read (None: it is)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{_kind(st.st_mode)}, not a regular file"
    if st.st_nlink != 1:
        return f"a hard link ({st.st_nlink} names for one file)"
    if st.st_size > cap:
        return f"{st.st_size} bytes, over the cap of {cap} bytes"
    return None


def bad_name(value: Any) -> str | None:
    """Why ``value`` is not a path T0 takes from the worker (None: it is one)."""
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a path"
    if "\x00" in value:
        return "holds a NUL byte"
    if len(value) > PATH_MAX:
        return f"is {len(value)} characters long (at most {PATH_MAX})"
    if value.startswith("/"):
        return "is an absolute path"
    parts = value.split("/")
    if ".." in parts:
        return "has a '..' component"
    if any(p in ("", ".") for p in parts):
        return "has an empty or '.' component"
    for p in parts:
        try:
            size = len(p.encode("utf-8"))
        except UnicodeEncodeError:  # a name of bytes that are not UTF-8 (surrogate-escaped)
            return "is not UTF-8"
        if not p.isprintable():
            return "holds a control character"
        if size > NAME_MAX:
            return f"has a component of {size} bytes (at most {NAME_MAX})"
    return None


@contextmanager
def session_dir(path: Path) -> Iterator[int]:
    """A descriptor of the session's directory ``path``, opened without following a link
    (its last component: the directories above it are the corpus's own). Raises
    :class:`Refused` for a symlink or anything but a directory, ``FileNotFoundError`` when
    it is gone."""
    why = (f"{shown(path.name)}: the session's directory (or the staging directory above "
           "it) is a symlink or not a directory")
    try:
        parent = os.open(path.parent, _DIR)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(why) from None
        raise
    try:
        fd = os.open(path.name, _DIR, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(why) from None
        raise
    finally:
        os.close(parent)
    try:
        yield fd
    finally:
        os.close(fd)


def _read_fd(fd: int, cap: int) -> bytes:
    chunks, got = [], 0
    while got <= cap:
        b = os.read(fd, min(cap + 1 - got, 1 << 20))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    if got > cap:
        raise Refused(f"grew over the cap of {cap} bytes while it was read")
    return b"".join(chunks)


def open_file(dir_fd: int, name: str, flags: int, cap: int) -> int:
    """``name`` (one component) in the directory ``dir_fd``, opened with ``flags`` and
    ``O_NOFOLLOW | O_NONBLOCK``, and checked on the descriptor (a regular file, one link,
    at most ``cap`` bytes). Raises :class:`Refused`, or ``FileNotFoundError``."""
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                     | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused("a symlink, not a regular file") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
            raise Refused("not a regular file") from None
        raise
    try:
        why = _not_regular(os.fstat(fd), cap)
    except BaseException:
        os.close(fd)
        raise
    if why is not None:
        os.close(fd)
        raise Refused(why)
    return fd


def _cap(rel: str, native: str | None) -> int:
    return CAPTURE_MAX if rel == CAPTURE else NATIVE_MAX if rel == native else OTHER_MAX


def read(path: Path, native: str | None = None) -> Staged:
    """Every regular file under the session's directory ``path``, read once through
    descriptors (see the module's docstring), and what was refused. ``native``: the
    native log's name the worker returned (already checked by :func:`bad_name`), read with
    its own cap. T0 scans these bytes and stores the same ones."""
    out = Staged()
    budget = {"entries": 0, "bytes": 0}
    try:
        with session_dir(path) as fd:
            _walk(fd, "", 0, native, out, budget)
    except Refused as exc:
        out.refused.append(str(exc))
    except FileNotFoundError:
        pass  # nothing staged: the capture log is missing
    except OSError as exc:  # a directory the worker made unreadable (chmod 000, …)
        out.refused.append(f"{shown(path.name)}: the session's directory could not be read "
                           f"({exc.strerror})")
    out.files = dict(sorted(out.files.items()))
    return out


def _walk(fd: int, prefix: str, depth: int, native: str | None, out: Staged,
          budget: dict[str, int]) -> None:
    with os.scandir(fd) as it:  # lazily: never more names than the cap in memory
        names = sorted(e.name for e in itertools.islice(it, MAX_ENTRIES + 1 - budget["entries"]))
    for name in names:
        rel = prefix + name
        budget["entries"] += 1
        if budget["entries"] > MAX_ENTRIES:
            out.refused.append(f"{shown(prefix) or 'the session'}: more than {MAX_ENTRIES} "
                               "entries (the rest were not read)")
            return
        if (why := bad_name(rel)) is not None:
            out.refused.append(f"{shown(rel)}: a name that {why}")
            continue
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if depth >= MAX_DEPTH:
                    raise Refused(f"a directory more than {MAX_DEPTH} levels deep")
                try:
                    sub = os.open(name, _DIR, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise Refused("a symlink, not a directory") from None
                    raise
                try:
                    _walk(sub, rel + "/", depth + 1, native, out, budget)
                finally:
                    os.close(sub)
                continue
            cap = _cap(rel, native)
            why = _not_regular(st, cap)
            if why is not None:  # refused from its metadata: never opened
                raise Refused(why)
            if budget["bytes"] + st.st_size > TOTAL_MAX:
                raise Refused(f"the session's files exceed the cap of {TOTAL_MAX} bytes")
            f = open_file(fd, name, os.O_RDONLY, cap)
            try:
                data = _read_fd(f, cap)
            finally:
                os.close(f)
            budget["bytes"] += len(data)
            out.files[rel] = data
        except Refused as exc:
            out.refused.append(f"{shown(rel)}: {exc}")
        except FileNotFoundError:
            continue  # removed while T0 read the directory: not staged
        except OSError as exc:  # made unreadable by the worker (chmod 000, …)
            out.refused.append(f"{shown(rel)}: could not be read ({exc.strerror})")


@contextmanager
def appending(path: Path, name: str = CAPTURE) -> Iterator[tuple[int, bytes] | None]:
    """``(descriptor, content)`` of the staged file ``name`` of the session's directory
    ``path``, opened for appending (``O_APPEND``) through descriptors and checked on the
    descriptor, or None when it is missing. Raises :class:`Refused`: T0 never writes
    through a link, into a FIFO or a device, nor outside the session's directory."""
    with session_dir(path) as d:
        try:
            fd = open_file(d, name, os.O_RDWR | os.O_APPEND, CAPTURE_MAX)
        except FileNotFoundError:
            yield None
            return
        try:
            yield fd, _read_fd(fd, CAPTURE_MAX)
        finally:
            os.close(fd)


def _text(value: Any) -> str:
    return value if len(value) <= TEXT_MAX else value[:TEXT_MAX] + "…"


def returned(result: Any) -> tuple[dict[str, Any], list[str]]:
    """What T0 takes of the worker's result for a cell, and what it refused: the fields it
    records, each of its type (a status of the capture's four, booleans, a call count,
    texts of at most :data:`TEXT_MAX` characters, a setup refusal's code and message, the
    native log's name as :func:`bad_name` takes it); a field of another type is refused
    and left out."""
    if not isinstance(result, dict):
        return {"status": "errored"}, [
            f"the worker's result: a {type(result).__name__}, not a JSON object"]
    out: dict[str, Any] = {}
    refused: list[str] = []

    def bad(key: str, why: str) -> None:
        refused.append(f"the worker's result: {key} {why}")

    status = result.get("status")
    if status in END_STATUSES:
        out["status"] = status
    else:
        out["status"] = "errored"
        if status is not None:
            bad("status", "is not complete, incomplete, errored or aborted")
    for key in ("utility", "security"):
        v = result.get(key)
        if v is None or isinstance(v, bool):
            out[key] = v
        else:
            bad(key, "is not a boolean")
    calls = result.get("calls")
    if calls is None or (isinstance(calls, int) and not isinstance(calls, bool) and calls >= 0):
        out["calls"] = calls
    else:
        bad("calls", "is not a count")
    for key in ("reason", "error"):
        v = result.get(key)
        if isinstance(v, str):
            out[key] = _text(v)
        elif v is not None:
            bad(key, "is not a text")
    sr = result.get("setup_refusal")
    if isinstance(sr, dict) and isinstance(sr.get("code"), str) and isinstance(
            sr.get("message"), str) and isinstance(sr.get("detail", ""), str | None):
        out["setup_refusal"] = {k: _text(sr[k]) for k in ("code", "message", "detail")
                                if isinstance(sr.get(k), str)}
    elif sr is not None:
        bad("setup_refusal", "is not a refusal (a code and a message)")
    native = result.get("native_log")
    if native is not None:
        why = bad_name(native)
        if why is None:
            out["native_log"] = native
        else:
            refused.append(f"the worker's result: native_log {shown(str(native))} {why}")
    carried = result.get(CARRIED_REFUSED)
    if isinstance(carried, list):  # refused where the session ran (:func:`carry_session`)
        refused += [_text(str(r)) for r in carried[:MAX_CARRIED]]
    elif carried is not None:
        bad(CARRIED_REFUSED, "is not a list of refusals")
    return out, refused


#: the result's field of what a host that ran the session refused of its staging
CARRIED_REFUSED = "staging_refused"
#: at most this many of those refusals are taken
MAX_CARRIED = 20


def carry_session(path: Path, result: dict[str, Any]) -> dict[str, Any]:
    """A session staged on another host, made ready to travel to T0: the worker's result
    (its :data:`CARRIED_REFUSED` field replaced by what this host refused) and the files of
    the session's directory ``path``, read as :func:`read` reads them (no links, bounded
    sizes). :func:`land_session` writes them into T0's staging."""
    native = result.get("native_log") if bad_name(result.get("native_log")) is None else None
    got = read(path, native=native)
    return {"result": {k: v for k, v in result.items() if k != CARRIED_REFUSED}
            | {CARRIED_REFUSED: got.refused}, "files": got.files}


def land_session(path: Path, files: Any) -> list[str]:
    """Write the files a session carried (:func:`carry_session`) into its staging directory
    ``path`` on T0's host, each a fresh regular file (``O_EXCL``, never through a link), by
    the rules :func:`read` applies: names of plain components at most :data:`MAX_DEPTH`
    directories deep, at most :data:`MAX_ENTRIES`, each within its cap, all within
    :data:`TOTAL_MAX`. What it refused (``name: why``); T0 then ingests the directory as any
    other staging. The session's directory is opened once and each directory below it once
    for the files in it (in order of their path's components), at most :data:`MAX_DEPTH`
    descriptors held at a time."""
    if not isinstance(files, dict):
        return [f"the carried session: a {type(files).__name__}, not a mapping of files"]
    refused: list[str] = []
    total = 0
    path.mkdir(parents=True, exist_ok=True)
    with session_dir(path) as fd:
        opened: list[tuple[str, int]] = []  # the directories of the last file, each opened
        try:
            for n, (rel, data) in enumerate(sorted(files.items(),
                                                   key=lambda kv: str(kv[0]).split("/"))):
                if n >= MAX_ENTRIES:
                    refused.append(f"the carried session: more than {MAX_ENTRIES} files")
                    break
                if (why := bad_name(rel)) is not None:
                    refused.append(f"{shown(str(rel))}: a name that {why}")
                    continue
                if not isinstance(data, bytes):
                    refused.append(f"{shown(rel)}: not bytes")
                    continue
                total += len(data)
                if len(data) > max(CAPTURE_MAX, NATIVE_MAX) or total > TOTAL_MAX:
                    refused.append(f"{shown(rel)}: over its cap")
                    continue
                *dirs, name = rel.split("/")
                if len(dirs) > MAX_DEPTH:
                    refused.append(f"{shown(rel)}: more than {MAX_DEPTH} directories deep")
                    continue
                try:
                    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                  | getattr(os, "O_CLOEXEC", 0), 0o600,
                                  dir_fd=_landing_dir(fd, opened, dirs))
                    with os.fdopen(out, "wb") as f:
                        f.write(data)
                except OSError as exc:
                    refused.append(f"{shown(rel)}: could not be written ({exc.strerror})")
        finally:
            for _, d in opened:
                os.close(d)
    return refused


def _landing_dir(top: int, opened: list[tuple[str, int]], dirs: list[str]) -> int:
    """The descriptor of ``dirs`` below the session's directory ``top``, each made (mode
    0700) where missing and opened without following a link; ``opened`` holds the chain of
    the previous file's directories, kept where it is shared and closed where it is not."""
    keep = 0
    while keep < min(len(opened), len(dirs)) and opened[keep][0] == dirs[keep]:
        keep += 1
    while len(opened) > keep:
        os.close(opened.pop()[1])
    for d in dirs[keep:]:
        parent = opened[-1][1] if opened else top
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, 0o700, dir_fd=parent)
        opened.append((d, os.open(d, _DIR, dir_fd=parent)))
    return opened[-1][1] if opened else top
