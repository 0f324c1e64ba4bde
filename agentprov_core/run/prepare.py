"""T0's checks, in the specification's order, up to the plan (steps 1 to 6 of R-16).

1. usage (exit 2): options, then the plan document, its expansion from the catalogue
2. live status gate (exit 5), backend and defence refusals (exit 5), the environment (3),
   and the pinned files of the defence's assets in it (3)
3. a restricted source's corpus outside $AGENTPROV_HOME (exit 4); API caps (exit 4) before
   any key is read; then the key (3), the endpoint URL (4) and the containment (4)
6. the plan: cells, digests, units and attempts due; ``--dry-run`` stops here
(7. consent is :mod:`agentprov_core.run.consent`, called by ``run`` after the plan.)

A refusal at one step has touched nothing of the later steps (R-16.8): the key is read at
step 3 only after the caps check (and never for a scripted run); nothing in this module
starts a process, contacts a server or writes a file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import msgspec

from agentprov_core.backend import environments
from agentprov_core.base import paths
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.live import endpoints as epmod
from agentprov_core.plan.plandoc import PlanDoc
from agentprov_core.plan.plans import (
    Cell,
    Plan,
    config_digest,
    content_digest,
    plan_content,
    plan_digest,
)
from agentprov_core.registries import defences as defmod
from agentprov_core.run import checks, presetrun, restricted
from agentprov_core.run.plandocument import plan_document
from agentprov_core.run.runrequest import RunRequest, check_usage
from agentprov_core.source import LIVE_ORDER, RunContext, Source

if TYPE_CHECKING:
    from agentprov_core.live.local.facts import Fact
    from agentprov_core.live.local.identity import LocalModelIdentity, ObserveOptions
    from agentprov_core.run.attackcache import Checked
    from agentprov_core.run.presetrun import PresetPlan


@dataclass(frozen=True)
class Prepared:
    """A run prepared up to its plan (steps 1 to 6): what the later steps, the dry run and
    the campaign read. Frozen: a step that changes the plan returns a new one
    (:func:`with_worker_catalogue`, :func:`agentprov_core.run.units.read_progress`)."""

    source: Source
    #: the request, with the defaults a preset or the sweep settled (the element, the jobs,
    #: the start stagger)
    request: RunRequest
    doc: PlanDoc
    catalogue: Catalogue
    cells: list[Cell]
    endpoint: epmod.Endpoint | None
    plan: Plan
    identity: dict[str, Any]
    #: the model parameters the agent configuration records and the agent sends (a
    #: preset's request timeout included); empty for the scripted transport
    params: dict[str, str | int]
    #: the endpoint's wire (``openai``, ``anthropic``), None for the scripted transport
    wire: str | None
    resolved: epmod.ResolvedEndpoint | None = None
    containment: dict[str, Any] | None = None
    #: a local server's model as step 4 observed it (agentprov-local-model/0.2), else None
    local_identity: LocalModelIdentity | None = None
    #: what the agent configuration records of it (model id, identity digest and part)
    local_record: dict[str, Any] | None = None
    #: how step 4 observed it (hashing, model folder, key): A14 re-observes the same way
    local_options: ObserveOptions | None = None
    #: step 5's verified attack cache (``--attack autodojo``): the file, its git origin and
    #: the vectors that fall back (:mod:`agentprov_core.run.attackcache`), else None
    attack_cache: Checked | None = None
    #: a local model's facts with their sources (flag, settings, folder, preset;
    #: :mod:`agentprov_core.live.local.facts`), else None; outside the digests
    model_facts: dict[str, Fact] | None = None
    #: a compute preset's plan for this model and host, else None
    preset: PresetPlan | None = None

    @property
    def endpoint_class(self) -> str | None:
        """``local`` or ``api`` for a real model (decided before consent, R-10.8); None for
        the scripted transport."""
        return self.resolved.endpoint_class if self.resolved is not None else None


def resolve_endpoint(req: RunRequest) -> epmod.Endpoint | None:
    o = req.options
    if req.scripted:
        return None
    option, name = ("--model", o.model) if o.model else ("--endpoint", o.endpoint)
    ep = epmod.resolve(name, option, epmod.load())
    if not ep.local:
        for key, flag in (("base_url", "--base-url"), ("allow_lan_endpoint",
                                                       "--allow-lan-endpoint")):
            if getattr(o, key):
                raise AgentprovError("cli.usage.local_only_option", option=flag,
                                     endpoint=ep.name)
        if not o.model_id:
            raise AgentprovError("cli.usage.model_id_missing", endpoint=ep.name)
    elif ep.base_url is None:  # no standard port (openai_compat): the flag or the setting
        epmod.resolve_base_url(ep, o.base_url, None)  # cli.usage.base_url_required
    return ep


#: Reasoning-effort levels an OpenAI-style endpoint accepts.
REASONING_LEVELS = ("minimal", "low", "medium", "high")


def model_params(req: RunRequest, src: Source, ep: epmod.Endpoint | None,
                 timeout_s: int | None = None) -> dict[str, Any]:
    """The model options of step 1 (exit 2; ``inject`` is exit 5 at step 2) as the agent
    configuration records them (R-12.14 … R-12.16, R-15.11, decision 8), with a preset's
    request timeout (``timeout_s``, R-11.50) when it has one."""
    o = req.options
    if ep is None:
        return {}
    wire = epmod.wire_of(ep)
    params: dict[str, Any] = {}
    if o.temperature is not None:
        try:
            t = float(o.temperature)
        except ValueError:
            t = -1.0
        if t != t:  # NaN
            t = -1.0
        if not 0.0 <= t <= 2.0:
            raise AgentprovError("cli.usage.option_value", option="--temperature",
                                 value=str(o.temperature), what="a number from 0 to 2")
        # canonical JSON takes no floats: the temperature is recorded as its decimal text
        params["temperature"] = format(Decimal(str(o.temperature).strip()).normalize(), "f")
    mt = o.max_tokens
    if wire == "anthropic":
        if mt is None:
            raise AgentprovError("cli.usage.max_tokens_required", endpoint=ep.name)
        if o.reasoning_effort is not None:
            raise AgentprovError("cli.usage.reasoning_effort_anthropic", endpoint=ep.name)
        if mt != "harness-default":
            if not (mt.isascii() and mt.isdigit() and len(mt) <= 9) or int(mt) < 1:
                raise AgentprovError("cli.usage.option_value", option="--max-tokens",
                                     value=mt if len(mt) <= 40 else f"{mt[:40]}…",
                                     what="a positive integer below 1,000,000,000, or "
                                          "harness-default")
            mt = int(mt)
        params["max_tokens"] = mt
    elif mt is not None:
        raise AgentprovError("cli.usage.max_tokens_openai", endpoint=ep.name)
    effort = o.reasoning_effort
    if effort is not None:
        if effort not in REASONING_LEVELS:
            raise AgentprovError("cli.usage.option_value", option="--reasoning-effort",
                                 value=effort, what="one of " + ", ".join(REASONING_LEVELS))
        params["reasoning_effort"] = effort
    if timeout_s is not None:  # a preset's request timeout
        params["timeout_s"] = timeout_s
    policy = o.temperature_policy
    if policy == "as-benchmark":
        params["temperature_policy"] = "as-benchmark"
    elif policy is None:
        dropped = not_transmitted(src, ep, o.element, params)
        if dropped:
            option, why = dropped
            raise AgentprovError("cli.usage.parameter_not_transmitted", option=option,
                                 value=str(getattr(o, option[2:].replace("-", "_"))),
                                 element=o.element, endpoint=ep.name,
                                 why=why)
    return params


def not_transmitted(src: Source, ep: epmod.Endpoint, element: str,
                    params: dict[str, Any]) -> tuple[str, str] | None:
    """The first configured parameter that the stock element would not transmit, with why
    (the A3 condition, decided before anything starts), or None."""
    if src.meta.kind != "suites":
        for key, option in (("temperature", "--temperature"),
                            ("reasoning_effort", "--reasoning-effort")):
            if key in params:
                return option, "an Inspect task transmits none of the agent's sampling parameters"
        return None
    if (element == "native" and epmod.wire_of(ep) == "openai"
            and "temperature" in params and Decimal(params["temperature"]) == 0):
        return "--temperature", "AgentDojo's OpenAI element drops a temperature of 0"
    return None


def agent_config(req: RunRequest, ep: epmod.Endpoint | None,
                 resolved: epmod.ResolvedEndpoint | None = None,
                 params: dict[str, Any] | None = None,
                 local: dict[str, Any] | None = None) -> dict[str, Any]:
    """The agent configuration that the plan and configuration digests hash.

    A scripted run's agent is the scripted transport itself, whatever the script holds
    (the script's own sha256 is recorded with the evidence); the display name is an
    attack parameter, not configuration, so adding it resumes the same run. A key is
    recorded by its variable's name only, and an optional key only when it is set
    (R-11.27).
    """
    o = req.options
    element = o.element
    if ep is None:
        return {"endpoint": "scripted", "element": element, "model_id": None, "params": {}}
    out: dict[str, Any] = {
        "endpoint": ep.name, "kind": ep.kind, "wire": epmod.wire_of(ep), "element": element,
        "model_id": o.model_id, "params": dict(params or {}),
        "key_variables": [ep.key] if ep.key else []}
    if resolved is not None:
        out |= {"endpoint_class": resolved.endpoint_class, "base_url": resolved.base_url,
                "key_variables": [resolved.key_variable] if resolved.key_variable else []}
        if resolved.custom:
            out["allow_custom_endpoint"] = True
        if resolved.lan:
            out["allow_lan_endpoint"] = True
    else:
        out["endpoint_class"] = endpoint_class(req, ep)
    if local is not None:  # step 4's observation: the model id picked and its identity
        out |= local
    return out


def endpoint_class(req: RunRequest, ep: epmod.Endpoint) -> str:
    """The class before ``.env`` is read (step 3 reads it only after the caps check): the
    flag, the setting and the registry decide it."""
    url, _ = epmod.resolve_base_url(ep, req.options.base_url, None)
    epmod.parse_url(url)  # a URL that is no URL is refused before it decides anything
    return epmod.endpoint_class(ep, url)


def run_context(req: RunRequest, ep: epmod.Endpoint | None) -> RunContext:
    """What a source's refusal rules look at besides the plan."""
    return RunContext(scripted=req.scripted, capped=req.capped,
                      llm_element=req.options.element,
                      wire=epmod.wire_of(ep) if ep is not None else "openai")


def check_judges(src: Source, req: RunRequest, doc: PlanDoc, agent_model: str) -> None:
    """Step 3 under caps (a real model): an Inspect plan's judges all use the agent's model
    (``cli.refused.api_caps``, exit 4, R-25.24)."""
    from agentprov_core.source import InspectSource

    if req.capped and not req.scripted and isinstance(src, InspectSource):
        src.check_judges(doc, agent_model)


def check_caps(req: RunRequest, cls: str) -> None:
    """Step 3 begins: an API-class run needs its caps (exit 4), before any key is read.
    ``--preflight-only`` takes no caps (R-15.8)."""
    if cls != "api" or req.options.preflight_only:
        return
    missing = [flag for key, flag in (("max_calls", "--max-calls"),
                                      ("max_cost_usd", "--max-cost-usd"))
               if getattr(req.options, key) is None]
    if missing:
        raise AgentprovError("cli.refused.api_caps", why="the endpoint entry is not local",
                             missing=", ".join(missing))


def check_key_and_url(req: RunRequest, ep: epmod.Endpoint) -> epmod.ResolvedEndpoint:
    """Step 3 after the caps: the key (exit 3), then the endpoint URL (exit 4).

    The key is read only to check that it is present at its source (decision 1): it is
    not kept here, and only its variable's name reaches the configuration. ``.env`` (or
    ``--env-stdin``) may also name the base URL (``base_url_variable``); a local entry
    that this moves off loopback becomes class api and needs the caps too."""
    from agentprov_core.live import keys

    o = req.options
    env: dict[str, str] = {}
    if ep.base_url_variable and not (ep.local and o.base_url):
        value = keys.read_variable(ep.base_url_variable, o.keys)
        if value:
            env[ep.base_url_variable] = value
    url, source = epmod.resolve_base_url(ep, o.base_url, env)
    epmod.parse_url(url)
    check_caps(req, epmod.endpoint_class(ep, url))
    key_variable: str | None = None
    secrets: dict[str, str] = {}
    if ep.key:
        secret = keys.read_key(ep.key, o.keys)  # cli.environment.credential (exit 3) when missing
        key_variable = ep.key
    elif ep.optional_key:
        try:
            secret = keys.read_key(ep.optional_key, o.keys)
        except AgentprovError as exc:
            if exc.code != "cli.environment.credential":
                raise
        else:
            key_variable = ep.optional_key
    if key_variable:
        secrets[key_variable] = secret.reveal()  # compared with the URL, then let go
    epmod.check_secret_free(url, secrets)  # exit 4: the base URL is recorded and printed
    resolved = epmod.check_url(ep, url, source,
                               allow_custom=bool(o.allow_custom_endpoint),
                               allow_lan=bool(o.allow_lan_endpoint))
    if resolved.lan and key_variable:
        raise AgentprovError("cli.refused.lan_key", variable=key_variable,
                             url=epmod.shown(url))
    return msgspec.structs.replace(resolved, key_variable=key_variable)


def check_containment(req: RunRequest, meta: Any, env_id: str) -> dict[str, Any]:
    """Step 3 ends: a real-model run declares its containment (exit 4, R-15.7): missing, or
    refused by :func:`agentprov_core.backend.containment.resolve` (a provider that does not apply on
    this platform, an enforced one without a passed probe of its current profile in the
    environment's marker). Returns what ``producer.sandbox`` records."""
    from agentprov_core.backend import containment

    name = req.options.containment
    if not name:
        raise AgentprovError(
            "cli.refused.containment",
            why="give --containment sandbox-exec, bwrap, dedicated-user or vm (the worker "
                "runs pinned third-party code as you, with network access)")
    marker = environments.read_marker(meta, env_id)
    return containment.resolve(name, marker, backend=meta.backend or meta.name).as_json()


def observe_local(req: RunRequest, ep: epmod.Endpoint,
                  resolved: epmod.ResolvedEndpoint) -> tuple[Any, dict[str, Any], Any]:
    """Step 4 (a local server, R-16.4): list and fingerprint the server (exit 3 or 4), pick
    the model (``--model-id``, the endpoint's model variable in ``.env``, or a numbered pick
    on a terminal; else exit 3 listing the served ids), observe its identity record
    (``agentprov-local-model/0.2``, weights hashed through the digest cache unless
    ``--no-hash-weights``), and refuse LM Studio's text tool prompt unless
    ``--allow-text-tool-calls``. Returns the identity and what the agent configuration
    records of it (its digest and identity part: another model is another configuration),
    and the observation's options (A14 re-observes the same way before every cell).
    """
    from agentprov_core.live import keys
    from agentprov_core.live.local import identity as li

    o = req.options
    key = keys.read_key(resolved.key_variable, o.keys) if resolved.key_variable else None
    opts = li.ObserveOptions(hash_weights=not o.no_hash_weights,
                             model_dir=o.model_dir, key=key,
                             key_variable=resolved.key_variable, allow_lan=resolved.lan)
    model_id = o.model_id
    if not model_id and ep.model_variable:
        model_id = keys.read_variable(ep.model_variable, o.keys) or None
    if not model_id:
        model_id = li.choose_model(li.served(resolved, opts), variable=ep.model_variable)
    ident = li.observe(resolved, model_id, opts)
    tool_use = li.check_tool_use(ident, allow_text_tool_calls=bool(
        o.allow_text_tool_calls))
    recorded = {"model_id": model_id,
                "local_model": ident.identity_part() | {"digest": ident.digest}}
    if tool_use is not None:
        recorded["tool_use"] = tool_use
    return ident, recorded, opts


def catalogue_for_print(src: Source) -> Catalogue:
    """The source's catalogue, with the defences of the repository's registry that its
    backend builds (the registry, not the snapshot, is authoritative for defences)."""
    from agentprov_core.backend.session import worker_catalogue

    cat = worker_catalogue(src) or src.catalogue()
    entries = [d for d in defmod.load_registry() if src.meta.backend in d.backends]
    return msgspec.structs.replace(cat, defences=entries)


def gate_capability(src: Source) -> None:
    if src.meta.backend is None:
        raise AgentprovError("run.unsupported.no_live_capability", source=src.meta.name,
                             because="")


def gate_backend(name: str) -> Source | None:
    """Before anything else, usage included (exit 5): a source with no backend, or whose
    backend cannot be built in this build (:func:`agentprov_core.backend.slots.unbuildable`),
    can run nothing, whatever the options; telling the user to fix an option, or to build
    the backend, would be advice that cannot succeed. A source that cannot be found is left
    to the usual lookup, in its usual place (None). Returns the source found."""
    from agentprov_core.backend import slots
    from agentprov_core.plugins import source_entry

    try:
        src = source_entry(name).source
    except AgentprovError:
        return None
    gate_capability(src)
    why = slots.unbuildable(src.meta)
    if why is not None:
        raise AgentprovError("run.unsupported.no_live_capability", source=name,
                             because=f": {why}")
    return src


def check_mapper(meta: Any) -> None:
    """A source that names the mapper of its live evidence (``SourceMeta.mapper``) needs it
    registered and reading the format of its live evidence (``SourceMeta.evidence_format``),
    before anything starts: every attempt it stored would fail to map
    (``cli.environment.mapper_missing``, exit 3)."""
    if meta.mapper is None:
        return
    from agentprov_core.mapping import mapper_for_source

    mapper_for_source(meta.name)


def prepare(req: RunRequest, *, estimate: bool = False) -> Prepared:
    """Steps 1 to 6. ``estimate`` plans for ``agentprov estimate``, which runs nothing and
    writes nothing: step 3 takes no caps, containment or corpus location, and reads a key
    (its presence only, as a dry run does) only when a key option is given for an API
    endpoint; step 4 never contacts a local server. Without that key the plan is made with
    the scripted stand-in's agent configuration (:func:`estimate_stand_in`)."""
    from agentprov_core.backend.session import recorded_catalogue
    from agentprov_core.plugins import parts, source_entry, suites_of_backend

    # nothing of a source that cannot run is worth checking; a source without a backend
    # has no catalogue to plan from
    found = gate_backend(req.source)
    # ---- step 1: usage
    check_usage(req)
    src = found if found is not None else source_entry(req.source).source
    meta = src.meta
    doc = plan_document(req, src)
    ep = resolve_endpoint(req)
    wire = epmod.wire_of(ep) if ep is not None else None
    from agentprov_core.live.local import facts as factsmod

    factsmod.check_flags(req.options.fact_flags(), req.scripted, ep)
    preset = presetrun.check_usage(req.options, req.given, req.scripted, ep)
    if preset is not None and req.options.llm_element is None:
        req = req.replace(llm_element="gateway_compat")  # a preset run's element
    params = model_params(req, src, ep)
    ctx = run_context(req, ep)
    # the built environment's catalogue (its worker's, as --catalogue prints), else the
    # plugin's committed one
    cat = recorded_catalogue(src) or src.catalogue()
    src.check_plan(doc, cat, ctx)
    cells = src.expand(doc, cat, ctx)
    if req.scripted:  # a script by role names the plan's roles, each with its own model
        from agentprov_core.live.scripted.script import check_roles, load_script

        check_roles(load_script(req.options.llm_script),
                    dict(doc.inspect.judges) if doc.inspect is not None else {})
    # ---- step 2: live status gate, backend and defence refusals, the environment
    part = parts().get(meta.name)
    status = part.live_status if part is not None else meta.live_status
    if not req.scripted and LIVE_ORDER.get(status, 0) < LIVE_ORDER["partial"]:
        raise AgentprovError("run.unsupported.planned", source=meta.name,
                             part=part.label if part else meta.label)
    if req.options.temperature_policy == "inject":
        raise AgentprovError("run.unsupported.temperature_policy", source=meta.name,
                             policy="inject")
    src.refusals(doc, cat, ctx)
    if not estimate:  # an estimate runs nothing: any preset plans its time
        presetrun.check_gate(preset, req.options, meta.name)
    element = req.options.element
    if ep is not None and element in checks.LOCAL_ONLY_ELEMENTS:  # the class as the flag,
        # the setting and the registry decide it (.env is read at step 3, after the caps)
        checks.check_element_scope(element, ep.name, endpoint_class(req, ep), meta.name)
    # the whole registry checked (exit 2 naming file, line, field and fix) before the
    # environment, whose marker would otherwise blame a rebuild for the registry's typo
    entry = defmod.check(meta.name, meta.backend, doc.defence, src.suites_of_plan(cells),
                         defmod.load_registry(suites_of=suites_of_backend),
                         paths.display(paths.defence_registry()),
                         wire=wire or "openai",
                         agent_endpoint=ep.name if ep is not None else None,
                         defence_endpoint=req.options.defence_endpoint)
    check_mapper(meta)
    # an estimate plans before a build as after it: from the catalogue a run plans with
    env_id, identity = (environments.planned_identity if estimate
                        else environments.backend_identity)(meta)
    if entry is not None and entry.assets and \
            identity["identity_sha256"] != environments.NOT_BUILT:  # its pinned files
        from agentprov_core.backend import defassets

        defassets.require_provisioned(entry, environments.read_marker(meta, env_id),
                                      environments.environment_dir(env_id), meta.backend)
    # ---- step 3: a restricted corpus under $AGENTPROV_HOME; API caps before any key is
    # read; the key, the endpoint URL, the containment
    if not estimate:
        restricted.check_location(meta, req.options.corpus)
    resolved = containment = None
    stand_in = estimate and estimate_stand_in(req, ep)
    if estimate and ep is not None and not stand_in:
        resolved = check_key_and_url(req.replace(preflight_only=True),
                                     ep)  # the key's presence; no caps needed
    elif ep is not None and not estimate:
        check_caps(req, endpoint_class(req, ep))
        if req.options.model_id:  # a local server's model is picked at step 4
            check_judges(src, req, doc, req.options.model_id)
        resolved = check_key_and_url(req, ep)
        # .env may move a local entry's base URL off loopback: class api, refused the same
        checks.check_element_scope(element, ep.name, resolved.endpoint_class, meta.name)
        containment = check_containment(req, meta, env_id)
    # ---- step 4: a local server: list, fingerprint, observe the model's identity
    local_identity = None
    if ep is not None and ep.local and resolved is not None:
        from agentprov_core.base import timing

        with timing.span("prepare.observe_local"):
            local_identity, local_record, local_options = observe_local(req, ep, resolved)
        check_judges(src, req, doc, local_record["model_id"])
        model_facts = factsmod.resolve(req.options.fact_flags(), ep.name,
                                       local_record["model_id"], preset)
    else:
        local_record = local_options = model_facts = None
    preset_plan = None
    if preset is not None and not estimate:  # the preset's plan: jobs, stagger, timeout
        if model_facts is None:  # no server observed (never for a run): the flags' facts
            model_facts = factsmod.resolve(req.options.fact_flags(), ep.name,
                                           req.options.model_id, preset)
        preset_plan = presetrun.plan(preset, model_facts, req.options, req.given,
                                      meta.name)
        req = req.replace(jobs=preset_plan.jobs, start_stagger=preset_plan.start_stagger_s)
        params = with_timeout(params, preset_plan.request_timeout_s)
    # ---- step 5: the attack cache's identity (the environment's is the worker's hello)
    attack_cache = check_attack_cache(req, doc, cat, cells)
    # ---- step 6: the plan
    plan = make_plan(src, req, doc, cat, cells, None if stand_in else ep, env_id, identity,
                     resolved, params, local_record)
    if attack_cache is not None:
        attack_cache.same_as_plan(plan.content)
    return Prepared(src, req, doc, cat, cells, ep, plan, identity, params, wire, resolved,
                    containment, local_identity, local_record, local_options, attack_cache,
                    model_facts, preset_plan)


def with_timeout(params: dict[str, Any], timeout_s: int) -> dict[str, Any]:
    """The model parameters with a preset's request timeout, in the place
    :func:`model_params` gives it."""
    policy = {k: params[k] for k in ("temperature_policy",) if k in params}
    rest = {k: v for k, v in params.items() if k not in policy}
    return rest | {"timeout_s": timeout_s} | policy


def estimate_stand_in(req: RunRequest, ep: epmod.Endpoint | None) -> bool:
    """Whether ``agentprov estimate`` plans with the scripted stand-in: a real model with no
    key option (``--keychain``, ``--env-file``, ``--env-stdin``), or a local server (an
    estimate contacts nothing). The plan digest is then the stand-in's, so units the real
    model already settled in the corpus are not recognised (the warning says so)."""
    from agentprov_core.live.keys import CREDENTIALS

    if ep is None:
        return False
    return ep.local or not any(getattr(req.options, name) for name, _ in CREDENTIALS)


def check_attack_cache(req: RunRequest, doc: PlanDoc, cat: Catalogue,
                       cells: list[Cell]) -> Any:
    """Step 5 for ``--attack autodojo``: the cache file verified against the pinned fork
    commit in the fetch cache (exit 3), before anything is staged or spawned; prints
    ``attack cache verified: …`` and how many vectors fall back. None without a cache."""
    if doc.autodojo_cache is None or doc.autodojo_variant is None:
        return None
    import click

    from agentprov_core.plan import cachefile
    from agentprov_core.run import attackcache

    checked = attackcache.check(doc.autodojo_cache, doc.autodojo_variant,
                                cachefile.known_injection_tasks(cat, doc.suites),
                                [c.injection_task_id for c in cells if c.injection_task_id],
                                allow_network=bool(req.options.allow_network),
                                dry_run=bool(req.options.dry_run))
    click.echo(checked.origin.message(), err=True)
    click.echo(checked.fallbacks.line(), err=True)
    return checked


def make_plan(src: Source, req: RunRequest, doc: PlanDoc, cat: Catalogue, cells: list[Cell],
              ep: epmod.Endpoint | None, env_id: str, identity: dict[str, Any],
              resolved: epmod.ResolvedEndpoint | None = None,
              params: dict[str, Any] | None = None,
              local: dict[str, Any] | None = None) -> Plan:
    meta = src.meta
    agent = agent_config(req, ep, resolved, params, local)
    backend = meta.backend or meta.name
    version = src.benchmark_version(doc, cat)
    bconfig = src.backend_config(doc, cat)
    config = config_digest(agent, identity)
    content = plan_content(meta.name, backend, version, doc.defence, bconfig, config)
    attacks = {c.attack for c in cells if c.attack}
    return Plan(
        source=meta.name, backend=backend, environment_id=env_id,
        benchmark_version=version,
        corpus_id=f"{meta.name}-live-{req.options.campaign}"
        if req.options.campaign else None,
        cells=cells, repeats=doc.repeats, defence=doc.defence,
        max_attempts=req.options.max_attempts or 3, settled=0,
        plan_sha256=plan_digest(meta.name, backend, cells, doc, agent, bconfig),
        config_digest=config, content=content, content_digest=content_digest(content),
        named_attacks=sorted(a.name for a in cat.attacks if a.name in attacks and a.names_model),
        display_name=req.options.model_display_name,
    )


def with_worker_catalogue(prepared: Prepared, cat: Catalogue) -> Prepared:
    """Re-expand the plan from the catalogue the backend's worker served (the authority on
    what the installed benchmark holds); a plan it cannot serve is a usage error."""
    if cat == prepared.catalogue:  # the catalogue the plan was made from: the same plan
        return prepared
    src, req = prepared.source, prepared.request
    ctx = run_context(req, prepared.endpoint)
    src.check_plan(prepared.doc, cat, ctx)
    cells = src.expand(prepared.doc, cat, ctx)
    plan = make_plan(src, req, prepared.doc, cat, cells, prepared.endpoint,
                     prepared.plan.environment_id, prepared.identity, prepared.resolved,
                     prepared.params, prepared.local_record)
    return dataclasses.replace(prepared, catalogue=cat, cells=cells, plan=plan)


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
