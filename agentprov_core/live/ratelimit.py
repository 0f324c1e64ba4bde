"""What one recorded wire reply says about an endpoint's rate limit, as the adaptive start
gate (:mod:`agentprov_core.run.gate`) reads it.

A reply is a *rate signal* when it is HTTP 429 or 503, or a ``wire_error`` whose exception
is a connection reset (the connection refused, closed or reset by the peer). Its pause is
what the reply asks for before the next request: ``retry-after-ms`` (milliseconds), else
``retry-after`` (delta seconds or an HTTP date), else, on any reply, ``x-ratelimit-remaining-
requests: 0`` with ``x-ratelimit-reset-requests`` (OpenAI's ``1s``, ``6m0s``, ``20ms``). A
value that is absurd is bounded and says so (``clamped``): a negative delay or a date in the
past is no pause; one beyond ``limit_s`` is ``limit_s``; one that does not parse is ignored.
Only the capture's allowlisted headers are read (docs/formats/capture-0.1.md): these are
among them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

#: the statuses that say "too many requests" or "overloaded, come back later"
RATE_STATUSES = (429, 503)
#: the httpx / httpcore / OS exceptions of a connection the peer refused, closed or reset
RESET_ERRORS = ("ConnectError", "RemoteProtocolError", "ReadError", "WriteError",
                "ConnectionResetError", "ConnectionRefusedError", "BrokenPipeError")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


@dataclass(frozen=True)
class Signal:
    """A reply's reading. ``cause`` (``http 429``, ``http 503``, ``connection reset``) makes
    it a rate signal, None when the reply was served; ``pause_s`` the bounded pause it asks
    for (None: none); ``header`` and ``value`` the header it came from, as received, when
    it was ``clamped`` (``negative``, ``past``, ``beyond``, ``unparsed``)."""

    cause: str | None
    ok: bool = False
    pause_s: float | None = None
    header: str | None = None
    value: str | None = None
    clamped: str | None = None


def read(record: dict[str, Any], now: float, limit_s: float) -> Signal | None:
    """The reading of one ``wire_response`` or ``wire_error`` record (None for any other
    kind); ``now`` is the epoch second an HTTP date is measured from, unless the reply
    carries its own ``date``."""
    kind = record.get("kind")
    if kind not in ("wire_response", "wire_error"):
        return None
    status = record.get("status")
    headers = record.get("headers") if isinstance(record.get("headers"), dict) else {}
    cause = None
    if isinstance(status, int) and status in RATE_STATUSES:
        cause = f"http {status}"
    elif kind == "wire_error" and str(record.get("error_type") or "").rpartition(".")[2] \
            in RESET_ERRORS:
        cause = "connection reset"
    ok = kind == "wire_response" and isinstance(status, int) and 200 <= status < 300
    pause, header, value, clamped = _pause(headers, now, limit_s, asked=cause is not None)
    return Signal(cause, ok, pause, header, value, clamped)


def _pause(headers: dict[str, Any], now: float, limit_s: float,
           asked: bool) -> tuple[float | None, str | None, str | None, str | None]:
    h = {str(k).lower(): str(v) for k, v in headers.items()}
    if asked and "retry-after-ms" in h:
        return _bound(_number(h["retry-after-ms"], 0.001), "retry-after-ms", h, limit_s)
    if asked and "retry-after" in h:
        raw = h["retry-after"].strip()
        secs = _number(raw, 1.0)
        if secs is None:  # an HTTP date, measured from the reply's own date when it has one
            secs = _date(raw)
            ref = _date(h["date"]) if "date" in h else None
            if secs is not None:
                secs -= ref if ref is not None else now
                if secs < 0:
                    return 0.0, "retry-after", raw, "past"
        return _bound(secs, "retry-after", h, limit_s)
    if h.get("x-ratelimit-remaining-requests", "").strip() == "0" \
            and "x-ratelimit-reset-requests" in h:
        return _bound(_duration(h["x-ratelimit-reset-requests"]),
                      "x-ratelimit-reset-requests", h, limit_s)
    return None, None, None, None


def _bound(secs: float | None, header: str, h: dict[str, str],
           limit_s: float) -> tuple[float | None, str | None, str | None, str | None]:
    raw = h[header][:80]
    if secs is None:
        return None, header, raw, "unparsed"
    if secs < 0:
        return 0.0, header, raw, "negative"
    if secs > limit_s:
        return limit_s, header, raw, "beyond"
    return secs, None, None, None


def _number(raw: str, scale: float) -> float | None:
    try:
        v = float(raw.strip())
    except ValueError:
        return None
    return v * scale if math.isfinite(v) else None


def _date(raw: str) -> float | None:
    try:
        return parsedate_to_datetime(raw).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _duration(raw: str) -> float | None:
    """OpenAI's reset durations: ``1s``, ``6m0s``, ``20ms``, ``1h2m``; a bare number is
    seconds."""
    raw = raw.strip()
    plain = _number(raw, 1.0)
    if plain is not None:
        return plain
    parts = _DURATION.findall(raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)
