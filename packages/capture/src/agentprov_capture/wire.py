"""What a wire record may hold: the header allowlist (applied by the writer to every wire
record, so no caller can record a credential), URLs without user info or query values, and
how a body is recorded."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from agentprov_capture.canonical import canonical

#: Header names recorded verbatim (lower-cased). Everything else is dropped; only its name
#: is recorded, in ``headers_dropped``.
ALLOWED_HEADERS = frozenset({
    "accept", "accept-encoding", "content-type", "content-length", "content-encoding",
    "transfer-encoding", "connection", "user-agent", "host", "date", "server", "retry-after",
    "retry-after-ms", "x-should-retry", "x-request-id", "request-id", "anthropic-version",
    "anthropic-beta",
    # Inspect's id of a model request (a random id per request, no secret): the
    # inspect.eval mapper pairs each model event of the .eval log with its wire attempt by it
    "x-irid",
})
#: Header name prefixes recorded verbatim: the SDKs' telemetry, OpenAI's own headers
#: (organization, project, version, processing time) and providers' rate limits.
ALLOWED_PREFIXES = ("x-stainless-", "openai-", "x-ratelimit-", "anthropic-ratelimit-")
#: A prefix-matched name containing one of these is dropped all the same (defence in depth:
#: ``openai-api-key`` is not a real header, and is never recorded).
DENIED_FRAGMENTS = ("auth", "key", "secret", "cookie", "passw", "credential", "signature",
                    "session", "token")
#: Rate-limit headers count tokens (``x-ratelimit-remaining-tokens``): "token" is allowed there.
_RATELIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def header_allowed(name: str) -> bool:
    """Whether a header's value may be recorded (the allowlist; never a credential)."""
    n = name.lower()
    if n in ALLOWED_HEADERS:
        return True
    if not n.startswith(ALLOWED_PREFIXES):
        return False
    denied = DENIED_FRAGMENTS
    if n.startswith(_RATELIMIT_PREFIXES):
        denied = tuple(f for f in denied if f != "token")
    return not any(f in n for f in denied)


def filter_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]
                   ) -> tuple[dict[str, str], list[str]]:
    """(kept, dropped): allowlisted headers by lower-case name (repeated values joined with
    ", "), and the sorted lower-case names of those dropped (names only, never values)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    kept: dict[str, str] = {}
    dropped: set[str] = set()
    for name, value in items:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        n = str(name).lower()
        if header_allowed(n):
            kept[n] = f"{kept[n]}, {value}" if n in kept else str(value)
        else:
            dropped.add(n)
    return dict(sorted(kept.items())), sorted(dropped)


def sanitize_url(url: str) -> tuple[str, list[str]]:
    """The URL without user info, query string or fragment, and the query's parameter names
    (values are dropped: some providers take a key as a query parameter)."""
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    keys = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")), keys



def _reject_constant(name: str) -> Any:
    raise ValueError(f"JSON constant {name} is not allowed")


def body_fields(raw: bytes) -> dict[str, Any]:
    """How a body is recorded: ``body_encoding`` is ``empty`` (``body`` null), ``json`` (the
    parsed value), ``text`` (valid UTF-8 that is not JSON, verbatim) or ``base64``;
    ``body_sha256`` and ``body_bytes`` are of the exact bytes.

    A text or JSON body stays readable, so a byte scan for a secret finds it; a scanner
    must decode ``base64`` bodies too."""
    out: dict[str, Any] = {"body_sha256": hashlib.sha256(raw).hexdigest(),
                           "body_bytes": len(raw)}
    if not raw:
        return {**out, "body": None, "body_encoding": "empty"}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {**out, "body": base64.b64encode(raw).decode("ascii"), "body_encoding": "base64"}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        canonical(value)  # lone surrogates or other unencodable values: fall back to text
    except (ValueError, RecursionError):
        return {**out, "body": text, "body_encoding": "text"}
    return {**out, "body": value, "body_encoding": "json"}
