"""The live-status gate (step 2) for a real model: `partial` (and `full`) admit real-model
runs, for the subset the part states; `planned` admits scripted runs only (exit 5). A local
server needs no caps: past the gate, its run goes on to the containment (step 3), never to
the API caps refusal."""

from __future__ import annotations

import pytest
from conftest import make_marker, snapshot

from tests.test_endpoints_consent import BANKING, env_id
from tests.test_local_models import FakeServer, ollama_routes

LOCAL = ("--endpoint", "ollama", "--model-id", "llama3.2:latest")


def with_status(registry, status: str) -> dict[str, str]:
    text = (registry / "parts.toml").read_text()
    old = 'label = "agentdojo · live"\nlive_status = "partial"'
    assert old in text
    (registry / "parts.toml").write_text(
        text.replace(old, f'label = "agentdojo · live"\nlive_status = "{status}"'))
    return {"AGENTPROV_REGISTRY": str(registry)}


@pytest.mark.req("R-1.4", "R-14.6", "R-1.5")
@pytest.mark.parametrize("status,code,error", [
    ("partial", 4, "cli.refused.containment"),
    ("full", 4, "cli.refused.containment"),
    ("planned", 5, "run.unsupported.planned"),
])
def test_a_local_real_model_needs_partial_or_better_and_no_caps(cli, home, corpora, script,
                                                                registry_copy, status, code,
                                                                error):
    make_marker(home, env_id())
    env = with_status(registry_copy, status)
    before = snapshot(home)
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *BANKING, *LOCAL, env=env)
    assert (r.code, r.error["error"]) == (code, error), r.err
    # the API endpoint of the same part: past the gate, its caps are required
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *BANKING, "--model", "openrouter", "--model-id", "m", "--containment", "vm",
            env=env)
    assert (r.code, r.error["error"]) == ((5, "run.unsupported.planned") if status == "planned"
                                          else (4, "cli.refused.api_caps"))
    assert snapshot(home) == before and list(corpora.iterdir()) == []
    # whatever the status, a scripted run passes the gate (to the worker, which a marker
    # alone cannot start)
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *BANKING, "--llm-script", script, env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.worker"), r.err


@pytest.mark.req("R-1.4")
def test_partial_admits_the_stated_subset_only(cli, home, corpora, tmp_path):
    """agentdojo's stated subset is the native LLM element, and gateway_compat against a
    local model server (D-829): both go on to consent against a local server (an API
    endpoint with gateway_compat is refused, tests/test_gateway_compat.py)."""
    make_marker(home, env_id())
    info = cli("info").out
    assert "partial: real-model runs admitted for a stated subset" in info
    server = FakeServer(ollama_routes(tmp_path))
    try:
        args = ("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *BANKING,
                *LOCAL, "--base-url", server.base_url, "--containment", "vm")
        for element in ((), ("--llm-element", "gateway_compat")):
            r = cli(*args, *element)  # no consent flag and no terminal: step 7 refuses
            assert (r.code, r.error["error"]) == (4, "cli.refused.consent")
    finally:
        server.close()
    assert list(corpora.iterdir()) == []
