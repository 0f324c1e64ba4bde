"""``agentprov import`` past files no AER can hold and over a corpus a fault damaged: a
result file holding a lone surrogate (``"\\ud800"``) is kept out by name like any malformed
file and the others are imported; a corpus that would hold only such files is never
created; an import never leaves a directory with a manifest and no ledger (which every
corpus tool calls "not a corpus"); a corpus whose last ledger line is torn while that
line's execution exists keeps that file out, writes nothing for it and passes on."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import snapshot
from tests.test_import_results import _put, _result, report

SURROGATE = _result(user="user_task_1", messages=[
    {"role": "user", "content": [{"type": "text", "content": "hi \ud800"}]},
    {"role": "assistant", "content": [{"type": "text", "content": "ok"}], "tool_calls": None}])


def test_a_lone_surrogate_keeps_its_file_out_and_the_rest_is_imported(tmp_path, corpora, cli):
    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    _put(logs, "local/shopping/user_task_1/none/none.json", SURROGATE)
    assert b"\\ud800" in (logs / "local/shopping/user_task_1/none/none.json").read_bytes()
    corpus = corpora / "s"
    for _ in range(2):  # the re-run completes the same way: nothing is imported twice
        r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
        assert r.code == 1, r.err
        rep = report(r)
        assert [(k["name"], k["code"]) for k in rep["kept_out"]] == [
            ("local/shopping/user_task_1/none/none.json", "import.file.malformed")]
        assert "surrogate" in rep["kept_out"][0]["why"]
    assert cli("verify", "--corpus", corpus).code == 0
    assert cli("validate", "--corpus", corpus, "--strict").code == 0


def test_only_bad_files_leave_no_directory_behind(tmp_path, corpora, cli):
    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_1/none/none.json", SURROGATE)
    corpus = corpora / "only"
    r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
    assert r.code == 1 and r.code != 70, r.err
    assert [k["code"] for k in report(r)["kept_out"]] == ["import.file.malformed"]
    assert list(corpora.iterdir()) == []


def test_a_new_corpus_holds_its_ledger_before_its_manifest(tmp_path, corpora, cli):
    """Whenever an import stops, a directory with a manifest has a ledger: the ledger is
    created first (empty), then the manifest."""
    from agentprov_core.evidence import importing

    order: list[str] = []

    wc_cls = importing.WorkingCorpus
    real = wc_cls.write_manifest

    def write_manifest(self, manifest):
        order.append("ledger" if self.ledger.path.exists() else "no ledger")
        return real(self, manifest)

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    wc_cls.write_manifest = write_manifest
    try:
        importing.run_import("agentdojo", logs, corpora / "o", "agentdojo")
    finally:
        wc_cls.write_manifest = real
    assert order and order[0] == "ledger", order


def test_a_torn_ledger_line_whose_execution_exists_keeps_that_file_out(tmp_path, corpora,
                                                                        cli):
    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    _put(logs, "local/shopping/user_task_1/none/none.json", _result(user="user_task_1"))
    corpus = corpora / "t"
    assert cli("import", "agentdojo", logs, "--corpus", corpus).code == 0
    root = Path(f"{corpus}.partial")
    ledger = root / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # the last line torn
    torn = json.loads(lines[-1])["native_path"]
    before = snapshot(root)
    r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
    assert r.code == 1 and r.code != 70, r.err
    rep = report(r)
    assert [(k["name"], k["code"]) for k in rep["kept_out"]] == [
        (torn, "import.file.duplicate_cell")]
    assert "torn" in rep["kept_out"][0]["why"]
    assert rep["imported"] == 0
    assert snapshot(root) == before


def test_a_corpus_whose_ledger_is_a_fifo_is_refused_at_once(tmp_path, corpora, cli):
    """The ledger (or index) an import would read replaced by a FIFO: refused at once
    (exit 3, naming it), never waited on, and nothing is written."""
    import os

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    corpus = corpora / "f"
    assert cli("import", "agentdojo", logs, "--corpus", corpus).code == 0
    _put(logs, "local/shopping/user_task_1/none/none.json", _result(user="user_task_1"))
    root = Path(f"{corpus}.partial")
    for name in ("ledger.jsonl", "executions.jsonl"):
        saved = (root / name).read_bytes()
        (root / name).unlink()
        os.mkfifo(root / name)
        before = snapshot(root)
        r = cli("import", "agentdojo", logs, "--corpus", corpus)
        assert (r.code, r.error["error"]) == (3, "cli.environment.corpus"), r.err
        assert name in r.error["message"]
        assert snapshot(root) == before
        (root / name).unlink()
        (root / name).write_bytes(saved)


def test_a_corpus_whose_manifest_is_a_fifo_is_refused_not_rewritten(tmp_path, corpora, cli):
    import os

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    corpus = corpora / "m"
    assert cli("import", "agentdojo", logs, "--corpus", corpus).code == 0
    root = Path(f"{corpus}.partial")
    (root / "manifest.json").unlink()
    os.mkfifo(root / "manifest.json")
    before = snapshot(root)
    r = cli("import", "agentdojo", logs, "--corpus", corpus)
    assert (r.code, r.error["error"]) == (3, "cli.environment.corpus"), r.err
    assert "manifest.json" in r.error["message"]
    assert snapshot(root) == before
