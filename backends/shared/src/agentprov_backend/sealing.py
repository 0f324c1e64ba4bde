"""Appending the end record to a capture log that its session could not end itself.

When the process running a cell dies or outlives its timeout, its parent appends the
``end`` record (status ``aborted``) and a note saying why, continuing the hash chain. The
same few lines exist on T0's side (agentprov_core/capture_chain.py): both follow
docs/formats/capture-0.1.md.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def canonical(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def seal(path: Path, status: str, reason: str, code: str) -> bool:
    """Append a note and an end record unless the log already ended; return whether it
    appended. A torn last line (the writer died mid-write) is cut before appending."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records = []
    keep = 0
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
            keep = i + 1
        except ValueError:
            break
    if records and records[-1].get("kind") == "end":
        return False
    if keep < len(lines):  # a torn tail: keep the readable prefix
        path.write_bytes(b"".join(x + b"\n" for x in lines[:keep]))
    prev = hashlib.sha256(canonical(records[-1])).hexdigest() if records else None
    seq = records[-1]["seq"] + 1 if records else 0
    t = records[-1].get("t", 0.0) if records else 0.0
    with open(path, "ab") as f:
        for rec in ({"seq": seq, "prev": prev, "kind": "note", "t": t, "code": code,
                     "text": reason},):
            f.write(canonical(rec) + b"\n")
            prev = hashlib.sha256(canonical(rec)).hexdigest()
        end = {"seq": seq + 1, "prev": prev, "kind": "end", "t": t, "status": status,
               "reason": reason, "sealed_by": "parent"}
        f.write(canonical(end) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return True
