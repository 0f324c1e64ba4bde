"""``verify``'s check of one execution: its files against the digests its index line
records, and its AER (decoded with the one AER schema, :mod:`agentprov_core.evidence.aer`)
against its index line, its validation.json, its ledger entry and its capture log's header
and end record; the evidence it cites in the raw store. A task of
:mod:`agentprov_core.audit.taskpool`: threads or processes. ``validate`` reports the index
line's disagreements with its AER the same way (:func:`index_row_problems`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from typing import Any

import msgspec

from agentprov_core.audit.corpusfiles import HEX64, hash_file, raw_rel, read_corpus_file
from agentprov_core.audit.findings import Finding, same_json
from agentprov_core.base import inputfile
from agentprov_core.evidence.aer import AER, NOT_RECORDED

_AER_DECODER = msgspec.json.Decoder(AER)


class LedgerRef(msgspec.Struct, gc=False):
    """What the execution checks need of a ledger entry (one small record per entry; its
    ``capture`` is filled in once the entry's capture log is read). A struct: it is
    pickled to the checking processes with each execution."""

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


def _which(base: str, e: Any, name: str, want: str, got: str) -> str:
    """Which of the two changed, when validation.json (which cites the AER, SEM and PROV
    digests) is intact and can tell."""
    from agentprov_core.evidence.executions import DIRNAME

    if name != "validation":
        try:
            data = read_corpus_file(f"{base}{DIRNAME}/{e.execution_id}/validation.json")
            if hashlib.sha256(data).hexdigest() == e.validation_sha256:
                cited = json.loads(data).get(f"{name}_sha256")
                if cited == want:
                    return f"the file was altered: validation.json, intact, cites {want[:16]}…"
                if cited == got:
                    return "that line was altered: validation.json, intact, cites the file"
        except (OSError, ValueError, AttributeError, RecursionError):
            pass
    return "the file or that line was altered"


def _index_facts(aer: AER, e: Any, validation: bytes | None
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
            for key, got, want in _index_facts(aer, entry, validation) if not same_json(got, want)]


INDEX_NAME = "executions.jsonl"


def _ledger_facts(aer: AER, ref: LedgerRef) -> Iterator[tuple[str, Any, Any, str]]:
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


def check_execution_encoded(base: str, item: tuple[int, bytes, LedgerRef | None]
                            ) -> dict[str, Any]:
    """:func:`check_execution` of an index entry given as its JSON (what a process is sent:
    bytes pickle in a fraction of a struct's time)."""
    from agentprov_core.evidence.executions import IndexEntry

    n, data, ref = item
    return check_execution(base, (n, msgspec.json.decode(data, type=IndexEntry), ref))


def check_execution(base: str, item: tuple[int, Any, Any]) -> dict[str, Any]:
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
                data = read_corpus_file(base + rel)
                got, size = hashlib.sha256(data).hexdigest(), len(data)
                kept[name] = data
            else:
                got, size = hash_file(base + rel)
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
        if not same_json(got, want):
            fail("executions.aer", rel, f"{key} is {got!r}; {where} records {want!r}")
    if ref is not None:
        for key, got, want, whose in _ledger_facts(aer, ref):
            if not same_json(got, want):
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
