"""A stored corpus's files as ``verify`` reads them: a regular file, never through a link,
a FIFO never waited on; hashed in large chunks (``hashlib`` releases the GIL); where the
raw store keeps a digest's bytes; and the one reader of a capture log's chain.
"""

from __future__ import annotations

import hashlib
import os
import re

import agentprov_capture

from agentprov_core.base import inputfile

HEX64 = re.compile(r"[0-9a-f]{64}")
CHUNK = 1 << 20


# the one reader of a capture log's chain (T0's ingest, the mapper and verify share it)
check_capture = agentprov_capture.check


def raw_rel(digest: str) -> str:
    return f"raw/sha256/{digest[:2]}/{digest}"


def read_corpus_file(path: str) -> bytes:
    """A corpus file's bytes: a regular file, never through a link, a FIFO never waited on
    (:func:`agentprov_core.base.inputfile.open_regular`). Raises
    :class:`~agentprov_core.base.inputfile.Missing` or ``Unreadable``."""
    fd = inputfile.open_regular(path, follow=False)
    try:
        return inputfile.read_fd(fd, inputfile.MAX_STORED, CHUNK)
    finally:
        os.close(fd)


def hash_file(path: str) -> tuple[str, int]:
    """``(sha256, size)`` of a corpus file (as :func:`read_corpus_file` opens it), read in
    large chunks (hashlib releases the GIL)."""
    fd = inputfile.open_regular(path, follow=False)
    h = hashlib.sha256()
    size = 0
    try:
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
            size += len(chunk)
    except OSError as exc:
        raise inputfile.Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return h.hexdigest(), size


def hash_item(_base: str, item: tuple[str, str]) -> tuple[str, int]:
    """``hash_file`` of ``item``'s path; ``(why, -1)`` when it cannot be read."""
    try:
        return hash_file(item[1])
    except inputfile.Unreadable as exc:
        return str(exc), -1
