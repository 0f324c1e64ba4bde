"""Working corpora with chosen outcomes, written the way T0 writes one, for the results
table's tests: each attempt is ledgered by ``Ledger.append``, its AER built from the structs
of ``agentprov_core.evidence.aer``, its SEM, PROV and validation derived by
``agentprov_core.evidence.derive.derive`` and stored by ``Executions.write`` and
``append_index``. No raw evidence is stored or cited (the results table reads none); the
AERs agree with their ledger entries, so ``verify`` passes these corpora (with a working
tree's unverified checks), and a test that damages one sees only its damage. A cell's
``records`` replace the default trajectory (the viewer's tests give model calls, tool calls,
injections and a defence's records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agentprov_core import __version__
from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.working import WorkingCorpus, unit_key
from agentprov_core.evidence import aer as A
from agentprov_core.evidence.executions import Executions, IndexEntry

PLAN, CONFIG = "1" * 64, "2" * 64


def manifest(corpus_id: str, source: str = "agentdojo") -> dict:
    return {"format": "agentprov-live-corpus/0.1", "corpus_id": corpus_id, "source": source,
            "profile": f"{source}-live@3", "registry_parts": "live", "backend": source,
            "working": True, "test_only": True, "synthetic": True, "partial": False,
            "plans": [PLAN], "config_digests": [CONFIG],
            "live": {"transport": "scripted"}}


@dataclass
class Cell:
    user_task: str
    injection_task: str | None = None  # None: a benign cell
    utility: bool | None = True
    security: bool | None = False
    status: str = "complete"  # the session's (ledger) status
    conclusive: bool | None = None  # default: status == complete
    agree: bool | None = True  # the live-versus-native verdict (None: unchecked)
    suite: str = "banking"
    attack: str = "important_instructions"
    defence: str = "none"
    model: str = "scripted"
    repeat: int = 0
    instrumentation: list[str] = field(default_factory=list)
    scores: list[dict] | None = None  # Inspect: the inspect.score decisions' data
    mapped: bool = True
    records: list | None = None  # the AER's records (default: one get_balance tool call)


def build(base: Path, name: str, cells: list[Cell], source: str = "agentdojo",
          benchmark_version: str | None = None) -> Path:
    """A working corpus ``base/name.partial`` of ``cells`` (one attempt each, in order; a
    cell repeated with the same user task, injection task and repeat is a second attempt
    of the same unit). Returns its root."""
    from agentprov_core.evidence.derive import derive
    from agentprov_core.evidence.live_mapping import _validation_status
    from agentprov_core.evidence.sem import verdict

    root = base / f"{name}.partial"
    root.mkdir(parents=True)
    WorkingCorpus(root).write_manifest(manifest(name, source))
    ledger, ex = Ledger(root / "ledger.jsonl"), Executions(root)
    tries: dict[str, int] = {}
    for seq, c in enumerate(cells):
        attack = c.attack if c.injection_task else None
        key = f"{c.suite}/{c.user_task}/{attack or 'none'}/{c.injection_task or 'none'}"
        unit = unit_key(key, c.defence, c.repeat)
        tries[unit] = tries.get(unit, 0) + 1
        session = f"s-{name[:6]}{seq:06d}"
        conclusive = c.status == "complete" if c.conclusive is None else c.conclusive
        ended = f"2026-12-01T10:{seq // 60 % 60:02d}:{seq % 60:02d}.000000Z"
        a = Attempt(seq=seq, invocation="inv", unit=unit, cell_key=key, defence=c.defence,
                    repeat=c.repeat, attempt=tries[unit], session_id=session,
                    started_at=ended, ended_at=ended, status=c.status, conclusive=conclusive,
                    utility=c.utility, security=c.security, plan_sha256=PLAN,
                    config_digest=CONFIG, unit_digest="d" * 16)
        ledger.append(a)
        if not c.mapped:
            continue
        records: list = list(c.records) if c.records is not None else [
            A.ToolCall(function="get_balance", arguments={}, result="1")]
        for d in c.scores or []:
            records.append(A.Decision(code="inspect.score", text="score", data=d))
        issues = [] if c.agree is not False else [A.Issue(code="map.live_native_disagree")]
        lvn = A.LiveVsNative(checked=False, reason="no native log") if c.agree is None else \
            A.LiveVsNative(checked=True, agree=c.agree, compared=["utility"])
        header = A.Header(
            execution_id=session, mode="live", source=source,
            backend=A.Backend(id=source, benchmark_version=benchmark_version or A.NOT_RECORDED),
            agent=A.Agent(model=c.model),
            task=A.Task(source=source, suite=c.suite, user_task_id=c.user_task,
                        injection_task_id=c.injection_task, attack=attack, cell_key=key,
                        defense_id=c.defence, unit=unit, attempt=tries[unit],
                        repeat=c.repeat),
            instrumentation=c.instrumentation, plan_sha256=PLAN, config_digest=CONFIG,
            producer=A.Producer(version=__version__, mapper="inspect.eval" if c.scores
                                is not None else "agentdojo.capture", mapper_version="1",
                                test_only=True))
        record = A.AER(header=header, records=records, outcome=A.Outcome(
            status="ok" if c.status == "complete" and not issues else "ok_with_issues"
            if c.status == "complete" else "failed", session_status=c.status,
            execution_observed=True,
            utility=c.utility if c.utility is not None else A.NOT_RECORDED,
            security=c.security if c.security is not None else A.NOT_RECORDED,
            issues=issues, live_vs_native=lvn))
        data = A.encode(record)
        files = derive(record, data, root)
        dg = ex.write(session, {"aer": data, **files})
        ex.append_index(IndexEntry(
            execution_id=session, unit=unit, ledger_seq=seq, mapper=header.producer.mapper,
            status=record.outcome.status, execution_observed=True,
            issues=sorted({i.code for i in issues}), live_vs_native=verdict(record),
            validation=_validation_status(files["validation"]), aer_sha256=dg["aer"],
            sem_sha256=dg["sem"], prov_sha256=dg.get("prov"),
            validation_sha256=dg["validation"], mapped_at=ended))
    return root
