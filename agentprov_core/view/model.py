"""The corpora a site shows, read once: each corpus's results table (the figures
``agentprov stats --tables results`` prints), its manifest's run records (caps, quality,
canary, egress, consent), verify's report, and its executions in index order, each read into
a page document (:mod:`agentprov_core.view.execution`) and one row of the execution list.

Executions are yielded one at a time (:meth:`ViewCorpus.executions`): the site writes each
page's document as it is read, so memory holds the list's rows, not the pages."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import inputfile
from agentprov_core.corpus.opening import OpenCorpus
from agentprov_core.view import checks
from agentprov_core.view.execution import document

#: the columns of the execution list (``list.js``), in order
COLUMNS = ("id", "corpus", "suite", "user_task", "injection_task", "attack", "defence",
           "model", "status", "session", "utility", "security", "issues", "verify", "cell",
           "attempt")
#: the manifest's run records the overview shows, under ``live``
RUN_RECORDS = ("caps", "quality", "canary", "egress", "consent", "endpoint_class",
               "transport", "llm_element", "local_models", "test_overrides")


def _s(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@dataclass
class Execution:
    eid: str
    row: dict[str, str]
    doc: dict[str, Any]
    files: dict[str, str]  # name (aer, sem, prov, validation) -> sha256 the index records
    evidence: list[dict[str, Any]] = field(default_factory=list)  # raw store files cited


@dataclass
class ViewCorpus:
    n: int  # its place among the site's corpora
    opened: OpenCorpus
    table: dict[str, Any]
    verdicts: checks.Verdicts
    ledger: dict[int, Any]  # seq -> the ledger's Attempt
    index: list[Any]  # executions.jsonl's IndexEntry rows, in order

    @property
    def root(self) -> Path:
        return self.opened.root

    @property
    def manifest(self) -> dict[str, Any]:
        return self.opened.manifest

    @property
    def restricted(self) -> dict[str, Any] | None:
        return self.opened.restricted

    def run_records(self) -> dict[str, Any]:
        live = self.manifest.get("live") if isinstance(self.manifest, dict) else None
        live = live if isinstance(live, dict) else {}
        return {k: live[k] for k in RUN_RECORDS if k in live}

    def about(self) -> dict[str, Any]:
        m = self.manifest
        keys = ("corpus_id", "format", "source", "profile", "backend", "working", "test_only",
                "synthetic", "partial", "created_at", "updated_at", "producer",
                "backend_identity")
        return {k: m[k] for k in keys if k in m}

    def executions(self) -> Iterator[Execution]:
        seen: set[str] = set()
        for e in self.index:
            if e.execution_id in seen:
                continue
            seen.add(e.execution_id)
            yield self._execution(e, self.ledger.get(e.ledger_seq))

    def _execution(self, e: Any, attempt: Any) -> Execution:
        import hashlib

        from agentprov_core.evidence.executions import Executions
        from agentprov_core.view.execution import SAFE_ID

        path = Executions(self.root).path(e.execution_id, "aer")
        data: bytes | None = None
        error: str | None = None
        try:
            if not SAFE_ID.fullmatch(e.execution_id):
                raise inputfile.Unreadable("is not a plain name")
            data = inputfile.read_bytes(path, follow=False)
            if hashlib.sha256(data).hexdigest() != e.aer_sha256:
                error = ("aer.json is not the file executions.jsonl indexed (its sha256 "
                         "differs): it was altered after it was written")
        except inputfile.Unreadable as exc:
            data, error = None, f"aer.json cannot be read: it {exc}"
        doc = document(self.root, e.execution_id, data, error)
        task = doc["header"].get("task") or {}
        agent = doc["header"].get("agent") or {}
        outcome = doc.get("outcome") or {}
        verdict = self.verdicts.of(e.execution_id)
        if error and verdict["verdict"] != "failed":
            verdict = {"verdict": "failed", "findings": [*verdict["findings"], {
                "kind": "failed", "code": "executions.digest",
                "path": f"executions/{e.execution_id}/aer.json", "message": error}]}
        doc["verify"] = verdict
        doc["index"] = {"status": e.status, "issues": e.issues, "mapper": e.mapper,
                        "live_vs_native": e.live_vs_native, "validation": e.validation,
                        "ledger_seq": e.ledger_seq, "unit": e.unit, "mapped_at": e.mapped_at}
        if attempt is not None:
            doc["ledger"] = msgspec.to_builtins(attempt)
        doc["restricted"] = self.restricted is not None
        doc["corpus"] = {"n": self.n, "id": self.opened.corpus_id}
        row = {
            "id": e.execution_id, "corpus": self.opened.corpus_id,
            "suite": _s(task.get("suite")), "user_task": _s(task.get("user_task_id")),
            "injection_task": _s(task.get("injection_task_id")),
            "attack": _s(task.get("attack")), "defence": _s(task.get("defense_id")),
            "model": _s(agent.get("model")), "status": e.status,
            "session": _s(outcome.get("session_status")),
            "utility": _s(outcome.get("utility")), "security": _s(outcome.get("security")),
            "issues": " ".join(e.issues), "verify": verdict["verdict"],
            "cell": f"{_s(task.get('cell_key') or e.unit)}|{_s(task.get('defense_id'))}"
                    f"|{_s(agent.get('model'))}",
            "attempt": _s(task.get("attempt")),
        }
        files = {"aer": e.aer_sha256, "sem": e.sem_sha256, "prov": e.prov_sha256 or "",
                 "validation": e.validation_sha256}
        evidence = [ev for ev in doc["header"].get("evidence") or [] if isinstance(ev, dict)]
        if not SAFE_ID.fullmatch(e.execution_id):
            files = {}
        return Execution(e.execution_id, row, doc, files, evidence)


def cites(index: list[Any], ledger: dict[int, Any]) -> dict[str, set[str]]:
    """Raw digest -> the executions whose ledger entry cites it (capture and native log)."""
    out: dict[str, set[str]] = {}
    for e in index:
        a = ledger.get(e.ledger_seq)
        for d in (a.capture_sha256, a.native_sha256) if a is not None else ():
            if d:
                out.setdefault(d, set()).add(e.execution_id)
    return out


def read_corpus(n: int, opened: OpenCorpus, *, verify: bool = True) -> ViewCorpus:
    """Corpus ``n`` of the site: its results table and verify's verdicts."""
    from agentprov_core.audit.results import results_table
    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.corpus.snapshot import decoded, take
    from agentprov_core.evidence.executions import INDEX, IndexEntry

    snap = take(opened.root)  # the ledger and the index, read once
    ledger = {a.seq: a for _, a in decoded(snap, "ledger.jsonl", Attempt)}
    index = [e for _, e in decoded(snap, INDEX, IndexEntry)]
    table = msgspec.to_builtins(results_table(opened))
    if verify:
        from agentprov_core.audit.verification import verify_corpus

        v = checks.verdicts(verify_corpus(opened.root), cites(index, ledger))
    else:
        v = checks.Verdicts(result="not run", summary="verify was not run (--no-verify)",
                            ran=False)
    return ViewCorpus(n, opened, table, v, ledger, index)
