"""The PROV graph of one execution: PROV-JSON derived from its AER and SEM.

Written directly as the PROV-JSON container (:func:`graph`: dicts, in the form the ``prov``
library's serialiser writes for the same graph built as a :class:`prov.model.ProvDocument`,
byte for byte; ``tests/test_prov_writer.py`` holds it to that) and stored in the canonical
form (:func:`agentprov_core.evidence.canonical.stored`), so that re-deriving it from the same
AER and SEM gives the same bytes. Building the graph with the library and serialising it
cost about eight times as much; the library stays the graph's reader in validation
(:mod:`agentprov_core.evidence.validation`), independent of this writer. Every identifier is
made from the execution id, call ids and content digests; the only times are the session's
start and end as the AER records them. The reference is ``docs/formats/prov.md``.

Entities are the stored artefacts, each with its sha256 and its path in the corpus (the
linkage tier of ``validate`` resolves them): the capture log and native log named by the
AER's evidence, the AER and the SEM. Activities are the session, its model calls (and their
wire attempts), its tool calls, the mapping that made the AER and the derivation that made
the SEM. Agents are agentprov, the worker environment, the model endpoint and, when one was
configured, the defence. When the AER records the defence as an actor (``header.actors``),
its agent carries the actor's kind and digests, and the activities it performed are
associated with it rather than with the environment: its own model calls (still with the
model endpoint, which served them) and the tool calls it denied (``agentprov:denied``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from typing import Any
from urllib.parse import quote

from msgspec import UNSET

from agentprov_core.evidence.aer import AER, NOT_RECORDED, ModelCall, ToolCall

#: the vocabulary: types and attributes of agentprov's PROV graphs
NS = "https://agentprov.dev/ns#"
#: the identifiers of the things in them
ID_NS = "https://agentprov.dev/id/"
PREFIX, ID_PREFIX = "agentprov", "apid"

#: an evidence role and the PROV type of its entity
ROLE_TYPES = {"capture": "CaptureLog", "native_log": "NativeLog", "inspect_log": "InspectLog"}


def _part(value: Any) -> str:
    """An identifier path segment from a value of the evidence (ids are short and plain;
    anything else is percent-encoded, so two values never share a segment)."""
    return quote(str(value), safe="-._~")


# -------------------------------------------------------------------- identifiers
def session_id(execution_id: str) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/session"


def mapping_id(execution_id: str) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/map"


def sem_derivation_id(execution_id: str) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/derive-sem"


def model_call_id(execution_id: str, call_id: Any) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/model-call/{_part(call_id)}"


def attempt_id(execution_id: str, call_id: Any, attempt_index: int) -> str:
    return f"{model_call_id(execution_id, call_id)}/attempt/{attempt_index}"


def tool_call_id(execution_id: str, ordinal: int) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/tool-call/{ordinal}"


def defence_agent_id(defense_id: str) -> str:
    return f"{ID_PREFIX}:agent/defence/{_part(defense_id)}"


def actor_agent_id(actor: Any) -> str:
    """The PROV agent of an actor of ``header.actors``: a defence's, or a judge's (by its
    role: ``apid:agent/judge/refusal_judge``)."""
    if actor.kind == "judge":
        return f"{ID_PREFIX}:agent/judge/{_part(actor.name)}"
    return defence_agent_id(actor.name)


def file_entity_id(execution_id: str, name: str) -> str:
    return f"{ID_PREFIX}:{_part(execution_id)}/{name}.json"


def raw_entity_id(sha256: str) -> str:
    return f"{ID_PREFIX}:raw/sha256/{_part(sha256)}"


def file_path(execution_id: str, name: str) -> str:
    """The corpus path of an execution's file (``executions/<id>/<name>.json``)."""
    return f"executions/{execution_id}/{name}.json"


# -------------------------------------------------------------------- derivation
def _recorded(value: Any) -> bool:
    return value is not None and value != NOT_RECORDED


def _attrs(**values: Any) -> dict[str, Any]:
    """``agentprov:`` attributes, leaving out what the evidence does not hold; values
    that are not plain literals (lists, dicts) are written as canonical JSON text."""
    from agentprov_core.evidence.canonical import canonical

    out: dict[str, Any] = {}
    for key, value in values.items():
        if not _recorded(value):
            continue
        if not isinstance(value, str | int | float | bool):
            value = canonical(value).decode("utf-8")
        out[f"{PREFIX}:{key}"] = value
    return out


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not _recorded(value):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# -------------------------------------------------------------------- PROV-JSON
#: an int's XSD datatype by its magnitude, as the prov library types a plain int
_INT32, _INT64 = 2**31 - 1, 2**63 - 1


def _qname(name: str) -> dict[str, str]:
    """A qualified name as an attribute value (``prov:type``'s): PROV-JSON's typed literal."""
    return {"$": name, "type": "xsd:QName"}


def _value(value: Any) -> Any:
    """An attribute value as the prov library's PROV-JSON serialiser writes it: a string or
    a boolean as itself, a number as a typed literal whose ``$`` is its text (an int typed by
    its magnitude, a float as ``xsd:double``: ``repr``, or ``NaN``, ``INF``, ``-INF``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        kind = "xsd:int" if -_INT32 - 1 <= value <= _INT32 else \
            "xsd:long" if -_INT64 - 1 <= value <= _INT64 else "xsd:integer"
        return {"$": str(value), "type": kind}
    if isinstance(value, float):
        text = "NaN" if math.isnan(value) else ("INF" if value > 0 else "-INF") \
            if math.isinf(value) else float.__repr__(value)
        return {"$": text, "type": "xsd:double"}
    return value  # a typed literal already (a qualified name)


def _time_text(value: Any) -> str | None:
    """An activity's time as PROV-JSON writes it: ISO 8601, an offset that is not a whole
    number of minutes turned to UTC (xsd:dateTime has none)."""
    t = _time(value)
    if t is None:
        return None
    offset = t.utcoffset()
    if offset is not None and (offset.total_seconds() % 60 or offset.microseconds):
        t = t.astimezone(dt.UTC)
    return t.isoformat()


class _Graph:
    """A PROV-JSON document being written: its container (``prefix`` and a group of records
    by identifier for each kind), the records added in order. It writes what the prov
    library's serialiser writes for the same records added to a ``ProvDocument``: a relation
    carries no identifier and is numbered ``_:id1``, ``_:id2``, … in the order it is added,
    a relation equal to one added before (same kind, same ends) taking that one's number (the
    library numbers records by equality); two records of one kind with one identifier are
    kept both, as a list."""

    def __init__(self) -> None:
        self.container: dict[str, dict[str, Any]] = {"prefix": {PREFIX: NS, ID_PREFIX: ID_NS}}
        self._relations: dict[tuple[str, ...], str] = {}  # kind and ends -> its blank id

    def _add(self, kind: str, identifier: str, record: dict[str, Any]) -> None:
        group = self.container.setdefault(kind, {})
        have = group.get(identifier)
        if have is None:
            group[identifier] = record
        elif isinstance(have, list):
            have.append(record)
        else:
            group[identifier] = [have, record]

    def element(self, kind: str, identifier: str, types: list[str], attrs: dict[str, Any],
                start: Any = None, end: Any = None) -> str:
        """Add an agent, activity or entity; its identifier. ``types``: its ``prov:type``
        values; ``attrs``: from :func:`_attrs`; ``start``, ``end``: an activity's times."""
        record: dict[str, Any] = {k: _value(v) for k, v in attrs.items()}
        typed = [_qname(t) for t in types]
        record["prov:type"] = typed[0] if len(typed) == 1 else typed
        for key, value in (("prov:startTime", start), ("prov:endTime", end)):
            if (text := _time_text(value)) is not None:
                record[key] = text
        self._add(kind, identifier, record)
        return identifier

    def relation(self, kind: str, **ends: str) -> None:
        """Add a relation between two records (``prov:`` attribute -> identifier)."""
        key = (kind, *ends.values())
        identifier = self._relations.setdefault(key, f"_:id{len(self._relations) + 1}")
        self._add(kind, identifier, {f"prov:{k}": v for k, v in ends.items()})


def graph(aer: AER, aer_bytes: bytes, sem: Any, sem_bytes: bytes) -> dict[str, Any]:
    """The PROV-JSON document of ``aer``: the container :func:`derive` stores."""
    h = aer.header
    eid = h.execution_id
    g = _Graph()
    software = "prov:SoftwareAgent"

    def typ(name: str) -> str:
        return f"{PREFIX}:{name}"

    # ---- agents
    p = h.producer
    agentprov = g.element("agent", f"{ID_PREFIX}:agent/agentprov/{_part(p.version)}",
                          [software], _attrs(name=p.name, version=p.version))
    b = h.backend
    env_key = next((v for v in (b.environment_id, b.identity_sha256) if _recorded(v)), None)
    environment = g.element(
        "agent", f"{ID_PREFIX}:agent/environment/{_part(env_key)}" if env_key is not None
        else f"{ID_PREFIX}:{_part(eid)}/environment",
        [software, typ("WorkerEnvironment")],
        _attrs(backend=b.id, environment_id=b.environment_id, identity_sha256=b.identity_sha256,
               benchmark_version=b.benchmark_version))
    g.relation("actedOnBehalfOf", delegate=environment, responsible=agentprov)
    a = h.agent
    endpoint_key = hashlib.sha256("\x00".join(
        str(v) for v in (a.endpoint_kind, a.endpoint, a.model)).encode()).hexdigest()[:16]
    endpoint = g.element(
        "agent", f"{ID_PREFIX}:agent/endpoint/{endpoint_key}", [software, typ("ModelEndpoint")],
        _attrs(endpoint_kind=a.endpoint_kind, endpoint=a.endpoint, model=a.model,
               display_name=a.display_name))
    defence = None
    by_actor: dict[str, str] = {}  # an actor's id -> its agent
    if h.task.defense_id != "none":
        actor = next((x for x in h.actors if x.name == h.task.defense_id), None) \
            if h.actors is not UNSET else None
        extra = {} if actor is None else _attrs(
            actor_id=actor.id, actor_kind=actor.kind, pipeline_name=actor.pipeline_name,
            elements=actor.elements or None, code_sha256=actor.code_sha256,
            parameters_sha256=actor.parameters_sha256,
            weights_sha256=actor.weights_sha256 or None)
        defence = g.element("agent", defence_agent_id(h.task.defense_id),
                            [software, typ("Defence")],
                            {**_attrs(defense_id=h.task.defense_id), **extra})
        g.relation("actedOnBehalfOf", delegate=defence, responsible=environment)
        if actor is not None:
            by_actor[actor.id] = defence
    for actor in h.actors if h.actors is not UNSET else []:
        if actor.kind != "judge":
            continue
        judge = g.element("agent", actor_agent_id(actor), [software, typ("Judge")], _attrs(
            actor_id=actor.id, actor_kind=actor.kind, role=actor.name,
            model=actor.model if actor.model is not UNSET else None))
        g.relation("actedOnBehalfOf", delegate=judge, responsible=environment)
        by_actor[actor.id] = judge

    # ---- the session
    t = h.task
    session = g.element(
        "activity", session_id(eid), [typ("Session")],
        _attrs(execution_id=eid, mode=h.mode, source=h.source, unit=t.unit,
               cell_key=t.cell_key, suite=t.suite, user_task_id=t.user_task_id,
               injection_task_id=t.injection_task_id, attack=t.attack,
               defense_id=t.defense_id, attempt=t.attempt, repeat=t.repeat,
               element=a.element, plan_sha256=h.plan_sha256,
               config_digest=h.config_digest, test_only=p.test_only,
               status=aer.outcome.status, session_status=aer.outcome.session_status,
               started_at=h.started_at, ended_at=h.ended_at),
        start=h.started_at, end=h.ended_at)
    g.relation("wasAssociatedWith", activity=session, agent=environment)
    if defence is not None:
        g.relation("wasAssociatedWith", activity=session, agent=defence)

    # ---- model calls, their wire attempts, tool calls
    calls: dict[str, str] = {}
    tools = 0
    for rec in aer.records:
        if isinstance(rec, ModelCall):
            by = by_actor.get(rec.actor) if rec.actor is not UNSET else None
            act = g.element("activity", model_call_id(eid, rec.call_id), [typ("ModelCall")],
                            _attrs(call_id=rec.call_id, element=rec.element,
                                   model_requested=rec.model_requested,
                                   served_model=rec.served_model, status=rec.status,
                                   request_sha256=rec.request_sha256,
                                   reply_sha256=rec.reply_sha256,
                                   finish_reason=rec.finish_reason, retries=rec.retries,
                                   error_type=rec.error_type, t=rec.t,
                                   actor=rec.actor if by is not None else None))
            calls.setdefault(str(rec.call_id), act)
            g.relation("wasInformedBy", informed=act, informant=session)
            g.relation("wasAssociatedWith", activity=act, agent=endpoint)
            g.relation("wasAssociatedWith", activity=act,
                       agent=by if by is not None else environment)
            for w in rec.attempts:
                wa = g.element("activity", attempt_id(eid, rec.call_id, w.attempt_index),
                               [typ("WireAttempt")],
                               _attrs(attempt_id=w.attempt_id, attempt_index=w.attempt_index,
                                      request_sha256=w.request_sha256,
                                      response_sha256=w.response_sha256,
                                      http_status=w.http_status, error_type=w.error_type,
                                      elapsed_ms=w.elapsed_ms))
                g.relation("wasInformedBy", informed=wa, informant=act)
                g.relation("wasAssociatedWith", activity=wa, agent=endpoint)
        elif isinstance(rec, ToolCall):
            by = by_actor.get(rec.actor) if rec.actor is not UNSET else None
            act = g.element("activity", tool_call_id(eid, tools), [typ("ToolCall")],
                            _attrs(function=rec.function, tool_call_id=rec.tool_call_id,
                                   call_id=rec.call_id, result_sha256=rec.result_sha256,
                                   error=rec.error, t=rec.t,
                                   actor=rec.actor if by is not None else None,
                                   denied=rec.denied if rec.denied is not UNSET else None))
            tools += 1
            requester = calls.get(str(rec.call_id)) if _recorded(rec.call_id) else None
            g.relation("wasInformedBy", informed=act,
                       informant=requester if requester is not None else session)
            g.relation("wasAssociatedWith", activity=act,
                       agent=by if by is not None else environment)

    # ---- the stored artefacts
    mapping = g.element("activity", mapping_id(eid), [typ("Mapping")],
                        _attrs(mapper=p.mapper, mapper_version=p.mapper_version))
    g.relation("wasAssociatedWith", activity=mapping, agent=agentprov)
    aer_entity = g.element(
        "entity", file_entity_id(eid, "aer"), [typ("ExecutionRecord")],
        _attrs(format=h.format, sha256=hashlib.sha256(aer_bytes).hexdigest(),
               bytes=len(aer_bytes), path=file_path(eid, "aer")))
    g.relation("wasGeneratedBy", entity=aer_entity, activity=mapping)
    seen = set()
    for ev in h.evidence:
        if ev.sha256 in seen:
            continue
        seen.add(ev.sha256)
        raw = g.element(
            "entity", raw_entity_id(ev.sha256), [typ(ROLE_TYPES.get(ev.role, "RawEvidence"))],
            _attrs(role=ev.role, format=ev.format, sha256=ev.sha256, bytes=ev.bytes,
                   path=ev.path, head_sha256=ev.head_sha256))
        g.relation("wasGeneratedBy", entity=raw, activity=session)
        g.relation("used", activity=mapping, entity=raw)
        g.relation("wasDerivedFrom", generatedEntity=aer_entity, usedEntity=raw)

    derivation = g.element("activity", sem_derivation_id(eid), [typ("SemDerivation")], {})
    g.relation("wasAssociatedWith", activity=derivation, agent=agentprov)
    g.relation("used", activity=derivation, entity=aer_entity)
    sem_entity = g.element(
        "entity", file_entity_id(eid, "sem"), [typ("Semantics")],
        _attrs(format=getattr(sem, "format", NOT_RECORDED),
               sha256=hashlib.sha256(sem_bytes).hexdigest(), bytes=len(sem_bytes),
               path=file_path(eid, "sem")))
    g.relation("wasGeneratedBy", entity=sem_entity, activity=derivation)
    g.relation("wasDerivedFrom", generatedEntity=sem_entity, usedEntity=aer_entity)
    return g.container


def derive(aer: AER, aer_bytes: bytes, sem: Any, sem_bytes: bytes) -> bytes:
    """The stored bytes of the PROV-JSON graph of ``aer``.

    :param aer: the execution record.
    :param aer_bytes: its stored bytes (the AER entity carries their sha256).
    :param sem: the SEM derived from it (its ``format`` is recorded when it has one).
    :param sem_bytes: the SEM's stored bytes (the SEM entity carries their sha256).
    """
    from agentprov_core.evidence.canonical import stored

    return stored(graph(aer, aer_bytes, sem, sem_bytes))
