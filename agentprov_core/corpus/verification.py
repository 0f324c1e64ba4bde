"""``agentprov verify``: re-walk what a corpus stores and say where it no longer holds.

Level ``chain`` (the only level of this build) checks, streaming over the corpus:

- **the manifest**: it parses, it is in the form T0 writes (sorted keys, indent 1), its
  format is known, and it agrees with the ledger (every plan and configuration digest the
  ledger records is listed) and with the capture headers (the backend identity, when the
  corpus holds one configuration). The manifest is rewritten atomically by every run and is
  not content-addressed: a changed byte shows only when it breaks the JSON, the form, or
  one of these agreements. A byte in a field nothing else repeats (``created_at``, say)
  cannot be caught on a working tree: that is what ``checksums.sha256`` is for, and it is
  written at sealing (hence the one ``unverified`` line of every working tree);
- **the ledger**: every line parses (a line cut short is a torn write: unverified), is in
  the form T0 writes, ``seq`` runs 0, 1, 2, … (a removed, inserted or reordered line
  fails), ``unit`` is ``cell_key|defence|r<repeat>``, and its references resolve;
- **each capture log** the ledger names (capture/0.1, as ``agentprov_backend.capture.verify``
  checks it): its file name is the sha256 of its bytes, every line is canonical JSON, ``seq``
  runs without gap, each ``prev`` is the sha256 of the line before, the head is the
  ledger's ``capture_head_sha256``, ``t`` never decreases, one end record, last; and its
  header, record count and end status agree with the ledger entry. A log the ledger already
  recorded as damaged when it was stored is *tombstoned*: its bytes are checked, its chain
  is not held against it;
- **the raw store**: every file's name is the sha256 of its bytes (files the ledger does not
  name are hashed too, and reported as unreferenced);
- **the executions**: every index line parses and is in form, names its ledger entry, and
  the sha256 of each of its files (aer, sem, prov, validation) is the one it records; each
  AER names its execution, agrees with the index on its outcome and cites evidence the
  raw store holds (and, for a capture log, the ledger's digests).

Memory is flat in the corpus size (files are read one at a time, the ledger and the index
line by line; what is kept is a digest set and one small tuple per ledger entry), and the
hashing runs in a pool of two threads (``hashlib`` releases the GIL).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core import capture_chain
from agentprov_core.errors import AgentprovError

LEVEL = "chain"
LIVE_FORMAT = "agentprov-live-corpus/0.1"
KNOWN_FORMATS = (LIVE_FORMAT,)
LEDGER_STATUSES = ("complete", "incomplete", "errored", "aborted", "quarantined")
HEX64 = re.compile(r"[0-9a-f]{64}")
WORKERS = 2
WINDOW = 64  # tasks in flight: bounds memory whatever the corpus size
BATCH = 16  # tasks per process call
PROCESS_THRESHOLD = 256 * 1024  # a ledger larger than this (about 300 attempts): processes
CHUNK = 1 << 20
PER_FILE = 5  # findings of one code at one path shown in text


@dataclass(frozen=True)
class Finding:
    kind: str  # failed | tombstoned | unverified
    code: str
    path: str  # relative to the corpus root
    message: str

    def line(self) -> str:
        return f"{self.kind}: {self.code} at {self.path}: {self.message}"


@dataclass
class Report:
    corpus: Path
    corpus_id: str
    working: bool
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {
        "ledger_entries": 0, "capture_logs": 0, "capture_records": 0, "raw_files": 0,
        "executions": 0, "preflight_calls": 0, "files_hashed": 0, "bytes_hashed": 0})

    def of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    @property
    def failed(self) -> list[Finding]:
        return self.of("failed")

    @property
    def not_verified(self) -> list[Finding]:
        return [f for f in self.findings if f.kind != "failed"]

    @property
    def result(self) -> str:
        if self.failed:
            return "failed"
        return "passed with unverified checks" if self.not_verified else "passed"

    def summary(self) -> str:
        return (f"agentprov verify: level {LEVEL}: {self.result}; {len(self.failed)} failed, "
                f"{len(self.not_verified)} unverified or tombstoned")

    def lines(self, per_file: int = PER_FILE) -> list[str]:
        """The findings, failures first; at most ``per_file`` of one code at one path (a
        record removed from a capture log puts every later record out of sequence):
        ``--format json`` lists them all."""
        order = {"failed": 0, "tombstoned": 1, "unverified": 2}
        shown: Counter[tuple[str, str, str]] = Counter()
        out: list[str] = []
        findings = _collapse_seq_runs(self.findings)
        groups = Counter((f.kind, f.code, f.path) for f in findings)
        for f in sorted(findings, key=lambda f: order[f.kind]):
            key = (f.kind, f.code, f.path)
            shown[key] += 1
            if shown[key] <= per_file:
                out.append(f.line())
            elif shown[key] == per_file + 1:
                out.append(f"{f.kind}: {f.code} at {f.path}: … and {groups[key] - per_file} "
                           "more (--format json lists them all)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": "agentprov-verify/0.1", "corpus": str(self.corpus),
                "corpus_id": self.corpus_id, "state": "working" if self.working else "sealed",
                "level": LEVEL, "result": self.result, "failed": len(self.failed),
                "unverified_or_tombstoned": len(self.not_verified), "counts": self.counts,
                "findings": [{"kind": f.kind, "code": f.code, "path": f.path,
                              "message": f.message} for f in self.findings]}


_SEQ = re.compile(r"record (\d+): seq is (-?\d+), expected \1$")


def _collapse_seq_runs(findings: list[Finding]) -> list[Finding]:
    """A run of records whose ``seq`` is off by the same amount (what a removed or inserted
    record does to every record after it) shown as its first record and one line."""
    out: list[Finding] = []
    run: list[tuple[Finding, int, int]] = []  # (finding, record, offset)

    def flush() -> None:
        if run:
            out.append(run[0][0])
        if len(run) > 1:
            f, first, off = run[0][0], run[1][1], run[0][2]
            out.append(Finding(f.kind, f.code, f.path,
                               f"records {first}-{run[-1][1]}: seq is off by {off} too (a "
                               f"record was removed or inserted at record {run[0][1]})"))
        run.clear()

    for f in findings:
        m = _SEQ.match(f.message) if f.code == "capture.chain" else None
        if m is not None:
            rec, off = int(m.group(1)), int(m.group(2)) - int(m.group(1))
            if run and (run[-1][0].path != f.path or run[-1][1] + 1 != rec
                        or run[-1][2] != off):
                flush()
            run.append((f, rec, off))
            continue
        flush()
        out.append(f)
    flush()
    return out


def is_live(manifest: dict[str, Any] | None, root: Path) -> bool:
    """A live corpus: its manifest says so (format, ``working``, a ``live`` block), or it is
    a working tree (``DIR.partial``, which only a live run writes in this build)."""
    m = manifest or {}
    return (m.get("format") == LIVE_FORMAT or bool(m.get("working")) or "live" in m
            or root.name.endswith(".partial"))


# ------------------------------------------------------------------------------ capture/0.1
# the one reader of a capture log's chain (T0's ingest, the mapper and verify share it)
check_capture = capture_chain.check


# ------------------------------------------------------------------------------ helpers
def raw_rel(digest: str) -> str:
    return f"raw/sha256/{digest[:2]}/{digest}"


_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def _read(path: str) -> bytes:
    """A file's bytes (plain system calls: at 60,000 files, ``open()`` and ``pathlib`` are
    a large share of the time)."""
    fd = os.open(path, _O_READ)
    try:
        chunks = []
        while chunk := os.read(fd, CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _hash_file(path: str) -> tuple[str, int]:
    """``(sha256, size)`` of a file, read in large chunks (hashlib releases the GIL)."""
    fd = os.open(path, _O_READ)
    h = hashlib.sha256()
    size = 0
    try:
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return h.hexdigest(), size


def _run_batch(fn: Callable[[str, Any], Any], base: str, items: list[Any]) -> list[Any]:
    return [fn(base, it) for it in items]


def _hash_item(_base: str, item: tuple[str, str]) -> tuple[str, int]:
    return _hash_file(item[1])


def _use_processes(root: Path) -> bool:
    """Two processes for a large corpus (parsing capture logs holds the GIL, so threads
    would run it one at a time); threads alone for a small one, which a process pool's
    start would only slow down. ``AGENTPROV_VERIFY_PROCESSES=1`` or ``0`` decides."""
    forced = os.environ.get("AGENTPROV_VERIFY_PROCESSES")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return (root / "ledger.jsonl").stat().st_size > PROCESS_THRESHOLD
    except OSError:
        return False


class _Runner:
    """Run tasks ``fn(base, item)`` and yield ``(item, result)`` in order, with a bounded
    number in flight: memory does not grow with the corpus."""

    def __init__(self, processes: bool) -> None:
        self.threads = ThreadPoolExecutor(WORKERS, thread_name_prefix="verify")
        self.procs = None
        if processes:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            ctx = (multiprocessing.get_context("fork") if sys.platform.startswith("linux")
                   else None)
            self.procs = ProcessPoolExecutor(WORKERS, mp_context=ctx)
            # start the workers now, before any thread of this process exists (fork)
            self.procs.submit(_run_batch, _hash_item, "", []).result()

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.threads.shutdown(cancel_futures=True)
        if self.procs is not None:
            self.procs.shutdown(cancel_futures=True)

    def map(self, fn: Callable[[str, Any], Any], base: str, items: Iterable[Any],
            heavy: bool = True) -> Iterator[tuple[Any, Any]]:
        if self.procs is None or not heavy:
            pending: deque[tuple[Any, Future]] = deque()
            for item in items:
                pending.append((item, self.threads.submit(fn, base, item)))
                if len(pending) >= WINDOW:
                    it, fut = pending.popleft()
                    yield it, fut.result()
            while pending:
                it, fut = pending.popleft()
                yield it, fut.result()
            return
        batches: deque[tuple[list[Any], Future]] = deque()
        batch: list[Any] = []

        def drain(limit: int) -> Iterator[tuple[Any, Any]]:
            while len(batches) > limit:
                got, fut = batches.popleft()
                yield from zip(got, fut.result(), strict=True)

        for item in items:
            batch.append(item)
            if len(batch) >= BATCH:
                batches.append((batch, self.procs.submit(_run_batch, fn, base, batch)))
                batch = []
                yield from drain(WINDOW // BATCH * WORKERS)
        if batch:
            batches.append((batch, self.procs.submit(_run_batch, fn, base, batch)))
        yield from drain(0)


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number from 1, bytes without newline, ended by a newline)``."""
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            ended = raw.endswith(b"\n")
            yield n, raw[:-1] if ended else raw, ended


def _truncated(exc: Exception) -> bool:
    return "truncated" in str(exc)


class _Evidence(msgspec.Struct):
    role: str
    sha256: str
    path: str
    head_sha256: str | None = None


class _Header(msgspec.Struct):
    execution_id: str
    source: str = ""
    evidence: list[_Evidence] = []


class _Outcome(msgspec.Struct):
    status: str
    execution_observed: bool = False


class _AER(msgspec.Struct):
    header: _Header
    outcome: _Outcome


_AER_DECODER = msgspec.json.Decoder(_AER)


@dataclass(frozen=True)
class _LedgerRef:
    line: int
    session_id: str
    capture_sha256: str | None
    capture_head_sha256: str | None
    native_sha256: str | None
    status: str


# ------------------------------------------------------------------------------ tasks
def _check_attempt(base: str, item: tuple[int, Any]) -> dict[str, Any]:
    """One ledger entry's native and capture logs (a task: threads or processes)."""
    n, e = item
    findings: list[Finding] = []
    verified: list[tuple[str, int]] = []
    out: dict[str, Any] = {"findings": findings, "verified": verified}
    where = f"ledger.jsonl line {n} (session {e.session_id})"

    def fail(code: str, path: str, msg: str, kind: str = "failed") -> None:
        findings.append(Finding(kind, code, path, msg))

    if e.native_sha256:
        rel = raw_rel(e.native_sha256)
        try:
            got, size = _hash_file(base + rel)
        except FileNotFoundError:
            fail("raw.missing", rel, f"{where} names it as the native log; the raw store "
                                     "does not hold it")
        else:
            if got != e.native_sha256:
                fail("raw.digest", rel, f"its sha256 is {got}, not its name: the file was "
                                        "altered")
            verified.append((e.native_sha256, size))
    if not e.capture_sha256:
        return out
    rel = raw_rel(e.capture_sha256)
    try:
        data = _read(base + rel)
    except FileNotFoundError:
        fail("raw.missing", rel, f"{where} names it as the capture log; the raw store does "
                                 "not hold it")
        return out
    got = hashlib.sha256(data).hexdigest()
    verified.append((e.capture_sha256, len(data)))
    if got != e.capture_sha256:
        fail("raw.digest", rel, f"its sha256 is {got}, not its name: the file was altered")
    chain = check_capture(data, e.capture_head_sha256)
    out["records"] = chain.n_records
    recorded_damage = (e.status in ("errored", "aborted") and e.reason is not None
                       and ("capture log damaged" in e.reason
                            or "has no end record" in e.reason))
    if chain.problems and recorded_damage and got == e.capture_sha256:
        fail("capture.damaged", rel,
             f"{where} recorded this log as damaged when it was stored ({e.reason}); "
             f"its bytes are intact, its chain is not checked: "
             + "; ".join(chain.problems[:3]), kind="tombstoned")
        return out
    for p in chain.problems:
        fail("capture.chain", rel, p)
    h = chain.header
    if h is not None and h.get("kind") == "header":
        b = h.get("backend") or {}
        if isinstance(b, dict):
            out["backend"] = (b.get("environment_id"), b.get("identity_sha256"))
        for key, want in (("session_id", e.session_id), ("unit", e.unit),
                          ("attempt", e.attempt), ("plan_sha256", e.plan_sha256),
                          ("config_digest", e.config_digest)):
            if want and h.get(key) != want:
                fail("capture.header", rel,
                     f"record 0: {key} is {h.get(key)!r}; {where} records {want!r}")
    if e.capture_records is not None and e.capture_records != chain.n_records:
        fail("capture.records", rel, f"it holds {chain.n_records} record(s); {where} "
                                     f"records {e.capture_records}")
    end = chain.end
    if end is not None and e.status != "quarantined" and end.get("status") != e.status:
        fail("capture.status", rel,
             f"record {chain.n_records - 1}: end status {end.get('status')!r}; {where} "
             f"records {e.status!r}")
    return out


def _which(base: str, e: Any, name: str, want: str, got: str) -> str:
    """Which of the two changed, when validation.json (which cites the AER, SEM and PROV
    digests) is intact and can tell."""
    from agentprov_core.evidence.executions import DIRNAME

    if name != "validation":
        try:
            data = _read(f"{base}{DIRNAME}/{e.execution_id}/validation.json")
            if hashlib.sha256(data).hexdigest() == e.validation_sha256:
                cited = json.loads(data).get(f"{name}_sha256")
                if cited == want:
                    return f"the file was altered: validation.json, intact, cites {want[:16]}…"
                if cited == got:
                    return "that line was altered: validation.json, intact, cites the file"
        except (OSError, ValueError, AttributeError):
            pass
    return "the file or that line was altered"


def _check_execution(base: str, item: tuple[int, Any, Any]) -> dict[str, Any]:
    """One execution's files against its index line (a task: threads or processes)."""
    from agentprov_core.evidence.executions import DIRNAME, INDEX

    n, e, ref = item
    findings: list[Finding] = []
    hashed: list[int] = []
    out: dict[str, Any] = {"findings": findings, "hashed": hashed, "source": None}

    def fail(code: str, path: str, msg: str) -> None:
        findings.append(Finding("failed", code, path, msg))

    where = f"{INDEX} line {n}"
    if ref is None:
        fail("executions.ledger", INDEX,
             f"line {n} ({e.execution_id}): ledger_seq {e.ledger_seq} names no ledger entry")
    elif ref.session_id != e.execution_id:
        fail("executions.ledger", INDEX,
             f"line {n} ({e.execution_id}): ledger_seq {e.ledger_seq} is session "
             f"{ref.session_id} (ledger.jsonl line {ref.line})")
    aer_bytes = None
    for name, want in (("aer", e.aer_sha256), ("sem", e.sem_sha256),
                       ("prov", e.prov_sha256), ("validation", e.validation_sha256)):
        rel = f"{DIRNAME}/{e.execution_id}/{name}.json"
        if want is None:
            continue
        try:
            if name == "aer":
                aer_bytes = _read(base + rel)
                got, size = hashlib.sha256(aer_bytes).hexdigest(), len(aer_bytes)
            else:
                got, size = _hash_file(base + rel)
        except FileNotFoundError:
            fail("executions.missing", rel, f"{where} names it; it does not exist")
            continue
        hashed.append(size)
        if got != want:
            fail("executions.digest", rel,
                 f"its sha256 is {got}, not the {name}_sha256 {want} that {where} records "
                 f"({_which(base, e, name, want, got)})")
            if name == "aer":
                aer_bytes = None  # do not cross-check an AER that is not the indexed one
    if aer_bytes is None:
        return out
    rel = f"{DIRNAME}/{e.execution_id}/aer.json"
    try:
        aer = _AER_DECODER.decode(aer_bytes)
    except msgspec.DecodeError as exc:
        fail("executions.aer", rel, f"not an AER ({exc})")
        return out
    h = aer.header
    out["source"] = h.source
    if h.execution_id != e.execution_id:
        fail("executions.aer", rel, f"header.execution_id is {h.execution_id!r}")
    if aer.outcome.status != e.status:
        fail("executions.aer", rel, f"outcome.status is {aer.outcome.status!r}; {where} "
                                    f"records {e.status!r}")
    if aer.outcome.execution_observed != e.execution_observed:
        fail("executions.aer", rel,
             f"outcome.execution_observed is {aer.outcome.execution_observed}; {where} "
             f"records {e.execution_observed}")
    for ev in h.evidence:
        if not HEX64.fullmatch(ev.sha256) or ev.path != raw_rel(ev.sha256):
            fail("executions.evidence", rel,
                 f"evidence {ev.role} cites {ev.path} ({ev.sha256}), not a raw store path")
            continue
        if not os.path.isfile(base + ev.path):
            fail("executions.evidence", rel,
                 f"evidence {ev.role} {ev.path} is not in the raw store")
        if ref is not None and ev.role == "capture":
            if ev.sha256 != ref.capture_sha256:
                fail("executions.evidence", rel,
                     f"its capture log is {ev.sha256}; ledger.jsonl line {ref.line} "
                     f"records {ref.capture_sha256}")
            elif ev.head_sha256 is not None and ev.head_sha256 != ref.capture_head_sha256:
                fail("executions.evidence", rel,
                     f"its capture head is {ev.head_sha256}; ledger.jsonl line {ref.line} "
                     f"records {ref.capture_head_sha256}")
        if ref is not None and ev.role == "native_log" and ev.sha256 != ref.native_sha256:
            fail("executions.evidence", rel,
                 f"its native log is {ev.sha256}; ledger.jsonl line {ref.line} records "
                 f"{ref.native_sha256}")
    return out


# ------------------------------------------------------------------------------ the walk
class _Verifier:
    def __init__(self, root: Path, manifest: dict[str, Any] | None, report: Report) -> None:
        self.root = root
        self.base = str(root) + os.sep  # paths as strings: no pathlib in the hot loops
        self.manifest = manifest
        self.report = report
        self.verified: set[str] = set()  # raw digests whose bytes were checked
        self.ledger: dict[int, _LedgerRef] = {}  # by seq
        self.plans: set[str] = set()
        self.configs: set[str] = set()
        self.backends: set[tuple[Any, Any]] = set()
        self.sources: set[str] = set()

    # findings
    def add(self, kind: str, code: str, path: str, message: str) -> None:
        self.report.findings.append(Finding(kind, code, path, message))

    def fail(self, code: str, path: str, message: str) -> None:
        self.add("failed", code, path, message)

    def hashed(self, nbytes: int) -> None:
        self.report.counts["files_hashed"] += 1
        self.report.counts["bytes_hashed"] += nbytes

    def run(self) -> None:
        with _Runner(_use_processes(self.root)) as runner:
            self.check_ledger(runner)
            self.check_raw(runner)
            self.check_executions(runner)
        self.check_preflight()
        self.check_manifest()
        if not (self.root / "checksums.sha256").is_file():
            why = ("a working tree has no checksums.sha256 (it is written at sealing)"
                   if self.report.working else
                   "the corpus has no checksums.sha256 (this build seals no corpus)")
            self.add("unverified", "checksums.absent", "checksums.sha256", why)
        else:
            self.add("unverified", "checksums.unsupported", "checksums.sha256",
                     "this build does not read sealed checksums (no sealed format yet)")

    def jsonl(self, path: Path, rel: str, prefix: str, dec: msgspec.json.Decoder, what: str,
              reader: str) -> Iterator[tuple[int, Any, bytes]]:
        """``(line number, entry, line)`` of a file T0 appends JSON lines to: a line that
        is not ``what`` fails (``<prefix>.entry``), a line cut short by a write that never
        finished is unverified (``<prefix>.torn``: ``reader`` skips it by design), a line
        that is not JSON fails (``<prefix>.parse``)."""
        for n, line, _ in _lines(path):
            if not line.strip():
                continue
            try:
                entry = dec.decode(line)
            except msgspec.ValidationError as exc:
                self.fail(f"{prefix}.entry", rel, f"line {n}: not {what} ({exc})")
                continue
            except msgspec.DecodeError as exc:
                if _truncated(exc):
                    self.add("unverified", f"{prefix}.torn", rel,
                             f"line {n}: a write cut short (T0 died or the disk filled); "
                             f"{reader} skips it")
                else:
                    self.fail(f"{prefix}.parse", rel,
                              f"line {n}: not JSON ({exc}): the line was altered")
                continue
            yield n, entry, line

    # -------------------------------------------------------------- manifest
    def check_manifest(self) -> None:
        m = self.manifest
        if m is None:
            return  # reported when the corpus was opened
        data = (self.root / "manifest.json").read_bytes()
        if (json.dumps(m, sort_keys=True, indent=1) + "\n").encode("utf-8") != data:
            self.fail("manifest.form", "manifest.json",
                      "it is not in the form T0 writes (JSON, sorted keys, indent 1, one "
                      "newline): it was edited after it was written")
        fmt = m.get("format")
        if fmt not in KNOWN_FORMATS:
            self.fail("manifest.format", "manifest.json",
                      f"format {fmt!r} is not one this build writes ({', '.join(KNOWN_FORMATS)})")
        if self.report.working and m.get("working") is not True:
            self.fail("manifest.working", "manifest.json",
                      "a working tree (DIR.partial) whose manifest does not say working: true")
        for key, seen, what in (("plans", self.plans, "plan"),
                                ("config_digests", self.configs, "configuration")):
            listed = m.get(key)
            listed = set(listed) if isinstance(listed, list) else set()
            for d in sorted(seen - listed):
                self.fail(f"manifest.{key}", "manifest.json",
                          f"the ledger records the {what} digest {d}, which the manifest's "
                          f"{key} does not list")
        ident = m.get("backend_identity") or {}
        want = (ident.get("environment_id"), ident.get("identity_sha256"))
        if len(self.configs) <= 1:
            for b in sorted(self.backends - {want}, key=str):
                self.fail("manifest.backend", "manifest.json",
                          f"a capture header names the backend {b[0]} ({b[1]}); the manifest's "
                          f"backend_identity is {want[0]} ({want[1]})")
        src = m.get("source")
        for s in sorted(self.sources - {src}):
            self.fail("manifest.source", "manifest.json",
                      f"an AER's source is {s!r}; the manifest's is {src!r}")

    # -------------------------------------------------------------- ledger and captures
    def check_ledger(self, runner: _Runner) -> None:
        from agentprov_core.corpus.ledger import Attempt
        from agentprov_core.corpus.working import unit_key

        path = self.root / "ledger.jsonl"
        dec = msgspec.json.Decoder(Attempt)
        expected_seq = 0

        def entries() -> Iterator[tuple[int, Attempt]]:
            nonlocal expected_seq
            for n, e, line in self.jsonl(path, "ledger.jsonl", "ledger", dec,
                                         "a ledger entry", "the ledger"):
                where = f"line {n}"
                self.report.counts["ledger_entries"] += 1
                if msgspec.json.encode(e) != line:
                    self.fail("ledger.form", "ledger.jsonl",
                              f"{where} (seq {e.seq}): not in the form T0 writes: the line "
                              "was edited")
                if e.seq != expected_seq:
                    self.fail("ledger.seq", "ledger.jsonl",
                              f"{where}: seq is {e.seq}, expected {expected_seq} (a line was "
                              "removed, inserted or reordered)")
                expected_seq = max(expected_seq, e.seq) + 1
                if e.unit != unit_key(e.cell_key, e.defence, e.repeat):
                    self.fail("ledger.unit", "ledger.jsonl",
                              f"{where} (seq {e.seq}): unit {e.unit!r} is not "
                              f"{unit_key(e.cell_key, e.defence, e.repeat)!r}")
                if e.status not in LEDGER_STATUSES:
                    self.fail("ledger.status", "ledger.jsonl",
                              f"{where} (seq {e.seq}): status {e.status!r} is not one of "
                              f"{', '.join(LEDGER_STATUSES)}")
                if e.plan_sha256:
                    self.plans.add(e.plan_sha256)
                if e.config_digest:
                    self.configs.add(e.config_digest)
                for name in ("capture_sha256", "native_sha256", "capture_head_sha256"):
                    v = getattr(e, name)
                    if v is not None and not HEX64.fullmatch(v):
                        self.fail("ledger.reference", "ledger.jsonl",
                                  f"{where} (seq {e.seq}): {name} {v!r} is not a sha256")
                        e = msgspec.structs.replace(e, **{name: None})  # the others are checked
                self.ledger[e.seq] = _LedgerRef(n, e.session_id, e.capture_sha256,
                                                e.capture_head_sha256, e.native_sha256,
                                                e.status)
                if e.capture_sha256 or e.native_sha256:
                    yield n, e

        for _, out in runner.map(_check_attempt, self.base, entries()):
            for f in out["findings"]:
                self.report.findings.append(f)
            for d, nbytes in out["verified"]:
                self.verified.add(d)
                self.hashed(nbytes)
            if out.get("records") is not None:
                self.report.counts["capture_logs"] += 1
                self.report.counts["capture_records"] += out["records"]
            if out.get("backend"):
                self.backends.add(out["backend"])

    # -------------------------------------------------------------- the raw store
    def check_raw(self, runner: _Runner) -> None:
        base = self.root / "raw"
        if not base.is_dir():
            return

        def unchecked() -> Iterator[tuple[str, str]]:
            for top in sorted(os.scandir(base), key=lambda d: d.name):
                if top.name != "sha256" or not top.is_dir():
                    self.fail("raw.unexpected", f"raw/{top.name}",
                              "the raw store holds only raw/sha256/<2 hex>/<sha256>")
                    continue
                for sub in sorted(os.scandir(top.path), key=lambda d: d.name):
                    if not sub.is_dir() or not re.fullmatch(r"[0-9a-f]{2}", sub.name):
                        self.fail("raw.unexpected", f"raw/sha256/{sub.name}",
                                  "the raw store holds only raw/sha256/<2 hex>/<sha256>")
                        continue
                    for f in sorted(os.scandir(sub.path), key=lambda d: d.name):
                        rel = f"raw/sha256/{sub.name}/{f.name}"
                        self.report.counts["raw_files"] += 1
                        if f.name.startswith(".put-"):
                            self.add("unverified", "raw.temporary", rel,
                                     "a temporary file of a store cut short (T0 died or the "
                                     "disk filled); nothing names it")
                        elif not HEX64.fullmatch(f.name) or not f.is_file():
                            self.fail("raw.unexpected", rel,
                                      "not a content-addressed file (its name is not a sha256)")
                        elif f.name[:2] != sub.name:
                            self.fail("raw.misplaced", rel,
                                      f"a file named {f.name} belongs in raw/sha256/{f.name[:2]}")
                        elif f.name not in self.verified:
                            yield rel, f.path

        for (rel, _), (got, size) in runner.map(_hash_item, self.base, unchecked(), heavy=False):
            self.hashed(size)
            name = rel.rsplit("/", 1)[1]
            if got != name:
                self.fail("raw.digest", rel, f"its sha256 is {got}, not its name: the file "
                                             "was altered")
            else:
                self.verified.add(name)
                self.add("unverified", "raw.unreferenced", rel,
                         "no ledger entry names it (a store cut short before its ledger "
                         "entry?)")

    # -------------------------------------------------------------- executions
    def check_executions(self, runner: _Runner) -> None:
        from agentprov_core.evidence.executions import DIRNAME, INDEX, IndexEntry

        index = self.root / INDEX
        exdir = self.root / DIRNAME
        if not index.exists() and not exdir.exists():
            return
        dec = msgspec.json.Decoder(IndexEntry)
        seen: dict[str, int] = {}

        def rows() -> Iterator[tuple[int, Any, _LedgerRef | None]]:
            if not index.exists():
                return
            for n, e, line in self.jsonl(index, INDEX, "executions", dec, "an index entry",
                                         "the index"):
                where = f"line {n}"
                if msgspec.json.encode(e) != line:
                    self.fail("executions.form", INDEX,
                              f"{where} ({e.execution_id}): not in the form T0 writes: the "
                              "line was edited")
                if e.execution_id in seen:
                    self.fail("executions.duplicate", INDEX,
                              f"{where}: {e.execution_id} is already indexed at line "
                              f"{seen[e.execution_id]} (an execution is written once)")
                    continue
                if "/" in e.execution_id or e.execution_id in ("", ".", ".."):
                    self.fail("executions.entry", INDEX,
                              f"{where}: {e.execution_id!r} is not an execution id")
                    continue
                seen[e.execution_id] = n
                self.report.counts["executions"] += 1
                yield n, e, self.ledger.get(e.ledger_seq)

        for _, out in runner.map(_check_execution, self.base, rows()):
            self.report.findings.extend(out["findings"])
            for nbytes in out["hashed"]:
                self.hashed(nbytes)
            if out["source"] is not None:
                self.sources.add(out["source"])
        for ref in self.ledger.values():
            if ref.capture_sha256 and ref.status != "quarantined" and ref.session_id not in seen:
                self.add("unverified", "executions.unmapped", "ledger.jsonl",
                         f"line {ref.line} (session {ref.session_id}): its attempt has no "
                         f"execution in {INDEX} (its mapping failed or was cut short: see the "
                         "manifest's mapping_failures)")
        if exdir.is_dir():
            for d in sorted(os.scandir(exdir), key=lambda d: d.name):
                if d.name not in seen:
                    self.add("unverified", "executions.unindexed", f"{DIRNAME}/{d.name}",
                             f"no line of {INDEX} names it (an index append cut short?)")

    # -------------------------------------------------------------- the preflight probe
    def check_preflight(self) -> None:
        """``preflight/``: the probe's calls of every invocation (R-18), each a capture log
        in ``preflight/sha256/<2 hex>/<sha256>`` named by a line of
        ``preflight/ledger.jsonl`` (JSON, sorted keys). Their billed calls count against
        the caps of later invocations, so they are evidence like the cells' logs: each line
        in T0's form, each log present, named by its sha256, its chain intact up to the
        head the line records, and its header naming the line's session and plan."""
        root = self.root / "preflight"
        if not root.exists():
            return
        ledger = root / "ledger.jsonl"
        named: set[str] = set()
        if ledger.is_file():
            for n, e, line in self.jsonl(ledger, "preflight/ledger.jsonl", "preflight",
                                         msgspec.json.Decoder(dict), "a JSON object",
                                         "the caps' count"):
                where = f"preflight/ledger.jsonl line {n}"
                self.report.counts["preflight_calls"] += 1
                if json.dumps(e, sort_keys=True).encode("utf-8") != line:
                    self.fail("preflight.form", "preflight/ledger.jsonl",
                              f"line {n}: not in the form T0 writes: the line was edited")
                sha = e.get("capture_sha256")
                if sha is None:
                    continue  # the call left no log: charged at the bound, nothing to check
                if not isinstance(sha, str) or not HEX64.fullmatch(sha):
                    self.fail("preflight.reference", "preflight/ledger.jsonl",
                              f"line {n}: capture_sha256 {sha!r} is not a sha256")
                    continue
                named.add(sha)
                self.check_preflight_log(sha, e, where)
        else:
            self.fail("preflight.ledger", "preflight/ledger.jsonl",
                      "preflight/ holds no ledger: nothing names its logs")
        store = root / "sha256"
        for sub in sorted(os.scandir(store), key=lambda d: d.name) if store.is_dir() else ():
            for f in sorted(os.scandir(sub.path), key=lambda d: d.name) if sub.is_dir() else ():
                if f.name not in named and not f.name.startswith(".put-"):
                    self.add("unverified", "preflight.unreferenced",
                             f"preflight/sha256/{sub.name}/{f.name}",
                             "no line of preflight/ledger.jsonl names it")

    def check_preflight_log(self, sha: str, e: dict[str, Any], where: str) -> None:
        rel = f"preflight/sha256/{sha[:2]}/{sha}"
        try:
            data = _read(self.base + rel)
        except FileNotFoundError:
            self.fail("preflight.missing", rel, f"{where} names it; preflight/ does not hold it")
            return
        self.hashed(len(data))
        got = hashlib.sha256(data).hexdigest()
        if got != sha:
            self.fail("preflight.digest", rel,
                      f"its sha256 is {got}, not its name: the file was altered")
        chain = check_capture(data, e.get("capture_head_sha256"))
        for problem in chain.problems:
            self.fail("preflight.chain", rel, problem)
        h = chain.header
        if h is not None and h.get("kind") == "header":
            for key in ("session_id", "plan_sha256", "config_digest"):
                if e.get(key) and h.get(key) != e.get(key):
                    self.fail("preflight.header", rel, f"record 0: {key} is {h.get(key)!r}; "
                                                      f"{where} records {e.get(key)!r}")


def _open(given: str | Path) -> tuple[Path, dict[str, Any] | None, str | None]:
    """The corpus root and its manifest; a manifest that no longer reads (beside a ledger)
    is a failed check of verify, not a reason to stop."""
    from agentprov_core.corpus.opening import open_corpus

    try:
        c = open_corpus(given)
        return c.root, c.manifest, None
    except AgentprovError as exc:
        if exc.code != "corpus.environment.not_a_corpus":
            raise
        root = Path(str(exc.params.get("corpus", given)))
        if (root.is_dir() and (root / "manifest.json").is_file()
                and (root / "ledger.jsonl").is_file()):
            return root, None, str(exc.params.get("what", ""))
        raise


def verify_corpus(given: str | Path) -> Report:
    root, manifest, broken = _open(given)
    corpus_id = str((manifest or {}).get("corpus_id") or root.name.removesuffix(".partial"))
    report = Report(root, corpus_id, root.name.endswith(".partial"))
    v = _Verifier(root, manifest, report)
    if broken is not None:
        v.fail("manifest.unreadable", "manifest.json",
               f"{broken}: the file was altered (it is rewritten whole by every run, never "
               "in place)")
    v.run()
    return report
