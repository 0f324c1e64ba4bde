"""Importing a directory of result files into an import-mode corpus (``agentprov import``).

The corpus is a working corpus (``DIR.partial``, the layout of
:mod:`agentprov_core.corpus.working`) whose manifest says ``mode: import``: each file that
passes is stored once in the raw store (``raw/sha256/…``), gets a ledger entry (status
``complete``, or ``errored`` / ``incomplete`` as its result says; ``native_sha256`` the
stored bytes, ``native_path`` its name in the import directory) and an execution mapped by
the importer's own mapper (AER mode ``import``), in that order, as a live run writes them.
``validate``, ``recompute``, ``verify`` and ``stats`` read it as any other corpus.

Nothing in the directory is trusted: entries are listed without following links (a link,
a FIFO or a device is reported and never read), a file is read bounded
(:data:`MAX_FILE_BYTES`), its name parts are plain (printable, bounded, no key shape) and
are never used as a path to write, and key-shaped strings in its bytes
(:data:`agentprov_core.base.redaction.KEY_SHAPES`) are replaced by ``…`` before anything is
stored or mapped (the AER's ``import.result`` note records the file's sha256 as read and
what was replaced). A file that fails is reported by name with its code and kept out; the
others are imported (exit 1 when any was kept out).

A unit is the configuration (the pipeline directory) and the cell: its unit key is the
live one (``cell_key|defence|r0``) and its unit digest names the configuration, so an
imported unit pairs with a live unit by cell key, defence and model. Re-importing adds
nothing: a file whose unit is in the corpus with the same stored bytes is "already
imported"; one with other bytes is a duplicate cell (``import.file.duplicate_cell``), kept
out. An entry a killed import ledgered but did not map is mapped by the next one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.working import WorkingCorpus, check_path, now, partial_dir, unit_key
from agentprov_core.errors import IMPORT_FINDINGS, AgentprovError
from agentprov_core.mapping import ImportRefused

#: the largest result file read (AgentDyn's largest published one is 0.7 MB)
MAX_FILE_BYTES = 16 * 1024 * 1024
#: the most directory entries an import lists
MAX_ENTRIES = 2_000_000
#: the deepest directory an import descends into below the import directory
MAX_DEPTH = 8
#: the longest name part read
MAX_PART = 200
#: files stored per flush (a batch's raw files are flushed before its ledger lines, its
#: executions before its index lines)
BATCH = 256
#: the processes that derive a large import's SEM, PROV and validation (building the PROV
#: graph holds the GIL: threads would run it one at a time)
WORKERS = 2
REDACTED = "…".encode()
CONFIG_FORMAT = "agentprov-import-config/0.1"
UNIT_FORMAT = "agentprov-import-unit/0.1"


@dataclass
class Finding:
    """A file kept out of the corpus: its name, its ``import.file.*`` code and why."""

    name: str
    code: str  # one of agentprov_core.errors.IMPORT_FINDINGS
    why: str

    def __post_init__(self) -> None:
        assert self.code in IMPORT_FINDINGS, self.code

    def line(self) -> str:
        return f"{self.code}: {self.name}: {self.why}"


@dataclass
class Summary:
    files: int = 0
    imported: int = 0
    already: int = 0
    finished: int = 0  # ledgered by a killed import, mapped by this one
    statuses: Counter = field(default_factory=Counter)
    redacted: int = 0  # files in which key-shaped strings were replaced
    findings: list[Finding] = field(default_factory=list)
    configurations: int = 0
    corpus: Path | None = None


def _digest(doc: dict[str, Any]) -> str:
    from agentprov_core.evidence.canonical import canonical

    return hashlib.sha256(canonical(doc)).hexdigest()


def config_digest(source: str, importer: str, configuration: str) -> str:
    """The configuration digest of an imported configuration: its source, the importer and
    the configuration's name (what an import knows of how the cells were run)."""
    return _digest({"format": CONFIG_FORMAT, "source": source, "importer": importer,
                    "configuration": configuration})


def unit_digest(config: str, cell_key: str) -> str:
    return _digest({"format": UNIT_FORMAT, "config_digest": config, "cell_key": cell_key})


def shown(name: str) -> str:
    from agentprov_core.corpus.staged import shown as staged_shown

    return staged_shown(name)


def _unsafe(part: str) -> str | None:
    from agentprov_core.base.redaction import key_shape

    if len(part) > MAX_PART:
        return f"a part of its name is {len(part)} characters; at most {MAX_PART} are read"
    if not part.isprintable():
        return "a part of its name holds a character that is not printable"
    if (what := key_shape(part)) is not None:
        return f"a part of its name is a key-shaped string ({what})"
    return None


def walk(root: Path, findings: list[Finding]) -> list[tuple[str, ...]]:
    """The regular files under ``root`` as name parts, sorted; every other entry (a link, a
    FIFO, a device, a directory too deep, a name that is not plain) is a finding."""
    out: list[tuple[str, ...]] = []
    seen = 0
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        path, parts = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError as exc:
            findings.append(Finding(shown("/".join(parts) or "."), "import.file.unreadable",
                                    f"the directory cannot be listed ({exc.strerror or exc})"))
            continue
        for e in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                raise AgentprovError("import.usage.too_many", logdir=root, limit=MAX_ENTRIES)
            here = (*parts, e.name)
            name = "/".join(here)
            why = _unsafe(e.name)
            if why is not None:
                findings.append(Finding(shown(name), "import.file.unsafe_name", why))
                continue
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                findings.append(Finding(shown(name), "import.file.unreadable",
                                        f"it cannot be read ({exc.strerror or exc})"))
                continue
            if stat.S_ISDIR(mode):
                if len(here) >= MAX_DEPTH:
                    findings.append(Finding(shown(name), "import.file.other_format",
                                            f"a directory deeper than {MAX_DEPTH} levels"))
                else:
                    stack.append((e.path, here))
            elif stat.S_ISREG(mode):
                out.append(here)
            else:
                from agentprov_core.corpus.staged import _kind

                findings.append(Finding(shown(name), "import.file.not_regular",
                                        f"it is {_kind(mode)}; only regular files are read "
                                        "(a link is never followed)"))
    return sorted(out)


def redact(data: bytes) -> tuple[bytes, dict[str, int]]:
    """``data`` with every key-shaped string replaced by ``…``, and how many of each shape
    were replaced."""
    from agentprov_core.base.redaction import KEY_SHAPES

    counts: dict[str, int] = {}
    for what, rx in KEY_SHAPES.items():
        data, n = rx.subn(REDACTED, data)
        if n:
            counts[what] = n
    return data, counts


def _read(path: Path) -> bytes:
    from agentprov_core.base import inputfile

    return inputfile.read_bytes(path, MAX_FILE_BYTES)


class Importer:
    """One import of ``logdir`` into the corpus ``corpus`` with the mapper ``ref``."""

    def __init__(self, ref: Any, logdir: Path, corpus: str | Path, source: str) -> None:
        self.ref = ref
        self.mapper = ref.load()
        self.logdir = logdir
        self.source = source
        self.wc = WorkingCorpus(partial_dir(corpus))
        self.summary = Summary(corpus=self.wc.root)
        self.invocation = "imp-" + hashlib.sha256(os.urandom(16)).hexdigest()[:12]
        self.old: dict[str, Any] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.started = ""
        self.written = False

    # ------------------------------------------------------------ the corpus
    def _manifest(self, configs: dict[str, dict[str, str]]) -> dict[str, Any]:
        from agentprov_core import __version__

        old = self.old
        known = dict(old.get("configurations") or {})
        known.update(configs)
        imports = [*(old.get("imports") or []),
                   {"invocation": self.invocation, "at": self.started,
                    "importer": self.ref.name, "importer_version": self.ref.version}]
        return {"format": "agentprov-live-corpus/0.1", "working": True, "mode": "import",
                "corpus_id": self.wc.root.name.removesuffix(".partial"),
                "source": self.source, "backend": self.source, "test_only": False,
                "importer": {"name": self.ref.name, "imports": self.ref.imports},
                "profile": f"{self.ref.name}@{self.ref.version}", "registry_parts": "import",
                "producer": {"name": "agentprov", "version": __version__},
                "created_at": old.get("created_at") or self.started,
                "config_digests": sorted(known), "plans": [],
                "configurations": dict(sorted(known.items())), "imports": imports}

    def _check_corpus(self) -> dict[str, Any]:
        """The manifest of the corpus (``{}`` when there is none yet), refused
        (``import.refused.corpus``) unless it is an import of this source by this mapper."""
        if not os.path.lexists(self.wc.root / "manifest.json"):
            return {}
        m = self.wc.manifest()
        if m.get("mode") != "import":
            raise AgentprovError("import.refused.corpus", corpus=self.wc.root,
                                 why="it is a live run's corpus; an import writes a corpus "
                                     "of its own")
        if m.get("source") != self.source:
            raise AgentprovError("import.refused.corpus", corpus=self.wc.root,
                                 why=f"it holds imports of source {m.get('source')!r}, not "
                                     f"{self.source!r}")
        got = (m.get("importer") or {}).get("name")
        if got != self.ref.name:
            raise AgentprovError("import.refused.corpus", corpus=self.wc.root,
                                 why=f"it holds files imported by {got!r}, not "
                                     f"{self.ref.name!r}")
        return m

    # ------------------------------------------------------------ the import
    def run(self) -> Summary:
        root = self.wc.root
        self.pool = None
        check_path(root)
        self._check_corpus()
        created = not root.exists()
        self.wc.lock()
        try:
            self.old = self._check_corpus()  # what another writer left before the lock
            self._run()
        finally:
            self.wc.unlock()
            if created and not (root / "manifest.json").exists():
                # nothing was imported into a corpus this import created: none is left
                (root / ".lock").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    root.rmdir()
        return self.summary

    def _run(self) -> None:
        s = self.summary
        files = walk(self.logdir, s.findings)
        s.files = len(files) + len(s.findings)
        if len(files) > 2 * BATCH:
            self.pool = _pool()
        try:
            self._import(files)
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)

    def _import(self, files: list[tuple[str, ...]]) -> None:
        from agentprov_core.evidence.executions import Executions

        s = self.summary
        self.started = now()
        configs: dict[str, dict[str, str]] = {}
        for parts in files:
            if len(parts) == 5 and _unsafe(parts[0]) is None:
                model, defence = self._parts(parts[0])
                configs[config_digest(self.source, self.ref.name, parts[0])] = {
                    "configuration": parts[0], "model": model, "defence": defence}
        self.configs = configs
        self.written = bool(self.old)
        entries = self.wc.attempts()
        mapped = Executions(self.wc.root).mapped()
        units: dict[str, Attempt] = {}
        for e in entries:
            units.setdefault(f"{e.unit}#{e.unit_digest}", e)
            if e.session_id not in mapped and e.native_sha256:
                self._finish(e)
                s.finished += 1
        seq = max((e.seq for e in entries), default=-1) + 1
        used: set[str] = set()
        batch: list[tuple[Attempt, Any, bytes, bytes]] = []
        for parts in files:
            name = "/".join(parts)
            try:
                got = self._one(parts, name, units, seq, used)
            except ImportRefused as exc:
                s.findings.append(Finding(shown(name), exc.code, exc.why))
                continue
            if got is not None:
                batch.append(got)
                seq += 1
            if len(batch) >= BATCH:
                self._flush(batch)
                batch = []
        self._flush(batch)
        if s.imported or s.finished:
            self.wc.write_manifest(self._manifest(
                {d: c for d, c in configs.items() if d in used}))
        s.configurations = len(used)

    def _parts(self, configuration: str) -> tuple[str, str]:
        split = getattr(self.mapper, "configuration_parts", None)
        return split(configuration) if split else (configuration, "none")

    def _one(self, parts: tuple[str, ...], name: str, units: dict[str, Attempt], seq: int,
             used: set[str]) -> tuple[Attempt, Any, bytes, bytes] | None:
        """The ledger entry, AER, encoded AER and stored bytes of the file ``name`` (``None``
        when it is already in the corpus); raises ``import.file.*`` for a file kept out.
        Whatever can refuse a file happens here, before anything of it is written."""
        from agentprov_core.base.inputfile import Unreadable
        from agentprov_core.evidence.aer import encode
        from agentprov_core.evidence.executions import Executions

        s = self.summary
        try:
            raw = _read(self.logdir.joinpath(*parts))
        except Unreadable as exc:
            raise ImportRefused("import.file.unreadable", str(exc)) from None
        data, redacted = redact(raw)
        cell = self.mapper.read(parts, data)
        config = config_digest(self.source, self.ref.name, cell.configuration)
        key = unit_key(cell.cell_key, cell.defence, 0)
        udig = unit_digest(config, cell.cell_key)
        uid = f"{key}#{udig}"
        sha = hashlib.sha256(data).hexdigest()
        earlier = units.get(uid)
        if earlier is not None:
            if earlier.native_sha256 == sha:
                s.already += 1
                used.add(config)
                return None
            raise ImportRefused("import.file.duplicate_cell",
                                f"the corpus already holds cell {cell.cell_key} of "
                                f"configuration {cell.configuration}, from "
                                f"{shown(earlier.native_path or '?')} (other bytes); an "
                                "import keeps one file per cell")
        session_id = "imp-" + hashlib.sha256(uid.encode()).hexdigest()[:16]
        if Executions(self.wc.root).path(session_id, "aer").parent.exists():
            # its execution was written, and no ledger line names it (its line was torn)
            raise ImportRefused("import.file.duplicate_cell",
                                f"the corpus already holds an execution of cell "
                                f"{cell.cell_key} (executions/{session_id}) whose ledger line "
                                "is missing or torn; agentprov verify reports it. Import "
                                "into a new corpus")
        at = now()
        e = Attempt(seq=seq, invocation=self.invocation, unit=key, cell_key=cell.cell_key,
                    defence=cell.defence, repeat=0, attempt=1,
                    session_id=session_id,
                    started_at=at, ended_at=at, status="complete", conclusive=True,
                    native_sha256=sha, native_path=name, config_digest=config,
                    unit_digest=udig)
        aer = self._aer(e, data, name, cell, hashlib.sha256(raw).hexdigest(), redacted)
        try:
            encoded = encode(aer)
        except (UnicodeEncodeError, msgspec.EncodeError, OverflowError, ValueError) as exc:
            raise ImportRefused("import.file.malformed",
                                "holds a value no AER can hold (a string that is not valid "
                                f"Unicode, such as a lone surrogate \\ud800: {exc})") from None
        o = aer.outcome
        status = o.session_status if o.session_status in ("complete", "incomplete",
                                                          "errored") else "errored"
        e = msgspec.structs.replace(
            e, status=status, conclusive=status == "complete",
            utility=o.utility if isinstance(o.utility, bool) else None,
            security=o.security if isinstance(o.security, bool) else None)
        units[uid] = e
        used.add(config)
        s.redacted += bool(redacted)
        return e, aer, encoded, data

    def _flush(self, batch: list[tuple[Attempt, Any, bytes, bytes]]) -> None:
        """Store a batch: the raw files, flushed, then their ledger lines; their executions,
        flushed, then their index lines (the order a live run writes them in, one flush a
        step rather than one a file)."""
        from agentprov_core.evidence.derive import derive
        from agentprov_core.evidence.executions import Executions

        if not batch:
            return
        if not self.written:  # the manifest lists every configuration before a line does
            # the ledger first: a directory holding a manifest is a corpus, whenever it stops
            self.wc.ledger.path.touch()
            self.wc.write_manifest(self._manifest(self.configs))
            self.written = True
        for *_, data in batch:
            self.wc.store.put_bytes(data, sync=False)
        # the linkage tier resolves the stored raw files: derived once they are there
        encoded = [b for _, _, b, _ in batch]
        if self.pool is not None:
            step = -(-len(encoded) // (2 * WORKERS))
            chunks = [encoded[i:i + step] for i in range(0, len(encoded), step)]
            derived = [d for f in [self.pool.submit(_derive_all, str(self.wc.root), c)
                                   for c in chunks] for d in f.result()]
        else:
            derived = [{"aer": b, **derive(aer, b, self.wc.root)} for _, aer, b, _ in batch]
        os.sync()
        self.wc.ledger.append_all([e for e, *_ in batch])
        ex = Executions(self.wc.root)
        digests = [ex.write(e.session_id, files, sync=False)
                   for (e, *_), files in zip(batch, derived, strict=True)]
        os.sync()
        ex.append_all([self._index(e, aer, files, d) for (e, aer, *_), files, d
                       in zip(batch, derived, digests, strict=True)])
        for e, *_ in batch:
            self.summary.imported += 1
            self.summary.statuses[e.status] += 1

    def _aer(self, e: Attempt, data: bytes, name: str, cell: Any, source_sha256: str,
             redacted: dict[str, int]) -> Any:
        from agentprov_core.mapping import ImportEvidence

        ev = ImportEvidence(data=data, name=name, cell=cell, attempt=e,
                            manifest={"source": self.source, "backend": self.source},
                            path=self.wc.store.path(e.native_sha256).relative_to(self.wc.root)
                            .as_posix(), source_sha256=source_sha256, redacted=redacted)
        return self.mapper.map(ev)

    def _finish(self, e: Attempt) -> None:
        """Map an entry a killed import ledgered and did not map, from its stored bytes (the
        file as read is taken from the import directory when it still redacts to them)."""
        name = e.native_path or ""
        data = self.wc.store.path(e.native_sha256).read_bytes()
        source_sha, redacted = e.native_sha256, {}
        try:
            raw = _read(self.logdir.joinpath(*name.split("/")))
            if redact(raw)[0] == data:
                source_sha, redacted = hashlib.sha256(raw).hexdigest(), redact(raw)[1]
        except (ValueError, OSError):
            pass
        cell = self.mapper.read(tuple(name.split("/")), data)
        self._write(e, self._aer(e, data, name, cell, source_sha, redacted), finish=True)

    def _write(self, e: Attempt, aer: Any, finish: bool = False) -> None:
        """Derive the SEM, PROV and validation of ``aer``, write the execution once and
        append its index line (the same steps as T0's mapping of a live attempt)."""
        from agentprov_core.evidence.aer import encode
        from agentprov_core.evidence.derive import derive
        from agentprov_core.evidence.executions import Executions

        root = self.wc.root
        aer_bytes = encode(aer)
        files = {"aer": aer_bytes, **derive(aer, aer_bytes, root)}
        ex = Executions(root)
        digests = ex.write(e.session_id, files, keep_same=finish)
        ex.append_index(self._index(e, aer, files, digests))

    def _index(self, e: Attempt, aer: Any, files: dict[str, bytes],
               digests: dict[str, str]) -> Any:
        from agentprov_core.evidence.live_mapping import index_entry

        return index_entry(aer, files, digests, unit=e.unit, seq=e.seq, mapper=self.ref.name,
                           mapped_at=now())


def _pool() -> Any:
    import multiprocessing
    import sys
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(WORKERS, mp_context=ctx)


def _derive_all(root: str, encoded: list[bytes]) -> list[dict[str, bytes]]:
    """The stored files (AER, SEM, PROV, validation) of each encoded AER (a pool's task)."""
    from agentprov_core.evidence.aer import decode
    from agentprov_core.evidence.derive import derive

    return [{"aer": b, **derive(decode(b), b, Path(root))} for b in encoded]


def run_import(kind: str, logdir: str | Path, corpus: str | Path, source: str) -> Summary:
    """Import the result files under ``logdir`` with the importer ``kind`` into ``corpus``
    (its working tree ``DIR.partial``) as source ``source``."""
    from agentprov_core import mapping
    from agentprov_core.plugins import manager

    ref = mapping.importer(kind)
    if ref is None:
        raise AgentprovError("import.usage.unknown_kind", kind=kind,
                             known=", ".join(mapping.importers()) or "none")
    if source not in manager().sources():
        raise AgentprovError("import.usage.unknown_source", source=source,
                             known=", ".join(sorted(manager().sources())) or "none")
    p = Path(logdir)
    if not p.is_dir():
        raise AgentprovError("import.usage.logdir", logdir=p,
                             what="no such directory" if not p.exists() else "not a directory")
    return Importer(ref, p, corpus, source).run()
