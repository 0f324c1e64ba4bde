"""The PROV graph of an execution as the ``prov`` library builds it: the reference the
direct writer (``agentprov_core.evidence.prov``) is held to, byte for byte.

:func:`document` builds the graph with :class:`prov.model.ProvDocument`, record by record in
the order the writer adds them, and :func:`library_bytes` is what the library's PROV-JSON
serialiser writes for it, in the stored (canonical) form. A change of the writer's graph, or
of how the library writes one, shows as a difference (``tests/test_prov_writer.py``).
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
from msgspec import UNSET

from agentprov_core.evidence.aer import AER, NOT_RECORDED, ModelCall, ToolCall
from agentprov_core.evidence.prov import (
    ID_NS,
    ID_PREFIX,
    NS,
    PREFIX,
    ROLE_TYPES,
    _attrs,
    _part,
    _recorded,
    _time,
    actor_agent_id,
    attempt_id,
    defence_agent_id,
    file_entity_id,
    file_path,
    mapping_id,
    model_call_id,
    raw_entity_id,
    sem_derivation_id,
    session_id,
    tool_call_id,
)


def document(aer: AER, aer_bytes: bytes, sem: Any, sem_bytes: bytes) -> Any:
    """The :class:`prov.model.ProvDocument` of ``aer``: the graph
    :func:`agentprov_core.evidence.prov.graph` writes, built with the library."""
    from prov.model import PROV, ProvDocument

    h = aer.header
    eid = h.execution_id
    doc = ProvDocument()
    doc.add_namespace(PREFIX, NS)
    doc.add_namespace(ID_PREFIX, ID_NS)
    software = PROV["SoftwareAgent"]

    def typ(name: str) -> Any:
        return doc.valid_qualified_name(f"{PREFIX}:{name}")

    # ---- agents
    p = h.producer
    agentprov = doc.agent(
        f"{ID_PREFIX}:agent/agentprov/{_part(p.version)}",
        {"prov:type": software, **_attrs(name=p.name, version=p.version)})
    b = h.backend
    env_key = next((v for v in (b.environment_id, b.identity_sha256) if _recorded(v)), None)
    environment = doc.agent(
        f"{ID_PREFIX}:agent/environment/{_part(env_key)}" if env_key is not None
        else f"{ID_PREFIX}:{_part(eid)}/environment",
        [("prov:type", software), ("prov:type", typ("WorkerEnvironment")),
         *_attrs(backend=b.id, environment_id=b.environment_id,
                 identity_sha256=b.identity_sha256,
                 benchmark_version=b.benchmark_version).items()])
    doc.actedOnBehalfOf(environment, agentprov)
    a = h.agent
    endpoint_key = hashlib.sha256("\x00".join(
        str(v) for v in (a.endpoint_kind, a.endpoint, a.model)).encode()).hexdigest()[:16]
    endpoint = doc.agent(
        f"{ID_PREFIX}:agent/endpoint/{endpoint_key}",
        [("prov:type", software), ("prov:type", typ("ModelEndpoint")),
         *_attrs(endpoint_kind=a.endpoint_kind, endpoint=a.endpoint, model=a.model,
                 display_name=a.display_name).items()])
    defence = None
    by_actor: dict[str, Any] = {}  # an actor's id -> its agent
    if h.task.defense_id != "none":
        actor = next((x for x in h.actors if x.name == h.task.defense_id), None) \
            if h.actors is not UNSET else None
        extra = {} if actor is None else _attrs(
            actor_id=actor.id, actor_kind=actor.kind, pipeline_name=actor.pipeline_name,
            elements=actor.elements or None, code_sha256=actor.code_sha256,
            parameters_sha256=actor.parameters_sha256,
            weights_sha256=actor.weights_sha256 or None)
        defence = doc.agent(defence_agent_id(h.task.defense_id),
                            [("prov:type", software), ("prov:type", typ("Defence")),
                             *_attrs(defense_id=h.task.defense_id).items(), *extra.items()])
        doc.actedOnBehalfOf(defence, environment)
        if actor is not None:
            by_actor[actor.id] = defence
    for actor in h.actors if h.actors is not UNSET else []:
        if actor.kind != "judge":
            continue
        judge = doc.agent(actor_agent_id(actor), [
            ("prov:type", software), ("prov:type", typ("Judge")),
            *_attrs(actor_id=actor.id, actor_kind=actor.kind, role=actor.name,
                    model=actor.model if actor.model is not UNSET else None).items()])
        doc.actedOnBehalfOf(judge, environment)
        by_actor[actor.id] = judge

    # ---- the session
    t = h.task
    session = doc.activity(
        session_id(eid), _time(h.started_at), _time(h.ended_at),
        {"prov:type": typ("Session"),
         **_attrs(execution_id=eid, mode=h.mode, source=h.source, unit=t.unit,
                  cell_key=t.cell_key, suite=t.suite, user_task_id=t.user_task_id,
                  injection_task_id=t.injection_task_id, attack=t.attack,
                  defense_id=t.defense_id, attempt=t.attempt, repeat=t.repeat,
                  element=a.element, plan_sha256=h.plan_sha256,
                  config_digest=h.config_digest, test_only=p.test_only,
                  status=aer.outcome.status, session_status=aer.outcome.session_status,
                  started_at=h.started_at, ended_at=h.ended_at)})
    doc.wasAssociatedWith(session, environment)
    if defence is not None:
        doc.wasAssociatedWith(session, defence)

    # ---- model calls, their wire attempts, tool calls
    calls: dict[str, Any] = {}
    tools = 0
    for rec in aer.records:
        if isinstance(rec, ModelCall):
            by = by_actor.get(rec.actor) if rec.actor is not UNSET else None
            act = doc.activity(model_call_id(eid, rec.call_id), other_attributes={
                "prov:type": typ("ModelCall"),
                **_attrs(call_id=rec.call_id, element=rec.element,
                         model_requested=rec.model_requested, served_model=rec.served_model,
                         status=rec.status, request_sha256=rec.request_sha256,
                         reply_sha256=rec.reply_sha256, finish_reason=rec.finish_reason,
                         retries=rec.retries, error_type=rec.error_type, t=rec.t,
                         actor=rec.actor if by is not None else None)})
            calls.setdefault(str(rec.call_id), act)
            doc.wasInformedBy(act, session)
            doc.wasAssociatedWith(act, endpoint)
            doc.wasAssociatedWith(act, by if by is not None else environment)
            for w in rec.attempts:
                wa = doc.activity(attempt_id(eid, rec.call_id, w.attempt_index),
                                  other_attributes={
                    "prov:type": typ("WireAttempt"),
                    **_attrs(attempt_id=w.attempt_id, attempt_index=w.attempt_index,
                             request_sha256=w.request_sha256,
                             response_sha256=w.response_sha256, http_status=w.http_status,
                             error_type=w.error_type, elapsed_ms=w.elapsed_ms)})
                doc.wasInformedBy(wa, act)
                doc.wasAssociatedWith(wa, endpoint)
        elif isinstance(rec, ToolCall):
            by = by_actor.get(rec.actor) if rec.actor is not UNSET else None
            act = doc.activity(tool_call_id(eid, tools), other_attributes={
                "prov:type": typ("ToolCall"),
                **_attrs(function=rec.function, tool_call_id=rec.tool_call_id,
                         call_id=rec.call_id, result_sha256=rec.result_sha256,
                         error=rec.error, t=rec.t,
                         actor=rec.actor if by is not None else None,
                         denied=rec.denied if rec.denied is not UNSET else None)})
            tools += 1
            requester = calls.get(str(rec.call_id)) if _recorded(rec.call_id) else None
            doc.wasInformedBy(act, requester if requester is not None else session)
            doc.wasAssociatedWith(act, by if by is not None else environment)

    # ---- the stored artefacts
    mapping = doc.activity(mapping_id(eid), other_attributes={
        "prov:type": typ("Mapping"), **_attrs(mapper=p.mapper, mapper_version=p.mapper_version)})
    doc.wasAssociatedWith(mapping, agentprov)
    aer_entity = doc.entity(file_entity_id(eid, "aer"), {
        "prov:type": typ("ExecutionRecord"),
        **_attrs(format=h.format, sha256=hashlib.sha256(aer_bytes).hexdigest(),
                 bytes=len(aer_bytes), path=file_path(eid, "aer"))})
    doc.wasGeneratedBy(aer_entity, mapping)
    seen = set()
    for ev in h.evidence:
        if ev.sha256 in seen:
            continue
        seen.add(ev.sha256)
        raw = doc.entity(raw_entity_id(ev.sha256), {
            "prov:type": typ(ROLE_TYPES.get(ev.role, "RawEvidence")),
            **_attrs(role=ev.role, format=ev.format, sha256=ev.sha256, bytes=ev.bytes,
                     path=ev.path, head_sha256=ev.head_sha256)})
        doc.wasGeneratedBy(raw, session)
        doc.used(mapping, raw)
        doc.wasDerivedFrom(aer_entity, raw)

    derivation = doc.activity(sem_derivation_id(eid), other_attributes={
        "prov:type": typ("SemDerivation")})
    doc.wasAssociatedWith(derivation, agentprov)
    doc.used(derivation, aer_entity)
    sem_entity = doc.entity(file_entity_id(eid, "sem"), {
        "prov:type": typ("Semantics"),
        **_attrs(format=getattr(sem, "format", NOT_RECORDED),
                 sha256=hashlib.sha256(sem_bytes).hexdigest(), bytes=len(sem_bytes),
                 path=file_path(eid, "sem"))})
    doc.wasGeneratedBy(sem_entity, derivation)
    doc.wasDerivedFrom(sem_entity, aer_entity)
    return doc


def library_bytes(aer: AER, aer_bytes: bytes, sem: Any, sem_bytes: bytes) -> bytes:
    """The stored form of what the library's PROV-JSON serialiser writes for the graph."""
    from agentprov_core.evidence.canonical import stored

    doc = document(aer, aer_bytes, sem, sem_bytes)
    return stored(msgspec.json.decode(doc.serialize(format="json")))
