"""``--llm-element gateway_compat`` (D-829): AgentDojo's OpenAI-compatible gateway element,
for runs against a local model server (and the scripted transport, a loopback server).

Refusals (fast): an API endpoint, and a LAN server (class api), are refused before anything
starts (exit 5, decision 8), before any key is read; a local server goes on to consent.
Runs (slow, the real AgentDojo environment): a scripted cell records the element, its
declared retries and role rewrite, and sends the system message as role ``system``; a
loopback llama.cpp stand-in that drops the first model request's connection is asked again
after the element's 10-20 s wait (this is the one test that waits it), and both attempts
are recorded on the wire as one model call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_marker, snapshot

from tests.test_endpoints_consent import BANKING, env_id
from tests.test_local_endpoint_runs import run_on_llamacpp
from tests.test_local_models import CLOSE, FakeServer, ollama_routes

GATEWAY = ("--llm-element", "gateway_compat")
LOCAL = ("--endpoint", "ollama", "--model-id", "llama3.2:latest")
ONE_CELL = ("--suite", "banking", "--user-tasks", "0")


@pytest.mark.req("R-11.53")
@pytest.mark.parametrize("endpoint", [
    ("--model", "openrouter", "--model-id", "openai/gpt-4o-mini"),
    ("--endpoint", "ollama", "--model-id", "m", "--base-url", "http://192.168.1.20:11434/v1",
     "--allow-lan-endpoint")], ids=["api", "lan"])
def test_gateway_compat_is_refused_for_an_endpoint_of_class_api(cli, home, corpora, endpoint):
    """Refused at step 2, with or without --dry-run: before the caps (exit 4), the key
    (exit 3) and the containment (exit 4) would be checked, so none of them is named."""
    make_marker(home, env_id())
    before = snapshot(home)
    for dry in (("--dry-run",), ("--i-consent-to-api-costs",)):
        r = cli("run", "agentdojo", *dry, "--corpus", corpora / "c", "--campaign", "c",
                *BANKING, *endpoint, *GATEWAY)
        assert (r.code, r.error["error"]) == (5, "run.unsupported.llm_element"), r.err
        assert "runs against a local model server (D-829)" in r.error["message"]
        assert "class api" in r.error["message"]
        assert r.error["message"].endswith("Nothing was started and nothing was written.")
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-11.53")
def test_gateway_compat_is_refused_when_env_moves_a_local_entry_off_loopback(cli, home,
                                                                             corpora, tmp_path):
    """The class at step 2 is local (the registry's loopback URL); .env, read at step 3 after
    the caps, moves it to a LAN address: class api, refused the same way (exit 5)."""
    make_marker(home, env_id())
    dotenv = tmp_path / "lan.env"
    dotenv.write_text("OLLAMA_BASE_URL=http://192.168.1.20:11434/v1\n")
    before = snapshot(home)
    r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *BANKING,
            *LOCAL, "--env-file", dotenv, "--allow-lan-endpoint", "--max-calls", "1",
            "--max-cost-usd", "1", "--price-in", "0", "--price-out", "0",
            "--i-consent-to-api-costs", "--containment", "vm", *GATEWAY)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.llm_element"), r.err
    assert "class api" in r.error["message"]
    r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *BANKING,
            *LOCAL, "--env-file", dotenv, "--allow-lan-endpoint", *GATEWAY)
    assert (r.code, r.error["error"]) == (4, "cli.refused.api_caps")  # the caps come first
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-11.53")
def test_gateway_compat_against_a_local_server_goes_on_to_consent(cli, home, corpora, tmp_path):
    make_marker(home, env_id())
    server = FakeServer(ollama_routes(tmp_path))
    try:
        r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *BANKING,
                *LOCAL, "--base-url", server.base_url, "--containment", "vm", *GATEWAY)
    finally:
        server.close()
    assert (r.code, r.error["error"]) == (4, "cli.refused.consent"), r.err
    assert list(corpora.iterdir()) == []


# ------------------------------------------------------------------ runs (real AgentDojo)
def _partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def _stored(corpus: Path) -> tuple[dict, list[dict], list[dict]]:
    """(manifest, the ledger's entries, the first entry's capture records)."""
    root = _partial(corpus)
    entries = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()]
    h = entries[0]["capture_sha256"]
    records = [json.loads(x) for x in
               (root / "raw" / "sha256" / h[:2] / h).read_text().splitlines()]
    return json.loads((root / "manifest.json").read_text()), entries, records


def _aer(corpus: Path) -> dict:
    root = _partial(corpus)
    [x] = [json.loads(x) for x in (root / "executions.jsonl").read_text().splitlines()]
    return json.loads((root / "executions" / x["execution_id"] / "aer.json").read_text())


def _bodies(records: list[dict]) -> list[dict]:
    return [r["body"] for r in records
            if r["kind"] == "wire_request" and r["url"].endswith("/chat/completions")]


@pytest.mark.slow
@pytest.mark.req("R-11.53", "R-11.55", "R-11.56", "R-21.16")
def test_a_scripted_cell_runs_the_gateway_element(e2e_cli, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([
        {"tool_calls": [{"name": "read_file",
                         "arguments": {"file_path": "bill-december-2023.txt"}}]},
        {"content": "I read it; nothing was paid."}]))
    corpus = tmp_path / "g"
    r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "g", *ONE_CELL,
                "--llm-script", script, *GATEWAY, json_errors=False)
    assert r.code == 0, r.out + r.err
    m, [entry], records = _stored(corpus)
    assert m["live"]["llm_element"] == "gateway_compat"
    assert entry["status"] == "complete"
    header = records[0]
    assert header["agent"]["element"] == "GatewayCompatLLM"
    declared = header["declared_instrumentation"]
    assert declared[0].startswith("http_backoff@1 policy: gateway_compat (connection and "
                                  "timeout errors, up to 8 attempts, 10-20 s apart")
    assert "http_backoff@1 policy: stock_sdk" not in declared
    assert any(i.startswith("role_rewrite@1 mode: modify") for i in declared)
    bodies = _bodies(records)
    assert len(bodies) == 2
    for body in bodies:  # the role rewrite: system, never the stock element's developer
        roles = [msg["role"] for msg in body["messages"]]
        assert roles[0] == "system" and "developer" not in roles
    assert [msg["role"] for msg in bodies[1]["messages"]] == ["system", "user", "assistant",
                                                              "tool"]
    starts = [x for x in records if x["kind"] == "model_call_start"]
    assert {x["element"] for x in starts} == {"GatewayCompatLLM"}
    aer = _aer(corpus)
    assert aer["outcome"]["status"] == "ok"
    assert [i for i in aer["header"]["request_modifying"]] == [
        i for i in declared if i.startswith("role_rewrite@1")]


@pytest.mark.slow
@pytest.mark.req("R-11.53", "R-11.55", "R-11.56")
def test_a_dropped_connection_is_asked_again_after_the_wait_and_recorded(e2e_cli, tmp_path):
    """A local server (a llama.cpp stand-in on loopback) that drops the first model request
    without a response: the element waits 10-20 s and asks again; the capture holds both
    wire attempts of the one model call, the first ending in a wire error."""
    from tests.test_real_campaign import answer

    chats: list[dict] = []

    def chat(body: bytes):
        req = json.loads(body)
        probe = any(t["function"]["name"] == "report_probe" for t in req.get("tools") or [])
        if not probe:  # the preflight probe's call is answered; the cell's first is dropped
            chats.append(req)
            if len(chats) == 1:
                return CLOSE
        return 200, answer(req)

    r, corpus = run_on_llamacpp(e2e_cli, tmp_path, chat, *ONE_CELL, *GATEWAY)
    assert r.code == 0, r.out + r.err
    # a real run says the model facts too (none here: no flag, setting or folder)
    assert "model facts: size_gb unknown (no preset);" in r.err
    m, [entry], records = _stored(corpus)
    assert m["live"]["llm_element"] == "gateway_compat" and m["live"]["endpoint_class"] == "local"
    assert entry["status"] == "complete"
    requests = [x for x in records if x["kind"] == "wire_request"]
    first, second = requests[0], requests[1]
    assert first["call_id"] == second["call_id"] == "c1"
    assert (first["attempt_index"], second["attempt_index"]) == (0, 1)
    assert second["first_attempt_id"] == first["attempt_id"]
    [error] = [x for x in records if x["kind"] == "wire_error"]
    assert error["attempt_id"] == first["attempt_id"]
    # the wait between the failed attempt and the next one is the element's, 10 to 20 s
    # (a bound of the behaviour, not of speed: the gap is the sleep plus a loopback request)
    assert 10.0 <= second["t"] - error["t"] < 60.0
    [end] = [x for x in records if x["kind"] == "model_call_end" and x["call_id"] == "c1"]
    assert (end["status"], end["wire_attempts"]) == ("ok", 2)
    assert first["body"] == second["body"]  # asked again, unchanged
    assert first["body"]["messages"][0]["role"] == "system"
    aer = _aer(corpus)
    [call] = [x for x in aer["records"] if x["kind"] == "model_call" and x["call_id"] == "c1"]
    assert call["retries"] == 1 and len(call["attempts"]) == 2
    assert call["element"] == "GatewayCompatLLM"


ELEMENT = """
import json, sys
import openai
from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.types import ChatSystemMessage, ChatUserMessage, text_content_block_from_string
from agentprov_dojo import gateway

waits = []
client = openai.OpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
llm = gateway.element_class()(client, "m", sleep=waits.append)
messages = [ChatSystemMessage(role="system", content=[text_content_block_from_string("s")]),
            ChatUserMessage(role="user", content=[text_content_block_from_string("u")])]
try:
    llm.query("", FunctionsRuntime([]), messages=messages)
    out = "ok"
except Exception as exc:
    out = type(exc).__name__
print(json.dumps({"out": out, "waits": waits}))
"""


@pytest.mark.slow
@pytest.mark.req("R-11.55")
def test_the_elements_retries_in_the_environment(agentdojo_env, tmp_path):
    """The element as the environment installs it, against a loopback server, with its wait
    recorded instead of slept (the one real wait is the run above): a connection that
    always drops is asked 8 times with 7 waits of 10-20 s; an HTTP 500 is raised at once;
    two drops then a reply is 3 requests and a reply."""
    import subprocess

    from conftest import child_env

    from tests.test_real_campaign import answer

    python = agentdojo_env.env_dir / "bin" / "python"
    cases = {"always_drop": lambda n, req: CLOSE,
             "http_500": lambda n, req: (500, {"error": {"message": "boom"}}),
             "drop_twice": lambda n, req: CLOSE if n <= 2 else (200, answer(req))}
    seen = {}
    for name, reply in cases.items():
        calls: list[dict] = []

        def chat(body: bytes, reply=reply, calls=calls):
            calls.append(json.loads(body))
            return reply(len(calls), calls[-1])

        server = FakeServer({("POST", "/v1/chat/completions"): chat})
        try:
            p = subprocess.run([str(python), "-c", ELEMENT, server.base_url],
                               capture_output=True, text=True, env=child_env(), timeout=120)
        finally:
            server.close()
        assert p.returncode == 0, p.stderr
        seen[name] = (json.loads(p.stdout), calls)
    doc, calls = seen["always_drop"]
    assert doc["out"] == "APIConnectionError" and len(calls) == 8
    assert len(doc["waits"]) == 7 and all(10 <= w <= 20 for w in doc["waits"])
    doc, calls = seen["http_500"]
    assert (doc["out"], len(calls), doc["waits"]) == ("InternalServerError", 1, [])
    doc, calls = seen["drop_twice"]
    assert (doc["out"], len(calls), len(doc["waits"])) == ("ok", 3, 2)
    assert [m["role"] for m in calls[-1]["messages"]] == ["system", "user"]
