"""T0's reading of capture/0.1 logs: the hash chain, and sealing a session its worker could
not end (docs/formats/capture-0.1.md). T0 never imports the worker library, so these few
lines mirror agentprov_backend.sealing on purpose."""

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
        prev = hashlib.sha256(canonical(rec)).hexdigest()
        records.append(rec)
    if records and records[0].get("kind") != "header":
        problems.append("record 0 is not the header")
    return Chain(not problems, records, prev, problems)


def seal(path: Path, status: str, reason: str, code: str) -> bool:
    """Append a note and the end record (``sealed_by: parent``) unless the log already
    ended; a torn last line is cut first. Returns whether it appended."""
    data = path.read_bytes() if path.exists() else b""
    lines = [x for x in data.split(b"\n")]
    if lines and lines[-1] == b"":
        lines.pop()
    records, keep = [], 0
    for i, line in enumerate(lines):
        try:
            records.append(json.loads(line))
            keep = i + 1
        except ValueError:
            break
    if records and records[-1].get("kind") == "end":
        return False
    if keep < len(lines):
        path.write_bytes(b"".join(x + b"\n" for x in lines[:keep]))
    prev = hashlib.sha256(canonical(records[-1])).hexdigest() if records else None
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
