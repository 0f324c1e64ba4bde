"""A run given a relative ``--corpus`` (resolved against the working directory): the worker
runs in the staging directory, so every path T0 sends it is absolute."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def test_a_relative_corpus_path_runs_its_cells(e2e_cli, tmp_path):
    r = e2e_cli("run", "agentdojo", "--corpus", "rel", "--campaign", "rel", "--suite", "banking",
                "--user-tasks", "0", "--benign", "only", "--llm-script",
                ROOT / "examples" / "scripts" / "live-demo.json", json_errors=False, cwd=tmp_path)
    assert r.code == 0, r.out + r.err
    [entry] = [json.loads(x) for x in (tmp_path / "rel.partial" / "ledger.jsonl")
               .read_text().splitlines()]
    assert entry["status"] == "complete" and entry["conclusive"] is True
