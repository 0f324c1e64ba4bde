"""``verify``'s check of one ledger entry: its line in the form T0 writes, its native log
and its capture log (the chain, the header, the record count and the end record against
the entry). A task of :mod:`agentprov_core.audit.taskpool`: threads or processes.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentprov_core.audit.corpusfiles import check_capture, hash_file, raw_rel, read_corpus_file
from agentprov_core.audit.findings import Finding, same_json
from agentprov_core.base import inputfile
from agentprov_core.corpus import selfdigest


def in_form(encoded: bytes, line: bytes) -> bool:
    """Whether ``line`` is what T0 writes for the entry it decodes to (a line of an earlier
    build, without ``line_sha256``, is compared without it)."""
    if encoded == line:
        return True
    return (selfdigest.line_status(line) == selfdigest.ABSENT
            and selfdigest.without_line_field(encoded) == line)


def check_attempt_encoded(base: str, item: tuple[int, int, bytes]) -> dict[str, Any]:
    """:func:`check_attempt` of a ledger entry given as ``(line, seq, its JSON)`` (what a
    process is sent: bytes pickle in a fraction of a struct's time)."""
    import msgspec

    from agentprov_core.corpus.ledger import Attempt

    n, _, data = item
    return check_attempt(base, (n, msgspec.json.decode(data, type=Attempt)))


def check_attempt(base: str, item: tuple[int, Any]) -> dict[str, Any]:
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
            got, size = hash_file(base + rel)
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
        data = read_corpus_file(base + rel)
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
            if want and not same_json(got, want):
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
            if want is not None and key in end and not same_json(end.get(key), want):
                fail("capture.end", rel,
                     f"record {chain.n_records - 1}: {key} is {end.get(key)!r}; {where} "
                     f"records {want!r}")
        facts["end"] = {k: end.get(k) for k in ("status", "utility", "security")}
    out["facts"] = facts or None
    return out
