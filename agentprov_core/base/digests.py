"""Canonical JSON and the digests built on it (stable across runs and machines).

The bytes are those of the capture log's canonical JSON (:func:`agentprov_capture.canonical`:
sorted keys, no insignificant whitespace, UTF-8), over documents without a float: a plan,
configuration or identity digest must not depend on how a float is printed. Why the stored
evidence records are written by msgspec instead: ``agentprov_core.evidence.canonical``.
"""

from __future__ import annotations

from typing import Any


def canonical_json(obj: Any) -> bytes:
    """``obj``'s canonical JSON; a float anywhere in it is refused (``TypeError``)."""
    from agentprov_capture.canonical import canonical  # loaded on first use (start-up time)

    _refuse_floats(obj)
    return canonical(obj)


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
