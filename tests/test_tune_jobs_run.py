"""The concurrency sweep and a preset run end to end (slow: the real AgentDojo environment),
against a loopback llama.cpp stand-in whose chat completions follow instructions
(tests/test_real_campaign.py's ``answer``).

A sweep of two arms over a plan of two cells writes a warm-up corpus of one cell, one
working corpus an arm, and tune-jobs.json/md with both arms measured and a recommendation;
re-running the same command reuses both arms: no model call reaches the server, and no
ledger line is added. A run with a preset records it in the manifest's producer block and
every AER's, runs gateway_compat and sends the preset's request timeout in the agent's
parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_local_models import FakeServer, llamacpp_routes
from tests.test_presets import write_preset

TWO_CELLS = ("--suite", "banking", "--user-tasks", "0-1", "--benign", "only")


def serve(tmp_path: Path) -> FakeServer:
    from tests.test_real_campaign import answer

    routes = llamacpp_routes(tmp_path)
    routes[("POST", "/v1/chat/completions")] = lambda body: (200, answer(json.loads(body)))
    return FakeServer(routes)


def chats(server: FakeServer) -> int:
    return sum(1 for _, p, _ in server.requests if p == "/v1/chat/completions")


def ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (corpus / "ledger.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.req("R-11.37", "R-11.39", "R-11.40", "R-11.42", "R-11.51")
def test_a_sweep_measures_each_arm_and_a_rerun_reuses_them(e2e_cli, tmp_path):
    out = tmp_path / "sweep"
    server = serve(tmp_path)
    cmd = ("run", "agentdojo", "--tune-jobs", "2,1", "--endpoint", "llamacpp", "--model-id",
           "m", "--base-url", server.base_url, "--containment", "vm",
           "--i-consent-to-local-run", *TWO_CELLS, "--tune-out", out)
    try:
        r = e2e_cli(*cmd, json_errors=False)
        assert r.code == 0, r.out + r.err
        first_chats = chats(server)
        warm = ledger(out / "warm-up.partial")
        assert len(warm) == 1 and warm[0]["status"] == "complete"  # one unmeasured cell
        arms = {}
        for v in (1, 2):
            entries = ledger(out / f"jobs-{v}.partial")
            assert len(entries) == 2 and all(e["status"] == "complete" for e in entries)
            m = json.loads((out / f"jobs-{v}.partial" / "manifest.json").read_text())
            assert m["live"]["llm_element"] == "gateway_compat"  # the sweep's default
            assert m["corpus_id"] == f"agentdojo-live-tune-jobs-{v}"
            arms[v] = len(entries)
        doc = json.loads((out / "tune-jobs.json").read_text())
        assert doc["format"] == "agentprov-tune-jobs/0.1"
        assert [a["jobs"] for a in doc["arms"]] == [1, 2]
        assert all(a["status"] == "measured" and a["complete"] == 2 and a["traces_per_hour"]
                   for a in doc["arms"])
        assert doc["recommendation"]["jobs"] in (1, 2)
        assert doc["sample"]["cells"] == 2 and doc["host"]["cpus"] >= 1
        assert doc["model"]["model_id"] == "m" and "4 slots" in doc["model"]["server"]
        md = (out / "tune-jobs.md").read_text()
        assert "**Recommendation:** --jobs" in md and "| 2 | measured | 2 | 2 |" in md
        # the same command again: both arms reused, nothing run, nothing added
        r = e2e_cli(*cmd, json_errors=False)
        assert r.code == 0, r.out + r.err
        assert chats(server) == first_chats
    finally:
        server.close()
    for v in (1, 2):
        assert len(ledger(out / f"jobs-{v}.partial")) == arms[v]
    assert len(ledger(out / "warm-up.partial")) == 1
    again = json.loads((out / "tune-jobs.json").read_text())
    assert [a["status"] for a in again["arms"]] == ["reused", "reused"]
    assert [a["traces_per_hour"] for a in again["arms"]] == \
        [a["traces_per_hour"] for a in doc["arms"]]
    assert again["recommendation"] == doc["recommendation"]


@pytest.mark.slow
@pytest.mark.req("R-11.46", "R-11.49", "R-11.50", "R-11.51")
def test_a_preset_run_records_the_preset_and_sends_its_timeout(e2e_cli, agentdojo_env,
                                                               tmp_path):
    write_preset(agentdojo_env.home, "e2e-here")
    server = serve(tmp_path)
    corpus = tmp_path / "p"
    try:
        r = e2e_cli("run", "agentdojo", "--preset", "e2e-here", "--endpoint", "llamacpp",
                    "--model-id", "m", "--base-url", server.base_url, "--containment", "vm",
                    "--i-consent-to-local-run", "--suite", "banking", "--user-tasks", "0",
                    "--benign", "only", "--active-params-b", "1", "--corpus", corpus,
                    "--campaign", "p", json_errors=False)
    finally:
        server.close()
    assert r.code == 0, r.out + r.err
    assert "workers=3" in r.out  # the preset's jobs
    work = corpus.with_name("p.partial")
    m = json.loads((work / "manifest.json").read_text())
    assert m["producer"]["preset"] == "e2e-here"
    assert m["producer"]["preset_plan"]["request_timeout_s"] == 120
    assert m["live"]["llm_element"] == "gateway_compat"
    [entry] = ledger(work)
    assert entry["status"] == "complete", entry
    h = entry["capture_sha256"]
    header = json.loads((work / "raw" / "sha256" / h[:2] / h).read_text().splitlines()[0])
    assert header["agent"]["element"] == "GatewayCompatLLM"
    assert header["agent"]["parameters"]["timeout_s"] == 120  # sent with every call
    [aer_file] = (work / "executions").glob("*/aer.json")
    assert json.loads(aer_file.read_text())["header"]["producer"]["preset"] == "e2e-here"
