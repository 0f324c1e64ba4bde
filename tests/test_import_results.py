"""``agentprov import agentdojo``: AgentDojo's own result files into an import-mode corpus,
on AgentDyn's published runs (``runs/`` of ../shared/sources/AgentDyn.git at its pinned
commit, read with ``git archive``; the repository is only read) and on bad input built from
them.

The real runs: four configurations, 1,688 files (``meta-llama_llama-3.3-70b-instruct``: 5
results that record an error, 5 that hold a private-key header; ``gpt-4o-mini-2024-07-18-
camel``: a directory whose files name their pipeline ``…+camel``, 3 without scores;
``gpt-4o-2024-08-06-tool_filter``: a defended configuration; ``gpt-5-mini-2025-08-07-
tool_filter``: 6 results without scores). The corpus is imported once for the module and
read by every tool.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from agentprov_core.base.redaction import KEY_SHAPES
from tests.conftest import agentdyn_sources, snapshot

COMMIT = "5353cf7615b135cace8d07c8f12dac53a16b6db3"
CONFIGS = ("meta-llama_llama-3.3-70b-instruct", "gpt-4o-mini-2024-07-18-camel",
           "gpt-4o-2024-08-06-tool_filter", "gpt-5-mini-2025-08-07-tool_filter")
N_FILES = 648 + 386 + 648 + 6


def extract(dest: Path, configs: tuple[str, ...] = CONFIGS) -> Path:
    """``runs/<config>`` of the pinned commit under ``dest`` (the repository is only read)."""
    repo = agentdyn_sources()
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", COMMIT,
                              *(f"runs/{c}" for c in configs)],
                             capture_output=True, check=True, timeout=300).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, timeout=300)
    return dest / "runs"


def report(r) -> dict:
    return json.loads(r.out)


def key_shaped(files: dict[str, bytes]) -> list[str]:
    return [f"{name}: {what}" for name, data in files.items()
            for what, rx in KEY_SHAPES.items() if rx.search(data)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The four configurations imported into ``corpus``: (runs dir, corpus, first report,
    home)."""
    import sys

    from tests.conftest import child_env

    base = tmp_path_factory.mktemp("import")
    runs = extract(base / "src")
    home = base / "home"
    home.mkdir()
    env = {**child_env(), "AGENTPROV_HOME": str(home), "AGENTPROV_ERROR_FORMAT": "json"}
    corpus = base / "corpora" / "agentdyn-import"
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "import", "agentdojo",
                        str(runs), "--corpus", str(corpus), "--source", "agentdyn",
                        "--format", "json"], capture_output=True, text=True, env=env,
                       timeout=1800)
    return runs, corpus, p


@pytest.mark.req("R-27.2", "R-27.3", "R-27.4", "R-27.11")
def test_agentdyn_runs_import_and_every_corpus_tool_accepts_them(imported, cli):
    runs, corpus, p = imported
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["files"] == N_FILES and rep["imported"] == N_FILES and rep["kept_out"] == []
    assert rep["statuses"] == {"complete": N_FILES - 14, "errored": 5, "incomplete": 9}
    assert rep["configurations"] == 4
    root = Path(str(corpus) + ".partial")
    r = cli("validate", "--corpus", corpus, "--strict")
    assert r.code == 0, r.out + r.err
    assert f"{N_FILES} passed, 0 failed; linkage resolved {N_FILES}/{N_FILES}" in r.out
    r = cli("recompute", "--corpus", corpus, "--dry-run")
    assert r.code == 0, r.out + r.err
    assert f"{N_FILES} identical, 0 changed (explained), 0 unexplained, 0 failed" in r.out
    r = cli("verify", "--corpus", corpus)
    assert r.code == 0, r.out + r.err
    assert "passed with unverified checks; 0 failed, 1 unverified" in r.out
    r = cli("stats", "--corpus", corpus, "--tables", "counts,issues", "--format", "json")
    assert r.code == 0, r.err
    stats = json.loads(r.out)
    counts = stats["tables"]["counts"][0]
    assert counts["source_id"] == "agentdyn" and counts["records"] == N_FILES
    assert counts["status_failed"] == 14 and counts["status_ok"] == N_FILES - 14
    issues = stats["tables"]["issues"]
    assert {i["code"]: i["records"] for i in issues} == {
        "map.result_error": 5, "map.result_incomplete": 9, "map.no_execution_observed": 8}
    # every execution: mode import, its evidence the stored file, its cell the live cell key
    ledger = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()]
    index = [json.loads(x) for x in (root / "executions.jsonl").read_text().splitlines()]
    assert len(ledger) == len(index) == N_FILES
    by_seq = {e["seq"]: e for e in ledger}
    published = {str(f.relative_to(runs)) for f in runs.rglob("*.json")}
    assert {e["native_path"] for e in ledger} == published
    for row in index:
        e = by_seq[row["ledger_seq"]]
        aer = json.loads((root / "executions" / row["execution_id"] / "aer.json").read_bytes())
        h = aer["header"]
        config, suite, user, attack, inj = e["native_path"].removesuffix(".json").split("/")
        cell = f"{suite}/{user}/{attack}/{inj}"
        defence = "tool_filter" if config.endswith("-tool_filter") else (
            "camel" if config.endswith("-camel") else "none")
        assert (h["mode"], h["source"], h["task"]["cell_key"]) == ("import", "agentdyn", cell)
        assert h["task"]["unit"] == e["unit"] == f"{cell}|{defence}|r0"
        assert h["task"]["defense_id"] == defence
        assert h["agent"]["model"] == config.removesuffix(f"-{defence}")
        assert h["agent"]["parameters"]["configuration"] == config
        assert h["producer"]["mapper"] == row["mapper"] == "agentdojo.results"
        [ev] = h["evidence"]
        assert ev["role"] == "native_log" and ev["sha256"] == e["native_sha256"]
        assert ev["path"] == f"raw/sha256/{ev['sha256'][:2]}/{ev['sha256']}"
        original = (runs / e["native_path"]).read_bytes()
        doc = json.loads(original)
        if isinstance(doc.get("utility"), bool):  # the outcome as the benchmark scored it
            assert aer["outcome"]["utility"] == doc["utility"] == e["utility"]
            assert aer["outcome"]["security"] == doc["security"] == e["security"]
        # the index row carries the execution's counts, so an estimate never reads the AER
        calls = sum(1 for r in aer["records"] if r["kind"] == "model_call")
        assert row["counts"]["agent_calls"] == calls and row["counts"]["judge_calls"] == 0
        note = aer["records"][0]
        assert note["code"] == "import.result"
        assert note["data"]["source_sha256"] == hashlib.sha256(original).hexdigest()
        assert note["data"]["pipeline_name"] == doc["pipeline_name"]
    # the pipeline directory names the configuration, not the file's renamed pipeline_name
    camel = [json.loads(p.read_bytes()) for p in (runs / CONFIGS[1]).rglob("*.json")]
    assert {d["pipeline_name"] for d in camel} == {"gpt-4o-mini-2024-07-18+camel"}


@pytest.mark.req("R-12.2")
def test_key_shaped_strings_in_published_results_are_redacted_before_they_are_stored(imported):
    runs, corpus, p = imported
    rep = json.loads(p.stdout)
    shaped = key_shaped({str(f.relative_to(runs)): f.read_bytes()
                         for f in runs.rglob("*.json")})
    # the published runs hold a private-key header (AgentDyn's dailylife injection task 4)
    assert len(shaped) == rep["redacted"] == 6
    root = Path(str(corpus) + ".partial")
    assert key_shaped(snapshot(root)) == []
    assert key_shaped({"stdout": p.stdout.encode(), "stderr": p.stderr.encode()}) == []
    ledger = [json.loads(x) for x in (root / "ledger.jsonl").read_text().splitlines()]
    for line in shaped:
        name = line.split(": ")[0]
        [e] = [x for x in ledger if x["native_path"] == name]
        stored = (root / "raw" / "sha256" / e["native_sha256"][:2] / e["native_sha256"])
        original = (runs / name).read_bytes()
        assert stored.read_bytes() == re.sub(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----",
                                             "…".encode(), original)
        aer = json.loads(next((root / "executions").glob(f"{e['session_id']}/aer.json"))
                         .read_bytes())
        n = len(re.findall(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----", original))
        assert aer["records"][0]["data"]["redacted"] == {"private key": n} and n >= 1
        assert aer["records"][0]["data"]["source_sha256"] == hashlib.sha256(original).hexdigest()


def test_reimporting_the_same_directory_adds_nothing(imported, cli):
    runs, corpus, _ = imported
    root = Path(str(corpus) + ".partial")
    before = snapshot(root)
    r = cli("import", "agentdojo", runs, "--corpus", corpus, "--source", "agentdyn")
    assert r.code == 0, r.err
    assert f"imported 0, already in the corpus {N_FILES}, kept out 0" in r.out
    assert "nothing new: every file is already in the corpus" in r.out
    assert snapshot(root) == before


# ------------------------------------------------------------------------------ bad input
def _result(suite="shopping", user="user_task_0", attack=None, inj=None, **extra) -> dict:
    doc = {"suite_name": suite, "pipeline_name": "local", "user_task_id": user,
           "injection_task_id": inj, "attack_type": attack, "injections": {},
           "messages": [{"role": "user", "content": [{"type": "text", "content": "hi"}]},
                        {"role": "assistant", "content": [{"type": "text", "content": "ok"}],
                         "tool_calls": None}],
           "error": None, "utility": True, "security": False, "duration": 1.0,
           "agentdojo_package_version": "0.1.35"}
    doc.update(extra)
    return doc


def _put(root: Path, rel: str, data: bytes | dict) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return p


def test_bad_files_are_reported_by_name_and_kept_out(tmp_path, corpora, cli):
    logs = tmp_path / "logs"
    good = _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    _put(logs, "local/shopping/user_task_1/none/none.json", b'{"suite_name": "shopping", ')
    _put(logs, "local/shopping/user_task_2/none/none.json", b"[1, 2, 3]")
    _put(logs, "local/shopping/user_task_3/none/none.json", {"samples": [], "eval": {}})
    _put(logs, "README.txt", b"published runs\n")
    _put(logs, "local/shopping/user_task_4/none/none.json", _result(user="user_task_5"))
    _put(logs, "local/shopping/user_task_6/none/none.json",
         _result(user="user_task_6", messages=[{"role": "wizard"}]))
    _put(logs, "local/shopping/user_task_7/none/none.json", b"\xff\xfe not utf-8")
    os.symlink(good, logs / "local/shopping/user_task_0/none/link.json")
    os.mkfifo(logs / "local/shopping/user_task_0/none/fifo.json")
    secret_dir = "sk-" + "Q" * 32
    _put(logs, f"{secret_dir}/shopping/user_task_0/none/none.json", _result())
    corpus = corpora / "bad"
    r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
    assert r.code == 1, r.err
    rep = report(r)
    assert rep["imported"] == 1
    kept = {k["name"]: k["code"] for k in rep["kept_out"]}
    assert kept == {
        "local/shopping/user_task_1/none/none.json": "import.file.malformed",
        "local/shopping/user_task_2/none/none.json": "import.file.other_format",
        "local/shopping/user_task_3/none/none.json": "import.file.other_format",
        "README.txt": "import.file.other_format",
        "local/shopping/user_task_4/none/none.json": "import.file.path_mismatch",
        "local/shopping/user_task_6/none/none.json": "import.file.malformed",
        "local/shopping/user_task_7/none/none.json": "import.file.malformed",
        "local/shopping/user_task_0/none/link.json": "import.file.not_regular",
        "local/shopping/user_task_0/none/fifo.json": "import.file.not_regular",
        "…": "import.file.unsafe_name",
    }
    why = {k["name"]: k["why"] for k in rep["kept_out"]}
    assert "field user_task_id" in why["local/shopping/user_task_4/none/none.json"]
    assert "messages[0]" in why["local/shopping/user_task_6/none/none.json"]
    assert secret_dir not in r.out + r.err
    # the text report names each file and its code
    r2 = cli("import", "agentdojo", logs, "--corpus", corpora / "bad-text")
    assert r2.code == 1
    assert ("kept out: import.file.path_mismatch: local/shopping/user_task_4/none/none.json: "
            "field user_task_id") in r2.out
    # nothing of a kept-out file is stored: the corpus holds the one good file
    root = Path(str(corpus) + ".partial")
    stored = sorted(p.name for p in (root / "raw").rglob("*") if p.is_file())
    assert stored == [hashlib.sha256(good.read_bytes()).hexdigest()]
    assert cli("verify", "--corpus", corpus).code == 0
    assert cli("validate", "--corpus", corpus, "--strict").code == 0


def test_a_directory_with_no_good_file_writes_no_corpus(tmp_path, corpora, cli):
    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_1/none/none.json", b"not json")
    corpus = corpora / "none"
    r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
    assert r.code == 1
    assert [k["code"] for k in report(r)["kept_out"]] == ["import.file.malformed"]
    assert not Path(str(corpus) + ".partial").exists() and not corpus.exists()


def test_a_duplicate_cell_is_kept_out_and_the_first_file_stays(tmp_path, corpora, cli):
    first, second = tmp_path / "a", tmp_path / "b"
    _put(first, "local/shopping/user_task_0/none/none.json", _result())
    _put(second, "local/shopping/user_task_0/none/none.json", _result(duration=2.0))
    _put(second, "local/shopping/user_task_1/none/none.json", _result(user="user_task_1"))
    corpus = corpora / "dup"
    assert cli("import", "agentdojo", first, "--corpus", corpus).code == 0
    r = cli("import", "agentdojo", second, "--corpus", corpus, "--format", "json")
    assert r.code == 1
    rep = report(r)
    assert rep["imported"] == 1
    [k] = rep["kept_out"]
    assert (k["name"], k["code"]) == ("local/shopping/user_task_0/none/none.json",
                                      "import.file.duplicate_cell")
    assert "already holds cell shopping/user_task_0/none/none of configuration local" in k["why"]
    assert cli("verify", "--corpus", corpus).code == 0


def test_refusals_write_nothing(tmp_path, corpora, cli):
    from filelock import FileLock

    from agentprov_core.corpus.working import WorkingCorpus

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    r = cli("import", "nosuch", logs, "--corpus", corpora / "x")
    assert (r.code, r.error["error"]) == (2, "import.usage.unknown_kind")
    r = cli("import", "agentdojo", tmp_path / "missing", "--corpus", corpora / "x")
    assert (r.code, r.error["error"]) == (2, "import.usage.logdir")
    r = cli("import", "agentdojo", logs, "--corpus", corpora / "x", "--source", "nosuch")
    assert (r.code, r.error["error"]) == (2, "import.usage.unknown_source")
    assert snapshot(corpora) == {}
    # a live run's corpus is not an import corpus
    live = WorkingCorpus(corpora / "live.partial")
    live.root.mkdir()
    live.write_manifest({"format": "agentprov-live-corpus/0.1", "working": True,
                         "source": "agentdojo"})
    (live.root / "ledger.jsonl").write_bytes(b"")
    before = snapshot(corpora)
    r = cli("import", "agentdojo", logs, "--corpus", corpora / "live")
    assert (r.code, r.error["error"]) == (4, "import.refused.corpus")
    assert snapshot(corpora) == before
    # a second writer is refused while the first holds the corpus
    corpus = corpora / "busy"
    assert cli("import", "agentdojo", logs, "--corpus", corpus).code == 0
    _put(logs, "local/shopping/user_task_1/none/none.json", _result(user="user_task_1"))
    before = snapshot(corpora)
    with FileLock(str(Path(str(corpus) + ".partial") / ".lock"), timeout=0):
        r = cli("import", "agentdojo", logs, "--corpus", corpus)
    assert (r.code, r.error["error"]) == (4, "cli.refused.corpus_busy")
    assert snapshot(corpora) == before
    # and once it is free, the new file is added to what is there
    r = cli("import", "agentdojo", logs, "--corpus", corpus)
    assert r.code == 0 and "imported 1 (complete 1), already in the corpus 1" in r.out


@pytest.mark.req("R-12.2")
def test_a_secret_looking_value_in_a_result_is_redacted_everywhere(tmp_path, corpora, cli):
    sentinel = "sk-proj-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:40]
    logs = tmp_path / "logs"
    doc = _result(attack="important_instructions", inj="injection_task_0",
                  injections={"vector": f"use the key {sentinel}"})
    doc["messages"] += [
        {"role": "assistant", "content": None,
         "tool_calls": [{"function": "get_key", "args": {"k": sentinel}, "id": "c1"}]},
        {"role": "tool", "content": [{"type": "text", "content": f"key: {sentinel}"}],
         "tool_call_id": "c1", "tool_call": {"function": "get_key", "args": {"k": sentinel},
                                             "id": "c1"}, "error": None}]
    _put(logs, "local/shopping/user_task_0/important_instructions/injection_task_0.json", doc)
    corpus = corpora / "secret"
    r = cli("import", "agentdojo", logs, "--corpus", corpus, "--format", "json")
    assert r.code == 0, r.err
    assert report(r)["redacted"] == 1
    assert cli("validate", "--corpus", corpus, "--strict").code == 0
    assert cli("verify", "--corpus", corpus).code == 0
    written = snapshot(Path(str(corpus) + ".partial"))
    assert not any(sentinel.encode() in data for data in written.values())
    assert sentinel not in r.out + r.err
    [aer] = [json.loads(v) for k, v in written.items() if k.endswith("aer.json")]
    [tool] = [x for x in aer["records"] if x["kind"] == "tool_call"]
    assert tool["result"] == "key: …" and tool["arguments"] == {"k": "…"}
    assert tool["call_id"] == "message-2" and tool["tool_call_id"] == "c1"
    assert aer["records"][0]["data"]["redacted"] == {"openai-style key": 4}


def test_an_entry_a_killed_import_did_not_map_is_mapped_by_the_next(tmp_path, corpora, cli):
    """An import killed between a file's ledger line and its index line (simulated: the
    index line and the execution's files removed) leaves an entry the next import maps."""
    import shutil
    import stat

    logs = tmp_path / "logs"
    _put(logs, "local/shopping/user_task_0/none/none.json", _result())
    corpus = corpora / "killed"
    assert cli("import", "agentdojo", logs, "--corpus", corpus).code == 0
    root = Path(str(corpus) + ".partial")
    index = (root / "executions.jsonl").read_bytes()
    (root / "executions.jsonl").write_bytes(b"")
    ex = next((root / "executions").iterdir())
    for f in ex.iterdir():
        f.chmod(stat.S_IWUSR | stat.S_IRUSR)
    shutil.rmtree(ex)
    r = cli("import", "agentdojo", logs, "--corpus", corpus)
    assert r.code == 0, r.err
    assert "mapped 1 entry(ies) an earlier import ledgered and did not map" in r.out
    assert "already in the corpus 1" in r.out
    assert json.loads((root / "executions.jsonl").read_bytes())["aer_sha256"] == \
        json.loads(index)["aer_sha256"]
    assert cli("verify", "--corpus", corpus).code == 0
