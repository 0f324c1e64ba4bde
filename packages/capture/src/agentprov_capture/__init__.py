"""capture/0.1, the worker's hash-chained wire log (docs/formats/capture-0.1.md), defined
once for both sides: the worker writes it (:class:`CaptureWriter`) and T0 checks it
(:func:`check`, :func:`verify`).

A session's capture log is JSON lines. Every line is one record in canonical JSON
(:func:`canonical`) and carries ``seq`` (0, 1, 2, ...), ``prev`` (the sha256 hex of the
previous line's bytes; ``null`` for the header), ``kind`` and ``t`` (seconds since the
session started, from the monotonic clock). Standard library only.
"""

from agentprov_capture.canonical import canonical
from agentprov_capture.chain import Chain, check, verify
from agentprov_capture.schema import (
    CELL_FIELDS,
    FORMAT,
    HEADER_FIELDS,
    INSTRUMENTATION_RE,
    KINDS,
    PAYLOAD_FIELDS,
    RESERVED,
    STATUSES,
    SYNC_KINDS,
)
from agentprov_capture.wire import (
    ALLOWED_HEADERS,
    ALLOWED_PREFIXES,
    DENIED_FRAGMENTS,
    body_fields,
    filter_headers,
    header_allowed,
    sanitize_url,
)
from agentprov_capture.writer import CaptureError, CaptureWriter

__version__ = "0.1.0"

__all__ = [
    "ALLOWED_HEADERS", "ALLOWED_PREFIXES", "CELL_FIELDS", "DENIED_FRAGMENTS", "FORMAT",
    "HEADER_FIELDS", "INSTRUMENTATION_RE", "KINDS", "PAYLOAD_FIELDS", "RESERVED", "STATUSES",
    "SYNC_KINDS", "CaptureError", "CaptureWriter", "Chain", "body_fields", "canonical",
    "check", "filter_headers", "header_allowed", "sanitize_url", "verify",
]
