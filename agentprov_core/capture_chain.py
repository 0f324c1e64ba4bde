"""T0's reading of capture/0.1 logs: the hash chain, and sealing a session its worker could
not end (docs/formats/capture-0.1.md). T0 never imports the worker library, so these few
lines mirror agentprov_backend.capture (verify, and CaptureWriter.reopen for the end a
parent appends) on purpose."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


@dataclass
class Chain:
    ok: bool
    records: list[dict[str, Any]]
    head_sha256: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def end(self) -> dict[str, Any] | None:
        return self.records[-1] if self.records and self.records[-1].get("kind") == "end" else None


def read(path: Path) -> Chain:
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    prev: str | None = None
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Chain(False, [], None, ["the capture log is missing"])
    for n, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            problems.append(f"record {n}: not JSON")
            break
        if rec.get("seq") != n:
            problems.append(f"record {n}: seq {rec.get('seq')} out of order")
        if rec.get("prev") != prev:
            problems.append(f"record {n}: prev does not match the sha256 of record {n - 1}")
        prev = hashlib.sha256(line).hexdigest()  # a line's bytes are its canonical JSON
        records.append(rec)
    if records and records[0].get("kind") != "header":
        problems.append("record 0 is not the header")
    return Chain(not problems, records, prev, problems)


def seal(path: Path, status: str, reason: str, code: str) -> bool:
    """Append a note and the end record (``sealed_by: parent``) to an intact log that has
    not ended. A missing, ended or damaged log (a torn last line) is left exactly as it is:
    the log is append-only, and the damage is evidence. Returns whether it appended."""
    data = path.read_bytes() if path.exists() else b""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records, keep = [], 0
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
            keep = i + 1
        except ValueError:
            break
    if not records or records[-1].get("kind") == "end" or keep < len(lines):
        return False
    prev = hashlib.sha256(lines[keep - 1]).hexdigest() if records else None
    seq = records[-1]["seq"] + 1 if records else 0
    t = records[-1].get("t", 0.0) if records else 0.0
    note = {"seq": seq, "prev": prev, "kind": "note", "t": t, "code": code, "text": reason}
    end = {"seq": seq + 1, "prev": hashlib.sha256(canonical(note)).hexdigest(), "kind": "end",
           "t": t, "status": status, "reason": reason, "sealed_by": "parent"}
    with open(path, "ab") as f:
        f.write(canonical(note) + b"\n" + canonical(end) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return True
