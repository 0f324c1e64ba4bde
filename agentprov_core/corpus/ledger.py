"""The append-only ledger of attempts: one JSON line per ended attempt, fsynced.

Nothing in it is ever rewritten. A torn line (T0 died, or the disk filled, mid-write) is
ignored on read and reported (``torn``), and the next append starts on a fresh line after it,
so a torn line can also sit between two entries.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec


class Attempt(msgspec.Struct, kw_only=True):
    seq: int
    invocation: str
    unit: str
    cell_key: str
    defence: str
    repeat: int
    attempt: int
    session_id: str
    started_at: str
    ended_at: str
    status: str  # complete | incomplete | errored | aborted | quarantined
    conclusive: bool
    capture_sha256: str | None = None
    capture_head_sha256: str | None = None
    capture_records: int | None = None
    native_sha256: str | None = None
    native_path: str | None = None
    utility: bool | None = None
    security: bool | None = None
    setup_refusal: dict[str, Any] | None = None
    reason: str | None = None
    calls: int | None = None
    plan_sha256: str = ""
    config_digest: str = ""
    #: with ``unit``, the unit's identity (:meth:`agentprov_core.plan.plans.Plan.unit_digest`);
    #: absent (never written as null) in an entry written before units had one, so such a
    #: line reads and re-encodes to the same bytes
    unit_digest: str | msgspec.UnsetType = msgspec.UNSET
    #: what T0 refused of what the worker staged or returned (``name: why``;
    #: agentprov_core/corpus/staged.py): the attempt is ``errored`` with
    #: ``map.staging_refused``; absent (never written as null) when nothing was refused
    staging_refused: list[str] | msgspec.UnsetType = msgspec.UNSET
    #: the sha256 of this line with this value empty (agentprov_core/corpus/selfdigest.py);
    #: kept last, and filled in by :meth:`Ledger.append`
    line_sha256: str = ""


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.torn = False

    def read(self) -> list[Attempt]:
        from agentprov_core.base import inputfile

        out = []
        lines = inputfile.stored_lines(self.path)
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                out.append(msgspec.json.decode(line, type=Attempt))
            except (msgspec.ValidationError, RecursionError):  # JSON, not an attempt: not torn
                from agentprov_core.errors import AgentprovError

                raise AgentprovError("cli.environment.corpus", corpus=self.path.parent,
                                     what=f"{self.path.name} line {i + 1} is not a ledger "
                                          "entry") from None
            except msgspec.DecodeError:
                # a write cut short (T0 died, the disk was full): ignored, last or not, since
                # the next append starts on a fresh line after it
                self.torn = True
        return out

    def append(self, entry: Attempt) -> None:
        self.append_all([entry])

    def append_all(self, entries: list[Attempt]) -> None:
        """Append the entries' lines in one write, fsynced once."""
        from agentprov_core.corpus.selfdigest import with_line_digest

        data = b"".join(
            with_line_digest(msgspec.json.encode(msgspec.structs.replace(e, line_sha256="")))
            + b"\n" for e in entries)
        with open(self.path, "ab") as f:
            if f.tell() > 0:
                with open(self.path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        f.write(b"\n")  # after a torn line
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
