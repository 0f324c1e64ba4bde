"""Where a corpus keeps its executions, and the append-only index that names them.

    DIR.partial/
      executions.jsonl            one line per derived execution, append-only (the index)
      executions/<execution_id>/  written once, never rewritten (files are read-only)
        aer.json                  the AER (agentprov-aer/0.1), canonical JSON
        sem.json                  the SEM derived from it (agentprov-sem/0.1)
        prov.json                 the PROV-JSON graph derived from both
        validation.json           the validation of the three (agentprov-validation/0.1)

An execution is one attempt's session: its id is the session id. Every attempt that reached
the ledger with a capture log is mapped, failed ones too (a failed execution is kept, never
discarded). The index line records the sha256 of each of the four files, so ``verify`` and
``validate`` name a file whose bytes changed. ``recompute --out`` writes a new tree
elsewhere; nothing here is rewritten.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Annotated

import msgspec

from agentprov_core.base import inputfile
from agentprov_core.evidence.canonical import sha256

INDEX = "executions.jsonl"
DIRNAME = "executions"
FILES = ("aer", "sem", "prov", "validation")


#: The largest count an index line may hold: beyond any run (10^15 tokens, or 31,000 years
#: in milliseconds), and exact as a float, so the estimate's arithmetic never overflows.
MAX_COUNT = 10**15
#: A count: a non-negative integer of at most :data:`MAX_COUNT`; a line holding another is
#: not in the form T0 writes, and is refused where it is read.
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]


class IndexCounts(msgspec.Struct, kw_only=True):
    """What an execution cost, counted from its AER when it is mapped, so that
    ``agentprov estimate --stats-corpus`` reads the index and never every AER. The judges'
    calls (an Inspect task's, D-770) are counted apart from the agent's; a token total is
    None when a call that got a reply did not record it (never 0); the duration is the
    session's, from the AER's ``started_at`` to ``ended_at``, None when either is not
    recorded."""

    agent_calls: Count
    judge_calls: Count = 0
    agent_input_tokens: Count | None = None
    agent_output_tokens: Count | None = None
    judge_input_tokens: Count | None = None
    judge_output_tokens: Count | None = None
    duration_ms: Count | None = None


class IndexEntry(msgspec.Struct, kw_only=True):
    execution_id: str
    unit: str
    ledger_seq: int  # the ledger entry of the attempt it was mapped from
    mapper: str
    status: str  # the AER outcome status: ok | ok_with_issues | failed
    execution_observed: bool
    issues: list[str] = []  # register codes
    live_vs_native: str = "unchecked"  # agree | disagree | unchecked
    validation: str = "unvalidated"  # passed | failed | unvalidated
    aer_sha256: str
    sem_sha256: str
    prov_sha256: str | None = None  # None when --skip-prov-conformance skipped PROV
    validation_sha256: str
    mapped_at: str
    #: the execution's counts (an index written before they were recorded has none)
    counts: IndexCounts | None = None
    #: the sha256 of this line with this value empty (agentprov_core/corpus/selfdigest.py);
    #: kept last, and filled in by :meth:`Executions.append_index`
    line_sha256: str = ""


class Executions:
    """The executions of one corpus root (working or not)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.index_path = root / INDEX

    def dir(self, execution_id: str) -> Path:
        return self.root / DIRNAME / execution_id

    def path(self, execution_id: str, name: str) -> Path:
        return self.dir(execution_id) / f"{name}.json"

    def entries(self) -> list[IndexEntry]:
        """The index, in order; a torn last line (a write cut short) is skipped."""
        out = []
        dec = msgspec.json.Decoder(IndexEntry)
        for line in inputfile.stored_lines(self.index_path):
            if line.strip():
                try:
                    out.append(dec.decode(line))
                except (msgspec.DecodeError, RecursionError):
                    continue
        return out

    def mapped(self) -> set[str]:
        return {e.execution_id for e in self.entries()}

    def write(self, execution_id: str, files: dict[str, bytes], *,
              keep_same: bool = False, sync: bool = True) -> dict[str, str]:
        """Write an execution's files once (refusing to overwrite); return their sha256s.

        ``keep_same`` finishes a write that was cut short (no index line names it yet): a
        file already there with exactly these bytes is kept as it is; one with other bytes
        is still refused. ``sync=False`` leaves the flush to the caller (``os.sync()``
        before the index line that names them: an import writes a batch that way)."""
        d = self.dir(execution_id)
        d.mkdir(parents=True, exist_ok=True)
        digests = {}
        for name, data in files.items():
            target = d / f"{name}.json"
            if keep_same and target.is_file() and target.read_bytes() == data:
                digests[name] = sha256(data)
                continue
            if target.exists():
                raise FileExistsError(f"{target} exists: an execution is written once")
            fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    if sync:
                        os.fsync(f.fileno())
                os.chmod(tmp, 0o444)
                os.link(tmp, target)  # fails if it appeared meanwhile: never replaced
            finally:
                Path(tmp).unlink(missing_ok=True)
            digests[name] = sha256(data)
        return digests

    def append_index(self, entry: IndexEntry) -> IndexEntry:
        """Append ``entry``'s line; returns the entry as written (its ``line_sha256``)."""
        return self.append_all([entry])[0]

    def append_all(self, entries: list[IndexEntry]) -> list[IndexEntry]:
        """Append the entries' lines in one write, fsynced once; returns them as written."""
        from agentprov_core.corpus.selfdigest import with_line_digest

        lines = [with_line_digest(msgspec.json.encode(msgspec.structs.replace(e, line_sha256="")))
                 for e in entries]
        with open(self.index_path, "ab") as f:
            if f.tell() > 0:
                with open(self.index_path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        f.write(b"\n")
            f.write(b"".join(line + b"\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())
        dec = msgspec.json.Decoder(IndexEntry)
        return [dec.decode(line) for line in lines]


def counts_of(aer) -> IndexCounts:
    """The :class:`IndexCounts` of ``aer``: its model calls by actor kind (a judge's, or the
    agent's with a defence's own), the tokens of each, and the session's duration."""
    from datetime import datetime

    from msgspec import UNSET

    from agentprov_core.evidence.aer import ModelCall

    h = aer.header
    judges = {a.id for a in h.actors if a.kind == "judge"} if h.actors is not UNSET else set()
    calls = [r for r in aer.records if isinstance(r, ModelCall)]
    judged = [c for c in calls if c.actor is not UNSET and c.actor in judges]
    agent = [c for c in calls if not (c.actor is not UNSET and c.actor in judges)]

    def total(cs, field: str) -> int | None:
        values = [getattr(c.usage, field) for c in cs if c.reply is not None]
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
            return None  # a count no API reports (a hostile worker's, a damaged log's)
        n = sum(values)
        return n if n <= MAX_COUNT else None

    duration = None
    try:
        start = datetime.fromisoformat(str(h.started_at).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(h.ended_at).replace("Z", "+00:00"))
        duration = max(0, round((end - start).total_seconds() * 1000))
        duration = duration if duration <= MAX_COUNT else None
    except (TypeError, ValueError):
        pass
    return IndexCounts(agent_calls=len(agent), judge_calls=len(judged),
                       agent_input_tokens=total(agent, "input_tokens"),
                       agent_output_tokens=total(agent, "output_tokens"),
                       judge_input_tokens=total(judged, "input_tokens") if judged else None,
                       judge_output_tokens=total(judged, "output_tokens") if judged else None,
                       duration_ms=duration)
