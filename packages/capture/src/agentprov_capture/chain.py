"""The chain check: the one check of a capture/0.1 log that the worker (before it continues
a log) and T0 (ingest, the mapper, ``verify``) share."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentprov_capture.canonical import canonical
from agentprov_capture.schema import FORMAT, STATUSES


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


def check(data: bytes, expected_head: str | None = None, require_end: bool = True, *,
          fast: bool | None = None) -> Chain:
    """Check a log's bytes: every line canonical JSON of an object, ``seq`` 0, 1, 2, …, each
    ``prev`` the sha256 of the line before (null for the first), the head ``expected_head``
    when given, a capture/0.1 header, at most one end record, last, with one of the four
    statuses (none: a problem only with ``require_end``: the log is unsealed), ``t`` never
    decreasing, no torn last line. A changed byte in record k breaks the link from k to k+1
    and is reported as ``record k: ...``; a change to the last record shows only against
    ``expected_head`` (the head the ledger recorded).

    Where msgspec is importable (T0's environment) each line is first parsed and re-encoded
    by it; a line that does not come back byte-identical, or holds a float not in Python's
    ``repr`` form, is parsed again by the standard library, so the fast path only ever
    accepts and the answers are the same without it. ``fast=False`` uses the standard
    library alone."""
    problems: list[str] = []
    lines = data.split(b"\n")
    torn = lines.pop()
    digests = [hashlib.sha256(line).hexdigest() for line in lines]
    records: list[dict[str, Any] | None] = []
    accel = _accelerator() if fast is not False else None
    for i, line in enumerate(lines):
        rec = accel(line) if accel is not None else None
        if rec is None:
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
                                or first.get("format") != FORMAT):
        problems.append(f"record 0: not a {FORMAT} header")
    ends = [i for i, r in enumerate(records) if r is not None and r.get("kind") == "end"]
    if len(ends) > 1:
        problems.append(f"record {ends[1]}: a second end record")
    if ends and ends[0] != len(records) - 1:
        problems.append(f"record {ends[0] + 1}: written after the end record")
    for i in ends:
        if records[i].get("status") not in STATUSES:
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


def verify(path: str | os.PathLike[str], expected_head: str | None = None,
           require_end: bool = True) -> tuple[bool, int, str | None, list[str]]:
    """:func:`check` of the log at ``path``: (ok, n_records, head_sha256, problems)."""
    with open(path, "rb") as f:
        chain = check(f.read(), expected_head, require_end)
    return chain.ok, chain.n_records, chain.head_sha256, chain.problems


@functools.cache
def _msgspec() -> tuple[Any, Any] | None:
    """msgspec and its sorted-key encoder, or None when msgspec is not importable."""
    try:
        import msgspec
    except ImportError:
        return None
    return msgspec, msgspec.json.Encoder(order="sorted")


def _accelerator() -> Callable[[bytes], dict[str, Any] | None] | None:
    """For one check (its own decoders and float flag: checks run in several threads), a
    parser returning a line's record when msgspec reads it and writes it back to the very
    same bytes with every float in ``repr`` form (the line is then canonical), else None;
    None itself when msgspec is not importable. A float msgspec writes in another form than
    ``repr`` (``2.8e-05`` as ``0.000028``) is compared as its own text, once its text is
    known to be its ``repr``."""
    found = _msgspec()
    if found is None:
        return None
    msgspec, enc = found
    odd = [False]

    def float_hook(s: str) -> float:
        f = float(s)
        if repr(f) != s:  # msgspec writes some floats differently: the exact check decides
            odd[0] = True
        return f

    def verbatim_hook(s: str) -> Any:
        float_hook(s)
        return msgspec.Raw(s.encode("ascii"))

    dec = msgspec.json.Decoder(float_hook=float_hook)
    # every float kept as its own text (written back as it is): for a line whose floats
    # msgspec writes in another form than repr (2.8e-05, a header's t, as 0.000028)
    verbatim = msgspec.json.Decoder(float_hook=verbatim_hook)

    def parse(line: bytes) -> dict[str, Any] | None:
        odd[0] = False
        try:
            rec = dec.decode(line)
            if not isinstance(rec, dict) or odd[0]:
                return None
            if enc.encode(rec) == line:
                return rec
            # each float's text is its repr (no odd one): the line is canonical when it
            # is written back to the very same bytes with those texts in place
            if enc.encode(verbatim.decode(line)) == line and not odd[0]:
                return rec
        except (msgspec.DecodeError, UnicodeError, TypeError, ValueError, RecursionError):
            pass
        return None

    return parse
