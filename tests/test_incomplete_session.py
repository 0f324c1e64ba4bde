"""A session ends ``incomplete`` when the cell completed but its native log is missing or
damaged (R-21.19): the real worker runs a real cell, and a test-only fault removes the
benchmark's log (or cuts it in half) once the cell has run and before its end is judged.
The capture's end says ``incomplete``, T0 ledgers it inconclusive, the mapper raises
``map.native_missing``, and the next run attempts the unit again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"


def _ledger(work: Path) -> list[dict]:
    return [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]


def _capture(work: Path, sha: str) -> list[dict]:
    return [json.loads(x) for x in
            (work / "raw" / "sha256" / sha[:2] / sha).read_text().splitlines()]


@pytest.mark.req("R-21.19", "R-21.17", "R-21.32")
@pytest.mark.parametrize("fault,native_stored", [("remove", False), ("truncate", True)])
def test_a_missing_or_damaged_native_log_ends_the_session_incomplete(e2e_cli, tmp_path,
                                                                      fault, native_stored):
    corpus = tmp_path / "inc"
    work = corpus.with_name("inc.partial")
    args = ("run", "agentdojo", "--corpus", corpus, "--campaign", "inc", "--suite", "banking",
            "--user-tasks", "0", "--llm-script", LIVE_DEMO)
    r = e2e_cli(*args, env={"AGENTPROV_TEST_NATIVE_LOG": fault}, json_errors=False)
    assert r.code == 1, r.out + r.err  # an inconclusive cell
    assert "0 conclusive, 0 inconsistent, 1 inconclusive" in r.out
    (entry,) = _ledger(work)
    assert (entry["status"], entry["conclusive"]) == ("incomplete", False)
    assert (entry["native_sha256"] is not None) is native_stored
    records = _capture(work, entry["capture_sha256"])
    assert records[-1]["kind"] == "end" and records[-1]["status"] == "incomplete"
    assert records[-1]["reason"].startswith("native log none.json: ")
    assert any(i.startswith(f"test_fault@1 native_log: {fault} ")
               for i in records[0]["declared_instrumentation"])  # the fault is on the record
    assert isinstance(records[-1]["utility"], bool)  # the cell itself ran to its verdict
    (row,) = [json.loads(x) for x in (work / "executions.jsonl").read_text().splitlines()]
    assert row["status"] == "ok_with_issues" and "map.native_missing" in row["issues"]
    aer = json.loads((work / "executions" / row["execution_id"] / "aer.json").read_text())
    assert aer["outcome"]["session_status"] == "incomplete"
    assert aer["outcome"]["live_vs_native"]["checked"] is False
    manifest = json.loads((work / "manifest.json").read_text())
    assert any(o.startswith("AGENTPROV_TEST_NATIVE_LOG: ")
               for o in manifest["live"]["test_overrides"])
    again = e2e_cli(*args, json_errors=False)  # no fault: the unit is attempted again
    assert again.code == 0, again.out + again.err
    assert "0 of 1 unit(s) done before" in again.out
    first, second = _ledger(work)
    assert (second["unit"], second["attempt"], second["status"]) == (
        first["unit"], 2, "complete")
