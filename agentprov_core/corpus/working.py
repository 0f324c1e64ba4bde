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


def check_path(corpus: str | Path) -> None:
    """``--corpus DIR``: its working tree ``DIR.partial`` can be made, or is a directory (a
    link to one is followed); refused before anything starts otherwise
    (``cli.usage.option_value``, exit 2): a name over 255 bytes, a path under a file, a
    dangling link or a loop."""
    from agentprov_core.base import inputfile

    inputfile.output_dir("--corpus", partial_dir(corpus),
                         "give a corpus directory DIR (its working tree is DIR.partial) "
                         "under directories, each name at most 255 bytes", links=True)


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
        self._manifest_read: tuple[Any, dict[str, Any]] | None = None
        #: the keys the redaction scan looks for in what is written here (by variable name)
        self.secrets: Callable[[], dict[str, str]] = dict

    # ------------------------------------------------------------------ reading
    @classmethod
    def peek(cls, corpus: str | Path) -> WorkingCorpus | None:
        root = partial_dir(corpus)
        return cls(root) if os.path.lexists(root / "manifest.json") else None

    def manifest_as_read(self) -> dict[str, Any]:
        """:meth:`manifest`, read and checked again only when the file is another than at
        the last read (its device, inode, size, modification or change time differ): for
        a reader that does not change it, such as each mapping of a campaign (nothing
        rewrites the manifest during the loop). Every rewrite reads it with
        :meth:`manifest` first, so a change made meanwhile is still refused."""
        try:
            st = os.stat(self.root / "manifest.json", follow_symlinks=False)
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        except OSError:
            key = None
        read = self._manifest_read
        if key is None or read is None or read[0] != key:
            read = self._manifest_read = (key, self.manifest())
        return read[1]

    def manifest(self) -> dict[str, Any]:
        """The manifest, refused (``cli.environment.corpus``, exit 3) when it is no JSON
        object or no longer matches its ``manifest_sha256``: a run rewrites it, and would
        make a change in it invisible."""
        from agentprov_core.base import inputfile
        from agentprov_core.corpus import selfdigest
        from agentprov_core.corpus.opening import parse_manifest

        try:
            data = inputfile.read_bytes(self.root / "manifest.json")
            m = parse_manifest(data)
            altered = selfdigest.manifest_status(data) == selfdigest.ALTERED
        except (OSError, ValueError) as exc:
            raise AgentprovError("cli.environment.corpus", corpus=self.root,
                                 what=f"manifest.json is not readable JSON ({exc})") from None
        if not isinstance(m, dict):
            raise AgentprovError("cli.environment.corpus", corpus=self.root,
                                 what="manifest.json is not a JSON object")
        if altered:
            raise AgentprovError("cli.environment.corpus", corpus=self.root,
                                 what="manifest.json no longer matches its manifest_sha256: "
                                      "it was changed after T0 wrote it (agentprov verify "
                                      "names what else no longer holds); restore it")
        return m

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
        from agentprov_core.base import redaction
        from agentprov_core.corpus import selfdigest

        # the redaction scan covers the manifest too: no key's value, no key-shaped string
        doc, found = redaction.redact_document(manifest, self.secrets())
        if found:
            doc["redacted"] = sorted(set(doc.get("redacted") or []) | set(found))
        doc[selfdigest.MANIFEST_FIELD] = ""
        data = selfdigest.with_manifest_digest(
            (json.dumps(doc, sort_keys=True, indent=1) + "\n").encode("utf-8"))
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".manifest-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
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
