"""The adaptive start gate on the real path: scripted campaigns through the real AgentDojo
environment against the scripted transport playing a provider's rate limit (a token bucket
answering 429 with Retry-After), asked for with ``--adaptive-jobs on``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow
LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"


def script(tmp_path: Path, name: str, **limit) -> Path:
    replies = json.loads(LIVE_DEMO.read_text())
    path = tmp_path / name
    path.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": 0.2,
                                "rate_limit": limit, "replies": replies}))
    return path


def partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (partial(corpus) / "ledger.jsonl").read_text().splitlines()]


def manifest(corpus: Path) -> dict:
    return json.loads((partial(corpus) / "manifest.json").read_text())


def test_the_gate_backs_off_under_a_rate_limit_and_changes_no_digest(e2e_cli, tmp_path):
    s = script(tmp_path, "limited.json", per_minute=120, burst=3)
    base = ("run", "agentdojo", "--suite", "banking", "--user-tasks", "0-3", "--llm-script", s,
            "--jobs", "4")
    gated = e2e_cli(*base, "--corpus", tmp_path / "g", "--campaign", "g",
                    "--adaptive-jobs", "on", json_errors=False)
    assert gated.code == 0, gated.err
    m = manifest(tmp_path / "g")
    [rec] = m["live"]["gate"]
    assert rec["policy"]["mode"] == "on" and rec["policy"]["why"] == "--adaptive-jobs on"
    assert rec["policy"]["ceiling"] == 4 and rec["decreases_total"] >= 1
    assert rec["signals"]["http 429"] >= 1
    assert rec["decreases"][0]["cause"] == "http 429" and rec["decreases"][0]["from"] == 4.0
    assert max(p[1] for p in rec["trace"]) <= 4  # never above --jobs
    assert m["live"]["quality"]["scripted"]["gate_backoffs"] == rec["decreases_total"]
    assert "  gate     backed off" in gated.err
    assert all(e["status"] == "complete" and e["conclusive"] for e in ledger(tmp_path / "g"))
    # the 429s are in the evidence: the SDK's retries, recorded as wire attempts
    assert m["live"]["quality"]["scripted"]["retries"] >= 1

    plain = e2e_cli(*base, "--corpus", tmp_path / "p", "--campaign", "g", json_errors=False)
    assert plain.code == 0, plain.err
    p = manifest(tmp_path / "p")
    assert "gate" not in p["live"] and "gate_backoffs" not in p["live"]["quality"]["scripted"]
    assert "  gate " not in plain.err
    assert p["config_digests"] == m["config_digests"] and p["plans"] == m["plans"]


def test_a_server_that_answers_429_for_ever_stops_the_run_with_exit_3(e2e_cli, tmp_path):
    s = script(tmp_path, "never.json", per_minute=0, retry_after="1")
    corpus = tmp_path / "n"
    r = e2e_cli("run", "agentdojo", "--suite", "banking", "--user-tasks", "0-9",
                "--llm-script", s, "--jobs", "2", "--cell-timeout", "15", "--adaptive-jobs",
                "on", "--canary", "0", "--corpus", corpus, "--campaign", "n")
    assert r.code == 3, r.err
    err = json.loads(r.err.strip().splitlines()[-1])
    assert (err["error"], err["exit"]) == ("run.environment.rate_limited", 3)
    assert "rate_limited: the endpoint answered nothing but rate limits for 15 s" in r.err
    entries = ledger(corpus)  # the cells in flight were sealed as they ended
    assert 1 <= len(entries) < 10 and all(not e["conclusive"] for e in entries)
    assert len({e["unit"] for e in entries}) == len(entries)
    m = manifest(corpus)
    assert m["partial"] is True and m["stops"][-1]["stop"] == "rate_limited"
    assert m["stops"][-1]["exit"] == 3
    [rec] = m["live"]["gate"]
    assert rec["closed"].startswith("the endpoint answered nothing but rate limits")
    assert err["message"].endswith(f"{10 - len(entries)} unit(s) not started; every attempt "
                                   "made is in the ledger")


def test_an_absurd_retry_after_is_bounded_and_recorded_never_a_hang(e2e_cli, tmp_path):
    s = script(tmp_path, "absurd.json", per_minute=60, burst=2, retry_after="99999999")
    corpus = tmp_path / "a"
    r = e2e_cli("run", "agentdojo", "--suite", "banking", "--user-tasks", "0-1",
                "--llm-script", s, "--jobs", "2", "--cell-timeout", "20", "--adaptive-jobs",
                "on", "--corpus", corpus, "--campaign", "a", json_errors=False)
    assert r.code in (0, 1, 3), r.err
    [rec] = manifest(corpus)["live"]["gate"]
    assert rec["clamped_total"] >= 1
    assert rec["clamped"][0]["value"] == "99999999" and rec["clamped"][0]["why"] == "beyond"
    assert rec["clamped"][0]["pause_s"] == 20.0  # bounded by the cell timeout
