"""A real model on a local server, before and during a run: what a dry run needs (the
containment, and a listing of the server, as a real run does up to consent) and that it
lists the server on loopback without a model call; and stock AgentDojo's own display name
for a local server, `Local model`, which an attack that addresses the model uses.

The servers are loopback stand-ins of Ollama and llama.cpp (tests/test_local_models.py);
the slow tests run the real AgentDojo environment."""

from __future__ import annotations

import json

import pytest
from conftest import make_marker

from tests.test_endpoints_consent import BANKING, env_id
from tests.test_local_models import FakeServer, llamacpp_routes, ollama_routes

LOCAL = ("--endpoint", "ollama", "--model-id", "llama3.2:latest")
MODEL_CALLS = ("/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate")


def model_calls(server: FakeServer) -> list[str]:
    return [path for _, path, _ in server.requests if path in MODEL_CALLS]


def run_on_llamacpp(e2e_cli, tmp_path, chat, *args: str):
    """A consented run of AgentDojo against a llama.cpp stand-in on loopback whose chat
    completions ``chat(body)`` answers: (the result, the corpus)."""
    routes = llamacpp_routes(tmp_path)
    routes[("POST", "/v1/chat/completions")] = chat
    server = FakeServer(routes)
    corpus = tmp_path / "local"
    try:
        r = e2e_cli("run", "agentdojo", "--endpoint", "llamacpp", "--base-url", server.base_url,
                    "--model-id", "m", "--containment", "vm", "--i-consent-to-local-run",
                    "--corpus", corpus, "--campaign", "local", *args, json_errors=False)
    finally:
        server.close()
    return r, corpus


@pytest.mark.req("R-8.20")
def test_a_local_dry_run_needs_the_containment_and_the_server(cli, home, corpora, tmp_path):
    make_marker(home, env_id())
    dry = ("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
           *BANKING, *LOCAL)
    server = FakeServer(ollama_routes(tmp_path))
    try:
        r = cli(*dry, "--base-url", server.base_url)  # no --containment
        assert (r.code, r.error["error"]) == (4, "cli.refused.containment")
        assert server.requests == []  # step 3 refused before step 4 lists the server
        port = server.port
    finally:
        server.close()
    r = cli(*dry, "--base-url", f"http://127.0.0.1:{port}/v1", "--containment", "vm")
    assert (r.code, r.error["error"]) == (3, "run.local.unreachable")  # nobody listens now
    assert list(corpora.iterdir()) == []


@pytest.mark.slow
@pytest.mark.req("R-8.20", "R-8.21")
def test_a_local_dry_run_lists_the_server_and_makes_no_model_call(e2e_cli, tmp_path):
    server = FakeServer(ollama_routes(tmp_path))
    corpus = tmp_path / "c"
    try:
        r = e2e_cli("run", "agentdojo", "--dry-run", "--corpus", corpus, "--campaign", "c",
                    *BANKING, *LOCAL, "--base-url", server.base_url, "--containment", "vm",
                    "--plan-json")
    finally:
        server.close()
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["units"] == 4 and doc["corpus_id"] == "agentdojo-live-c"
    paths = [path for _, path, _ in server.requests]
    assert "/v1/models" in paths and "/api/tags" in paths  # listed and fingerprinted
    assert model_calls(server) == []  # and no model call
    assert not corpus.exists() and not corpus.with_name("c.partial").exists()


@pytest.mark.slow
@pytest.mark.req("R-13.9")
def test_an_attack_addresses_a_local_model_as_local_model(e2e_cli, tmp_path):
    """On a local server the pipeline is AgentDojo's own `local`, whose stock display name
    is `Local model`: an attack that names the model needs no --model-display-name, and the
    injection the model reads addresses it so."""
    from tests.test_real_campaign import answer

    bodies: list[dict] = []

    def chat(body: bytes):
        bodies.append(json.loads(body))
        return 200, answer(bodies[-1])

    r, corpus = run_on_llamacpp(e2e_cli, tmp_path, chat, "--suite", "banking",
                                "--user-tasks", "0", "--attack", "important_instructions",
                                "--injection-tasks", "0", "--benign", "exclude")
    assert r.code == 0, r.out + r.err
    assert "setup refusal" not in r.err
    work = corpus.with_name("local.partial")
    [entry] = [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]
    assert entry["status"] == "complete" and entry["setup_refusal"] is None
    h = entry["capture_sha256"]
    header = json.loads((work / "raw" / "sha256" / h[:2] / h).read_text().splitlines()[0])
    assert header["agent"]["pipeline_name"] == "local"
    assert not any("model_display_name" in i for i in header["declared_instrumentation"])
    tool_results = [m for b in bodies for m in b["messages"] if m.get("role") == "tool"]
    assert tool_results, bodies
    assert any("to you, Local model." in json.dumps(m) for m in tool_results)
