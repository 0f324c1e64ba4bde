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
- **each capture log** the ledger names (capture/0.1, as ``agentprov_capture.check``
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

import dataclasses
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

import agentprov_capture
import msgspec

from agentprov_core.base import inputfile
from agentprov_core.corpus import selfdigest
from agentprov_core.corpus.snapshot import LOCK, Snapshot
from agentprov_core.errors import AgentprovError

LEVEL = "chain"
LIVE_FORMAT = "agentprov-live-corpus/0.1"
KNOWN_FORMATS = (LIVE_FORMAT,)
LEDGER_STATUSES = ("complete", "incomplete", "errored", "aborted", "quarantined")
HEX64 = re.compile(r"[0-9a-f]{64}")
#: The keys of a line of preflight/ledger.jsonl (agentprov_core/run/preflight.py writes them)
PREFLIGHT_KEYS = frozenset({
    "at", "invocation", "session_id", "call", "status", "capture_sha256",
    "capture_head_sha256", "billed_calls", "plan_sha256", "config_digest", "line_sha256"})
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
check_capture = agentprov_capture.check


# ------------------------------------------------------------------------------ helpers
def raw_rel(digest: str) -> str:
    return f"raw/sha256/{digest[:2]}/{digest}"


def _read(path: str) -> bytes:
    """A corpus file's bytes: a regular file, never through a link, a FIFO never waited on
    (:func:`agentprov_core.base.inputfile.open_regular`). Raises
    :class:`~agentprov_core.base.inputfile.Missing` or ``Unreadable``."""
    fd = inputfile.open_regular(path, follow=False)
    try:
        return inputfile.read_fd(fd, inputfile.MAX_STORED, CHUNK)
    finally:
        os.close(fd)


def _hash_file(path: str) -> tuple[str, int]:
    """``(sha256, size)`` of a corpus file (as :func:`_read` opens it), read in large chunks
    (hashlib releases the GIL)."""
    fd = inputfile.open_regular(path, follow=False)
    h = hashlib.sha256()
    size = 0
    try:
        while chunk := os.read(fd, CHUNK):
            h.update(chunk)
            size += len(chunk)
    except OSError as exc:
        raise inputfile.Unreadable(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    return h.hexdigest(), size


def _run_batch(fn: Callable[[str, Any], Any], base: str, items: list[Any]) -> list[Any]:
    return [fn(base, it) for it in items]


def _hash_item(_base: str, item: tuple[str, str]) -> tuple[str, int]:
    """``_hash_file`` of ``item``'s path; ``(why, -1)`` when it cannot be read."""
    try:
        return _hash_file(item[1])
    except inputfile.Unreadable as exc:
        return str(exc), -1


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


def _truncated(exc: Exception) -> bool:
    return "truncated" in str(exc)


class _Evidence(msgspec.Struct):
    role: str
    sha256: str
    path: str
    head_sha256: str | None = None


class _Task(msgspec.Struct, frozen=True):
    cell_key: str = ""
    unit: str = ""
    attempt: int = -1
    repeat: int = 0
    defense_id: str = "none"
    source: str = ""


class _Producer(msgspec.Struct, frozen=True):
    mapper: str = ""
    test_only: bool = False


class _Backend(msgspec.Struct, frozen=True):
    environment_id: Any = None
    identity_sha256: Any = None
    benchmark_version: Any = None


class _Header(msgspec.Struct):
    execution_id: str
    source: str = ""
    evidence: list[_Evidence] = []
    task: _Task = _Task()
    producer: _Producer = _Producer()
    backend: _Backend = _Backend()
    plan_sha256: Any = None
    config_digest: Any = None
    started_at: Any = None


class _Issue(msgspec.Struct):
    code: str


class _LiveVsNative(msgspec.Struct):
    checked: bool = False
    agree: bool | None = None


class _Outcome(msgspec.Struct):
    status: str
    execution_observed: bool = False
    session_status: Any = None
    utility: Any = None
    security: Any = None
    issues: list[_Issue] = []
    live_vs_native: _LiveVsNative | None = None


class _AER(msgspec.Struct):
    header: _Header
    outcome: _Outcome


_AER_DECODER = msgspec.json.Decoder(_AER)
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class _LedgerRef:
    """What the execution checks need of a ledger entry (one small tuple per entry)."""

    line: int
    session_id: str
    capture_sha256: str | None
    capture_head_sha256: str | None
    native_sha256: str | None
    status: str
    unit: str = ""
    cell_key: str = ""
    defence: str = ""
    repeat: int = 0
    attempt: int = 0
    plan_sha256: str = ""
    config_digest: str = ""
    utility: bool | None = None
    security: bool | None = None
    #: what its capture log's header and end record hold (None: not read, or damaged)
    capture: dict[str, Any] | None = None


def _same(a: Any, b: Any) -> bool:
    """Equal, and of one JSON type (``True`` is not ``1``)."""
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------------------ tasks
def _in_form(encoded: bytes, line: bytes) -> bool:
    """Whether ``line`` is what T0 writes for the entry it decodes to (a line of an earlier
    build, without ``line_sha256``, is compared without it)."""
    if encoded == line:
        return True
    return (selfdigest.line_status(line) == selfdigest.ABSENT
            and selfdigest.without_line_field(encoded) == line)


def _check_attempt(base: str, item: tuple[int, Any]) -> dict[str, Any]:
    """One ledger entry's native and capture logs (a task: threads or processes)."""
    n, e = item
    findings: list[Finding] = []
    verified: list[tuple[str, int]] = []
    read: list[tuple[str, str]] = []  # (path, sha256) of each file read
    out: dict[str, Any] = {"findings": findings, "verified": verified, "line": n, "read": read}
    where = f"ledger.jsonl line {n} (session {e.session_id})"

    def fail(code: str, path: str, msg: str, kind: str = "failed") -> None:
        findings.append(Finding(kind, code, path, msg))

    if e.native_sha256:
        rel = raw_rel(e.native_sha256)
        try:
            got, size = _hash_file(base + rel)
        except inputfile.Missing:
            fail("raw.missing", rel, f"{where} names it as the native log; the raw store "
                                     "does not hold it")
        except inputfile.Unreadable as exc:
            fail("raw.not_a_file", rel, f"{where} names it as the native log; it {exc}")
        else:
            read.append((rel, got))
            if got != e.native_sha256:
                fail("raw.digest", rel, f"its sha256 is {got}, not its name: the file was "
                                        "altered")
            verified.append((e.native_sha256, size))
    if not e.capture_sha256:
        return out
    rel = raw_rel(e.capture_sha256)
    try:
        data = _read(base + rel)
    except inputfile.Missing:
        fail("raw.missing", rel, f"{where} names it as the capture log; the raw store does "
                                 "not hold it")
        return out
    except inputfile.Unreadable as exc:
        fail("raw.not_a_file", rel, f"{where} names it as the capture log; it {exc}")
        return out
    got = hashlib.sha256(data).hexdigest()
    read.append((rel, got))
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
    facts: dict[str, Any] = {}
    if h is not None and h.get("kind") == "header":
        b = h.get("backend") or {}
        if isinstance(b, dict):
            out["backend"] = (b.get("environment_id"), b.get("identity_sha256"))
            facts["backend"] = {k: b[k] for k in ("environment_id", "identity_sha256")
                                if k in b}
        cell = h.get("cell") if isinstance(h.get("cell"), dict) else {}
        for key, got, want in (("session_id", h.get("session_id"), e.session_id),
                               ("unit", h.get("unit"), e.unit),
                               ("attempt", h.get("attempt"), e.attempt),
                               ("plan_sha256", h.get("plan_sha256"), e.plan_sha256),
                               ("config_digest", h.get("config_digest"), e.config_digest),
                               ("cell.cell_key", cell.get("cell_key"), e.cell_key)):
            if want and not _same(got, want):
                fail("capture.header",
                     rel, f"record 0: {key} is {got!r}; {where} records {want!r}")
        out["test_only"] = h.get("test_only")
        out["source"] = h.get("source")
        for key in ("started_at", "benchmark_version", "test_only", "source"):
            facts[key] = h.get(key)
    if e.capture_records is not None and e.capture_records != chain.n_records:
        fail("capture.records", rel, f"it holds {chain.n_records} record(s); {where} "
                                     f"records {e.capture_records}")
    end = chain.end
    if end is not None and e.status != "quarantined":
        # T0 errors a session whose staging it refused (map.staging_refused) after the
        # worker ended its log: the ledger's status is T0's, the log's the worker's
        refused = bool(e.staging_refused) and e.status == "errored"
        if end.get("status") != e.status and not refused:
            fail("capture.status", rel,
                 f"record {chain.n_records - 1}: end status {end.get('status')!r}; {where} "
                 f"records {e.status!r}")
        # what the worker returned T0 (the ledger) and wrote in its end record: the same,
        # where both have it (a worker that died after its end record returned nothing; a
        # setup refusal's end record counts no calls)
        for key in ("utility", "security", "calls"):
            want = getattr(e, key)
            if want is not None and key in end and not _same(end.get(key), want):
                fail("capture.end", rel,
                     f"record {chain.n_records - 1}: {key} is {end.get(key)!r}; {where} "
                     f"records {want!r}")
        facts["end"] = {k: end.get(k) for k in ("status", "utility", "security")}
    out["facts"] = facts or None
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
        except (OSError, ValueError, AttributeError, RecursionError):
            pass
    return "the file or that line was altered"


def _index_facts(aer: _AER, e: Any, validation: bytes | None
                 ) -> Iterator[tuple[str, Any, Any]]:
    """``(what, the AER's, the index line's)`` for each fact the index line repeats of its
    AER (and of its validation.json, given when it is the indexed one)."""
    o = aer.outcome
    lvn = o.live_vs_native
    verdict = ("unchecked" if lvn is None or not lvn.checked or lvn.agree is None
               else "agree" if lvn.agree else "disagree")
    yield "header.task.unit", aer.header.task.unit, e.unit
    yield "header.producer.mapper", aer.header.producer.mapper, e.mapper
    yield "outcome.issues", sorted({i.code for i in o.issues}), list(e.issues)
    yield "outcome.live_vs_native", verdict, e.live_vs_native
    if validation is None:
        return
    from agentprov_core.evidence.live_mapping import _validation_status

    try:
        doc = json.loads(validation)
    except (ValueError, RecursionError):
        return
    if not isinstance(doc, dict):
        return
    yield "validation.json status", _validation_status(validation), e.validation
    yield "validation.json execution_id", doc.get("execution_id"), e.execution_id
    for name in ("aer", "sem", "prov"):
        yield f"validation.json {name}_sha256", doc.get(f"{name}_sha256"), getattr(
            e, f"{name}_sha256")


def index_row_problems(aer_bytes: bytes, entry: Any, validation: bytes | None) -> list[str]:
    """What an index line says of its execution that its AER (or its validation.json,
    given when it is the indexed one) does not: ``validate`` reports these of the line
    (``verify`` checks the same)."""
    try:
        aer = _AER_DECODER.decode(aer_bytes)
    except (msgspec.DecodeError, RecursionError):
        return []  # the aer tier says why
    return [f"{key} is {got!r}; {INDEX_NAME} records {want!r}"
            for key, got, want in _index_facts(aer, entry, validation) if not _same(got, want)]


INDEX_NAME = "executions.jsonl"


def _ledger_facts(aer: _AER, ref: _LedgerRef) -> Iterator[tuple[str, Any, Any, str]]:
    """``(what, the AER's, the other's, whose)`` for each fact the AER repeats of its
    ledger entry and of its capture log's header and end record."""
    h, t, o = aer.header, aer.header.task, aer.outcome
    led = f"ledger.jsonl line {ref.line}"
    for key, got, want in (("header.task.unit", t.unit, ref.unit),
                           ("header.task.cell_key", t.cell_key, ref.cell_key),
                           ("header.task.defense_id", t.defense_id, ref.defence or "none"),
                           ("header.task.repeat", t.repeat, ref.repeat),
                           ("header.task.attempt", t.attempt, ref.attempt),
                           ("header.plan_sha256", h.plan_sha256, ref.plan_sha256 or None),
                           ("header.config_digest", h.config_digest, ref.config_digest or None)):
        if want is not None:
            yield key, got, want, led
    for key in ("utility", "security"):
        want = getattr(ref, key)
        if want is not None:
            yield f"outcome.{key}", getattr(o, key), want, led
    cap = ref.capture
    if cap is None:
        return
    log = f"the capture log ({led})"
    end = cap.get("end")
    if end is not None:
        yield "outcome.session_status", o.session_status, end.get("status", NOT_RECORDED), log
        for key in ("utility", "security"):
            v = end.get(key)
            yield f"outcome.{key}", getattr(o, key), v if isinstance(v, bool) else NOT_RECORDED, log
    if cap.get("started_at"):
        yield "header.started_at", h.started_at, cap["started_at"], log
    if cap.get("benchmark_version"):
        yield "header.backend.benchmark_version", h.backend.benchmark_version, \
            cap["benchmark_version"], log
    if cap.get("backend") is not None:
        for key in ("environment_id", "identity_sha256"):
            yield f"header.backend.{key}", getattr(h.backend, key), \
                cap["backend"].get(key, NOT_RECORDED), log
    if cap.get("source"):
        yield "header.source", h.source, cap["source"], log


def _check_execution(base: str, item: tuple[int, Any, Any]) -> dict[str, Any]:
    """One execution's files against its index line (a task: threads or processes)."""
    from agentprov_core.evidence.executions import DIRNAME, INDEX

    n, e, ref = item
    findings: list[Finding] = []
    hashed: list[int] = []
    read: list[tuple[str, str]] = []  # (path, sha256) of each file read
    out: dict[str, Any] = {"findings": findings, "hashed": hashed, "source": None,
                           "read": read}

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
    elif ref.unit != e.unit:
        fail("executions.ledger", INDEX,
             f"line {n} ({e.execution_id}): unit {e.unit!r}; ledger.jsonl line {ref.line} "
             f"records {ref.unit!r}")
    kept: dict[str, bytes] = {}  # the AER and the validation, when they are the indexed ones
    for name, want in (("aer", e.aer_sha256), ("sem", e.sem_sha256),
                       ("prov", e.prov_sha256), ("validation", e.validation_sha256)):
        rel = f"{DIRNAME}/{e.execution_id}/{name}.json"
        if want is None:
            continue
        try:
            if name in ("aer", "validation"):
                data = _read(base + rel)
                got, size = hashlib.sha256(data).hexdigest(), len(data)
                kept[name] = data
            else:
                got, size = _hash_file(base + rel)
        except inputfile.Missing:
            fail("executions.missing", rel, f"{where} names it; it does not exist")
            continue
        except inputfile.Unreadable as exc:
            fail("executions.not_a_file", rel, f"{where} names it; it {exc}")
            continue
        hashed.append(size)
        read.append((rel, got))
        if got != want:
            fail("executions.digest", rel,
                 f"its sha256 is {got}, not the {name}_sha256 {want} that {where} records "
                 f"({_which(base, e, name, want, got)})")
            kept.pop(name, None)  # not cross-checked: it is not the indexed one
    aer_bytes = kept.get("aer")
    if aer_bytes is None:
        return out
    rel = f"{DIRNAME}/{e.execution_id}/aer.json"
    try:
        aer = _AER_DECODER.decode(aer_bytes)
    except (msgspec.DecodeError, RecursionError) as exc:
        fail("executions.aer", rel, f"not an AER ({exc})")
        return out
    h = aer.header
    out["source"] = h.source
    out["test_only"] = h.producer.test_only
    if h.execution_id != e.execution_id:
        fail("executions.aer", rel, f"header.execution_id is {h.execution_id!r}")
    if aer.outcome.status != e.status:
        fail("executions.aer", rel, f"outcome.status is {aer.outcome.status!r}; {where} "
                                    f"records {e.status!r}")
    if aer.outcome.execution_observed != e.execution_observed:
        fail("executions.aer", rel,
             f"outcome.execution_observed is {aer.outcome.execution_observed}; {where} "
             f"records {e.execution_observed}")
    for key, got, want in _index_facts(aer, e, kept.get("validation")):
        if not _same(got, want):
            fail("executions.aer", rel, f"{key} is {got!r}; {where} records {want!r}")
    if ref is not None:
        for key, got, want, whose in _ledger_facts(aer, ref):
            if not _same(got, want):
                fail("executions.aer", rel, f"{key} is {got!r}; {whose} records {want!r}")
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
    def __init__(self, root: Path, manifest: dict[str, Any] | None, report: Report,
                 snap: Snapshot, digests: dict[str, str] | None = None) -> None:
        self.root = root
        self.base = str(root) + os.sep  # paths as strings: no pathlib in the hot loops
        self.manifest = manifest
        self.report = report
        self.snap = snap
        self.verified: set[str] = set()  # raw digests whose bytes were checked
        self.digests = digests  # when given: the sha256 of every file read, by path
        self.ledger: dict[int, _LedgerRef] = {}  # by seq
        self.plans: set[str] = set()
        self.configs: set[str] = set()
        self.backends: set[tuple[Any, Any]] = set()
        self.sources: set[str] = set()
        self.test_only: set[tuple[str, bool]] = set()  # (whose, the value it records)
        self.undigested: Counter[str] = Counter()  # lines without line_sha256, per file
        self.sealed_lines = 0  # lines with one

    # findings
    def add(self, kind: str, code: str, path: str, message: str) -> None:
        self.report.findings.append(Finding(kind, code, path, message))

    def fail(self, code: str, path: str, message: str) -> None:
        self.add("failed", code, path, message)

    def hashed(self, nbytes: int) -> None:
        self.report.counts["files_hashed"] += 1
        self.report.counts["bytes_hashed"] += nbytes

    def read(self, pairs: Iterable[tuple[str, str]]) -> None:
        if self.digests is not None:
            self.digests.update(pairs)

    def run(self) -> None:
        if (note := self.snap.note()) is not None:
            self.add("unverified", "corpus.in_progress", LOCK, note)
        with _Runner(_use_processes(self.root)) as runner:
            self.check_ledger(runner)
            self.check_raw(runner)
            self.check_executions(runner)
        self.check_preflight()
        self.check_manifest()
        for rel, n in sorted(self.undigested.items()):
            self.add("unverified", "lines.undigested", rel,
                     f"{n} line(s) carry no line_sha256 (written by an earlier agentprov): a "
                     "changed byte in a field nothing else holds cannot be seen in them")
        if not (self.root / "checksums.sha256").is_file():
            why = ("a working tree has no checksums.sha256 (it is written at sealing)"
                   if self.report.working else
                   "the corpus has no checksums.sha256: it is not sealed (agentprov package "
                   "seals a copy of it)")
            self.add("unverified", "checksums.absent", "checksums.sha256", why)
        elif not (self.root / "seal").is_dir():
            self.add("unverified", "checksums.unsupported", "checksums.sha256",
                     "a checksums.sha256 without seal/ is not a sealed corpus this build "
                     "reads (agentprov-corpus/0.3)")
        # a sealed corpus's checksums.sha256: level sealed reads it (audit/sealed.py)

    def jsonl(self, rel: str, prefix: str, dec: msgspec.json.Decoder, what: str,
              reader: str) -> Iterator[tuple[int, Any, bytes]]:
        """``(line number, entry, line)`` of a file T0 appends JSON lines to, as far as the
        snapshot reads it: a line whose ``line_sha256`` does not match its bytes fails
        (``<prefix>.digest``), a line that is not ``what`` fails (``<prefix>.entry``), a
        line cut short by a write that never finished is unverified (``<prefix>.torn``:
        ``reader`` skips it by design), a line that is not JSON fails (``<prefix>.parse``)."""
        sealed = 0  # the first line that carries a digest
        pending: int | None = None  # a line cut short, yet ended by a newline

        def cut(n: int) -> None:
            self.add("unverified", f"{prefix}.torn", rel,
                     f"line {n}: a write cut short (T0 died or the disk filled); {reader} "
                     "skips it")

        for n, line, ended in self.snap.lines(rel):
            if not line.strip():
                continue
            if pending is not None:  # lines were appended after it: a write cut short
                cut(pending)
                pending = None
            entry = None
            try:
                entry = dec.decode(line)
            except msgspec.ValidationError as exc:
                self.fail(f"{prefix}.entry", rel, f"line {n}: not {what} ({exc})")
            except RecursionError:
                self.fail(f"{prefix}.parse", rel, f"line {n}: nested too deeply to be "
                                                  f"{what}: the line was altered")
            except msgspec.DecodeError as exc:
                # a write cut short leaves no newline (T0 writes the line and its newline at
                # once), and gets one only from a later append (the ledger's and the index's
                # append starts on a fresh line; the preflight ledger's does not): its digest
                # is not held against it either
                if _truncated(exc) and not ended:
                    cut(n)
                    continue
                if _truncated(exc) and prefix != "preflight":
                    pending = n  # torn if lines follow; altered if it is the last
                    continue
                self.fail(f"{prefix}.parse", rel,
                          f"line {n}: not JSON ({exc}): the line was altered")
            status = selfdigest.line_status(line)
            if status == selfdigest.ALTERED:
                self.fail(f"{prefix}.digest", rel,
                          f"line {n}: its bytes no longer match its line_sha256: the line was "
                          "altered after T0 wrote it")
            elif status == selfdigest.ABSENT and sealed:
                self.fail(f"{prefix}.digest", rel,
                          f"line {n}: it carries no line_sha256, and line {sealed} does (T0 "
                          "writes one on every line since): the field was removed or its "
                          "name altered")
            elif status == selfdigest.ABSENT and entry is not None:
                self.undigested[rel] += 1
            if status != selfdigest.ABSENT:
                sealed = sealed or n
                self.sealed_lines += 1
            if entry is not None:
                yield n, entry, line
        if pending is not None:
            self.fail(f"{prefix}.parse", rel,
                      f"line {pending}: cut short, yet ended by a newline and the last line "
                      "(a write cut short leaves none): the line was altered")

    # -------------------------------------------------------------- manifest
    def check_manifest(self) -> None:
        """The manifest as it is now (read after the ledger and the index: it lists what
        their lines record, also while a run rewrites it)."""
        from agentprov_core.base import inputfile
        from agentprov_core.corpus.opening import parse_manifest

        if self.manifest is None:
            return  # reported when the corpus was opened
        try:
            data = inputfile.read_bytes(self.root / "manifest.json")
            m = parse_manifest(data)
        except ValueError as exc:
            self.fail("manifest.unreadable", "manifest.json", f"{exc}: the file was altered")
            return
        if not isinstance(m, dict):
            self.fail("manifest.unreadable", "manifest.json",
                      "it is not a JSON object: the file was altered")
            return
        status = selfdigest.manifest_status(data)
        if status == selfdigest.ALTERED:
            self.fail("manifest.digest", "manifest.json",
                      "its bytes no longer match its manifest_sha256: it was altered after T0 "
                      "wrote it")
        elif status == selfdigest.ABSENT and self.sealed_lines:
            self.fail("manifest.digest", "manifest.json",
                      "it carries no manifest_sha256, and the lines of the ledger or the index "
                      "do (every run rewrites the manifest, with it): the field was removed or "
                      "its name altered")
        elif status == selfdigest.ABSENT:
            self.add("unverified", "manifest.undigested", "manifest.json",
                     "it carries no manifest_sha256 (written by an earlier agentprov): a "
                     "changed byte in a field nothing else holds cannot be seen")
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
                      f"an AER or capture header's source is {s!r}; the manifest's is {src!r}")
        self.check_test_only(m)

    def check_test_only(self, m: dict[str, Any]) -> None:
        """``test_only`` (a scripted corpus, never a real one) as the manifest, every capture
        header and every AER record it; ``synthetic`` and ``live.transport`` with it."""
        flag = m.get("test_only")
        if not isinstance(flag, bool):
            if self.test_only:
                self.fail("manifest.test_only", "manifest.json",
                          f"test_only is {flag!r}, not true or false")
            return
        live = m.get("live") if isinstance(m.get("live"), dict) else {}
        transport = live.get("transport")
        # a real run is test_only too when what it ran is not the benchmark's: the project's
        # fixture dataset, or a test override (the capture headers then say real, false)
        ident = m.get("backend_identity") if isinstance(m.get("backend_identity"), dict) else {}
        dataset = ident.get("dataset") if isinstance(ident.get("dataset"), dict) else {}
        real_test = flag is True and transport not in (None, "scripted") and bool(
            dataset.get("kind") == "fixture" or live.get("test_overrides"))
        for whose, value in sorted(self.test_only):
            if value != flag and not (real_test and whose == "a capture header"
                                      and value is False):
                self.fail("manifest.test_only", "manifest.json",
                          f"test_only is {str(flag).lower()}; {whose} records "
                          f"{str(value).lower()} (a scripted corpus is never a real one)")
        if "synthetic" in m and m.get("synthetic") != flag:
            self.fail("manifest.test_only", "manifest.json",
                      f"test_only is {str(flag).lower()} and synthetic "
                      f"{json.dumps(m.get('synthetic'))} (T0 writes both from the transport)")
        if transport is not None and (transport == "scripted") != flag and not real_test:
            self.fail("manifest.test_only", "manifest.json",
                      f"test_only is {str(flag).lower()} and live.transport {transport!r} "
                      "(a scripted run is test_only, a real one is not, unless it ran the "
                      "project's fixture dataset or a test override)")

    # -------------------------------------------------------------- ledger and captures
    def check_ledger(self, runner: _Runner) -> None:
        from agentprov_core.corpus.ledger import Attempt
        from agentprov_core.corpus.working import unit_key

        dec = msgspec.json.Decoder(Attempt)
        expected_seq = 0

        def entries() -> Iterator[tuple[int, Attempt]]:
            nonlocal expected_seq
            for n, e, line in self.jsonl("ledger.jsonl", "ledger", dec, "a ledger entry",
                                         "the ledger"):
                where = f"line {n}"
                self.report.counts["ledger_entries"] += 1
                if not _in_form(msgspec.json.encode(e), line):
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
                if e.conclusive != (e.status == "complete"):
                    self.fail("ledger.conclusive", "ledger.jsonl",
                              f"{where} (seq {e.seq}): conclusive is {e.conclusive} and status "
                              f"{e.status!r} (an attempt is conclusive when it completed)")
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
                self.ledger[e.seq] = _LedgerRef(
                    n, e.session_id, e.capture_sha256, e.capture_head_sha256, e.native_sha256,
                    e.status, unit=e.unit, cell_key=e.cell_key, defence=e.defence,
                    repeat=e.repeat, attempt=e.attempt, plan_sha256=e.plan_sha256,
                    config_digest=e.config_digest, utility=e.utility, security=e.security)
                if e.capture_sha256 or e.native_sha256:
                    yield n, e

        for (_, e), out in runner.map(_check_attempt, self.base, entries()):
            for f in out["findings"]:
                self.report.findings.append(f)
            for d, nbytes in out["verified"]:
                self.verified.add(d)
                self.hashed(nbytes)
            self.read(out["read"])
            if out.get("records") is not None:
                self.report.counts["capture_logs"] += 1
                self.report.counts["capture_records"] += out["records"]
            if out.get("backend"):
                self.backends.add(out["backend"])
            if isinstance(out.get("test_only"), bool):
                self.test_only.add(("a capture header", out["test_only"]))
            if out.get("source"):
                self.sources.add(out["source"])
            ref = self.ledger.get(e.seq)
            if out.get("facts") is not None and ref is not None and ref.line == out["line"]:
                self.ledger[e.seq] = dataclasses.replace(ref, capture=out["facts"])

    # -------------------------------------------------------------- the raw store
    def check_raw(self, runner: _Runner) -> None:
        base = self.root / "raw"
        if not base.is_dir():
            return

        def unchecked() -> Iterator[tuple[str, str]]:
            for top in sorted(os.scandir(base), key=lambda d: d.name):
                if top.name != "sha256" or not top.is_dir(follow_symlinks=False):
                    self.fail("raw.unexpected", f"raw/{top.name}",
                              "the raw store holds only raw/sha256/<2 hex>/<sha256>")
                    continue
                for sub in sorted(os.scandir(top.path), key=lambda d: d.name):
                    if not sub.is_dir(follow_symlinks=False) \
                            or not re.fullmatch(r"[0-9a-f]{2}", sub.name):
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
                        elif not HEX64.fullmatch(f.name) or not f.is_file(follow_symlinks=False):
                            self.fail("raw.unexpected", rel,
                                      "not a content-addressed file (its name is not a sha256, "
                                      "or it is a link, a directory, a FIFO: not a file)")
                        elif f.name[:2] != sub.name:
                            self.fail("raw.misplaced", rel,
                                      f"a file named {f.name} belongs in raw/sha256/{f.name[:2]}")
                        elif f.name not in self.verified:
                            yield rel, f.path

        for (rel, _), (got, size) in runner.map(_hash_item, self.base, unchecked(), heavy=False):
            if size < 0:
                self.fail("raw.unexpected", rel, f"not a content-addressed file: it {got}")
                continue
            self.hashed(size)
            self.read(((rel, got),))
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
        dec = msgspec.json.Decoder(IndexEntry)
        seen: dict[str, int] = {}

        def rows() -> Iterator[tuple[int, Any, _LedgerRef | None]]:
            for n, e, line in self.jsonl(INDEX, "executions", dec, "an index entry",
                                         "the index"):
                where = f"line {n}"
                if not _in_form(msgspec.json.encode(e), line):
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

        if index.exists():
            for _, out in runner.map(_check_execution, self.base, rows()):
                self.report.findings.extend(out["findings"])
                for nbytes in out["hashed"]:
                    self.hashed(nbytes)
                self.read(out["read"])
                if out["source"] is not None:
                    self.sources.add(out["source"])
                if out.get("test_only") is not None:
                    self.test_only.add(("an AER", out["test_only"]))
        for ref in self.ledger.values():
            if ref.capture_sha256 and ref.status != "quarantined" and ref.session_id not in seen:
                if self.snap.held:
                    self.add("unverified", "executions.in_progress", "ledger.jsonl",
                             f"line {ref.line} (session {ref.session_id}): its attempt has no "
                             f"execution in {INDEX} yet: the run that holds the corpus maps "
                             "it")
                else:
                    self.fail("executions.unmapped", "ledger.jsonl",
                              f"line {ref.line} (session {ref.session_id}): its attempt has no "
                              f"execution in {INDEX}, and no run is writing the corpus (its "
                              "mapping failed or was cut short: see the manifest's "
                              "mapping_failures); re-run the same command to map it")
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
            for n, e, line in self.jsonl("preflight/ledger.jsonl", "preflight",
                                         msgspec.json.Decoder(dict), "a JSON object",
                                         "the caps' count"):
                where = f"preflight/ledger.jsonl line {n}"
                self.report.counts["preflight_calls"] += 1
                if json.dumps(e, sort_keys=True).encode("utf-8") != line:
                    self.fail("preflight.form", "preflight/ledger.jsonl",
                              f"line {n}: not in the form T0 writes: the line was edited")
                elif unknown := sorted(set(e) - PREFLIGHT_KEYS):
                    self.fail("preflight.form", "preflight/ledger.jsonl",
                              f"line {n}: {unknown[0]!r} is not a key T0 writes: the line was "
                              "edited")
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
            for f in sorted(os.scandir(sub.path), key=lambda d: d.name) if sub.is_dir(
                    follow_symlinks=False) else ():
                if f.name not in named and not f.name.startswith(".put-"):
                    self.add("unverified", "preflight.unreferenced",
                             f"preflight/sha256/{sub.name}/{f.name}",
                             "no line of preflight/ledger.jsonl names it")

    def check_preflight_log(self, sha: str, e: dict[str, Any], where: str) -> None:
        rel = f"preflight/sha256/{sha[:2]}/{sha}"
        try:
            data = _read(self.base + rel)
        except inputfile.Missing:
            self.fail("preflight.missing", rel, f"{where} names it; preflight/ does not hold it")
            return
        except inputfile.Unreadable as exc:
            self.fail("preflight.not_a_file", rel, f"{where} names it; it {exc}")
            return
        self.hashed(len(data))
        got = hashlib.sha256(data).hexdigest()
        self.read(((rel, got),))
        if got != sha:
            self.fail("preflight.digest", rel,
                      f"its sha256 is {got}, not its name: the file was altered")
        chain = check_capture(data, e.get("capture_head_sha256"))
        for problem in chain.problems:
            self.fail("preflight.chain", rel, problem)
        h = chain.header
        if h is not None and h.get("kind") == "header":
            for key, got in (("session_id", h.get("session_id")),
                             ("plan_sha256", h.get("plan_sha256")),
                             ("config_digest", h.get("config_digest")),
                             ("attempt", h.get("attempt"))):
                want = e.get("call" if key == "attempt" else key)
                if want and not _same(got, want):
                    self.fail("preflight.header", rel, f"record 0: {key} is {got!r}; "
                                                      f"{where} records {want!r}")
        end = chain.end
        if end is not None and isinstance(e.get("status"), str) and \
                end.get("status") != e["status"]:
            self.fail("preflight.status", rel,
                      f"record {chain.n_records - 1}: end status {end.get('status')!r}; "
                      f"{where} records {e['status']!r}")
        if "billed_calls" in e and chain.ok:
            from agentprov_core.live import caps

            billed = caps.charge_records(chain.records).billed
            if not _same(billed, e["billed_calls"]):
                self.fail("preflight.billed", rel,
                          f"it bills {billed} call(s); {where} records "
                          f"{e['billed_calls']!r} (the caps count them)")


def _ledger_has_attempts(root: Path) -> bool:
    """Whether the ledger's first line is a ledger entry (a corpus whose manifest was
    damaged, as opposed to a directory that merely holds two files of those names)."""
    from agentprov_core.corpus.ledger import Attempt

    try:
        fd = inputfile.open_regular(root / "ledger.jsonl", follow=False)
    except inputfile.Unreadable:
        return False
    try:
        with os.fdopen(fd, "rb") as f:
            first = f.readline(1 << 20)
        msgspec.json.decode(first, type=Attempt)
    except (OSError, msgspec.DecodeError, RecursionError):
        return False
    return True


def _open(given: str | Path) -> tuple[Path, dict[str, Any] | None, str | None]:
    """The corpus root and its manifest; a manifest that no longer reads, beside a ledger
    of attempts, is a failed check of verify, not a reason to stop."""
    from agentprov_core.corpus.opening import open_corpus

    try:
        c = open_corpus(given)
        return c.root, c.manifest, None
    except AgentprovError as exc:
        if exc.code != "corpus.environment.not_a_corpus":
            raise
        root = Path(str(exc.params.get("corpus", given)))
        if (root.is_dir() and (root / "manifest.json").is_file()
                and _ledger_has_attempts(root)):
            return root, None, str(exc.params.get("what", ""))
        raise


def verify_corpus(given: str | Path, digests: dict[str, str] | None = None) -> Report:
    """Level chain of the corpus ``given``. When ``digests`` is given, the sha256 of every
    file the walk read is put in it by relative path (level sealed and sealing use them
    instead of reading those files again)."""
    from agentprov_core.corpus import snapshot

    root, manifest, broken = _open(given)
    snap = snapshot.take(root)
    corpus_id = str((manifest or {}).get("corpus_id") or root.name.removesuffix(".partial"))
    report = Report(root, corpus_id, root.name.endswith(".partial"))
    v = _Verifier(root, manifest, report, snap, digests)
    if broken is not None:
        v.fail("manifest.unreadable", "manifest.json",
               f"{broken}: the file was altered (it is rewritten whole by every run, never "
               "in place)")
    v.run()
    return report
