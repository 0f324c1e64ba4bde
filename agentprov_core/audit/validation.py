"""Validating a corpus's executions in tiers (aer, sem, prov, linkage, and shacl in release
mode), one execution at a time: what ``agentprov validate`` walks.

The executions are streamed from the index (``executions.jsonl``): each one's files are read,
checked against the digests its index row records, validated
(:func:`agentprov_core.evidence.validation.validate`) and let go before the next, so memory
stays flat in the size of the corpus. Modes (``docs/formats/validation-0.1.md``): the
default is ``standard`` mode, where warnings are reported and do not fail; release mode
(``--strict``, ``--release``) fails warnings and unvalidated executions.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.base import inputfile
from agentprov_core.errors import AgentprovError

REPORT_FORMAT = "agentprov-validate-report/0.1"
#: the tier a file of an execution belongs to, for the failure lines
FILE_TIER = {"aer": "aer", "sem": "sem", "prov": "prov", "validation": "validation"}


@dataclass
class Tally:
    executions: int = 0
    passed: int = 0
    failed: int = 0
    unvalidated: int = 0
    linkage_resolved: int = 0
    linkage_total: int = 0
    #: stored results of an imported log re-scored from the AER (none in a live corpus)
    reproduced: int = 0
    differ: int = 0
    #: executions passed on T0's record of their clean validation (``package`` only)
    recorded: int = 0
    #: ledgered attempts not yet mapped by the run that holds the corpus
    in_progress: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)  # kept for --format json
    corpus_problems: list[dict[str, Any]] = field(default_factory=list)


def _percent(n: int, d: int) -> str:
    return f"{100 * n / d:.2f}%" if d else "n/a"


def summary_line(*, n: int, corpus_id: str, state: str, mode: str, tiers: str, passed: int,
                 failed: int, unvalidated: int, resolved: int, total: int, reproduced: int,
                 differ: int) -> str:
    counts = f"{passed} passed, {failed} failed"
    if unvalidated:
        counts += f", {unvalidated} unvalidated"
    return (f"validated {n} execution(s) of {corpus_id} ({state}) in {mode} mode, tiers "
            f"{tiers}: {counts}; linkage resolved {resolved}/{total} "
            f"({_percent(resolved, total)}); stored results reproduced {reproduced}, "
            f"differ {differ}")


class Run:
    """One invocation's state: options, counters and how a finding is reported."""

    def __init__(self, root: Path, *, strict: bool, release: bool, skip_prov: bool,
                 fmt: str, echo: Callable[[str], None] = print,
                 known: Mapping[str, str] | None = None, recorded: bool = False) -> None:
        self.root = root
        #: the sha256 of corpus files already read in this process, by relative path: the
        #: linkage tier does not read them again
        self.known = known
        #: ``package``'s check: an execution T0 recorded as validated clean by this
        #: validator, whose files (digests in ``known``) are still those, is not validated
        #: again (agentprov_core/evidence/validated.py); ``validate`` validates every one
        self.records: dict[str, list[Any]] = {}
        if recorded and known is not None and not release:
            from agentprov_core.evidence import validated

            self.records = validated.read(root)
        self.echo = echo  # a text finding's line (json collects them in the tally)
        self.strict = strict or release
        self.release = release
        self.skip_prov = skip_prov
        self.fmt = fmt
        self.tally = Tally()
        self.snap: Any = None  # the snapshot read (agentprov_core/corpus/snapshot.py)

    # ------------------------------------------------------------------ reporting
    def report(self, execution: str | None, tier: str, file: str, what: str,
               level: str = "error") -> bool:
        """Print one finding; True when it fails (an error, or a warning in release mode)."""
        fails = level == "error" or self.strict
        kind = "failed" if fails else "warning"
        row = {"execution": execution, "tier": tier, "file": file, "what": what, "level": kind}
        if self.fmt == "json":
            (self.tally.failures if execution else self.tally.corpus_problems).append(row)
        else:
            who = f"execution {execution} tier {tier}" if execution else "corpus"
            self.echo(f"{kind}: {who} file {file}: {what}")
        return fails

    # ------------------------------------------------------------------ one execution
    def _taken_on_record(self, entry: Any) -> bool:
        """Whether ``entry`` is taken as passed from its record (and counted so)."""
        from agentprov_core.audit.sealed import sha256_file
        from agentprov_core.evidence.validated import holds

        def sha256_of(rel: str) -> str | None:
            p = self.root / rel
            return sha256_file(p) if p.is_file() and not p.is_symlink() else None

        assert self.known is not None
        if not any(holds(rec, entry, self.known, sha256_of)
                   for rec in self.records.get(entry.execution_id, ())):
            return False
        t = self.tally
        t.executions += 1
        t.linkage_total += 1
        t.linkage_resolved += 1
        t.passed += 1
        t.recorded += 1
        return True

    def execution(self, entry: Any) -> None:
        from agentprov_core.evidence import validation as valmod
        from agentprov_core.evidence.canonical import sha256
        from agentprov_core.evidence.executions import FILES, Executions

        ex = Executions(self.root)
        eid = entry.execution_id
        t = self.tally
        t.executions += 1
        t.linkage_total += 1  # an execution whose linkage was not checked did not resolve
        failed = False

        def rel(name: str) -> str:
            return f"executions/{eid}/{name}"

        files: dict[str, bytes] = {}
        for name in FILES:
            expected = getattr(entry, f"{name}_sha256")
            p = ex.path(eid, name)
            if expected is None:  # prov: derived with --skip-prov-conformance
                if p.exists():
                    failed |= self.report(eid, FILE_TIER[name], rel(p.name),
                                          "exists, but the index records no PROV graph")
                continue
            try:
                data = inputfile.read_bytes(p, inputfile.MAX_STORED, follow=False)
            except inputfile.Unreadable as exc:
                failed |= self.report(eid, FILE_TIER[name], rel(p.name),
                                      f"{'missing' if isinstance(exc, inputfile.Missing) else exc}"
                                      f" (the index records sha256 {expected})")
                continue
            actual = sha256(data)
            if actual != expected:
                failed |= self.report(eid, FILE_TIER[name], rel(p.name),
                                      f"the index records sha256 {expected}, the file has "
                                      f"{actual}")
            files[name] = data
        if "aer" not in files or "sem" not in files:
            t.failed += 1
            return
        if sha256(files["aer"]) == entry.aer_sha256:  # the facts the line repeats of it
            from agentprov_core.audit.executioncheck import index_row_problems

            val = files.get("validation")
            if val is not None and sha256(val) != entry.validation_sha256:
                val = None  # reported above
            for what in index_row_problems(files["aer"], entry, val):
                failed |= self.report(eid, "index", "executions.jsonl", what)

        stored_prov = files.get("prov")
        prov_bytes = None if self.skip_prov else stored_prov
        try:
            v = valmod.validate(files["aer"], files["sem"], prov_bytes, self.root,
                                release=self.release, known=self.known)
        except AgentprovError:
            raise
        except Exception as exc:  # noqa: BLE001 - one execution fails, not the whole run
            self.report(eid, "internal", rel("aer.json"),
                        f"the validator raised {type(exc).__name__}: {exc} (a bug in "
                        "agentprov: please report it)")
            t.failed += 1
            return
        if v.execution_id is not None and v.execution_id != eid:
            failed |= self.report(eid, "aer", rel("aer.json"),
                                  f"the AER's execution id is {v.execution_id}, the index "
                                  f"row names {eid}")
        unvalidated = False
        for tier in v.tiers:
            for problem in tier.problems:
                file = (rel(problem.file) if problem.file in ("aer.json", "sem.json",
                                                              "prov.json") else problem.file)
                failed |= self.report(eid, tier.tier, file, problem.what, problem.level)
            if tier.status == "skipped":
                unvalidated = True
                if self.strict:
                    failed |= self.report(eid, tier.tier, rel(f"{tier.tier}.json"),
                                          f"skipped ({tier.reason}); release mode needs it")
            if tier.tier == "linkage":
                t.linkage_resolved += tier.status == "passed"

        # the stored validation, re-derived from the same inputs (a standard validation)
        if "validation" in files and prov_bytes is stored_prov:
            again = valmod.encode(valmod.as_standard(v))
            if again != files["validation"]:
                failed |= self.report(eid, "validation", rel("validation.json"),
                                      f"differs from its re-derivation: stored sha256 "
                                      f"{sha256(files['validation'])}, re-derived "
                                      f"{sha256(again)}")
        if failed:
            t.failed += 1
        elif unvalidated:
            t.unvalidated += 1
        else:
            t.passed += 1

    # ------------------------------------------------------------------ the corpus
    def corpus(self, workers: int = 1) -> bool:
        """Validate every execution; True when anything failed. With ``workers`` > 1 the
        executions are validated in that many processes (PROV parsing holds the GIL), in
        batches whose findings are reported in index order."""
        from agentprov_core.corpus import snapshot
        from agentprov_core.corpus.ledger import Attempt
        from agentprov_core.evidence.executions import DIRNAME, INDEX, IndexEntry

        index = self.root / INDEX
        snap = self.snap = snapshot.take(self.root)
        torn: list[int] = []
        seen: set[str] = set()
        corpus_failed = False
        if not index.exists() and not snap.held:  # while a run holds it: not mapped yet
            corpus_failed |= self.report(None, "index", INDEX,
                                         "absent: no execution has been mapped", "warning")
        def unique() -> Iterator[Any]:
            nonlocal corpus_failed
            for n, entry in snapshot.decoded(snap, INDEX, IndexEntry, torn):
                if entry.execution_id in seen:
                    corpus_failed |= self.report(None, "index", INDEX, (
                        f"line {n} repeats execution {entry.execution_id}; the first row is "
                        "validated"), "warning")
                    continue
                seen.add(entry.execution_id)
                yield entry

        todo = unique()
        if self.records:
            todo = (entry for entry in todo if not self._taken_on_record(entry))
        if workers > 1 and sys.platform.startswith("linux"):
            self._in_processes(todo, workers)
        else:
            for entry in todo:
                self.execution(entry)
        for n in torn:
            corpus_failed |= self.report(None, "index", INDEX,
                                         f"line {n} is not an index row (a torn write)",
                                         "warning")
        for n, a in snapshot.decoded(snap, "ledger.jsonl", Attempt):
            if a.capture_sha256 and a.status != "quarantined" and a.session_id not in seen:
                if snap.held:  # the run that holds the corpus maps it
                    self.tally.in_progress += 1
                    continue
                corpus_failed |= self.report(None, "index", "ledger.jsonl", (
                    f"line {n}: attempt {a.session_id} has a capture log but no execution in "
                    f"{INDEX} (not mapped), and no run is writing the corpus"), "warning")
        d = self.root / DIRNAME
        if d.is_dir():
            with os.scandir(d) as it:
                orphans = sorted(e.name for e in it
                                 if e.is_dir(follow_symlinks=False) and e.name not in seen)
            for name in orphans:
                if snap.held:  # being written: its index line comes after its files
                    continue
                corpus_failed |= self.report(None, "index", f"{DIRNAME}/{name}",
                                             f"has no row in {INDEX}", "warning")
        return corpus_failed or self.tally.failed > 0

    def _in_processes(self, entries: Iterator[Any], workers: int) -> None:
        import multiprocessing
        from collections import deque
        from concurrent.futures import ProcessPoolExecutor

        global _FORKED
        _FORKED = self  # the children are forked: they inherit it, nothing is pickled
        pending: deque[Any] = deque()
        try:
            with ProcessPoolExecutor(workers,
                                     mp_context=multiprocessing.get_context("fork")) as pool:
                def collect(limit: int) -> None:
                    while len(pending) > limit:
                        self._merge(*pending.popleft().result())

                batch: list[Any] = []
                for entry in entries:
                    batch.append(entry)
                    if len(batch) == BATCH:
                        pending.append(pool.submit(_validate_batch, batch))
                        batch = []
                        collect(2 * workers)
                if batch:
                    pending.append(pool.submit(_validate_batch, batch))
                collect(0)
        finally:
            _FORKED = None

    def _merge(self, tally: Tally, lines: list[str], error: tuple[str, dict] | None) -> None:
        if error is not None:
            raise AgentprovError(error[0], **error[1])
        t = self.tally
        for f in ("executions", "passed", "failed", "unvalidated", "linkage_resolved",
                  "linkage_total", "reproduced", "differ"):
            setattr(t, f, getattr(t, f) + getattr(tally, f))
        t.failures += tally.failures
        for line in lines:
            self.echo(line)


BATCH = 64  # executions per task of a process
_FORKED: Run | None = None  # the run a forked child validates for


def _validate_batch(entries: list[Any]) -> tuple[Tally, list[str], tuple[str, dict] | None]:
    """In a forked child: validate ``entries`` for the parent's run; its tally, its text
    lines, and the code and parameters of an error that stops the run (not picklable)."""
    parent = _FORKED
    assert parent is not None
    lines: list[str] = []
    run = Run(parent.root, strict=parent.strict, release=parent.release,
              skip_prov=parent.skip_prov, fmt=parent.fmt, echo=lines.append,
              known=parent.known)
    try:
        for entry in entries:
            run.execution(entry)
    except AgentprovError as exc:
        return run.tally, lines, (exc.code, exc.params)
    return run.tally, lines, None
