"""The validation of one execution (``agentprov-validation/0.1``): its AER, SEM and PROV
graph checked in tiers, and the result as it is stored beside them (``validation.json``).

Tiers, in order (``docs/formats/validation-0.1.md``):

``aer``      the AER decodes against the ``agentprov-aer/0.1`` schema (the failing field is
             named), its bytes are the canonical stored form, and every record's ``actor``
             is an actor of its header;
``sem``      the SEM re-derived from the AER is byte-for-byte the stored SEM;
``prov``     the PROV-JSON deserialises with the ``prov`` library, has no bundles, unifies
             (PROV-CONSTRAINTS key and impossibility constraints as the library checks them),
             every identifier a relation names exists, every model call, wire attempt and
             tool call of the AER has its activity (associated with its actor's agent when
             the AER names one), and the AER, SEM and raw evidence entities carry the right
             sha256;
``linkage``  every entity with a digest resolves to a stored file with that sha256;
``shacl``    (release mode only) the graph as PROV-O satisfies the SHACL shapes of
             ``shapes/prov-agentprov.ttl`` (pyshacl over rdflib).

The stored result depends only on the bytes checked and the corpus's files: no time, no
absolute path, so re-validating an unchanged execution reproduces ``validation.json``.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import msgspec

from agentprov_core.errors import AgentprovError

VALIDATION_FORMAT = "agentprov-validation/0.1"
TIERS = ("aer", "sem", "prov", "linkage")
RELEASE_TIERS = (*TIERS, "shacl")
SHAPES = "prov-agentprov.ttl"
_PATH = "agentprov:path"  # the corpus path attribute of an entity (prov.PREFIX)

TierStatus = Literal["passed", "failed", "skipped", "not_run"]


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing wrong: the file it is in (a corpus-relative path or ``aer.json``, …) and
    what. A warning fails the tier only in strict and release mode."""

    file: str
    what: str
    level: Literal["error", "warning"] = "error"


class TierResult(msgspec.Struct, frozen=True, kw_only=True):
    tier: str
    status: TierStatus
    problems: list[Problem] = []
    reason: str | None = None  # why it was skipped or not run


class Linkage(msgspec.Struct, frozen=True, kw_only=True):
    entities: int = 0  # entities with a digest
    resolved: int = 0  # of which resolve to a stored file with that digest


class Validation(msgspec.Struct, frozen=True, kw_only=True):
    format: str = VALIDATION_FORMAT
    execution_id: str | None  # None when the AER does not decode
    mode: Literal["standard", "release"]  # release: the shacl tier ran
    status: Literal["passed", "failed", "unvalidated"]
    aer_sha256: str
    sem_sha256: str
    prov_sha256: str | None  # None: no PROV graph (--skip-prov-conformance)
    tiers: list[TierResult]
    linkage: Linkage

    def tier(self, name: str) -> TierResult | None:
        return next((t for t in self.tiers if t.tier == name), None)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _status(tiers: list[TierResult]) -> Literal["passed", "failed", "unvalidated"]:
    if any(t.status == "failed" for t in tiers):
        return "failed"
    if any(t.status != "passed" for t in tiers):
        return "unvalidated"
    return "passed"


def _tier(name: str, problems: list[Problem]) -> TierResult:
    failed = any(p.level == "error" for p in problems)
    return TierResult(tier=name, status="failed" if failed else "passed", problems=problems)


def as_standard(v: Validation) -> Validation:
    """``v`` without its shacl tier: what a standard validation (the one stored) reads."""
    tiers = [t for t in v.tiers if t.tier != "shacl"]
    return msgspec.structs.replace(v, mode="standard", tiers=tiers, status=_status(tiers))


def release_missing() -> list[str]:
    """The SHACL tier's libraries that are not importable."""
    import importlib.util

    return [m for m in ("rdflib", "pyshacl") if importlib.util.find_spec(m) is None]


# ----------------------------------------------------------------------------- tiers
def _aer_tier(aer_bytes: bytes) -> tuple[TierResult, Any]:
    from agentprov_core.evidence import aer as aermod

    try:
        record = aermod.decode(aer_bytes)
    except msgspec.ValidationError as exc:  # names the field: "… - at `$.header.task`"
        return _tier("aer", [Problem(file="aer.json", what=f"schema: {exc}")]), None
    except msgspec.DecodeError as exc:
        return _tier("aer", [Problem(file="aer.json", what=f"not JSON: {exc}")]), None
    problems = []
    if record.header.format != aermod.AER_FORMAT:
        problems.append(Problem(file="aer.json", what=(
            f"schema: header.format is {record.header.format!r}, not {aermod.AER_FORMAT!r}")))
    if aermod.encode(record) != aer_bytes:
        problems.append(Problem(file="aer.json", what=(
            "not in the canonical stored form (sorted keys, compact, one trailing newline)")))
    problems += [Problem(file="aer.json", what=f"schema: {p}")
                 for p in aermod.actor_problems(record)]
    return _tier("aer", problems), record


def _sem_tier(record: Any, sem_bytes: bytes) -> tuple[TierResult, Any]:
    from agentprov_core.evidence import sem as semmod
    from agentprov_core.evidence.canonical import first_difference, stored

    try:
        derived = semmod.derive(record)
        expected = stored(derived)
    except Exception as exc:  # noqa: BLE001 - the tier fails, naming why
        return _tier("sem", [Problem(file="sem.json", what=(
            f"the SEM could not be re-derived from the AER: {type(exc).__name__}: {exc}"))]), None
    if expected == sem_bytes:
        return _tier("sem", []), derived
    try:
        where = first_difference(msgspec.json.decode(sem_bytes), msgspec.json.decode(expected))
        where = f", first at {where}"
    except msgspec.DecodeError:
        where = " (the stored SEM is not JSON)"
    return _tier("sem", [Problem(file="sem.json", what=(
        f"differs from the SEM re-derived from the AER: stored sha256 {_sha(sem_bytes)}, "
        f"re-derived {_sha(expected)}{where}"))]), derived


def _literal(value: Any) -> Any:
    """An attribute value as Python (prov gives Literal objects for typed literals)."""
    from prov.model import Literal as ProvLiteral

    return value.value if isinstance(value, ProvLiteral) else value


def _attr(record: Any, name: str) -> Any:
    values = [v for k, v in record.attributes if str(k) == name]
    return _literal(values[0]) if values else None


def _deserialise(prov_bytes: bytes) -> tuple[Any, list[Problem]]:
    """The ProvDocument and the problems met reading and unifying it."""
    from prov import Error as ProvError
    from prov.model import ProvWarning
    from prov.serializers.provjson import ProvJSONSerializer

    problems: list[Problem] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            # the PROV-JSON reader itself, as ProvDocument.deserialize(format="json") calls
            # it, without the format registry (which imports rdflib for its RDF format)
            doc = ProvJSONSerializer().deserialize(io.StringIO(prov_bytes.decode()))
        except Exception as exc:  # noqa: BLE001 - whatever malformed input raises
            return None, [Problem(file="prov.json", what=(
                f"not a PROV-JSON document the prov library reads: {type(exc).__name__}: "
                f"{exc}"))]
        if doc.has_bundles():
            problems.append(Problem(file="prov.json", what=(
                "has bundles: an execution's graph is one document without bundles")))
        # unification merges the records that share an identifier (and refuses those that
        # cannot share one); with every identifier unique it has nothing to check
        ids = [r.identifier for r in doc.get_records() if r.identifier is not None]
        try:
            if len(ids) != len(set(ids)):
                doc.unified()
        except ProvError as exc:
            problems.append(Problem(file="prov.json", what=(
                f"violates PROV-CONSTRAINTS (unification): {exc}")))
    # the prov library's own warnings only: catch_warnings records every warning raised
    # meanwhile, a ResourceWarning of an object collected then or another thread's among them
    for w in caught:
        if issubclass(w.category, ProvWarning):
            problems.append(Problem(file="prov.json", level="warning",
                                    what=f"prov library warning: {w.message}"))
    return doc, problems


def _prov_tier(doc: Any, read_problems: list[Problem], record: Any, aer_bytes: bytes,
               sem_bytes: bytes) -> TierResult:
    from msgspec import UNSET
    from prov.identifier import QualifiedName

    from agentprov_core.evidence import prov as provmod
    from agentprov_core.evidence.aer import ModelCall, ToolCall

    problems = list(read_problems)
    if doc is None:
        return _tier("prov", problems)
    elements: dict[str, Any] = {}
    relation_ids = set()
    for rec in doc.get_records():
        if rec.is_element():
            elements[str(rec.identifier)] = rec
        elif rec.identifier is not None:
            relation_ids.add(str(rec.identifier))
    missing = set()
    for rec in doc.get_records():
        if rec.is_relation():
            ends = rec.formal_attributes[:2]
            if any(value is None for _, value in ends):
                problems.append(Problem(file="prov.json", what=(
                    f"a {rec.get_type().localpart} relation does not name both of its ends "
                    f"({', '.join(a.localpart for a, v in ends if v is None)} missing)")))
            for attr, value in rec.formal_attributes:
                if isinstance(value, QualifiedName) and str(value) not in elements \
                        and str(value) not in relation_ids:
                    missing.add(f"{rec.get_type().localpart} names {value} ({attr.localpart})")
    problems += [Problem(file="prov.json", what=f"unknown identifier: {m}")
                 for m in sorted(missing)]

    def expect(identifier: str, kind: str, prov_type: str) -> Any:
        rec = elements.get(identifier)
        if rec is None or rec.get_type().localpart.lower() != kind:
            problems.append(Problem(file="prov.json", what=(
                f"no {kind} {identifier} for the {prov_type} of the AER")))
            return None
        return rec

    eid = record.header.execution_id
    expect(provmod.session_id(eid), "activity", "session")
    associated: dict[str, set[str]] = {}
    for rec in doc.get_records():
        if rec.is_relation() and rec.get_type().localpart == "Association":
            (_, act), (_, ag) = rec.formal_attributes[:2]
            associated.setdefault(str(act), set()).add(str(ag))
    agents = {a.id: provmod.actor_agent_id(a) for a in record.header.actors} \
        if record.header.actors is not UNSET else {}

    def by_actor(r: Any, identifier: str, what: str) -> None:
        if r.actor is not UNSET and agents.get(r.actor) not in associated.get(identifier, ()):
            problems.append(Problem(file="prov.json", what=(
                f"the {what} of actor {r.actor} is not associated with its agent "
                f"{agents.get(r.actor, 'unknown')}")))

    calls = tools = 0
    for r in record.records:
        if isinstance(r, ModelCall):
            calls += 1
            expect(provmod.model_call_id(eid, r.call_id), "activity", f"model call {r.call_id}")
            by_actor(r, provmod.model_call_id(eid, r.call_id), f"model call {r.call_id}")
            for w in r.attempts:
                expect(provmod.attempt_id(eid, r.call_id, w.attempt_index), "activity",
                       f"wire attempt {w.attempt_id} of model call {r.call_id}")
        elif isinstance(r, ToolCall):
            expect(provmod.tool_call_id(eid, tools), "activity", f"tool call {tools}")
            by_actor(r, provmod.tool_call_id(eid, tools), f"tool call {tools}")
            tools += 1
    typed: dict[str, int] = {}
    for rec in elements.values():
        for t in rec.get_asserted_types():
            typed[str(t)] = typed.get(str(t), 0) + 1
    for name, n in (("ModelCall", calls), ("ToolCall", tools)):
        have = typed.get(f"{provmod.PREFIX}:{name}", 0)
        if have != n:
            problems.append(Problem(file="prov.json", what=(
                f"{have} {provmod.PREFIX}:{name} activities for {n} in the AER")))

    def digest(identifier: str, what: str, sha: str) -> None:
        rec = expect(identifier, "entity", what)
        if rec is not None and _attr(rec, f"{provmod.PREFIX}:sha256") != sha:
            problems.append(Problem(file="prov.json", what=(
                f"entity {identifier} ({what}) carries sha256 "
                f"{_attr(rec, f'{provmod.PREFIX}:sha256')}, the file has {sha}")))

    digest(provmod.file_entity_id(eid, "aer"), "aer.json", _sha(aer_bytes))
    digest(provmod.file_entity_id(eid, "sem"), "sem.json", _sha(sem_bytes))
    for ev in record.header.evidence:
        digest(provmod.raw_entity_id(ev.sha256), f"{ev.role} evidence", ev.sha256)
    return _tier("prov", problems)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _linkage_tier(targets: list[tuple[str, str]], own: dict[str, bytes],
                  corpus_root: Path, known: Mapping[str, str]) -> tuple[TierResult, Linkage]:
    """``targets``: (path, sha256) of every entity with a digest; ``own``: the paths of the
    execution's files being validated and their bytes (they may not be written yet);
    ``known``: the sha256 of corpus files the caller read, by relative path."""
    problems = []
    resolved = 0
    root = corpus_root.resolve()
    for rel, sha in targets:
        if not rel:
            problems.append(Problem(file="prov.json", what=(
                f"an entity with sha256 {sha} names no {_PATH}")))
            continue
        if rel in own:
            actual: str | None = _sha(own[rel])
        else:
            p = (root / rel).resolve()
            if not p.is_relative_to(root):
                problems.append(Problem(file=rel, what="the path is outside the corpus"))
                continue
            if rel.startswith("raw/") and rel != f"raw/sha256/{sha[:2]}/{sha}":
                problems.append(Problem(file=rel, what=(
                    f"is not the raw store's address of sha256 {sha}")))
                continue
            actual = known.get(rel) or (_file_sha256(p) if p.is_file() else None)
        if actual is None:
            problems.append(Problem(file=rel, what=f"missing from the corpus (sha256 {sha})"))
        elif actual != sha:
            problems.append(Problem(file=rel, what=(
                f"has sha256 {actual}, the evidence names {sha}")))
        else:
            resolved += 1
    return _tier("linkage", problems), Linkage(entities=len(targets), resolved=resolved)


def _prov_targets(doc: Any) -> list[tuple[str, str]]:
    from agentprov_core.evidence import prov as provmod

    out = []
    for rec in doc.get_records():
        if rec.is_element() and rec.get_type().localpart == "Entity":
            sha = _attr(rec, f"{provmod.PREFIX}:sha256")
            if sha is not None:
                out.append((str(_attr(rec, _PATH) or ""), str(sha)))
    return sorted(out)


@lru_cache(maxsize=1)
def _shapes_graph() -> Any:
    from importlib.resources import files

    from rdflib import Graph

    return Graph().parse(data=(files("agentprov_core.evidence") / "shapes" / SHAPES)
                         .read_text(encoding="utf-8"), format="turtle")


def _shacl_tier(doc: Any) -> TierResult:
    import pyshacl
    from rdflib import Graph
    from rdflib.namespace import SH

    try:
        data = Graph().parse(data=doc.serialize(format="rdf", rdf_format="nt",
                                                encoding="utf-8"), format="nt")
    except Exception as exc:  # noqa: BLE001 - the tier fails, naming why
        return _tier("shacl", [Problem(file="prov.json", what=(
            f"cannot be converted to PROV-O: {type(exc).__name__}: {exc}"))])
    conforms, results, _text = pyshacl.validate(data, shacl_graph=_shapes_graph(),
                                                inference="none", advanced=False)
    if conforms:
        return _tier("shacl", [])
    found = set()
    for result in results.subjects(SH.resultSeverity, SH.Violation):
        focus = results.value(result, SH.focusNode)
        message = results.value(result, SH.resultMessage)
        value = results.value(result, SH.value)
        extra = f" (value {value})" if value is not None else ""
        found.add(f"{message} at <{focus}>{extra}")
    if not found:
        found.add("the graph does not conform to the shapes")
    return _tier("shacl", [Problem(file="prov.json", what=f"SHACL {SHAPES}: {m}")
                           for m in sorted(found)])


# ----------------------------------------------------------------------------- validate
def validate(aer_bytes: bytes, sem_bytes: bytes, prov_bytes: bytes | None,
             corpus_root: Path, *, release: bool = False,
             known: Mapping[str, str] | None = None,
             targets: list[tuple[str, str]] | None = None) -> Validation:
    """Validate one execution's AER, SEM and PROV bytes against the corpus at
    ``corpus_root``.

    :param prov_bytes: ``None`` when no PROV graph was derived (``--skip-prov-conformance``):
        the prov tier is skipped, linkage resolves the AER's evidence instead, and the
        result is ``unvalidated``.
    :param release: add the shacl tier; raises ``validate.environment.release`` when
        rdflib or pyshacl is missing.
    :param known: the sha256 of corpus files the caller has just read, by relative path
        (``package``'s verify pass): linkage takes a target's digest from it instead of
        reading the file again.
    :param targets: when given, the ``(path, sha256)`` the linkage tier resolved are added
        to it (what :mod:`agentprov_core.evidence.validated` records).
    """
    if release and (missing := release_missing()):
        raise AgentprovError("validate.environment.release", missing=", ".join(missing))
    from agentprov_core.evidence import prov as provmod

    tiers: list[TierResult] = []
    aer_t, record = _aer_tier(aer_bytes)
    tiers.append(aer_t)
    eid = record.header.execution_id if record is not None else None
    blocked = "the AER does not decode"
    if record is None:
        tiers.append(TierResult(tier="sem", status="not_run", reason=blocked))
    else:
        tiers.append(_sem_tier(record, sem_bytes)[0])

    doc = None
    if prov_bytes is None:
        tiers.append(TierResult(tier="prov", status="skipped",
                                reason="--skip-prov-conformance: no PROV graph was derived"))
    elif record is None:
        tiers.append(TierResult(tier="prov", status="not_run", reason=blocked))
    else:
        doc, read_problems = _deserialise(prov_bytes)
        tiers.append(_prov_tier(doc, read_problems, record, aer_bytes, sem_bytes))

    linkage = Linkage()
    if record is None:
        tiers.append(TierResult(tier="linkage", status="not_run", reason=blocked))
    else:
        own = {provmod.file_path(eid, "aer"): aer_bytes, provmod.file_path(eid, "sem"): sem_bytes}
        if doc is not None:
            resolved = _prov_targets(doc)
        else:  # no graph: the evidence the AER names, and the AER and SEM themselves
            resolved = sorted({(ev.path, ev.sha256) for ev in record.header.evidence}
                             | {(p, _sha(b)) for p, b in own.items()})
        t, linkage = _linkage_tier(resolved, own, corpus_root, known or {})
        tiers.append(t)
        if targets is not None:
            targets += resolved

    if release:
        if prov_bytes is None:
            tiers.append(TierResult(tier="shacl", status="skipped",
                                    reason="no PROV graph was derived"))
        elif doc is None or tiers[2].status != "passed":
            tiers.append(TierResult(tier="shacl", status="not_run",
                                    reason="the prov tier did not pass"))
        else:
            tiers.append(_shacl_tier(doc))

    return Validation(execution_id=eid, mode="release" if release else "standard",
                      status=_status(tiers), aer_sha256=_sha(aer_bytes),
                      sem_sha256=_sha(sem_bytes),
                      prov_sha256=None if prov_bytes is None else _sha(prov_bytes),
                      tiers=tiers, linkage=linkage)


def encode(v: Validation) -> bytes:
    from agentprov_core.evidence.canonical import stored

    return stored(v)
