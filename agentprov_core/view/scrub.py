"""What the viewer shows, made safe to show: every string of a document passes through the
redaction rules of :mod:`agentprov_core.base.redaction` (a key-shaped string becomes ``…``)
before it is written into the site. Escaping is not done here: the overview is rendered
with :func:`html.escape`, the pages' script builds the DOM with ``textContent`` only."""

from __future__ import annotations

from typing import Any

from agentprov_core.base.redaction import key_shape, redact_text

#: the longest string kept whole in a page's document (a longer one is cut, and says so)
MAX_TEXT = 200_000


def text(value: str) -> str:
    out = redact_text(value) if key_shape(value) else value
    if len(out) > MAX_TEXT:
        out = out[:MAX_TEXT] + f"… [{len(out) - MAX_TEXT} more characters not shown]"
    return out


def doc(value: Any) -> Any:
    """``value`` (JSON values) with every string, keys included, redacted."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(str(k)): doc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [doc(v) for v in value]
    return value


def raw_bytes(data: bytes) -> tuple[bytes, bool]:
    """The bytes of a stored file as the site may hold them, and whether they were
    redacted (then they are no longer the stored file's: its digest will not match)."""
    if key_shape(data) is None:
        return data, False
    return redact_text(data.decode("utf-8", "replace")).encode("utf-8"), True
