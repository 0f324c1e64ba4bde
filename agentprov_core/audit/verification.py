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

This module is the walk over the corpus; one ledger entry's check is
:mod:`~agentprov_core.audit.attemptcheck`, one execution's
:mod:`~agentprov_core.audit.executioncheck`, the pool they run in
:mod:`~agentprov_core.audit.taskpool`, how a file is read
:mod:`~agentprov_core.audit.corpusfiles`, and the report :mod:`~agentprov_core.audit.findings`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.audit.attemptcheck import check_attempt_encoded, in_form
from agentprov_core.audit.corpusfiles import HEX64, check_capture, hash_item, read_corpus_file
from agentprov_core.audit.executioncheck import LedgerRef, check_execution_encoded
from agentprov_core.audit.findings import Finding, Report, same_json
from agentprov_core.audit.taskpool import Runner, use_processes
from agentprov_core.base import inputfile
from agentprov_core.corpus import selfdigest
from agentprov_core.corpus.snapshot import LOCK, Snapshot
from agentprov_core.errors import AgentprovError

LIVE_FORMAT = "agentprov-live-corpus/0.1"
KNOWN_FORMATS = (LIVE_FORMAT,)
LEDGER_STATUSES = ("complete", "incomplete", "errored", "aborted", "quarantined")
#: The keys of a line of preflight/ledger.jsonl (agentprov_core/run/preflight.py writes them)
PREFLIGHT_KEYS = frozenset({
    "at", "invocation", "session_id", "call", "status", "capture_sha256",
    "capture_head_sha256", "billed_calls", "plan_sha256", "config_digest", "line_sha256"})


def is_live(manifest: dict[str, Any] | None, root: Path) -> bool:
    """A live corpus: its manifest says so (format, ``working``, a ``live`` block), or it is
    a working tree (``DIR.partial``, which only a live run writes in this build)."""
    m = manifest or {}
    return (m.get("format") == LIVE_FORMAT or bool(m.get("working")) or "live" in m
            or root.name.endswith(".partial"))


def _truncated(exc: Exception) -> bool:
    return "truncated" in str(exc)


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
        self.ledger: dict[int, LedgerRef] = {}  # by seq
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

    def run(self, beside: Callable[[], object] | None = None) -> None:
        if (note := self.snap.note()) is not None:
            self.add("unverified", "corpus.in_progress", LOCK, note)
        with Runner(use_processes(self.root)) as runner, ThreadPoolExecutor(
                1, thread_name_prefix="verify-beside") as side:
            # started once the worker processes are (a fork never copies a running thread)
            started = side.submit(beside) if beside is not None else None
            self.check_ledger(runner)
            self.check_raw(runner)
            self.check_executions(runner)
            if started is not None:
                started.result()  # what it raised, raised here
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
    def check_ledger(self, runner: Runner) -> None:
        from agentprov_core.corpus.ledger import Attempt
        from agentprov_core.corpus.working import unit_key

        dec = msgspec.json.Decoder(Attempt)
        expected_seq = 0

        def entries() -> Iterator[tuple[int, int, bytes]]:
            nonlocal expected_seq
            for n, e, line in self.jsonl("ledger.jsonl", "ledger", dec, "a ledger entry",
                                         "the ledger"):
                where = f"line {n}"
                self.report.counts["ledger_entries"] += 1
                if not in_form(msgspec.json.encode(e), line):
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
                self.ledger[e.seq] = LedgerRef(
                    n, e.session_id, e.capture_sha256, e.capture_head_sha256, e.native_sha256,
                    e.status, unit=e.unit, cell_key=e.cell_key, defence=e.defence,
                    repeat=e.repeat, attempt=e.attempt, plan_sha256=e.plan_sha256,
                    config_digest=e.config_digest, utility=e.utility, security=e.security)
                if e.capture_sha256 or e.native_sha256:
                    # sent as what it is now (its references checked), with its seq
                    yield n, e.seq, msgspec.json.encode(e)

        for (_, seq, _), out in runner.map(check_attempt_encoded, self.base, entries()):
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
            ref = self.ledger.get(seq)
            if out.get("facts") is not None and ref is not None and ref.line == out["line"]:
                ref.capture = out["facts"]

    # -------------------------------------------------------------- the raw store
    def check_raw(self, runner: Runner) -> None:
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

        for (rel, _), (got, size) in runner.map(hash_item, self.base, unchecked(), heavy=False):
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
    def check_executions(self, runner: Runner) -> None:
        from agentprov_core.evidence.executions import DIRNAME, INDEX, IndexEntry

        index = self.root / INDEX
        exdir = self.root / DIRNAME
        dec = msgspec.json.Decoder(IndexEntry)
        seen: dict[str, int] = {}

        def rows() -> Iterator[tuple[int, bytes, LedgerRef | None]]:
            for n, e, line in self.jsonl(INDEX, "executions", dec, "an index entry",
                                         "the index"):
                where = f"line {n}"
                if not in_form(msgspec.json.encode(e), line):
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
                yield n, line, self.ledger.get(e.ledger_seq)  # the line: a process decodes it

        if index.exists():
            for _, out in runner.map(check_execution_encoded, self.base, rows()):
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
            data = read_corpus_file(self.base + rel)
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
                if want and not same_json(got, want):
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
            if not same_json(billed, e["billed_calls"]):
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


def verify_corpus(given: str | Path, digests: dict[str, str] | None = None,
                  beside: Callable[[], object] | None = None) -> Report:
    """Level chain of the corpus ``given``. When ``digests`` is given, the sha256 of every
    file the walk read is put in it by relative path (level sealed and sealing use them
    instead of reading those files again). ``beside`` (level sealed's own reads) runs on a
    thread of its own meanwhile, and has returned when this does (what it raises is
    raised)."""
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
    v.run(beside)
    return report
