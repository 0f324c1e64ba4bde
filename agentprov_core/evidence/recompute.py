"""``agentprov recompute``: re-derive SEM, PROV and validation from each stored AER and
compare them with what the corpus stores.

Each execution of the index is classified once, the worst that applies:

``failed``       the AER does not decode, or the derivation raised;
``unexplained``  the stored AER's bytes no longer match the index's ``aer_sha256`` (an
                 AER edited by hand: it is not re-derived), a stored SEM, PROV or validation
                 no longer matches its index digest, or the re-derived bytes differ and
                 nothing explains why;
``unverified``   a file the index names is missing (nothing to derive from, or nothing to
                 compare with);
``changed``      the re-derived bytes differ, and the difference is explained: the AER's
                 producer (the agentprov version, or the mapper version, that derived the
                 stored files) is not this build's, the stored file is in another format, or
                 PROV was skipped when the execution was mapped (``--skip-prov-conformance``);
``identical``    byte for byte.

A live corpus is re-derived from its stored AERs only: re-mapping it from raw evidence
(``--remap``) is refused (D-43). Nothing in the corpus is rewritten, ever: ``--out DIR``
writes a new tree (``executions/`` and ``executions.jsonl``, plus ``recompute.json`` saying
where it came from) holding every execution that was identical or changed (explained),
with its index row refreshed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.base import inputfile
from agentprov_core.evidence.canonical import first_difference

STAGES = ("sem", "prov", "validation")
CLASSES = ("identical", "changed", "unexplained", "failed", "unverified")
_RANK = {"identical": 0, "changed": 1, "unverified": 2, "unexplained": 3, "failed": 4}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Result:
    """One execution's re-derivation."""

    execution_id: str
    cls: str = "identical"
    reasons: list[str] = field(default_factory=list)
    files: dict[str, bytes] | None = None  # aer + derived, when it may be written
    row: Any = None  # the refreshed index row
    refreshed: bool = False

    def mark(self, cls: str, reason: str) -> None:
        if _RANK[cls] > _RANK[self.cls]:
            self.cls = cls
        self.reasons.append(f"{cls}: {reason}")


@dataclass
class Summary:
    units: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    refreshed: int = 0
    written: int = 0
    unmapped: int = 0  # ledgered attempts with a stored capture log and no execution
    details: list[Result] = field(default_factory=list)  # the ones not identical

    @property
    def ok(self) -> bool:
        return not (self.counts["unexplained"] or self.counts["failed"])


def _format(data: bytes) -> str | None:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    return doc.get("format") if isinstance(doc, dict) else None


class Recomputer:
    def __init__(self, root: Path, manifest: dict[str, Any]) -> None:
        from agentprov_core import __version__

        self.root = root
        self.manifest = manifest
        self.version = __version__
        self._mappers: dict[str, str | None] = {}

    def mapper_version(self, name: str) -> str | None:
        """This build's version of the mapper ``name`` (None when it is not installed)."""
        if name not in self._mappers:
            version = None
            try:
                from agentprov_core.mapping import registered

                found = registered(name)  # by name, as the mapping chose it
                version = str(found.version) if found is not None else None
            except Exception:  # an unloadable plugin only loses an explanation
                version = None
            self._mappers[name] = version
        return self._mappers[name]

    def explain(self, stage: str, old: bytes, new: bytes, aer: Any) -> list[str]:
        why = []
        p = aer.header.producer
        if p.version != self.version:
            why.append(f"the stored files were derived by agentprov {p.version} (the AER's "
                       f"producer); this is agentprov {self.version}")
        current = self.mapper_version(p.mapper)
        if current is not None and current != p.mapper_version:
            why.append(f"the AER was mapped by {p.mapper} version {p.mapper_version}; this "
                       f"build's {p.mapper} is version {current}")
        fo, fn = _format(old), _format(new)
        if fo != fn:
            why.append(f"the stored {stage}.json is {fo or 'of no known format'}; this build "
                       f"derives {fn}")
        return why

    def one(self, e: Any) -> Result:
        from agentprov_core.evidence import aer as aermod
        from agentprov_core.evidence.derive import derive
        from agentprov_core.evidence.executions import Executions

        ex = Executions(self.root)
        r = Result(e.execution_id)
        rel = f"executions/{e.execution_id}"
        try:
            aer_bytes = inputfile.read_bytes(ex.path(e.execution_id, "aer"), follow=False)
        except inputfile.Missing:
            r.mark("unverified", f"{rel}/aer.json is missing: nothing to derive from")
            return r
        except inputfile.Unreadable as exc:
            r.mark("failed", f"{rel}/aer.json cannot be read: it {exc}")
            return r
        if _sha(aer_bytes) != e.aer_sha256:
            r.mark("unexplained", f"{rel}/aer.json no longer matches the aer_sha256 "
                                  f"executions.jsonl records ({e.aer_sha256[:16]}…): the AER was "
                                  "edited after it was mapped; it is not re-derived")
            return r
        try:
            aer = aermod.decode(aer_bytes)
        except Exception as exc:
            r.mark("failed", f"{rel}/aer.json does not decode as an AER: {exc}")
            return r
        try:
            derived = derive(aer, aer_bytes, self.root)
        except Exception as exc:
            r.mark("failed", f"deriving from {rel}/aer.json raised {type(exc).__name__}: {exc}")
            return r
        changed: dict[tuple[str, ...], list[str]] = {}  # one line per explanation
        for stage in STAGES:
            want = getattr(e, f"{stage}_sha256")
            new = derived.get(stage)
            if want is None:
                if new is not None:
                    r.mark("changed", f"{stage}: not derived when the execution was mapped "
                                      "(--skip-prov-conformance); a full recompute derives it")
                continue
            try:
                old = inputfile.read_bytes(ex.path(e.execution_id, stage), follow=False)
            except inputfile.Missing:
                r.mark("unverified", f"{rel}/{stage}.json is missing: nothing to compare with")
                continue
            except inputfile.Unreadable as exc:
                r.mark("failed", f"{rel}/{stage}.json cannot be read: it {exc}")
                continue
            if _sha(old) != want:
                r.mark("unexplained", f"{rel}/{stage}.json no longer matches the "
                                      f"{stage}_sha256 executions.jsonl records: it was edited "
                                      "after it was derived")
                continue
            if new == old:
                continue
            if new is None:
                r.mark("unexplained", f"{stage}: stored, but this build derives none")
                continue
            why = self.explain(stage, old, new, aer)
            if why:
                changed.setdefault(tuple(why), []).append(stage)
            else:
                try:
                    at = first_difference(json.loads(old), json.loads(new))
                except ValueError:
                    at = "$"
                r.mark("unexplained", f"{stage}: the re-derived bytes differ from the stored "
                                      f"{rel}/{stage}.json (first at {at}) and nothing explains "
                                      f"it: same agentprov ({self.version}), same mapper, same "
                                      "format")
        for why, stages in changed.items():
            r.mark("changed", f"{','.join(stages)}: " + "; ".join(why))
        if r.cls in ("identical", "changed"):
            r.files = {"aer": aer_bytes, **derived}
            r.row = self.row(e, aer, derived)
            r.refreshed = r.row != e
        return r

    @staticmethod
    def row(e: Any, aer: Any, derived: dict[str, bytes]) -> Any:
        import msgspec

        from agentprov_core.evidence.live_mapping import _validation_status
        from agentprov_core.evidence.sem import verdict

        return msgspec.structs.replace(
            e, status=aer.outcome.status, execution_observed=aer.outcome.execution_observed,
            issues=sorted({i.code for i in aer.outcome.issues}), live_vs_native=verdict(aer),
            validation=_validation_status(derived["validation"]),
            sem_sha256=_sha(derived["sem"]),
            prov_sha256=_sha(derived["prov"]) if "prov" in derived else None,
            validation_sha256=_sha(derived["validation"]))


def index_rows(root: Path, snap: Any = None) -> Iterator[Any]:
    """The index rows, first row of each execution (an execution is written once), as far
    as the snapshot ``snap`` reads the index (one is taken when none is given)."""
    from agentprov_core.corpus.snapshot import decoded, take
    from agentprov_core.evidence.executions import INDEX, IndexEntry

    seen: set[str] = set()
    for _, e in decoded(snap or take(root), INDEX, IndexEntry):  # torn, foreign: verify says
        if e.execution_id in seen or "/" in e.execution_id or e.execution_id in ("", ".", ".."):
            continue
        seen.add(e.execution_id)
        yield e


def count_units(root: Path, snap: Any = None) -> int:
    return sum(1 for _ in index_rows(root, snap))


def unmapped(root: Path, snap: Any = None) -> int:
    """Ledgered attempts whose capture log is stored and that have no execution."""
    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.corpus.snapshot import decoded, take

    snap = snap or take(root)
    ids = {e.execution_id for e in index_rows(root, snap)}
    return sum(1 for _, a in decoded(snap, "ledger.jsonl", Attempt)
               if a.status != "quarantined" and a.capture_sha256 and a.session_id not in ids)


def run(root: Path, manifest: dict[str, Any], out: Path | None = None,
        snap: Any = None) -> Summary:
    """Re-derive every execution of the corpus at ``root`` (as far as the snapshot ``snap``
    reads it); with ``out``, write the new tree there (``out`` must be a new, empty
    directory: the caller checks)."""
    from agentprov_core.corpus.snapshot import take
    from agentprov_core.evidence.executions import Executions

    s = Summary()
    snap = snap or take(root)
    rc = Recomputer(root, manifest)
    target = Executions(out) if out is not None else None
    for e in index_rows(root, snap):
        s.units += 1
        r = rc.one(e)
        s.counts[r.cls] += 1
        s.refreshed += r.refreshed
        if r.cls != "identical":
            r.files = None if target is None else r.files
            s.details.append(r)
        if target is not None and r.files is not None:
            target.write(r.execution_id, r.files)
            target.append_index(r.row)
            s.written += 1
        r.files = None
    s.unmapped = unmapped(root, snap)
    if out is not None:
        from agentprov_core.evidence.canonical import stored

        (out / "recompute.json").write_bytes(stored({
            "format": "agentprov-recompute/0.1", "corpus": str(root),
            "corpus_id": manifest.get("corpus_id"), "agentprov": rc.version,
            "stages": list(STAGES), "counts": s.counts, "written": s.written,
            "refreshed": s.refreshed}))
    return s
