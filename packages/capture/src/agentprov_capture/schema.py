"""The record schema: the format string, the record kinds and their required fields, the
header's fields and the end statuses."""

from __future__ import annotations

import re

FORMAT = "capture/0.1"

#: An end record's status.
STATUSES = ("complete", "incomplete", "errored", "aborted")

#: The fields the writer sets on every record; callers cannot pass them.
RESERVED = frozenset({"seq", "prev", "kind", "t"})

#: Fields whose values are recorded payloads (wire bodies, tool arguments and results): they
#: may hold floats, because the wire or the benchmark did. Everything else must not.
PAYLOAD_FIELDS = frozenset({"body", "arguments", "result"})

HEADER_FIELDS = ("session_id", "cell", "unit", "attempt", "backend", "plan_sha256",
                 "config_digest", "declared_instrumentation")
CELL_FIELDS = ("suite", "user_task_id", "attack", "injection_task_id", "cell_key")

#: The records after which the writer fsyncs the file (every record written before them
#: included): the header, each wire request before it is sent, and the end.
SYNC_KINDS = frozenset({"header", "wire_request", "end"})

#: Required fields per record kind (values may be null; extra fields are allowed).
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
