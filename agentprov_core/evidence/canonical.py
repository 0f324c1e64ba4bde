"""The stored form of evidence records (AER, SEM, PROV, validation): canonical JSON.

Sorted keys, no insignificant whitespace, UTF-8 (non-ASCII as itself), one trailing newline,
encoded by msgspec (``order="sorted"``). Floats are allowed (an AER carries payloads as the
wire had them, and capture times); they are written the way msgspec writes them, the same
way every time, so re-deriving a record reproduces its bytes exactly.
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
