"""A stored corpus's files as ``verify`` reads them: a regular file, never through a link,
a FIFO never waited on, in as few system calls as that allows (``open``, ``fstat``, one
``read``, ``close``: ``verify`` reads every file of the corpus once, and their number is
what it costs beside the hashing); where the raw store keeps a digest's bytes; and the
one reader of a capture log's chain.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from typing import NoReturn

import agentprov_capture

from agentprov_core.base import inputfile

HEX64 = re.compile(r"[0-9a-f]{64}")
CHUNK = 1 << 20


# the one reader of a capture log's chain (T0's ingest, the mapper and verify share it)
check_capture = agentprov_capture.check


def raw_rel(digest: str) -> str:
    return f"raw/sha256/{digest[:2]}/{digest}"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
          | getattr(os, "O_NOCTTY", 0))
#: a file larger than this is hashed in chunks, never held whole
WHOLE = 64 << 20


def _refused(path: str) -> NoReturn:
    """:func:`~agentprov_core.base.inputfile.open_regular`'s refusal of ``path``, in its
    words (its ``lstat`` is asked only on the way to an error)."""
    os.close(inputfile.open_regular(path, follow=False))
    raise inputfile.Unreadable("changed while it was read")


def _open(path: str) -> tuple[int, int]:
    """``(descriptor, size)`` of the regular file ``path``: opened non-blocking (a FIFO is
    refused at once, never waited on), never through a link (``O_NOFOLLOW``), then checked
    by ``fstat``: two system calls where :func:`inputfile.open_regular` spends three, for the
    tens of thousands of files ``verify`` reads. Raises
    :class:`~agentprov_core.base.inputfile.Missing` or ``Unreadable``, as ``open_regular``
    says it."""
    if not _NOFOLLOW:  # no O_NOFOLLOW: lstat first, as open_regular does
        fd = inputfile.open_regular(path, follow=False)
    else:
        try:
            fd = os.open(path, _FLAGS)
        except OSError:
            _refused(path)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        _refused(path)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        _refused(path)
    if st.st_size > inputfile.MAX_STORED:
        os.close(fd)
        raise inputfile.Unreadable(
            f"is {st.st_size:,} bytes; the limit is {inputfile.MAX_STORED:,}")
    return fd, st.st_size


def _read(fd: int, size: int) -> bytes:
    """The bytes of ``fd`` (``size`` by ``fstat``): one ``read`` when the file has not
    grown since (a regular file's read returns less than asked only at its end)."""
    try:
        data = os.read(fd, size + 1)
        if len(data) <= size:
            return data
        chunks = [data]
        while chunk := os.read(fd, CHUNK):
            chunks.append(chunk)
    except OSError as exc:
        raise inputfile.Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    data = b"".join(chunks)
    if len(data) > inputfile.MAX_STORED:
        raise inputfile.Unreadable(f"is more than {inputfile.MAX_STORED:,} bytes; the limit "
                                   f"is {inputfile.MAX_STORED:,}")
    return data


def read_corpus_file(path: str) -> bytes:
    """A corpus file's bytes: a regular file, never through a link, a FIFO never waited on
    (as :func:`agentprov_core.base.inputfile.open_regular` opens it). Raises
    :class:`~agentprov_core.base.inputfile.Missing` or ``Unreadable``."""
    fd, size = _open(path)
    try:
        return _read(fd, size)
    finally:
        os.close(fd)


def hash_file(path: str) -> tuple[str, int]:
    """``(sha256, size)`` of a corpus file (as :func:`read_corpus_file` opens it): read
    whole in one call when it is small, in large chunks otherwise (hashlib releases the
    GIL)."""
    fd, size = _open(path)
    try:
        if size <= WHOLE:
            data = _read(fd, size)
            return hashlib.sha256(data).hexdigest(), len(data)
        h = hashlib.sha256()
        size = 0
        try:
            while chunk := os.read(fd, CHUNK):
                h.update(chunk)
                size += len(chunk)
        except OSError as exc:
            raise inputfile.Unreadable(f"cannot be read ({exc.strerror or exc})") from None
        return h.hexdigest(), size
    finally:
        os.close(fd)


def hash_item(_base: str, item: tuple[str, str]) -> tuple[str, int]:
    """``hash_file`` of ``item``'s path; ``(why, -1)`` when it cannot be read."""
    try:
        return hash_file(item[1])
    except inputfile.Unreadable as exc:
        return str(exc), -1
