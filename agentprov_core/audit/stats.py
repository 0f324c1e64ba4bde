"""``agentprov stats``: tables of a corpus's records and executions.

``counts`` has one row per (source, profile): a live corpus holds one source under one live
profile (the manifest's ``source`` and ``profile``), so it has one row. Decision 14 of the
specification's decisions: ``records`` counts every AER in the index (failed ones
included); ``n_executions`` those in which an execution was observed (a model call or a
tool call was recorded). ``status_*`` count the index's outcome statuses. The other columns
come from the ledger (``attempts``, ``units``, ``quarantined``) and the index
(``validation_passed``, ``live_vs_native_disagree``).

``issues`` has one row per (source, profile, register code): the records that carry it.
Everything is read line by line from ``ledger.jsonl`` and ``executions.jsonl`` (as far as a
snapshot reads them: agentprov_core/corpus/snapshot.py); no AER is opened.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from agentprov_core.corpus.opening import OpenCorpus
from agentprov_core.evidence.aer import NOT_RECORDED

TABLES = ("counts", "issues", "results")  # results: agentprov_core/audit/results.py
COUNTS = ("source_id", "profile", "registry_parts", "attempts", "units", "records",
          "n_executions", "quarantined", "status_ok", "status_ok_with_issues", "status_failed",
          "validation_passed", "live_vs_native_disagree")
ISSUES = ("source_id", "profile", "code", "records")


def _identity(c: OpenCorpus) -> dict[str, str]:
    m = c.manifest
    parts = m.get("registry_parts")
    if isinstance(parts, list):
        parts = ",".join(map(str, parts))
    return {"source_id": str(m.get("source") or NOT_RECORDED),
            "profile": str(m.get("profile") or NOT_RECORDED),
            "registry_parts": str(parts or NOT_RECORDED)}


def tables(c: OpenCorpus, names: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.corpus.snapshot import decoded, take
    from agentprov_core.corpus.working import unit_id
    from agentprov_core.evidence.executions import INDEX, IndexEntry

    ident = _identity(c)
    snap = take(c.root)  # consistent while a run writes the corpus
    attempts = quarantined = 0
    units: set[str] = set()
    for _, a in decoded(snap, "ledger.jsonl", Attempt):
        attempts += 1
        # a unit is its name and its digest: under --allow-mixed-config one name may be two
        # units (another benchmark version, say); an entry from before unit digests has none
        units.add(unit_id(a.unit, a.unit_digest) if isinstance(a.unit_digest, str) else a.unit)
        quarantined += a.status == "quarantined"
    seen: set[str] = set()
    status: Counter[str] = Counter()
    issues: Counter[str] = Counter()
    records = observed = validated = disagree = 0
    for _, e in decoded(snap, INDEX, IndexEntry):
        if e.execution_id in seen:
            continue
        seen.add(e.execution_id)
        records += 1
        observed += e.execution_observed
        status[e.status] += 1
        validated += e.validation == "passed"
        disagree += e.live_vs_native == "disagree"
        issues.update(set(e.issues))
    out: dict[str, list[dict[str, Any]]] = {}
    if "counts" in names:
        out["counts"] = [{**ident, "attempts": attempts, "units": len(units), "records": records,
                          "n_executions": observed, "quarantined": quarantined,
                          "status_ok": status["ok"],
                          "status_ok_with_issues": status["ok_with_issues"],
                          "status_failed": status["failed"], "validation_passed": validated,
                          "live_vs_native_disagree": disagree}]
    if "issues" in names:
        out["issues"] = [{"source_id": ident["source_id"], "profile": ident["profile"],
                          "code": code, "records": n} for code, n in sorted(issues.items())]
    return out


def columns(name: str) -> tuple[str, ...]:
    return COUNTS if name == "counts" else ISSUES
