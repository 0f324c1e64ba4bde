"""The refusals of a run that come after the plan and before anything starts: a corpus that
holds another transport, configuration or plan (exit 4), and what this build cannot run
(exit 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentprov_core.corpus.working import WorkingCorpus
from agentprov_core.errors import AgentprovError

if TYPE_CHECKING:
    from agentprov_core.run.prepare import Prepared


def check_corpus(prepared: Prepared) -> None:
    """Mixed configuration, mixed plan and mixed transport refusals (exit 4), before
    anything starts. A plan whose content digest (what its cells run, apart from which
    cells) the corpus does not hold would run cells the corpus already holds another way:
    refused like another configuration, unless ``--allow-mixed-config``."""
    from agentprov_core.plan.plans import content_differences

    o = prepared.request.options
    wc = WorkingCorpus.peek(o["corpus"])
    if wc is None:
        return
    m = wc.manifest()
    want = "scripted" if prepared.request.scripted else "real"
    # the transport the manifest records (a real run on a fixture dataset is test_only
    # too, so test_only cannot tell); a manifest without one was scripted when test_only
    transport = (m.get("live") or {}).get("transport")
    have = ("scripted" if transport == "scripted" else "real") if transport \
        else "scripted" if m.get("test_only") else "real"
    if have != want:
        raise AgentprovError("cli.refused.mixed_transport", corpus=wc.root, have=have, want=want)
    if o.get("allow_mixed_config"):
        return
    plan = prepared.plan
    digests = set(m.get("config_digests", []))
    if digests and plan.config_digest not in digests:
        raise AgentprovError("cli.refused.mixed_config", corpus=wc.root,
                             have=", ".join(sorted(d[:16] for d in digests)),
                             want=plan.config_digest[:16])
    contents = m.get("plan_contents") or {}
    if contents and plan.content_digest not in contents:
        # name what differs from the recorded content closest to this plan's
        diffs = min((content_differences(c, plan.content) for c in contents.values()),
                    key=len)
        raise AgentprovError("cli.refused.mixed_plan", corpus=wc.root,
                             what="; ".join(diffs) or "another content digest")


def check_supported(prepared: Prepared) -> None:
    """What this build cannot run (exit 5, before consent and before any worker starts):
    another element than the native one, scripted or not (this build's worker runs
    AgentDojo's stock element only, so a campaign recorded as ``gateway_compat`` would
    record an element that never ran; a dry run still plans it). (A defence's own
    endpoint, ``--defence-endpoint``, is refused earlier, with the defence:
    :mod:`agentprov_core.registries.defences`.)

    An Anthropic-style endpoint runs AgentDojo's own AnthropicLLM over an ``AsyncAnthropic``
    client on the recording transport (the event-stream replies read by caps, canary,
    preflight and the mapper). The environment locks anthropic below 1.0: AgentDojo 0.1.35's
    element passes ``temperature`` to ``messages.stream``, which anthropic 1.0.0 and later
    no longer take.

    An Inspect source runs against a real model as against a script: its cells are Inspect
    ``eval()`` calls in its worker, and its preflight probe goes through Inspect's own model
    (D-742, :mod:`agentprov_inspect.probe`)."""
    o = prepared.request.options
    name = prepared.source.meta.name
    if (o.get("llm_element") or "native") != "native":
        raise AgentprovError("run.unsupported.llm_element", source=name,
                             element=o["llm_element"],
                             reason="This build's worker runs AgentDojo's stock element "
                                    "(native) only: a campaign with another element would "
                                    "record an element that never ran (a dry run plans it).")
