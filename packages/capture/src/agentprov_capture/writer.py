"""The writer: append records to one session's capture log.

It opens the file append-only and exclusively (a new session never continues an old file),
writes each record with one ``write`` (so it survives the worker's death at once),
``fsync``s the file before a wire request leaves and at the header and the end (so what
left the machine is on disk before it left), keeps the head digest (the sha256 of the last
line), writes ``end`` at most once and refuses anything after it. Headers in wire records
pass the allowlist (:mod:`agentprov_capture.wire`) here, in the writer, so no caller can
put an ``authorization`` or ``api-key`` header into a capture log. ``t`` is the only float
among the fields the writer itself produces; floats can only appear inside recorded
payloads (``body``, ``arguments``, ``result``), which are what the wire or the benchmark
carried.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentprov_capture.canonical import canonical
from agentprov_capture.chain import verify
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
from agentprov_capture.wire import filter_headers, sanitize_url


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
