"""T0's reading of capture/0.1 logs (docs/formats/capture-0.1.md): the one check of a log's
hash chain that ingest, the mapper and ``verify`` share, and sealing a session its worker
could not end. T0 never imports the worker library, so these lines mirror
agentprov_backend.capture (``verify``, and ``CaptureWriter.reopen`` for the end a parent
appends) on purpose; a test holds the two to the same answers."""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

END_STATUSES = ("complete", "incomplete", "errored", "aborted")


def canonical(record: Any) -> bytes:
    """A record's canonical JSON: its bytes in the log, and what its sha256 is taken of."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


class _FloatForm:
    """msgspec's float hook: a float token not in Python's repr form sends the line to the
    exact (standard library) check, since msgspec writes some floats differently."""

    def __init__(self) -> None:
        self.odd = False

    def __call__(self, s: str) -> float:
        f = float(s)
        if repr(f) != s:
            self.odd = True
        return f


_ENC = msgspec.json.Encoder(order="sorted")


@dataclass
class Chain:
    """What :func:`check` found: the number of lines, the head (the sha256 of the last
    line), the problems (none: the chain holds), the header and the (last) end record, and
    the records that could be read, in order."""

    n_records: int
    head_sha256: str | None
    problems: list[str]
    header: dict[str, Any] | None
    end: dict[str, Any] | None
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check(data: bytes, expected_head: str | None = None, require_end: bool = True) -> Chain:
    """The checks of ``agentprov_backend.capture.verify`` over a log's bytes, with the same
    problem strings (a test holds the two to the same answers): every line canonical JSON,
    ``seq`` 0, 1, 2, …, each ``prev`` the sha256 of the line before, the head
    ``expected_head`` when given, a capture/0.1 header, one end record and last (absent:
    a problem only with ``require_end``), ``t`` never decreasing. Lines are parsed by msgspec
    and re-encoded; a line that does not come back byte-identical is parsed again by the
    standard library exactly as the reference does, so the fast path only ever accepts."""
    problems: list[str] = []
    lines = data.split(b"\n")
    torn = lines.pop()
    digests = [hashlib.sha256(line).hexdigest() for line in lines]
    records: list[dict[str, Any] | None] = []
    form = _FloatForm()
    dec = msgspec.json.Decoder(float_hook=form)
    for i, line in enumerate(lines):
        form.odd = False
        try:
            rec = dec.decode(line)
            fast = isinstance(rec, dict) and not form.odd and _ENC.encode(rec) == line
        except (msgspec.DecodeError, UnicodeError, TypeError, ValueError, RecursionError):
            fast = False
        if not fast:
            try:
                rec = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                problems.append(f"record {i}: not JSON ({exc})")
                records.append(None)
                continue
            except RecursionError:  # a record from the worker nested a thousand levels deep
                problems.append(f"record {i}: not JSON (nested too deeply to be read)")
                records.append(None)
                continue
            if not isinstance(rec, dict):
                problems.append(f"record {i}: not a JSON object")
                records.append(None)
                continue
            try:
                if canonical(rec) != line:
                    problems.append(f"record {i}: not in canonical form")
            except (ValueError, RecursionError) as exc:
                problems.append(f"record {i}: not canonical JSON ({exc})")
        records.append(rec)
        if rec.get("seq") != i:
            problems.append(f"record {i}: seq is {rec.get('seq')!r}, expected {i}")
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
        if records[i].get("status") not in END_STATUSES:
            problems.append(f"record {i}: end status {records[i].get('status')!r} is not "
                            f"complete, incomplete, errored or aborted")
    if records and not ends and require_end:
        problems.append("the log has no end record (unsealed)")
    last_t = None
    for i, rec in enumerate(records):
        if rec is None:
            continue
        t = rec.get("t")
        if not isinstance(t, int | float) or isinstance(t, bool):
            problems.append(f"record {i}: t is not a number")
            continue
        if last_t is not None and t < last_t:
            problems.append(f"record {i}: t goes backwards")
        last_t = t
    return Chain(len(lines), head, problems, first,
                 records[ends[-1]] if ends else None,  # type: ignore[arg-type]
                 [r for r in records if r is not None])


def read(path: Path) -> Chain:
    """:func:`check` of the log at ``path`` as T0 ingests it (its end record is looked at by
    the caller: a log without one is an aborted session, not a damaged one)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Chain(0, None, ["the capture log is missing"], None, None, [])
    return check(data, require_end=False)


def seal(path: Path, status: str, reason: str, code: str) -> bool:
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
    """The note and end record that seal the log ``data``, or None when it is not sealed
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
