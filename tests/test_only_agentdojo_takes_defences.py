"""`agentdojo` is the only backend that takes `--defence`: every defence of the registry
plans on it (banking, where the Mandate entries run; one that needs assets reaches the
environment step, where its assets are looked for, and MELON's the check of its own
endpoint), and every one is refused on every other
source, before anything starts (in-process `prepare`, steps 1 to 6; the environment
check answers a fixed id)."""

from __future__ import annotations

import pytest
from conftest import ROOT, fake_identity

from agentprov_core.backend import environments
from agentprov_core.errors import AgentprovError
from agentprov_core.registries import defences
from agentprov_core.run import prepare as planning
from agentprov_core.run.runrequest import RunRequest

SCRIPT = str(ROOT / "examples" / "scripts" / "live-demo.json")
BUILDABLE = [d.name for d in defences.load_registry() if not d.replaces_pipeline]


def prepare(source: str, defence: str, **options):
    o = dict(corpus="/tmp/elsewhere/c", campaign="d", llm_script=SCRIPT, defence=defence,
             **options)
    return planning.prepare(RunRequest.of(source, o, set(o)))


@pytest.mark.req("R-3.2")
def test_every_registry_defence_plans_on_agentdojo_only(monkeypatch, landed):
    identity = fake_identity("00000000")

    def built(meta):  # a built environment's identity carries its marker's digest
        env_id, ident = identity(meta)
        return env_id, {**ident, "identity_sha256": "0" * 64}

    monkeypatch.setattr(environments, "backend_identity", built)
    assert len(BUILDABLE) == 10
    entries = {d.name: d for d in defences.load_registry()}
    for defence in BUILDABLE:
        if entries[defence].endpoint:  # past the registry's checks: MELON's own endpoint
            with pytest.raises(AgentprovError) as e:
                prepare("agentdojo", defence, suite=("banking",), user_tasks="0")
            assert (e.value.code, e.value.exit_code) == ("cli.usage.defence_endpoint_missing", 2)
        elif entries[defence].assets:  # past the defence checks: its assets are looked for
            with pytest.raises(AgentprovError) as e:  # in the (here unbuilt) environment
                prepare("agentdojo", defence, suite=("banking",), user_tasks="0")
            assert (e.value.code, e.value.exit_code) == ("cli.environment.backend_missing", 3)
        else:
            p = prepare("agentdojo", defence, suite=("banking",), user_tasks="0")
            assert p.plan.defence == defence
        monkeypatch.setenv("AGENTPROV_BACKENDS", str(landed))  # as once their backends land
        for source in ("autodojo", "agentdyn"):
            with pytest.raises(AgentprovError) as e:
                prepare(source, defence, suite=("banking",), user_tasks="0")
            assert (e.value.code, e.value.exit_code) == ("run.unsupported.defence_backend", 5)
        with pytest.raises(AgentprovError) as e:  # an Inspect task takes no defence at all
            prepare("agentharm", defence, task="inspect_evals/agentharm", samples="limit:1",
                    message_limit=10, token_limit=1000, time_limit=60,
                    judge=("refusal_judge=m", "semantic_judge=m"))
        assert (e.value.code, e.value.exit_code) == ("cli.usage.option_for_other_kind", 2)
        monkeypatch.delenv("AGENTPROV_BACKENDS")
