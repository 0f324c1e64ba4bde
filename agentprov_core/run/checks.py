"""The refusals of a run before anything starts: a corpus that holds another transport,
configuration or plan (exit 4, after the plan), and an LLM element outside its scope
(exit 5, steps 2 and 3)."""

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
    wc = WorkingCorpus.peek(o.corpus)
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
    if o.allow_mixed_config:
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


#: The LLM element that runs against a local model server only (D-829).
LOCAL_ONLY_ELEMENTS = ("gateway_compat",)


def check_element_scope(element: str, endpoint: str | None, cls: str | None,
                        source: str) -> None:
    """``gateway_compat`` runs against a local model server, or the scripted transport (a
    server on loopback); with an endpoint of class api (an API, or a LAN server) it is
    refused before anything starts (exit 5, decision 8). ``cls`` is None for the scripted
    transport. Which sources run the element at all is their ``SourceMeta.llm_elements``
    (AutoDojo and AgentDyn run the native one only: :meth:`Source.refusals`)."""
    if element in LOCAL_ONLY_ELEMENTS and cls == "api":
        raise AgentprovError(
            "run.unsupported.llm_element", source=source, element=element,
            reason=f"The {element} element runs against a local model server (D-829); "
                   f"the {endpoint} endpoint is of class api here (an API, or a server "
                   "that is not on loopback).")
