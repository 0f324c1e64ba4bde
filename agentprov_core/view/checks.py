"""``verify``'s report (:func:`agentprov_core.audit.verification.verify_corpus`) told per
execution: a finding at ``executions/<id>/…`` is that execution's, one at a raw store file
is every execution whose AER or ledger entry cites that digest; the rest (the ledger, the
manifest, the preflight calls, a raw file nobody cites) are the corpus's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Verdicts:
    result: str  # verify's result for the corpus
    summary: str
    by_execution: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    corpus: list[dict[str, str]] = field(default_factory=list)
    ran: bool = True  # False: --no-verify

    def of(self, eid: str) -> dict[str, Any]:
        """An execution's verdict: ``failed`` when a finding failed, ``unverified`` when one
        could not be verified, else ``passed``."""
        found = self.by_execution.get(eid, [])
        kinds = {f["kind"] for f in found}
        verdict = "failed" if "failed" in kinds else ("unverified" if kinds else
                                                      "passed" if self.ran else "not run")
        return {"verdict": verdict, "findings": found}


def verdicts(report: Any, cites: dict[str, set[str]]) -> Verdicts:
    """``report``'s findings by execution; ``cites`` maps a raw digest to the executions
    citing it."""
    v = Verdicts(result=report.result, summary=report.summary())
    for f in report.findings:
        item = {"kind": f.kind, "code": f.code, "path": f.path, "message": f.message}
        owners: set[str] = set()
        if f.path.startswith("executions/"):
            parts = f.path.split("/")
            if len(parts) >= 2 and parts[1]:
                owners = {parts[1]}
        elif f.path.startswith("raw/sha256/"):
            owners = set(cites.get(f.path.rsplit("/", 1)[-1], ()))
        for eid in owners:
            v.by_execution.setdefault(eid, []).append(item)
        if not owners:
            v.corpus.append(item)
    return v
