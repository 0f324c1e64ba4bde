"""A sealed corpus as one file: ``package --out NAME.tar`` writes it, ``verify`` and
``prove`` take it as ``--corpus NAME.tar`` (docs/formats/sealed-corpus-0.3.md, "The
archive").

The archive is deterministic: the same sealed corpus gives the same bytes. It is a POSIX
tar (pax format) holding one top directory, ``NAME/``, and under it the sealed corpus's
directories and files, sorted by path (a directory before what it holds), each with
mtime 0, owner and group 0 with no names, mode 0755 for a directory and 0444 for a file
(whatever the sealer's umask); nothing else (no link, no device, no extended attribute).

A reader unpacks it into a private temporary directory (mode 0700, removed afterwards)
and checks that: every member must be a directory or a regular file inside ``NAME/``,
named once, or the archive is refused as a whole before anything is written.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentprov_core.audit import sealed
from agentprov_core.errors import AgentprovError

SUFFIX = ".tar"


def is_archive(path: str | Path) -> bool:
    return str(path).endswith(SUFFIX)


def _info(name: str, kind: bytes, mode: int, size: int = 0) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size = kind, mode, size
    ti.mtime = 0
    ti.uid = ti.gid = 0
    ti.uname = ti.gname = ""
    return ti


def write(root: Path, out: Path, top: str) -> None:
    """Write the sealed corpus directory ``root`` to the new file ``out`` as the
    deterministic archive whose top directory is ``top``."""
    dirs: set[str] = set()
    with open(out, "xb") as f, tarfile.open(fileobj=f, mode="w",
                                            format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_info(top, tarfile.DIRTYPE, 0o755))
        for rel, e in sorted(sealed.walk(root), key=lambda x: x[0].split("/")):
            parts = rel.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    tar.addfile(_info(f"{top}/{d}", tarfile.DIRTYPE, 0o755))
            with open(e.path, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                tar.addfile(_info(f"{top}/{rel}", tarfile.REGTYPE, 0o444, size), src)


def _refuse(path: Path, what: str) -> AgentprovError:
    return AgentprovError("corpus.environment.not_a_corpus", corpus=path,
                          what=f"not a sealed corpus archive: {what}")


def _top(path: Path, members: list[tarfile.TarInfo]) -> str:
    """The one top directory of the archive's ``members``; refused unless each member is a
    directory or a regular file inside it, named once."""
    tops = {m.name.split("/", 1)[0] for m in members}
    if len(tops) != 1:
        raise _refuse(path, "it does not hold one top directory")
    top = tops.pop()
    seen: set[str] = set()
    for m in members:
        parts = m.name.split("/")
        if m.name.startswith("/") or any(p in ("", ".", "..") for p in parts) or m.name in seen:
            raise _refuse(path, f"member {m.name!r} is not a path inside {top}/ named once")
        if not (m.isreg() or m.isdir()):
            raise _refuse(path, f"member {m.name!r} is a link or a special file, which a "
                                "sealed corpus never holds")
        seen.add(m.name)
    return top


def _remove(tmp: Path) -> None:
    for d, _, _ in os.walk(tmp):  # a directory stored read-only keeps its mode
        os.chmod(d, 0o700)
    shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """The sealed corpus of the archive ``path``, unpacked into a private temporary
    directory for as long as the context lasts."""
    tmp: Path | None = None
    try:
        with tarfile.open(path, mode="r:") as tar:
            members = tar.getmembers()
            top = _top(path, members)
            tmp = Path(tempfile.mkdtemp(prefix=".agentprov-archive-"))
            tar.extractall(tmp, members=members, filter="data")
    except (OSError, tarfile.TarError) as exc:
        if tmp is not None:
            _remove(tmp)
        raise _refuse(path, f"it cannot be read or unpacked ({exc})") from None
    except BaseException:
        if tmp is not None:
            _remove(tmp)
        raise
    try:
        yield tmp / top
    finally:
        _remove(tmp)
