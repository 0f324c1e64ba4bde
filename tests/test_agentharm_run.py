"""Scripted AgentHarm campaigns end to end: ``agentprov run agentharm`` against the real
inspect-agentharm environment built with the project's fixture dataset (``agentharm_env``).

Each cell is one ``inspect_ai.eval()`` in the worker; the agent and both judges reach the
scripted endpoint through Inspect's own OpenAI-style provider over the recording transport,
so one script answers them all, in arrival order (a scripted cell runs its samples one at a
time). T0 stores the cell's ``.eval`` log and its wire log, and the ``inspect.eval`` mapper
imports the log through Inspect's own reader, with the wire-versus-eval check.

The scripts answer every model call with what the call can use: the agent's first reply
calls the sample's target functions (with no arguments: a tool that needs some
answers with an error, which Inspect records), its second is text; every later reply (a judge's) is ``Answer: No``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT, Result, child_env, snapshot

pytestmark = pytest.mark.slow

VAL = "benchmark/harmful_behaviors_validation.json"


def _cli(env, *args, extra_env=None) -> Result:
    e = child_env() | {"AGENTPROV_HOME": str(env.home), "AGENTPROV_ERROR_FORMAT": "json"}
    e.update(extra_env or {})
    p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                       capture_output=True, text=True, env=e, cwd=ROOT, timeout=900)
    return Result(p.returncode, p.stdout, p.stderr)


def _behaviour(env, sample_id: str) -> dict:
    doc = json.loads((env.home / "fixture" / VAL).read_text())
    return next(b for b in doc["behaviors"] if b["id"] == sample_id)


def _script(path, functions: list[str], judges: int = 6):
    replies = [{"tool_calls": [{"name": f, "arguments": {}} for f in functions]},
               {"content": "Done."}] + [{"content": "Answer: No"}] * judges
    path.write_text(json.dumps(replies))
    return path


def _run(env, corpus, script, samples, *extra) -> Result:
    return _cli(env, "run", "agentharm", "--corpus", corpus, "--campaign", corpus.name,
                "--task", "inspect_evals/agentharm", "--split", "val", "--samples", samples,
                "--message-limit", "10", "--token-limit", "20000", "--time-limit", "600",
                "--judge", "refusal_judge=judge-m", "--judge", "semantic_judge=judge-m",
                "--llm-script", script, *extra)


def _lines(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _aers(corpus) -> list[dict]:
    return [json.loads(p.read_bytes()) for p in sorted(corpus.glob("executions/*/aer.json"))]


@pytest.mark.req("R-25.3", "R-25.4", "R-25.5", "R-25.6", "R-25.7", "R-2.12", "R-25.23",
                 "R-3.6")
def test_a_scripted_campaign_runs_cells_and_imports_their_eval_logs(agentharm_env, tmp_path):
    env = agentharm_env
    functions = _behaviour(env, "46-1")["target_functions"]
    script = _script(tmp_path / "script.json", functions)
    corpus = env.home / "corpora" / "run1"
    r = _run(env, corpus, script, "46-1,46-2", "--cell-size", "1")
    assert r.code == 0, r.out + r.err
    wc = corpus.with_name("run1.partial")
    ledger = _lines(wc / "ledger.jsonl")
    assert [e["status"] for e in ledger] == ["complete", "complete"]  # two cells of one
    assert len({e["cell_key"] for e in ledger}) == 2
    for e in ledger:
        assert e["native_path"].startswith("inspect/") and e["native_path"].endswith(".eval")
        native = wc / "raw" / "sha256" / e["native_sha256"][:2] / e["native_sha256"]
        with zipfile.ZipFile(native) as z:  # the .eval log itself, stored as raw evidence
            assert "header.json" in z.namelist()
        cap = wc / "raw" / "sha256" / e["capture_sha256"][:2] / e["capture_sha256"]
        header = json.loads(cap.read_text().splitlines()[0])
        assert header["cell"]["kind"] == "samples" and len(header["cell"]["samples"]) == 1
        assert header["inspect"]["task"] == "inspect_evals/agentharm"
        assert header["inspect"]["judges"] == {"refusal_judge": "judge-m",
                                               "semantic_judge": "judge-m"}
        assert any(i.startswith("scripted_order@1") for i in header["declared_instrumentation"])
    aers = _aers(wc)
    assert len(aers) == 2
    for aer in aers:
        h, out = aer["header"], aer["outcome"]
        assert (h["mode"], h["producer"]["mapper"]) == ("import", "inspect.eval")
        assert [e["role"] for e in h["evidence"]] == ["inspect_log", "capture"]
        assert h["evidence"][0]["format"].startswith("inspect-eval/")
        assert [(a["id"], a["kind"], a["name"], a["model"]) for a in h["actors"]] == [
            ("judge0", "judge", "refusal_judge", "judge-m"),
            ("judge1", "judge", "semantic_judge", "judge-m")]
        calls = [x for x in aer["records"] if x["kind"] == "model_call"]
        agent = [c for c in calls if "actor" not in c]
        judged = [c for c in calls if c.get("actor") in ("judge0", "judge1")]
        assert len(agent) == 2 and judged and len(agent) + len(judged) == len(calls)
        # the agent's calls at the agent's model, the judges' at theirs, one endpoint
        assert {c["model_requested"] for c in agent} == {"scripted"}
        assert {c["model_requested"] for c in judged} == {"judge-m"}
        assert [t["function"] for t in aer["records"] if t["kind"] == "tool_call"] == functions
        tools = [t for t in aer["records"] if t["kind"] == "tool_call"]
        # each linked to the agent's call that asked for it, with what the tool answered
        # (the empty arguments are refused by the tools that need some: a tool error)
        assert all(t["call_id"] == agent[0]["call_id"] for t in tools)
        assert all(t["error"] or t["result"] is not None for t in tools)
        assert all(c["attempts"] and c["request_sha256"] == c["attempts"][0]["request_sha256"]
                   for c in calls)  # each paired with its wire attempt
        lvn = out["live_vs_native"]
        assert (lvn["checked"], lvn["agree"], lvn["differences"]) == (True, True, []), lvn
        assert out["status"] == "ok" and out["session_status"] == "complete"
        assert [d["code"] for d in aer["records"] if d["kind"] == "decision"] == ["inspect.score"]
    sems = [json.loads(p.read_bytes()) for p in sorted(wc.glob("executions/*/sem.json"))]
    assert all(s["judge_model_calls"] >= 1 and "defence_model_calls" not in s for s in sems)
    for cmd in (["validate", "--strict"], ["recompute", "--dry-run"], ["verify"], ["stats"]):
        got = _cli(env, *cmd, "--corpus", wc)
        assert got.code == 0, (cmd, got.out + got.err)
    assert "2 identical" in _cli(env, "recompute", "--dry-run", "--corpus", wc).out
    # the results table reads the Inspect scores: two samples (one cell each), neither
    # refused (the refusal judge answered "Answer: No"), a mean score in [0, 1]
    got = _cli(env, "stats", wc, "--tables", "results", "--by", "source,suite", "--format",
               "json")
    assert got.code == 0, got.err
    t = json.loads(got.out)["tables"]["results"]
    (row,) = t["rows"]
    assert (t["counted"], t["left_out"], row["kind"], row["units"], row["samples"]) == (
        2, {}, "inspect", 2, 2)
    assert row["group"] == {"source": "agentharm", "suite": "inspect_evals/agentharm"}
    assert row["refusal"]["successes"] == 0 and row["refusal"]["n"] == 2
    assert row["score"]["n"] == 2 and 0.0 <= row["score"]["mean"] <= 1.0


@pytest.mark.req("R-25.35", "R-25.4")
def test_two_samples_without_caps_are_one_cell_of_one_eval(agentharm_env, tmp_path):
    env = agentharm_env
    replies = [{"content": "I will not do that."}] + [{"content": "Answer: Yes"}] * 3
    script = tmp_path / "script.json"
    script.write_text(json.dumps(replies * 2))
    corpus = env.home / "corpora" / "run2"
    r = _run(env, corpus, script, "46-1,46-2")
    assert r.code == 0, r.out + r.err
    wc = corpus.with_name("run2.partial")
    (entry,) = _lines(wc / "ledger.jsonl")
    assert entry["status"] == "complete"
    (aer,) = _aers(wc)
    notes = [n["data"]["id"] for n in aer["records"] if n.get("code") == "inspect.sample"]
    assert notes == ["46-1", "46-2"]
    assert aer["outcome"]["live_vs_native"]["agree"] is True


@pytest.mark.req("R-25.8")
def test_a_sample_that_errors_is_kept_and_makes_its_cell_incomplete(agentharm_env, tmp_path):
    """D-743: a 401 is not retried by Inspect; the sample errors in the harness, is kept and
    imported, the cell ends incomplete and the run exits 1."""
    env = agentharm_env
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"http_error": {"status": 401}}]))
    corpus = env.home / "corpora" / "run3"
    r = _run(env, corpus, script, "46-1", "--max-attempts", "1")
    assert r.code == 1, r.out + r.err
    wc = corpus.with_name("run3.partial")
    (entry,) = _lines(wc / "ledger.jsonl")
    assert entry["status"] == "incomplete" and entry["native_sha256"]
    assert "46-1" in entry["reason"]
    (aer,) = _aers(wc)
    codes = [i["code"] for i in aer["outcome"]["issues"]]
    assert "map.sample_errored" in codes
    (note,) = [n for n in aer["records"] if n.get("code") == "inspect.sample"]
    assert note["data"]["id"] == "46-1" and note["data"]["error"]
    (call,) = [c for c in aer["records"] if c["kind"] == "model_call"]
    assert call["status"] == "error" and call["attempts"][0]["http_status"] == 401
    assert aer["outcome"]["live_vs_native"]["agree"] is True  # one event, one attempt


def _rewrite_eval(env, src, dst, code: str) -> None:
    """Rewrite the .eval log ``src`` to ``dst`` with Inspect's own writer, after running
    ``code`` on ``log`` in the environment's Python."""
    prog = ("import sys\nfrom inspect_ai.log import read_eval_log, write_eval_log\n"
            "log = read_eval_log(sys.argv[1])\n" + code + "\nwrite_eval_log(log, sys.argv[2])\n")
    p = subprocess.run([str(env.env_dir / "bin" / "python"), "-I", "-c", prog, str(src),
                        str(dst)], capture_output=True, text=True, timeout=300,
                       env={"HOME": str(dst.parent), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr


@pytest.mark.req("R-25.5")
def test_the_wire_versus_eval_check_names_what_differs(agentharm_env, tmp_path, monkeypatch):
    """The check is made against the real logs of a cell, then against the same cell's
    .eval log with one model event removed (a wire attempt no event claims) and with one
    request id changed (an event the wire never saw)."""
    from agentprov_inspect_harness.eval_mapper import MAPPER

    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.mapping import LiveEvidence

    env = agentharm_env
    script = _script(tmp_path / "script.json", _behaviour(env, "46-1")["target_functions"])
    corpus = env.home / "corpora" / "run4"
    assert _run(env, corpus, script, "46-1").code == 0
    wc = corpus.with_name("run4.partial")
    (entry,) = _lines(wc / "ledger.jsonl")
    manifest = json.loads((wc / "manifest.json").read_text())
    raw = wc / "raw" / "sha256"
    capture = (raw / entry["capture_sha256"][:2] / entry["capture_sha256"]).read_bytes()
    native = tmp_path / "cell.eval"  # Inspect's writer and reader go by the extension
    native.write_bytes((raw / entry["native_sha256"][:2] / entry["native_sha256"]).read_bytes())
    attempt = Attempt(**{k: v for k, v in entry.items() if k != "line_sha256"})
    monkeypatch.setenv("AGENTPROV_HOME", str(env.home))
    before = snapshot(wc)

    def check(eval_bytes):
        aer = MAPPER.map(LiveEvidence(capture=capture, native=eval_bytes, attempt=attempt,
                                      manifest=manifest))
        return aer.outcome.live_vs_native, [i.code for i in aer.outcome.issues]

    lvn, codes = check(native.read_bytes())
    assert (lvn.checked, lvn.agree) == (True, True) and codes == []
    dropped = tmp_path / "dropped.eval"
    _rewrite_eval(env, native, dropped, "s = log.samples[0]\n"
                  "last = [i for i, e in enumerate(s.events) if e.event == 'model'][-1]\n"
                  "del s.events[last]")
    lvn, codes = check(dropped.read_bytes())
    assert lvn.agree is False and "map.live_native_disagree" in codes
    assert any("is no model event Inspect recorded" in d for d in lvn.differences), lvn
    renamed = tmp_path / "renamed.eval"
    _rewrite_eval(env, native, renamed, "s = log.samples[0]\n"
                  "e = [e for e in s.events if e.event == 'model'][0]\n"
                  "e.call.request['extra_headers']['x-irid'] = 'not-on-the-wire'")
    lvn, _ = check(renamed.read_bytes())
    assert any("has no wire request" in d for d in lvn.differences), lvn
    assert any("is no model event" in d for d in lvn.differences), lvn
    lvn, codes = check(b"PK\x03\x04 not a log")
    assert lvn.checked is False and "map.native_missing" in codes
    assert snapshot(wc) == before  # mapping writes nothing


ROLES_SCRIPT = ROOT / "examples" / "scripts" / "agentharm-roles.json"


@pytest.mark.req("R-8.14", "R-25.4")
def test_the_walk_through_runs_with_a_script_by_role(agentharm_env, tmp_path):
    """docs/running.md's AgentHarm walk-through, with the committed script by role: each
    role's calls take that role's replies, the semantic judge grades the meme and the
    refusal judge each text; nothing is left over. A script with a spare judge reply runs
    the same cells (the spare reply never answers the agent) and reports it."""
    env = agentharm_env
    args = ("--task", "inspect_evals/agentharm", "--split", "val", "--samples", "45-1,45-2",
            "--cell-size", "1", "--message-limit", "10", "--token-limit", "20000",
            "--time-limit", "600", "--judge", "refusal_judge=refusal-judge",
            "--judge", "semantic_judge=semantic-judge")
    corpus = env.home / "corpora" / "walk"
    r = _cli(env, "run", "agentharm", "--corpus", corpus, "--campaign", "walk", *args,
             "--llm-script", ROLES_SCRIPT)
    assert r.code == 0, r.out + r.err
    assert "left over" not in r.err
    wc = corpus.with_name("walk.partial")
    assert [e["status"] for e in _lines(wc / "ledger.jsonl")] == ["complete", "complete"]
    for aer in _aers(wc):
        calls = [x for x in aer["records"] if x["kind"] == "model_call"]
        by_model = {}
        for c in calls:
            by_model.setdefault(c["model_requested"], []).append(c)
        assert {m: len(c) for m, c in by_model.items()} == {
            "scripted": 2, "semantic-judge": 1, "refusal-judge": 1}
        assert [t["function"] for t in aer["records"] if t["kind"] == "tool_call"] == [
            "get_contacts", "create_meme_image", "share_on_pinterest"]
        (score,) = [d for d in aer["records"] if d["kind"] == "decision"]
        assert score["data"]["value"]["refusal"] == 0.0
    spare = json.loads(ROLES_SCRIPT.read_text())
    spare["roles"]["refusal_judge"].append({"content": "Answer: Yes"})
    path = tmp_path / "spare.json"
    path.write_text(json.dumps(spare))
    corpus2 = env.home / "corpora" / "spare"
    r = _cli(env, "run", "agentharm", "--corpus", corpus2, "--campaign", "spare", *args,
             "--llm-script", path)
    assert r.code == 0, r.out + r.err
    notices = [x for x in r.err.splitlines() if "left over" in x]
    assert len(notices) == 2 and all(x.endswith("refusal_judge 1") for x in notices), r.err
    for aer in _aers(corpus2.with_name("spare.partial")):
        (score,) = [d for d in aer["records"] if d["kind"] == "decision"]
        assert score["data"]["value"]["refusal"] == 0.0  # the spare "Yes" answered nobody
