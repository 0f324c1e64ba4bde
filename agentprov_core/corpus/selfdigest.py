"""The sha256 a line of a corpus's JSON-lines files, and its manifest, carry of themselves.

``ledger.jsonl``, ``executions.jsonl`` and ``preflight/ledger.jsonl`` are appended to and
``manifest.json`` is rewritten whole, so none of them is content-addressed; much of what
they hold is held nowhere else (when an attempt started, which invocation ran it, when it
was mapped, the manifest's plugins and stops). Each line therefore ends with
``"line_sha256":"<hex>"``, and the manifest holds ``"manifest_sha256": "<hex>"``: the
sha256 of the same bytes with that value empty (``""``). A byte changed anywhere in the
line or the manifest, by a failing disk or by hand, no longer matches.

It detects a change; it cannot stop someone who rewrites the digest too (nothing on a
working tree can: that is what a sealed corpus is for). ``verify`` checks it; a run refuses to
resume a corpus whose manifest no longer matches (it would rewrite it, and the change
would no longer show).
"""

from __future__ import annotations

import hashlib
import re

LINE_FIELD = "line_sha256"
MANIFEST_FIELD = "manifest_sha256"

_LINE = re.compile(rb'"line_sha256": ?"([^"\\]*)"')
_MANIFEST = re.compile(rb'\n "manifest_sha256": "([^"\\]*)"')
_ANYWHERE = re.compile(rb'"manifest_sha256"\s*:')
_HEX64 = re.compile(rb"[0-9a-f]{64}")

OK, ABSENT, ALTERED = "ok", "absent", "altered"


def _last(rx: re.Pattern[bytes], data: bytes) -> re.Match[bytes] | None:
    """The last match: the entry's own field is its last one (a value the worker returned,
    such as a setup refusal, may hold a key of the same name before it)."""
    found = None
    for found in rx.finditer(data):  # noqa: B007 - the last one is wanted
        pass
    return found


def _fill(rx: re.Pattern[bytes], data: bytes) -> bytes:
    m = _last(rx, data)
    if m is None or m.group(1):
        raise ValueError("the document has no empty digest field to fill")
    digest = hashlib.sha256(data).hexdigest().encode("ascii")
    return data[:m.start(1)] + digest + data[m.end(1):]


def _status(rx: re.Pattern[bytes], data: bytes) -> str:
    """``absent`` only when the field is not there at all: a value that is no digest (a
    flipped hex digit, an empty one) is a change like any other."""
    m = _last(rx, data)
    if m is None:
        return ABSENT
    if not _HEX64.fullmatch(m.group(1)):
        return ALTERED
    blank = data[:m.start(1)] + data[m.end(1):]
    return OK if hashlib.sha256(blank).hexdigest().encode("ascii") == m.group(1) else ALTERED


def with_line_digest(line: bytes) -> bytes:
    """``line`` (one JSON object, holding ``"line_sha256":""``) with its digest filled in."""
    return _fill(_LINE, line)


def json_line(entry: dict) -> str:
    """``entry`` as T0 appends it to a JSON-lines file it writes with the standard library
    (sorted keys), its ``line_sha256`` filled in, with its newline."""
    import json

    data = json.dumps({**entry, LINE_FIELD: ""}, sort_keys=True).encode("utf-8")
    return with_line_digest(data).decode("utf-8") + "\n"


def line_status(line: bytes) -> str:
    """``ok``, ``absent`` (a line of an earlier build) or ``altered``."""
    return _status(_LINE, line)


def without_line_field(line: bytes) -> bytes:
    """``line`` re-encoded by a reader that does not know the field: what an earlier
    build's line looks like (for the form check of a line that has no digest)."""
    return line.replace(b',"line_sha256":""', b"")


def with_manifest_digest(data: bytes) -> bytes:
    """A manifest's bytes (``json.dumps(sort_keys=True, indent=1)``, with
    ``"manifest_sha256": ""``) with its digest filled in."""
    return _fill(_MANIFEST, data)


def manifest_status(data: bytes) -> str:
    """As :func:`line_status`, for a manifest: the field where T0 writes it (a key of the
    top-level object, at indent 1); found anywhere else, the file was re-formatted."""
    status = _status(_MANIFEST, data)
    if status == ABSENT and _ANYWHERE.search(data):
        return ALTERED
    return status
