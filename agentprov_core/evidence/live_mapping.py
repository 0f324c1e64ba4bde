"""T0's mapping of a live attempt, right after its ledger entry: AER, SEM, PROV, validation.

For every attempt whose capture log is in the raw store (a quarantined attempt stored
nothing, so it is not mapped), T0 asks the mapper of the corpus's source for the AER: the
one its ``SourceMeta.mapper`` names (``agentdojo.capture``, ``inspect.eval``), else the
registered mapper for the source's evidence format, ``capture/0.1`` by default
(:func:`agentprov_core.mapping.mapper_for_source`); it derives the SEM, PROV and validation
from it
(:func:`agentprov_core.evidence.derive.derive`, the same function ``recompute`` uses),
writes the four files once under ``executions/<session id>/``, appends the index line, and
then, when the validation found nothing, its line of ``validated.jsonl``
(:mod:`agentprov_core.evidence.validated`).

A failed session is mapped too: it becomes a failed execution with its register codes.
Mapping itself never stops a campaign: when it raises, the attempt counts as "failed" in the
run's summary and the reason is kept as a note in the manifest (``mapping_failures``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.corpus.store import RawStore
from agentprov_core.evidence import validated
from agentprov_core.evidence.aer import AER, encode
from agentprov_core.evidence.executions import Executions, IndexEntry, counts_of


@dataclass
class Mapped:
    """One attempt's mapping: its index line and the AER it came from."""

    entry: IndexEntry
    aer: AER


def mappable(store: RawStore, attempt: Attempt) -> bool:
    """Whether ``attempt`` is mapped: not quarantined, and its capture log is stored."""
    return (attempt.status != "quarantined" and bool(attempt.capture_sha256)
            and store.has(attempt.capture_sha256))


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _validation_status(data: bytes) -> str:
    """``passed``, ``failed`` or ``unvalidated`` from a validation document's bytes."""
    try:
        doc = json.loads(data)
    except ValueError:
        return "unvalidated"
    status = doc.get("status") if isinstance(doc, dict) else None
    if status in ("passed", "failed", "unvalidated"):
        return status
    passed = doc.get("passed") if isinstance(doc, dict) else None
    return {True: "passed", False: "failed"}.get(passed, "unvalidated")


def _derive(aer: AER, aer_bytes: bytes, root: Path, skip_prov: bool
            ) -> tuple[dict[str, bytes], bytes | None]:
    from agentprov_core.evidence import derive

    return derive.derive_attested(aer, aer_bytes, root, skip_prov=skip_prov)


def map_attempt(root: Path, attempt: Attempt, manifest: dict[str, Any], *,
                skip_prov: bool = False, mapped_at: str, finish: bool = False) -> Mapped | None:
    """Map ``attempt`` of the corpus at ``root`` and write its execution; ``None`` when it is
    not mapped (quarantined, or its capture log is not in the raw store). Raises whatever
    the mapping raised (the caller records it). ``finish`` maps an attempt whose mapping a
    killed T0 left unfinished: files it had written with the same bytes are kept."""
    from agentprov_core.mapping import LiveEvidence, mapper_for_source

    store = RawStore(root / "raw")
    if not mappable(store, attempt):
        return None
    cap_path = store.path(attempt.capture_sha256)
    native = native_rel = None
    if attempt.native_sha256 and store.has(attempt.native_sha256):
        npath = store.path(attempt.native_sha256)
        native, native_rel = npath.read_bytes(), _rel(root, npath)
    evidence = LiveEvidence(capture=cap_path.read_bytes(), native=native, attempt=attempt,
                            manifest=manifest, capture_path=_rel(root, cap_path),
                            native_path=native_rel)
    mapper = mapper_for_source(manifest.get("source"))
    aer = mapper.map(evidence)
    aer_bytes = encode(aer)
    files, attested = _derive(aer, aer_bytes, root, skip_prov)
    ex = Executions(root)
    digests = ex.write(aer.header.execution_id, {"aer": aer_bytes, **files}, keep_same=finish)
    entry = index_entry(aer, files, digests, unit=attempt.unit, seq=attempt.seq,
                        mapper=mapper.name, mapped_at=mapped_at)
    mapped = Mapped(ex.append_index(entry), aer)
    validated.append(root, [attested])
    return mapped


def index_entry(aer, files: dict[str, bytes], digests: dict[str, str], *, unit: str, seq: int,
                mapper: str, mapped_at: str) -> IndexEntry:
    """The index line of an execution just written (its AER, derived files and their
    digests), as every mapping writes it: live runs and imports alike."""
    from agentprov_core.evidence.sem import verdict

    return IndexEntry(
        execution_id=aer.header.execution_id, unit=unit, ledger_seq=seq, mapper=mapper,
        status=aer.outcome.status, execution_observed=aer.outcome.execution_observed,
        issues=sorted({i.code for i in aer.outcome.issues}), live_vs_native=verdict(aer),
        validation=_validation_status(files["validation"]), aer_sha256=digests["aer"],
        sem_sha256=digests["sem"], prov_sha256=digests.get("prov"),
        validation_sha256=digests["validation"], mapped_at=mapped_at, counts=counts_of(aer))
