"""T0's checks, in the specification's order, up to the plan (steps 1 to 6 of R-16).

1. usage (exit 2): options, then the plan document, its expansion from the catalogue
2. live status gate (exit 5), backend and defence refusals (exit 5), the environment (3)
3. API caps (exit 4) before any key is read; then key, endpoint, containment (later issues)
6. the plan: cells, digests, units and attempts due; ``--dry-run`` stops here

A refusal at one step has touched nothing of the later steps (R-16.8): nothing in this
module reads a key, starts a process, contacts a server or writes a file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core import defences as defmod
from agentprov_core import endpoints as epmod
from agentprov_core import environments, paths, planfile
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.plandoc import CELL_OPTIONS, InspectPlan, PlanDoc
from agentprov_core.plans import Cell, Plan, config_digest, plan_digest
from agentprov_core.runrequest import RunRequest, check_usage
from agentprov_core.source import LIVE_ORDER, RunContext, Source

INSPECT_FLAGS = ("task", "samples", "split", "epochs", "cell_size", "max_connections", "judge",
                 "task_param", "message_limit", "token_limit", "time_limit")
SUITE_FLAGS = ("suite", "benchmark_version", "user_tasks", "injection_tasks", "attack",
               "benign", "autodojo_cache", "autodojo_variant")


@dataclass
class Prepared:
    source: Source
    request: RunRequest
    doc: PlanDoc
    catalogue: Catalogue
    cells: list[Cell]
    endpoint: epmod.Endpoint | None
    plan: Plan
    identity: dict[str, Any]


def _split_list(values: tuple[str, ...] | list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def _pairs(values, option: str, scalar: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw in values or ():
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise AgentprovError("cli.usage.option_value", option=option, value=raw,
                                 what="expected KEY=VALUE")
        parsed: Any = value
        if scalar:
            try:
                parsed = tomllib.loads(f"v = {value}")["v"]
            except tomllib.TOMLDecodeError:
                parsed = value
            if isinstance(parsed, float):
                raise AgentprovError("cli.usage.option_value", option=option, value=raw,
                                     what="floats are not accepted; give a string or an integer")
            if not isinstance(parsed, (str, int, bool)):
                parsed = value
        out[key.strip()] = parsed
    return out


def plan_document(req: RunRequest, src: Source) -> PlanDoc:
    o = req.options
    kind = src.meta.kind
    if o.get("plan"):
        clash = [CELL_OPTIONS[k] for k in CELL_OPTIONS if k in req.given]
        if clash:
            raise AgentprovError("cli.usage.plan_with_cell_options", options=", ".join(clash))
        path = Path(o["plan"])
        doc = planfile.load(path)
        if doc.backend != src.meta.name:
            raise AgentprovError("cli.usage.plan_backend", location=str(path),
                                 plan_backend=doc.backend, source=src.meta.name)
        return doc
    foreign = INSPECT_FLAGS if kind == "suites" else SUITE_FLAGS
    for name in foreign:
        if name in req.given:
            why = ("it plans suites and tasks, not an Inspect task" if kind == "suites"
                   else "it runs an Inspect task (--task, --samples)")
            raise AgentprovError("cli.usage.option_for_other_kind", option=CELL_OPTIONS[name],
                                 source=src.meta.name, why=why)
    fields: dict[str, Any] = {"backend": src.meta.name, "repeats": o.get("repeats") or 1,
                              "defence": o.get("defence") or "none"}
    if kind == "suites":
        fields |= {
            "benchmark_version": o.get("benchmark_version"),
            "suites": _split_list(o.get("suite")) or None,
            "user_tasks": o.get("user_tasks") or "all",
            "injection_tasks": o.get("injection_tasks") or "all",
            "attacks": _split_list(o.get("attack")),
            "benign": o.get("benign") or "include",
            "autodojo_cache": o.get("autodojo_cache"),
            "autodojo_variant": o.get("autodojo_variant"),
        }
    else:
        limits = {k: o[k] for k in ("message_limit", "token_limit", "time_limit")
                  if o.get(k) is not None}
        fields["inspect"] = InspectPlan(
            task=o.get("task"), samples=o.get("samples"), split=o.get("split"),
            epochs=o.get("epochs") or 1, cell_size=o.get("cell_size"),
            max_connections=o.get("max_connections") or 4,
            judges=_pairs(o.get("judge"), "--judge", scalar=False),
            params=_pairs(o.get("task_param"), "--task-param", scalar=True), limits=limits)
    return msgspec.convert(fields, type=PlanDoc, from_attributes=True)


def resolve_endpoint(req: RunRequest) -> epmod.Endpoint | None:
    o = req.options
    if req.scripted:
        return None
    option, name = ("--model", o["model"]) if o.get("model") else ("--endpoint", o["endpoint"])
    ep = epmod.resolve(name, option, epmod.load())
    if not ep.local:
        for key, flag in (("base_url", "--base-url"), ("allow_lan_endpoint",
                                                       "--allow-lan-endpoint")):
            if o.get(key):
                raise AgentprovError("cli.usage.local_only_option", option=flag,
                                     endpoint=ep.name)
        if not o.get("model_id"):
            raise AgentprovError("cli.usage.model_id_missing", endpoint=ep.name)
    return ep


def agent_config(req: RunRequest, ep: epmod.Endpoint | None) -> dict[str, Any]:
    """The agent configuration that the plan and configuration digests hash.

    A scripted run's agent is the scripted transport itself, whatever the script holds
    (the script's own sha256 is recorded with the evidence); the display name is an
    attack parameter, not configuration, so adding it resumes the same run.
    """
    o = req.options
    element = o.get("llm_element") or "native"
    if ep is None:
        return {"endpoint": "scripted", "element": element, "model_id": None, "params": {}}
    params = {k: o[k] for k in ("temperature", "max_tokens", "reasoning_effort")
              if o.get(k) is not None}
    return {"endpoint": ep.name, "endpoint_class": endpoint_class(req, ep), "kind": ep.kind,
            "element": element, "model_id": o.get("model_id"), "params": params,
            "key_variables": [ep.key] if ep.key else []}


def endpoint_class(req: RunRequest, ep: epmod.Endpoint) -> str:
    url = req.options.get("base_url") or ep.base_url
    return "local" if ep.local and epmod.is_loopback(url) else "api"


def catalogue_for_print(src: Source) -> Catalogue:
    """The source's catalogue, with the defences of the repository's registry that its
    backend builds (the registry, not the snapshot, is authoritative for defences)."""
    from agentprov_core.session import worker_catalogue

    cat = worker_catalogue(src) or src.catalogue()
    entries = [d for d in defmod.load_registry() if src.meta.backend in d.backends]
    return msgspec.structs.replace(cat, defences=entries)


def gate_capability(src: Source) -> None:
    if src.meta.backend is None:
        raise AgentprovError("run.unsupported.no_live_capability", source=src.meta.name)


def prepare(req: RunRequest) -> Prepared:
    from agentprov_core import parts as partsmod
    from agentprov_core.cli.common import source_entry

    # ---- step 1: usage
    check_usage(req)
    src = source_entry(req.source).source
    meta = src.meta
    gate_capability(src)  # a source without a backend has no catalogue to plan from
    doc = plan_document(req, src)
    ep = resolve_endpoint(req)
    ctx = RunContext(scripted=req.scripted, capped=req.capped,
                     llm_element=req.options.get("llm_element") or "native")
    cat = src.catalogue()
    src.check_plan(doc, cat, ctx)
    cells = src.expand(doc, cat, ctx)
    # ---- step 2: live status gate, backend and defence refusals, the environment
    part = partsmod.load().get(meta.name)
    status = part.live_status if part is not None else meta.live_status
    if not req.scripted and LIVE_ORDER.get(status, 0) < LIVE_ORDER["partial"]:
        raise AgentprovError("run.unsupported.planned", source=meta.name,
                             part=part.label if part else meta.label)
    src.refusals(doc, cat, ctx)
    defmod.check(meta.name, meta.backend, doc.defence, src.suites_of_plan(cells),
                 defmod.load_registry(), paths.display(paths.defence_registry()))
    env_id, identity = environments.backend_identity(meta)
    # ---- step 3: API caps, before any key is read
    if ep is not None and endpoint_class(req, ep) == "api":
        missing = [flag for key, flag in (("max_calls", "--max-calls"),
                                          ("max_cost_usd", "--max-cost-usd"))
                   if req.options.get(key) is None]
        if missing:
            raise AgentprovError("cli.refused.api_caps", missing=", ".join(missing))
    # ---- step 6: the plan
    plan = make_plan(src, req, doc, cat, cells, ep, env_id, identity)
    return Prepared(src, req, doc, cat, cells, ep, plan, identity)


def make_plan(src: Source, req: RunRequest, doc: PlanDoc, cat: Catalogue, cells: list[Cell],
              ep: epmod.Endpoint | None, env_id: str, identity: dict[str, Any]) -> Plan:
    meta = src.meta
    agent = agent_config(req, ep)
    return Plan(
        source=meta.name, backend=meta.backend or meta.name, environment_id=env_id,
        benchmark_version=src.benchmark_version(doc, cat),
        corpus_id=f"{meta.name}-live-{req.options['campaign']}"
        if req.options.get("campaign") else None,
        cells=cells, repeats=doc.repeats, defence=doc.defence,
        max_attempts=req.options.get("max_attempts") or 3, settled=0,
        plan_sha256=plan_digest(meta.name, meta.backend or meta.name, cells, doc, agent,
                                src.backend_config(doc, cat)),
        config_digest=config_digest(agent, identity),
    )


def with_worker_catalogue(p: Prepared, cat: Catalogue) -> Prepared:
    """Re-expand the plan from the catalogue the backend's worker served (the authority on
    what the installed benchmark holds); a plan it cannot serve is a usage error."""
    ctx = RunContext(scripted=p.request.scripted, capped=p.request.capped,
                     llm_element=p.request.options.get("llm_element") or "native")
    p.source.check_plan(p.doc, cat, ctx)
    cells = p.source.expand(p.doc, cat, ctx)
    plan = make_plan(p.source, p.request, p.doc, cat, cells, p.endpoint,
                     p.plan.environment_id, p.identity)
    return Prepared(p.source, p.request, p.doc, cat, cells, p.endpoint, plan, p.identity)


def plan_lines(plan: Plan) -> list[str]:
    """The dry run's human lines (R-8.3 … R-8.5)."""
    lines = [
        f"plan {plan.plan_sha256[:16]}...: {len(plan.cells)} cell(s) x {plan.repeats} "
        f"repeat(s); corpus {plan.corpus_id}; backend {plan.environment_id}",
        f"  config digest sha256:{plan.config_digest[:16]}...; {plan.settled} unit(s) already "
        f"settled; up to {plan.attempts_due} attempt(s) due (--max-attempts {plan.max_attempts})",
    ]
    lines += [f"  cell {c.key}" for c in plan.cells]
    return lines
