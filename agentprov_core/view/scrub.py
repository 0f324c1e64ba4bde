"""What the viewer shows, made safe to show: every string of a document passes through the
redaction rules of :mod:`agentprov_core.base.redaction` (a key-shaped string becomes ``…``)
before it is written into the site. Escaping is not done here: the overview is rendered
with :func:`html.escape`, the pages' script builds the DOM with ``textContent`` only."""

from __future__ import annotations

import json
from typing import Any

from agentprov_core.base.redaction import key_shape, redact_text

#: the longest string kept whole in a page's document (a longer one is cut, and says so)
MAX_TEXT = 200_000


def _shape(value: str) -> str | None:
    """:func:`key_shape` of any string (one that is not valid Unicode too)."""
    return key_shape(value.encode("utf-8", "replace"))


def text(value: str) -> str:
    out = redact_text(value) if _shape(value) else value
    if len(out) > MAX_TEXT:
        out = out[:MAX_TEXT] + f"… [{len(out) - MAX_TEXT} more characters not shown]"
    return out


def doc(value: Any) -> Any:
    """``value`` (JSON values) with every string, keys included, redacted and cut to
    :data:`MAX_TEXT`. A document whose JSON text holds no key shape and is no longer than
    that is returned as it is (one scan of its text instead of one per string: JSON
    escapes no character a key shape is made of)."""
    try:
        blob = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _walk(value)
    if len(blob) <= MAX_TEXT and _shape(blob) is None:
        return value
    return _walk(value)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(str(k)): _walk(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v) for v in value]
    return value


def raw_bytes(data: bytes) -> tuple[bytes, bool]:
    """The bytes of a stored file as the site may hold them, and whether they were
    redacted (then they are no longer the stored file's: its digest will not match)."""
    if key_shape(data) is None:
        return data, False
    return redact_text(data.decode("utf-8", "replace")).encode("utf-8"), True
