"""The stored form of evidence records (AER, SEM, PROV, validation): canonical JSON.

Sorted keys, no insignificant whitespace, UTF-8 (non-ASCII as itself), one trailing newline,
encoded by msgspec (``order="sorted"``). Floats are allowed (an AER carries payloads as the
wire had them, and capture times); they are written the way msgspec writes them, the same
way every time, so re-deriving a record reproduces its bytes exactly.

This is the one canonical JSON that is not :func:`agentprov_capture.canonical` (which the
capture log and, without floats, every digest of ``agentprov_core.base.digests`` use). For
a document without a float the two give the same bytes; they differ in how a float with an
exponent is written (msgspec ``1e16``, Python's ``json`` ``1e+16``) and in what is not a
number (msgspec writes NaN as ``null``, the capture form refuses it). Both are fixed by
what corpora already store: ``validate`` and ``recompute`` require an AER, SEM or PROV file
to be exactly its record's encoding, and the chain check requires each capture line to be
exactly its record's, so moving either form to the other would fail every stored record
holding such a float. And each side needs its own encoder: the records are msgspec structs
(encoded here without a copy into dicts), while the capture library is the worker's,
standard library only. ``tests/test_canonical_json.py`` holds the three to these rules.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")


def canonical(obj: Any) -> bytes:
    """``obj`` (a msgspec struct or builtins) as canonical JSON bytes, without a newline."""
    return _encoder.encode(obj)


def stored(obj: Any) -> bytes:
    """The bytes a corpus stores: canonical JSON and a newline."""
    return _encoder.encode(obj) + b"\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def first_difference(a: Any, b: Any, path: str = "$") -> str:
    """Where two decoded JSON documents first differ, as a path (``$.outcome.status``,
    ``$.records[3]``): how recompute and validation name what changed."""
    if type(a) is not type(b):
        return path
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}"
            if a[k] != b[k]:
                return first_difference(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path}[{min(len(a), len(b))}]"
    return path
