"""Ending a session its worker could not end: T0 appends the note and the end record to
the staged capture/0.1 log (docs/formats/capture-0.1.md), reading and writing it through
the session directory's descriptor (:mod:`agentprov_core.corpus.staged`). The spec and
the messages call this sealing a session (``sealed `aborted```; the end record says
``sealed_by: parent``); in the code, *seal* is kept for a sealed corpus
(``agentprov package``, ``audit/sealing.py``). The format itself, and the chain check, are
:mod:`agentprov_capture`'s."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from agentprov_capture import canonical


def append_end(path: Path, status: str, reason: str, code: str) -> bool:
    """Append a note and the end record (``sealed_by: parent``) to an intact log that has
    not ended. A missing, ended or damaged log (a torn last line) is left exactly as it is:
    the log is append-only, and the damage is evidence. ``path`` is a session's staged
    ``capture.jsonl``: it is opened through the session directory's descriptor, never
    through a link, and only a regular file is written
    (:func:`agentprov_core.corpus.staged.appending`); anything else is left as it is and
    refused when the session is ingested. Returns whether it appended."""
    from agentprov_core.corpus import staged

    try:
        with staged.appending(path.parent, path.name) as found:
            if found is None:
                return False
            fd, data = found
            tail = _end_after(data, status, reason, code)
            if tail is None:
                return False
            os.write(fd, tail)
            os.fsync(fd)
            return True
    except (staged.Refused, FileNotFoundError, PermissionError):  # not one T0 writes
        return False


def _end_after(data: bytes, status: str, reason: str, code: str) -> bytes | None:
    """The note and end record that end the log ``data``, or None when it is left as it is
    (empty, ended, or damaged)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records, keep = [], 0
    for i, line in enumerate(lines):
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            break
        if not isinstance(rec, dict) or not isinstance(rec.get("seq"), int):
            break
        records.append(rec)
        keep = i + 1
    if not records or records[-1].get("kind") == "end" or keep < len(lines):
        return None
    prev = hashlib.sha256(lines[keep - 1]).hexdigest()
    seq = records[-1]["seq"] + 1
    t = records[-1].get("t", 0.0)
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
        t = 0.0
    note = {"seq": seq, "prev": prev, "kind": "note", "t": t, "code": code, "text": reason}
    end = {"seq": seq + 1, "prev": hashlib.sha256(canonical(note)).hexdigest(), "kind": "end",
           "t": t, "status": status, "reason": reason, "sealed_by": "parent"}
    return canonical(note) + b"\n" + canonical(end) + b"\n"
