"""Scripted campaigns through the real AgentDojo environment: the working corpus, resume,
the config stop, drain, --limit, --jobs, --keep-staging and the redaction quarantine."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow
LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
DEMO = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
        "--injection-tasks", "0")


def ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (corpus.with_name(corpus.name + ".partial") / "ledger.jsonl")
            .read_text().splitlines() if x.strip()]


def raw(corpus: Path, sha: str) -> bytes:
    return (corpus.with_name(corpus.name + ".partial") / "raw" / "sha256" / sha[:2] / sha).read_bytes()


def executions(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (corpus.with_name(corpus.name + ".partial")
                                    / "executions.jsonl").read_text().splitlines() if x.strip()]


def manifest(corpus: Path) -> dict:
    return json.loads((corpus.with_name(corpus.name + ".partial") / "manifest.json").read_text())


@pytest.mark.req("R-29.12", "R-13.3", "R-21.16", "R-21.17", "R-2.9", "R-8.9", "R-21.14",
                 "R-2.10", "R-2.11", "R-27.6", "R-27.9", "R-21.33", "R-21.24", "R-13.5",
                 "R-13.6", "R-13.7", "R-13.8", "R-13.1", "R-13.4", "R-2.8", "R-2.24", "R-2.25",
                 "R-11.56")
def test_config_stop_then_resume_runs_nothing_twice(e2e_cli, tmp_path):
    corpus = tmp_path / "live-demo"
    args = ("run", "agentdojo", "--corpus", corpus, "--campaign", "demo", *DEMO,
            "--llm-script", LIVE_DEMO)
    first = e2e_cli(*args, json_errors=False)
    assert first.code == 1, first.err
    assert first.out.splitlines()[0] == "agentprov run agentdojo: units=4 plan=4 unit(s) workers=1"
    lines = first.err.splitlines()
    i = lines.index("  units    3 of 4: sealed 2, failed 1")
    assert re.fullmatch(r"run: finished in \d+\.\ds \(exit 1\)", lines[i - 1]), lines[i - 1]
    assert lines[i + 1] == "  issues   map.capture_error x1, map.no_execution_observed x1"
    assert lines[i + 2] == (
        "agentprov run: a cell's setup refused this configuration, so no further cell was "
        "started (every one would fail the same way); fix the option the refusal names and "
        "re-run the same command")
    assert first.out.strip().endswith("3 attempt(s); 2 conclusive, 0 inconsistent, "
                                      "1 inconclusive; 3 derived, 0 failed; 0 of 4 unit(s) "
                                      "done before")
    assert ("notice: setup refusal: banking/user_task_0/important_instructions/injection_task_0: "
            "attack 'important_instructions' names the model, and the pipeline name has no stock "
            "MODEL_NAMES entry: attack_params.model_display_name (--model-display-name) is "
            "required") in lines
    assert not corpus.exists() and corpus.with_name("live-demo.partial").is_dir()
    entries = ledger(corpus)
    assert [e["status"] for e in entries] == ["complete", "complete", "errored"]
    assert entries[2]["setup_refusal"]["code"] == "setup.attack_model_name"
    m = manifest(corpus)
    assert m["partial"] is True and m["test_only"] is True and m["synthetic"] is True
    assert m["producer"]["sandbox"] is None and m["live"]["transport"] == "scripted"
    assert m["live"]["llm_element"] == "native"
    second = e2e_cli(*args, "--model-display-name", "Scripted Model", json_errors=False)
    assert second.code == 0, second.err
    assert second.out.strip().splitlines()[-1] == (
        "agentprov run: 2 attempt(s); 2 conclusive, 0 inconsistent, 0 inconclusive; 2 derived, "
        "0 failed; 2 of 4 unit(s) done before")
    assert "  issues " not in second.err
    entries = ledger(corpus)
    assert len(entries) == 5                       # the failed attempt stays
    conclusive = Counter(e["unit"] for e in entries if e["conclusive"])
    assert set(conclusive.values()) == {1} and len(conclusive) == 4
    # every stored capture is intact, hash-chained, and ends as its ledger entry says
    for e in entries:
        data = raw(corpus, e["capture_sha256"])
        assert hashlib.sha256(data).hexdigest() == e["capture_sha256"]
        records = [json.loads(x) for x in data.splitlines()]
        assert records[0]["kind"] == "header" and records[-1]["kind"] == "end"
        assert records[-1]["status"] == e["status"]
        prev = None
        for line, rec in zip(data.splitlines(), records, strict=True):
            assert rec["prev"] == prev
            prev = hashlib.sha256(line).hexdigest()
        assert prev == e["capture_head_sha256"]
    attacked = [e for e in entries if e["status"] == "complete" and "important" in e["unit"]]
    header = json.loads(raw(corpus, attacked[0]["capture_sha256"]).splitlines()[0])
    assert "model_display_name@1 value: Scripted Model" in header["declared_instrumentation"]
    assert "http_backoff@1 policy: stock_sdk" in header["declared_instrumentation"]
    native = json.loads(raw(corpus, attacked[0]["native_sha256"]))
    assert native["attack_type"] == "important_instructions"
    # every attempt is an execution (the failed one too), mapped from its stored evidence
    index = executions(corpus)
    assert [x["ledger_seq"] for x in index] == [e["seq"] for e in entries]
    assert [x["execution_id"] for x in index] == [e["session_id"] for e in entries]
    assert Counter(x["status"] for x in index) == {"ok": 4, "failed": 1}
    [failed] = [x for x in index if x["status"] == "failed"]
    assert failed["issues"] == ["map.capture_error", "map.no_execution_observed"]
    assert failed["execution_observed"] is False
    assert [x["live_vs_native"] for x in index if x["status"] == "ok"] == ["agree"] * 4
    root = corpus.with_name("live-demo.partial")
    for x in index:
        d = root / "executions" / x["execution_id"]
        assert hashlib.sha256((d / "aer.json").read_bytes()).hexdigest() == x["aer_sha256"]
        aer = json.loads((d / "aer.json").read_text())
        sem = json.loads((d / "sem.json").read_text())
        assert aer["header"]["mode"] == "live" and sem["format"] == "agentprov-sem/0.1"
        assert aer["header"]["producer"]["mapper"] == "agentdojo.capture"
        assert aer["header"]["agent"]["endpoint_kind"] == "scripted"
        assert "http_backoff@1 policy: stock_sdk" in aer["header"]["instrumentation"]
        cap = {ev["role"]: ev for ev in aer["header"]["evidence"]}["capture"]
        assert (root / cap["path"]).is_file()
    refused = json.loads((root / "executions" / failed["execution_id"] / "aer.json").read_text())
    assert refused["records"][0]["kind"] == "decision"
    assert refused["records"][0]["code"] == "setup.attack_model_name"
    attacked_ok = [x for x in index if x["status"] == "ok" and "important" in x["unit"]]
    sem = json.loads((root / "executions" / attacked_ok[0]["execution_id"] / "sem.json")
                     .read_text())
    assert sem["attacked"] is True and isinstance(sem["attack_success"], bool)
    third = e2e_cli(*args, "--model-display-name", "Scripted Model", json_errors=False)
    assert third.code == 0 and "units=0 plan=4" in third.out
    assert len(ledger(corpus)) == 5                # nothing settled ran again
    assert len(executions(corpus)) == 5


@pytest.mark.req("R-21.25", "R-21.31", "R-15.14", "R-21.28")
def test_drain_limit_and_keep_staging(e2e_cli, tmp_path):
    corpus = tmp_path / "d"
    control = tmp_path / "control"
    control.write_text("drain")
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "d", "--suite", "banking",
            "--user-tasks", "0-3", "--llm-script", LIVE_DEMO)
    drained = e2e_cli(*base, "--control-file", control, json_errors=False)
    assert drained.code == 0 and "drained" in drained.err
    assert not corpus.with_name("d.partial").joinpath("ledger.jsonl").exists()
    control.write_text("")
    limited = e2e_cli(*base, "--limit", "1", "--keep-staging", json_errors=False)
    assert limited.code == 0, limited.err
    assert "--limit reached" in limited.err
    entries = ledger(corpus)
    assert len(entries) == 1 and manifest(corpus)["partial"] is True
    kept = corpus.with_name("d.partial") / "staging" / entries[0]["session_id"]
    assert (kept / "capture.jsonl").read_bytes() == raw(corpus, entries[0]["capture_sha256"])
    rest = e2e_cli(*base, "--jobs", "2", json_errors=False)
    assert rest.code == 0, rest.err
    assert "1 of 4 unit(s) done before" in rest.out
    assert Counter(e["unit"] for e in ledger(corpus)) == {
        f"banking/user_task_{i}/none/none|none|r0": 1 for i in range(4)}


@pytest.mark.req("R-21.21")
def test_a_staged_key_quarantines_the_session(e2e_cli, tmp_path):
    script = tmp_path / "leak.json"
    sentinel = "sk-" + "QUARANTINESENTINEL" + "0123456789abcdef"
    script.write_text(json.dumps([{"content": f"here is a key {sentinel}"}]))
    corpus = tmp_path / "q"
    r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "q", "--suite", "banking",
                "--user-tasks", "0", "--llm-script", script, json_errors=False)
    assert r.code == 1, r.err
    assert "quarantined 1" in r.err
    entries = ledger(corpus)
    assert entries[0]["status"] == "quarantined" and entries[0]["capture_sha256"] is None
    root = corpus.with_name("q.partial")
    register = json.loads((root / "quarantine" / f"{entries[0]['session_id']}.json").read_text())
    assert register["code"] == "capture.quarantined"
    assert (root / "staging" / entries[0]["session_id"] / "capture.jsonl").is_file()  # kept
    stored = b"".join(p.read_bytes() for p in (root / "raw").rglob("*") if p.is_file())
    assert sentinel.encode() not in stored
    assert sentinel not in r.out + r.err
    assert sentinel not in json.dumps(register) + (root / "ledger.jsonl").read_text()


@pytest.mark.req("R-2.14", "R-2.26")
def test_a_scripted_corpus_never_takes_a_real_session(e2e_cli, tmp_path):
    corpus = tmp_path / "s"
    assert e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "s", "--suite",
                   "banking", "--user-tasks", "0", "--llm-script", LIVE_DEMO).code == 0
    from tests.test_local_models import FakeServer, ollama_routes

    server = FakeServer(ollama_routes(tmp_path))  # step 4 observes the local model first
    try:
        r = e2e_cli("run", "agentdojo", "--dry-run", "--corpus", corpus, "--campaign", "s",
                    "--suite", "banking", "--user-tasks", "0", "--endpoint", "ollama",
                    "--model-id", "llama3.2:latest", "--base-url", server.base_url,
                    "--containment", "vm")
    finally:
        server.close()
    assert (r.code, r.error["error"]) == (4, "cli.refused.mixed_transport")
