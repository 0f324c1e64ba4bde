"""The capture/0.1 writer and verifier (documented in docs/formats/capture-0.1.md).

A session's capture log is JSON lines. Every line is one record in canonical JSON (sorted
keys, separators ``(",", ":")``, ``ensure_ascii=False``, UTF-8, no NaN or infinity) and
carries ``seq`` (0, 1, 2, ...), ``prev`` (the sha256 hex of the previous line's bytes, which
are that record's canonical JSON; ``null`` for the header), ``kind`` and ``t`` (seconds since
the session started, from the monotonic clock). ``t`` is the only float among the fields the
writer itself produces; floats can only appear inside recorded payloads (``body``,
``arguments``, ``result``), which are what the wire or the benchmark carried.

The writer opens the file append-only and exclusively (a new session never continues an
old file), writes each record with one ``write`` (so it survives the worker's death at once),
``fsync``s the file before a wire request leaves and at the header and the end (so what
left the machine is on disk before it left), keeps the head digest
(the sha256 of the last line), writes ``end`` at most once and refuses anything after it.
Headers in wire records pass an allowlist here, in the writer, so no caller can put an
``authorization`` or ``api-key`` header into a capture log.

Standard library only. ``verify`` has no dependency outside its own body, so T0 can copy it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

FORMAT = "capture/0.1"
STATUSES = ("complete", "incomplete", "errored", "aborted")

#: The fields the writer sets on every record; callers cannot pass them.
RESERVED = frozenset({"seq", "prev", "kind", "t"})

#: Fields whose values are recorded payloads (wire bodies, tool arguments and results): they
#: may hold floats, because the wire or the benchmark did. Everything else must not.
PAYLOAD_FIELDS = frozenset({"body", "arguments", "result"})

HEADER_FIELDS = ("session_id", "cell", "unit", "attempt", "backend", "plan_sha256",
                 "config_digest", "declared_instrumentation")
CELL_FIELDS = ("suite", "user_task_id", "attack", "injection_task_id", "cell_key")

#: Required fields per record kind (values may be null; extra fields are allowed).
#: the records after which the writer fsyncs the file (every record written before them
#: included): the header, each wire request before it is sent, and the end
SYNC_KINDS = frozenset({"header", "wire_request", "end"})

KINDS: dict[str, tuple[str, ...]] = {
    "model_call_start": ("call_id", "element", "model"),
    "model_call_end": ("call_id", "status"),
    "wire_request": ("attempt_id", "call_id", "first_attempt_id", "method", "url", "headers",
                     "body", "body_encoding", "body_sha256"),
    "wire_response": ("attempt_id", "call_id", "status", "headers", "body", "body_encoding",
                      "body_sha256"),
    "wire_error": ("attempt_id", "call_id", "error_type", "error_message"),
    "tool_result": ("tool", "arguments", "result", "error"),
    "environment_digest": ("name", "sha256"),
    "note": ("code", "text"),
}

#: An item of declared instrumentation: ``name@version`` optionally followed by
#: `` key: value`` (e.g. ``http_backoff@1 policy: stock_sdk``, ``recording_transport@1``).
INSTRUMENTATION_RE = re.compile(r"^[a-z][a-z0-9_.-]*@[0-9]+( [a-z][a-z0-9_.-]*: \S.*)?$")

# -- header allowlist --------------------------------------------------------------------

#: Header names recorded verbatim (lower-cased). Everything else is dropped; only its name
#: is recorded, in ``headers_dropped``.
ALLOWED_HEADERS = frozenset({
    "accept", "accept-encoding", "content-type", "content-length", "content-encoding",
    "transfer-encoding", "connection", "user-agent", "host", "date", "server", "retry-after",
    "retry-after-ms", "x-should-retry", "x-request-id", "request-id", "anthropic-version",
    "anthropic-beta",
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


# -- canonical JSON and bodies -----------------------------------------------------------

def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8 (not ASCII-escaped), no NaN."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


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


def _floats(value: Any, path: str) -> list[str]:
    if isinstance(value, float):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _floats(v, f"{path}.{k}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _floats(v, f"{path}[{i}]")]
    return []


class CaptureError(Exception):
    """A capture log cannot be written (bad record, ended, broken by an I/O error)."""


# -- the writer --------------------------------------------------------------------------

class CaptureWriter:
    """Append records to one session's capture log.

    ``CaptureWriter(path, header_fields)`` creates the file (it must not exist) and writes
    the header. ``append(kind, **fields)`` writes one record and returns its ``seq``;
    ``end(status, **fields)`` writes the end record once. Thread-safe. An I/O error breaks
    the writer: every later call raises ``CaptureError`` (the file may end in a torn line,
    which ``verify`` reports)."""

    def __init__(self, path: str | os.PathLike[str], header_fields: Mapping[str, Any], *,
                 durable: bool = True, _reopen: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._durable = durable
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._attempts = 0
        self._ended = False
        self._broken: str | None = None
        if _reopen is not None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
            self._seq = _reopen["seq"]
            self._head = _reopen["head"]
            self._t0 = time.monotonic() - _reopen["t"]
            self._counts = _reopen["counts"]
            self._attempts = _reopen["attempts"]
            return
        header = self._check_header(header_fields)
        self._fd = os.open(self.path,
                           os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                           0o600)
        self._t0 = time.monotonic()
        self._seq = 0
        self._head: str | None = None
        if durable:  # the new directory entry is durable too
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._write("header", header)

    # .. opening an existing log (the parent appending notes and an aborted end) ..........

    @classmethod
    def reopen(cls, path: str | os.PathLike[str], *, durable: bool = True) -> CaptureWriter:
        """Continue an existing, intact, unended log (for the parent that ends a session its
        worker left: a timeout or a dead worker). ``t`` continues from the last record's
        (the gap while nobody wrote is not measured). Refuses a log that does not verify."""
        ok, n, head, problems = verify(path, require_end=False)
        if not ok:
            raise CaptureError(f"{path}: cannot continue a log that does not verify: "
                               + "; ".join(problems[:3]))
        counts: dict[str, int] = {}
        last_t = 0.0
        attempts = 0
        with open(path, "rb") as f:
            for line in f:
                rec = json.loads(line)
                counts[rec["kind"]] = counts.get(rec["kind"], 0) + 1
                last_t = rec["t"]
                if rec["kind"] == "end":
                    raise CaptureError(f"{path}: the session has already ended")
                if rec["kind"] == "wire_request":
                    attempts += 1
        return cls(path, {}, durable=durable, _reopen={
            "seq": n, "head": head, "t": last_t, "counts": counts, "attempts": attempts})

    # .. properties ..........................................................................

    @property
    def head_sha256(self) -> str | None:
        """The sha256 of the last record written (what the ledger records)."""
        return self._head

    @property
    def seq(self) -> int:
        """The ``seq`` the next record will get (= records written)."""
        return self._seq

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def broken(self) -> str | None:
        """Why the writer stopped writing (an I/O error), or None."""
        return self._broken

    def counts(self) -> dict[str, int]:
        """Records written so far, by kind."""
        with self._lock:
            return dict(self._counts)

    def new_attempt_id(self) -> str:
        """A fresh wire attempt id, unique within the session: ``a1``, ``a2``, ..."""
        with self._lock:
            self._attempts += 1
            return f"a{self._attempts}"

    # .. writing ..............................................................................

    def append(self, kind: str, **fields: Any) -> int:
        """Write one record of ``kind``; returns its ``seq``."""
        if kind in ("header", "end"):
            raise CaptureError(f"{kind} records are written by the writer itself")
        if kind not in KINDS:
            raise CaptureError(f"unknown record kind {kind!r} (known: {', '.join(KINDS)})")
        missing = [f for f in KINDS[kind] if f not in fields]
        if missing:
            raise CaptureError(f"{kind} record lacks {', '.join(missing)}")
        if kind in ("wire_request", "wire_response", "wire_error") and "headers" in fields:
            kept, dropped = filter_headers(fields["headers"] or {})
            fields["headers"] = kept
            fields["headers_dropped"] = sorted(set(dropped) | set(fields.get("headers_dropped",
                                                                              ())))
        if kind == "wire_request":
            url, keys = sanitize_url(fields["url"])
            fields["url"] = url
            if keys:
                fields["query_keys"] = keys
        return self._write(kind, fields)

    def end(self, status: str, reason: str | None = None, **fields: Any) -> int:
        """Write the end record (once). ``counts`` holds the records written before it by
        kind, plus any ``counts`` given (which must not reuse a kind's name)."""
        if status not in STATUSES:
            raise CaptureError(f"end status {status!r} is not one of {', '.join(STATUSES)}")
        with self._lock:
            counts = dict(self._counts)
        extra = dict(fields.pop("counts", None) or {})
        clash = sorted(set(extra) & set(counts) | set(extra) & set(KINDS) | set(extra) & {
            "header", "end"})
        if clash:
            raise CaptureError(f"end counts {', '.join(clash)} clash with record kinds")
        fields["status"] = status
        fields["reason"] = reason
        fields["counts"] = dict(sorted({**counts, **extra}.items()))
        return self._write("end", fields)

    def _write(self, kind: str, fields: Mapping[str, Any]) -> int:
        bad = sorted(RESERVED & set(fields))
        if bad:
            raise CaptureError(f"fields {', '.join(bad)} are set by the writer")
        floats = [p for k, v in fields.items() if k not in PAYLOAD_FIELDS
                  for p in _floats(v, k)]
        if floats:
            raise CaptureError(f"{kind}: float values are not allowed outside payloads "
                               f"({', '.join(floats)}); use integers (e.g. milliseconds)")
        with self._lock:
            if self._broken:
                raise CaptureError(f"the capture log is broken: {self._broken}")
            if self._ended:
                raise CaptureError("the session has ended: nothing is written after the end")
            rec = dict(fields)
            rec.update(seq=self._seq, prev=self._head, kind=kind,
                       t=round(time.monotonic() - self._t0, 6))
            try:
                line = canonical(rec)
            except (TypeError, ValueError) as exc:
                raise CaptureError(f"{kind} record is not JSON-serialisable: {exc}") from exc
            data = line + b"\n"
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                if self._durable and kind in SYNC_KINDS:
                    os.fsync(self._fd)  # and every record written since the last fsync
            except OSError as exc:
                self._broken = f"{type(exc).__name__}: {exc}"
                raise CaptureError(f"writing {self.path} failed: {self._broken}") from exc
            self._head = hashlib.sha256(line).hexdigest()
            seq = self._seq
            self._seq += 1
            self._counts[kind] = self._counts.get(kind, 0) + 1
            if kind == "end":
                self._ended = True
                self._close_locked()
            return seq

    # .. closing ..............................................................................

    def _close_locked(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            finally:
                self._fd = -1

    def close(self) -> None:
        """Close the file without ending the session (an unended log is ``unsealed``)."""
        with self._lock:
            self._close_locked()

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _check_header(fields: Mapping[str, Any]) -> dict[str, Any]:
        missing = [f for f in HEADER_FIELDS if f not in fields]
        if missing:
            raise CaptureError(f"header lacks {', '.join(missing)}")
        if "format" in fields and fields["format"] != FORMAT:
            raise CaptureError(f"header format must be {FORMAT}")
        cell = fields["cell"]
        if not isinstance(cell, Mapping) or [f for f in CELL_FIELDS if f not in cell]:
            raise CaptureError(f"header cell must hold {', '.join(CELL_FIELDS)}")
        instr = fields["declared_instrumentation"]
        if not isinstance(instr, (list, tuple)) or not all(
                isinstance(i, str) and INSTRUMENTATION_RE.match(i) for i in instr):
            raise CaptureError("declared_instrumentation must be a list of strings "
                               "'name@version' or 'name@version key: value'")
        out = dict(fields)
        out["format"] = FORMAT
        out["declared_instrumentation"] = list(instr)
        out.setdefault("started_at", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        return out


# -- the verifier (self-contained: copy this function as it is) -------------------------

def verify(path, expected_head=None, require_end=True):
    """Re-check a capture/0.1 log: (ok, n_records, head_sha256, problems).

    Checks every line is canonical JSON of an object, ``seq`` runs 0, 1, 2, ..., each
    ``prev`` is the sha256 of the previous line's bytes (null for the first), the first
    record is a ``capture/0.1`` header, ``t`` never decreases, at most one ``end`` and
    nothing after it, and no torn last line. A changed byte in record k breaks the link
    from k to k+1 and is reported as ``record k: ...``; a change to the last record shows
    only against ``expected_head`` (the head the ledger recorded). A log without an end is
    a problem (unsealed) unless ``require_end`` is false. Standard library only."""
    import hashlib
    import json

    def canon(obj):
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")

    problems = []
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    digests = [hashlib.sha256(line).hexdigest() for line in lines]
    records = []
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            problems.append(f"record {i}: not JSON ({exc})")
            records.append(None)
            continue
        if not isinstance(rec, dict):
            problems.append(f"record {i}: not a JSON object")
            records.append(None)
            continue
        records.append(rec)
        try:
            if canon(rec) != line:
                problems.append(f"record {i}: not in canonical form")
        except ValueError as exc:
            problems.append(f"record {i}: not canonical JSON ({exc})")
        if rec.get("seq") != i:
            problems.append(f"record {i}: seq is {rec.get('seq')!r}, expected {i}")
    # the chain: link j holds when record j+1's prev is the sha256 of record j
    broken = set()
    for j, rec in enumerate(records):
        if rec is None:
            continue
        want = None if j == 0 else digests[j - 1]
        if rec.get("prev") != want:
            broken.add(j - 1)
    for j in sorted(broken):
        if j < 0:
            problems.append("record 0: prev is not null")
        elif j + 1 in broken:
            problems.append(f"record {j + 1}: its prev is not the sha256 of record {j} "
                            f"(record {j + 1} was altered)")
        else:
            problems.append(f"record {j}: its sha256 is not the prev of record {j + 1} "
                            f"(record {j} was altered)")
    head = digests[-1] if digests else None
    if expected_head is not None and head != expected_head:
        problems.append(f"record {len(lines) - 1}: the head sha256 {head} is not the "
                        f"expected {expected_head} (the last record was altered or the log "
                        f"was cut or extended)")
    if torn:
        problems.append(f"record {len(lines)}: torn (the file does not end with a newline)")
    first = records[0] if records else None
    if not records:
        problems.append("the log is empty")
    elif first is not None and (first.get("kind") != "header"
                                or first.get("format") != "capture/0.1"):
        problems.append("record 0: not a capture/0.1 header")
    ends = [i for i, r in enumerate(records) if r is not None and r.get("kind") == "end"]
    if len(ends) > 1:
        problems.append(f"record {ends[1]}: a second end record")
    if ends and ends[0] != len(records) - 1:
        problems.append(f"record {ends[0] + 1}: written after the end record")
    for i in ends:
        if records[i].get("status") not in ("complete", "incomplete", "errored", "aborted"):
            problems.append(f"record {i}: end status {records[i].get('status')!r} is not "
                            f"complete, incomplete, errored or aborted")
    if records and not ends and require_end:
        problems.append("the log has no end record (unsealed)")
    last_t = None
    for i, rec in enumerate(records):
        if rec is None:
            continue
        t = rec.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            problems.append(f"record {i}: t is not a number")
            continue
        if last_t is not None and t < last_t:
            problems.append(f"record {i}: t goes backwards")
        last_t = t
    return (not problems, len(lines), head, problems)
