"""A working corpus: ``DIR.partial`` while it is being written.

    DIR.partial/
      manifest.json   what was configured and observed (rewritten atomically)
      ledger.jsonl    one line per ended attempt, append-only
      raw/            the content-addressed raw store (capture logs, native logs)
      staging/<session>/   one per attempt; removed after ingest unless --keep-staging,
                           kept on quarantine
      quarantine/     the register of quarantined sessions (capture.quarantined)
      .lock           held by the one T0 writing the corpus

Only T0 writes here. A second writer is refused; a different configuration digest, or a plan
that runs the same cells differently (another content digest), is refused unless mixing is
allowed; a scripted and a real session never share a corpus.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.store import RawStore
from agentprov_core.errors import AgentprovError

MANIFEST_FORMAT = "agentprov-live-corpus/0.1"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def partial_dir(corpus: str | Path) -> Path:
    p = Path(corpus)
    return p if p.name.endswith(".partial") else p.with_name(p.name + ".partial")


def unit_key(cell_key: str, defence: str, repeat: int) -> str:
    """A unit's name (the ledger's ``unit``); with the unit digest, its identity."""
    return f"{cell_key}|{defence}|r{repeat}"


def unit_id(key: str, unit_digest: str) -> str:
    """A unit's identity: its name and its unit digest (docs/decisions.md, "Unit identity")."""
    return f"{key}#{unit_digest}"


def _unit(e: Attempt) -> str:
    return e.unit


class WorkingCorpus:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ledger = Ledger(root / "ledger.jsonl")
        self.store = RawStore(root / "raw")
        self._lock = None

    # ------------------------------------------------------------------ reading
    @classmethod
    def peek(cls, corpus: str | Path) -> WorkingCorpus | None:
        root = partial_dir(corpus)
        return cls(root) if (root / "manifest.json").is_file() else None

    def manifest(self) -> dict[str, Any]:
        return json.loads((self.root / "manifest.json").read_text(encoding="utf-8"))

    def attempts(self) -> list[Attempt]:
        return self.ledger.read()

    def settled(self, entries: list[Attempt] | None = None,
                key: Callable[[Attempt], str] = _unit) -> set[str]:
        """Units with a conclusive attempt whose capture log (and native log) is still in the
        raw store, intact: a damaged or missing log unsettles its unit, which is then
        attempted again; the old entry stays. ``key`` names an entry's unit (a campaign
        names it by unit key and unit digest)."""
        entries = self.attempts() if entries is None else entries
        return {key(e) for e in entries
                if e.conclusive and e.capture_sha256 and self.store.verify(e.capture_sha256)
                and (e.native_sha256 is None or self.store.verify(e.native_sha256))}

    def attempts_per_unit(self, entries: list[Attempt] | None = None,
                          key: Callable[[Attempt], str] = _unit) -> Counter:
        entries = self.attempts() if entries is None else entries
        return Counter(key(e) for e in entries)

    # ------------------------------------------------------------------ writing
    def lock(self) -> None:
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / ".lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise AgentprovError("cli.refused.corpus_busy", corpus=self.root) from None
        self._lock = lock

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".manifest-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(manifest, f, sort_keys=True, indent=1)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.root / "manifest.json")
        except BaseException:  # a full disk: the old manifest stays, no temporary is left
            Path(tmp).unlink(missing_ok=True)
            raise

    def staging(self, session_id: str) -> Path:
        d = self.root / "staging" / session_id
        d.mkdir(parents=True, exist_ok=False)
        return d

    def drop_staging(self, session_id: str) -> None:
        shutil.rmtree(self.root / "staging" / session_id, ignore_errors=True)

    def quarantine(self, session_id: str, unit: str, findings: list[str]) -> None:
        q = self.root / "quarantine"
        q.mkdir(exist_ok=True)
        (q / f"{session_id}.json").write_text(json.dumps(
            {"code": "capture.quarantined", "session_id": session_id, "unit": unit,
             "staging": f"staging/{session_id}", "findings": findings, "at": now()},
            sort_keys=True, indent=1) + "\n", encoding="utf-8")
