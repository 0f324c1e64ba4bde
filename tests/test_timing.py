"""The debug timer (``AGENTPROV_DEBUG_TIMING``, agentprov_core/base/timing.py): off by default, and
on, one line per span of T0, of the worker, its forkserver and its cells, in one file outside
the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"


def test_off_by_default_a_span_writes_nothing(tmp_path, monkeypatch):
    from agentprov_core.base import timing

    monkeypatch.setattr(timing, "_path", None)
    with timing.span("x", session="s"):
        pass
    timing.emit("y", 1.0)
    assert not timing.enabled() and timing.worker_env(tmp_path) == {}
    timing.absorb(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_on_spans_and_a_workers_file_are_appended(tmp_path, monkeypatch):
    from agentprov_core.base import timing

    out = tmp_path / "t.jsonl"
    monkeypatch.setattr(timing, "_path", str(out))
    with timing.span("outer", session="s-1"):
        timing.emit("instant", 5.0, 5.0)
    worker_tmp = tmp_path / "w"
    worker_tmp.mkdir()
    env = timing.worker_env(worker_tmp)
    Path(env[timing.VARIABLE]).write_text('{"span": "worker.fork", "t0": 1, "t1": 2}\n')
    timing.absorb(worker_tmp)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["span"] for x in lines] == ["instant", "outer", "worker.fork"]
    assert lines[1]["session"] == "s-1" and lines[1]["t1"] >= lines[1]["t0"]


@pytest.mark.slow
def test_a_run_with_the_timer_records_every_process_and_keeps_it_out_of_the_corpus(
        e2e_cli, tmp_path):
    out = tmp_path / "timing.jsonl"
    corpus = tmp_path / "c"
    r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "t", "--suite", "banking",
                "--user-tasks", "0", "--benign", "only", "--llm-script", LIVE_DEMO,
                env={"AGENTPROV_DEBUG_TIMING": str(out)}, json_errors=False)
    assert r.code == 0, r.err
    spans = [json.loads(x) for x in out.read_text().splitlines()]
    names = {s["span"] for s in spans}
    assert {"t0.run", "prepare", "check", "campaign.open", "live.start", "launch", "submit",
            "ingest", "map", "campaign.close", "campaign.finish", "worker.start",
            "worker.close", "worker.main", "worker.request", "worker.fork", "worker.join",
            "forkserver.preload", "cell.child"} <= names, names
    assert len({s["pid"] for s in spans}) >= 4  # T0, two workers, a forkserver, a cell
    sid = next(s["session"] for s in spans if s["span"] == "submit")
    child = next(s for s in spans if s["span"] == "cell.child")
    assert child["session"] == sid and child["t1"] > child["t0"]
    text = out.read_text()
    assert "bill-december-2023" not in text  # names and times, never a reply
    part = corpus.with_name("c.partial")
    assert not [p for p in part.rglob("*") if "timing" in p.name]
