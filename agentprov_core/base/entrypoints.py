"""The entry points of one group, from an index kept beside the Python environment.

Finding a group's entry points through :mod:`importlib.metadata` imports it (the email
parser, zip files, …) and reads every installed distribution's ``entry_points.txt``:
about 20 ms of CPU, more than the rest of ``agentprov --version``. This module answers
from ``<sys.prefix>/var/cache/agentprov/entry-points.json`` instead while the installed
distributions are unchanged, and does the full scan (and rewrites the index) otherwise.

*Unchanged* is judged by a fingerprint taken afresh on every start, as
:mod:`importlib.metadata` finds distributions: for every ``sys.path`` entry, the name of
each ``*.dist-info`` and ``*.egg-info`` in it with its modification time and the size and
modification time of its ``entry_points.txt`` (a zip file on the path: its size and
time). Installing, upgrading or removing a distribution adds, renames or removes such a
directory; an ``entry_points.txt`` edited in place changes its size or time. The index
holds the whole fingerprint it was written under and is used only when the fresh one is
equal, byte for byte; an index that cannot be read or decoded, of another format, or
written under another fingerprint is ignored and rewritten. Where the environment is not
writable the scan runs every time, as without an index. With a distribution finder on
``sys.meta_path`` besides the standard path finder and the ``importlib_metadata``
backport's (which reads the same ``sys.path`` entries: any import of the backport adds
it), one that this fingerprint cannot see, the index is neither read nor written.

The index changes nothing but speed: each entry point is loaded as
:meth:`importlib.metadata.EntryPoint.load` loads it (the module imported, the attribute
path followed), and one whose value that method cannot parse is loaded by that method, so
its error is the same.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

FORMAT = "agentprov-entry-points/0.1"
#: the index's largest size read (a larger one is rebuilt)
MAX_INDEX = 4 << 20


class EntryPointRef(msgspec.Struct, frozen=True, array_like=True):
    """One entry point of the group: its name and value, the module and attribute path
    its value names (``None`` when :mod:`importlib.metadata` cannot parse it), and the
    distribution that declares it (its ``Name`` and version)."""

    name: str
    value: str
    group: str
    module: str | None
    attr: str | None
    distribution: str | None
    version: str | None

    def load(self) -> Any:
        """The object the entry point names, exactly as ``EntryPoint.load`` finds it."""
        if self.module is None:
            from importlib import metadata

            return metadata.EntryPoint(self.name, self.value, self.group).load()
        found = importlib.import_module(self.module)
        return functools.reduce(getattr, filter(None, (self.attr or "").split(".")), found)


class Index(msgspec.Struct):
    format: str
    group: str
    fingerprint: msgspec.Raw
    entries: list[EntryPointRef]


def index_path() -> Path:
    return Path(sys.prefix) / "var" / "cache" / "agentprov" / "entry-points.json"


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _metadata_dirs(root: str) -> Iterator[str]:
    """The children of ``root`` that :mod:`importlib.metadata` reads distributions from."""
    egg = os.path.basename(root).lower().endswith(".egg")
    for name in os.listdir(root):
        low = name.lower()
        if low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info"):
            yield name


def fingerprint(path: list[str] | None = None) -> bytes:
    """What the installed distributions on ``path`` (``sys.path``) look like: a change in
    any of them changes it. Path entries that hold no distribution do not count, so the
    console script and ``python -m`` (whose first entries differ) share an index."""
    out: list[Any] = []
    for entry in sys.path if path is None else path:
        if not isinstance(entry, str):
            continue
        root = entry or "."
        try:
            names = sorted(_metadata_dirs(root))
        except NotADirectoryError:  # a zip file: distributions may be inside
            out.append([os.path.abspath(root), _stat(root)])
            continue
        except OSError:  # absent: nothing found there
            continue
        if names:
            out.append([os.path.abspath(root), [
                [n, _stat(d), _stat(os.path.join(d, "entry_points.txt"))]
                for n in names for d in (os.path.join(root, n),)]])
    return msgspec.json.encode(out)


def _fingerprintable() -> bool:
    """Whether every distribution finder reads the ``sys.path`` entries
    :func:`fingerprint` follows: the standard path finder, and the ``importlib_metadata``
    backport's ``MetadataPathFinder`` (the same search over the same entries)."""
    from importlib.machinery import PathFinder

    return all(f is PathFinder or not hasattr(f, "find_distributions") or _path_backport(f)
               for f in sys.meta_path)


def _path_backport(finder: object) -> bool:
    kind = type(finder)
    return kind.__module__ == "importlib_metadata" and kind.__name__ == "MetadataPathFinder"


def scan(group: str) -> list[EntryPointRef]:
    """The group's entry points by :mod:`importlib.metadata`, in its order."""
    from importlib import metadata

    out = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        try:
            module, attr = ep.module, ep.attr
        except (AttributeError, ValueError):  # a value it cannot parse (the standard
            # library's match fails, the importlib_metadata backport's raises): load() says so
            module = attr = None
        out.append(EntryPointRef(ep.name, ep.value, group, module, attr,
                                 dist.metadata["Name"] if dist is not None else None,
                                 dist.version if dist is not None else None))
    return out


def _read(path: Path) -> Index | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INDEX + 1)
        if len(data) > MAX_INDEX:
            return None
        index = msgspec.json.decode(data, type=Index)
    except (OSError, msgspec.DecodeError):
        return None
    return index if index.format == FORMAT else None


def _write(path: Path, index: Index) -> None:
    """Replace the index at once (a reader sees the old one or the new one); an index
    that cannot be written is no error."""
    import tempfile  # only when the index is rewritten: start-up time

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".entry-points.")
        try:
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), 0o644)  # names and versions only: any user may read
                f.write(msgspec.json.encode(index))
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def entry_points(group: str) -> list[EntryPointRef]:
    """The group's entry points, from the index while the fingerprint is unchanged."""
    if not _fingerprintable():
        return scan(group)
    path = index_path()
    now = fingerprint()
    index = _read(path)
    if index is not None and index.group == group and bytes(index.fingerprint) == now:
        return index.entries
    found = scan(group)
    _write(path, Index(FORMAT, group, msgspec.Raw(now), found))
    return found
