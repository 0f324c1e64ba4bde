"""The lock checks ``agentprov info`` and ``agentprov plugins`` show, remembered from the
last build.

Checking a backend project's lock against what it declares
(:func:`agentprov_core.backend.projects.lock_problem`) parses its ``uv.lock`` (140–180 KB
for the bundled backends) with the standard library's pure-Python TOML parser: most of
what ``info`` spends above its imports. ``agentprov backends build``, which checks the lock
anyway, records in ``$AGENTPROV_HOME/cache/lock-checks.json`` that a project's lock matched,
with what that depends on: each file the check read (the lock, the project's
``pyproject.toml`` and each path dependency's) by its size, modification time and sha256,
the worker package the project names, and the checking code itself (the sha256 of its
modules). A listing reuses the answer only while every one of them is unchanged, content
included (a file rewritten with its old size and time is read again), and checks the lock
itself otherwise, an unreadable or foreign cache included.

A listing never writes (``info`` and ``plugins`` leave ``$AGENTPROV_HOME`` as they found
it), and what builds or runs never reads the cache: they check the lock themselves, so a
cache that lies can mislead a listing, never a build.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from agentprov_core.base import inputfile, paths

if TYPE_CHECKING:
    from agentprov_core.backend.projects import Located

FORMAT = "agentprov-lock-checks/0.1"
#: the cache file's largest size read (a cache larger than that is rebuilt)
MAX_CACHE = 1 << 20


class Stamp(msgspec.Struct, array_like=True):
    size: int
    mtime_ns: int
    sha256: str


class Entry(msgspec.Struct):
    """A project whose lock matched: what the answer depends on."""

    checker: str  # the sha256 of the checking code
    worker: str
    files: dict[str, Stamp]


class Cache(msgspec.Struct):
    format: str
    entries: dict[str, Entry] = {}


def cache_path() -> Path:
    return paths.home() / "cache" / "lock-checks.json"


def _stamp(path: Path, known: Stamp | None = None) -> Stamp | None:
    """The file's stamp, or None when it cannot be read; with ``known``, None as soon as
    its size or time differs (the content is then not read)."""
    try:
        st = path.stat()
        if known is not None and (st.st_size, st.st_mtime_ns) != (known.size, known.mtime_ns):
            return None
        data = inputfile.read_bytes(path, inputfile.MAX_STORED)
    except (OSError, inputfile.Unreadable):
        return None
    return Stamp(st.st_size, st.st_mtime_ns, hashlib.sha256(data).hexdigest())


@functools.cache
def _checker() -> str:
    h = hashlib.sha256()
    for name in ("lockcheck.py", "projects.py", "hostlibs.py"):  # the check's modules
        h.update(Path(__file__).with_name(name).read_bytes())
    return h.hexdigest()


def _read() -> Cache:
    try:
        cache = msgspec.json.decode(inputfile.read_bytes(cache_path(), MAX_CACHE), type=Cache)
    except (inputfile.Unreadable, msgspec.DecodeError):
        return Cache(FORMAT)
    return cache if cache.format == FORMAT else Cache(FORMAT)


def _write(cache: Cache) -> None:
    """Replace the cache file at once (a reader sees the old one or the new one); a cache
    that cannot be written is no error."""
    import tempfile  # only a build writes: start-up time of a listing

    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".lock-checks.")
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.encode(cache))
        os.replace(tmp, path)
    except OSError:
        pass


def lock_problem(loc: Located, check: Callable[[Located, set[Path]], str | None]
                 ) -> str | None:
    """``check(loc, seen)``'s answer for the present project ``loc``: None at once when the
    last build recorded a match and nothing it depends on changed."""
    assert loc.directory is not None
    got = _read().entries.get(str(loc.directory.resolve()))
    if got is not None and got.checker == _checker() and \
            got.worker == (loc.entry.project.worker or "") and all(
                _stamp(Path(p), s) == s for p, s in got.files.items()):
        return None
    return check(loc, set())


def record(loc: Located, check: Callable[[Located, set[Path]], str | None]) -> None:
    """After a build: check ``loc``'s lock and, when it matches, remember it (with every
    file the check read)."""
    assert loc.directory is not None
    seen: set[Path] = set()
    if check(loc, seen) is not None:
        return
    files = [loc.directory / "uv.lock", loc.directory / "pyproject.toml",
             *(d / "pyproject.toml" for d in sorted(seen))]
    stamps = {str(f.resolve()): _stamp(f) for f in files}
    if any(s is None for s in stamps.values()):  # a file it could not read: not kept
        return
    cache = _read()
    cache.entries[str(loc.directory.resolve())] = Entry(
        _checker(), loc.entry.project.worker or "", stamps)  # type: ignore[arg-type]
    _write(cache)
