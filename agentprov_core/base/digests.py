"""Canonical JSON and the digests built on it (stable across runs and machines)."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(obj: Any) -> bytes:
    """Sorted keys, no insignificant whitespace, UTF-8. Floats are refused: digests of
    configurations must not depend on how a platform prints a float."""
    _refuse_floats(obj)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _refuse_floats(obj: Any) -> None:
    if isinstance(obj, float):
        raise TypeError("floats are not allowed in canonical JSON; use a string or an integer")
    if isinstance(obj, dict):
        for v in obj.values():
            _refuse_floats(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _refuse_floats(v)


def sha256_hex(data: bytes) -> str:
    import hashlib  # OpenSSL costs start-up time: loaded when first needed

    return hashlib.sha256(data).hexdigest()


def digest(obj: Any) -> str:
    """The sha256 (hex) of ``obj``'s canonical JSON."""
    return sha256_hex(canonical_json(obj))


def file_sha256(path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
