"""PROV derivation and `agentprov validate`: the tiers aer, sem, prov, linkage (and shacl
with --release) over a small synthetic working corpus, run through the real CLI.

The AERs are built directly from the structs of `agentprov_core.evidence.aer`; the corpus is
written the way T0 writes one (raw store, ledger, `Executions.write` and `append_index`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT

from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.store import RawStore
from agentprov_core.evidence import aer as A
from agentprov_core.evidence.executions import Executions, IndexEntry
from agentprov_core.evidence.validation import Problem

CORPUS_ID = "agentdojo-live-demo"
HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------- building a corpus
def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def raw_path(digest: str) -> str:
    return f"raw/sha256/{digest[:2]}/{digest}"


def logs(eid: str) -> tuple[bytes, bytes]:
    capture = json.dumps({"kind": "header", "session_id": eid}).encode() + b"\n"
    native = json.dumps({"native": eid}).encode() + b"\n"
    return capture, native


def make_aer(eid: str, *, failed: bool = False, defence: str = "none",
             evidence: bool = True) -> A.AER:
    """A complete session (2 model calls, 1 tool call), or one that failed in its setup."""
    capture, native = logs(eid)
    ev = [A.Evidence(role="capture", format="capture/0.1", sha256=sha(capture),
                     bytes=len(capture), path=raw_path(sha(capture)), head_sha256="f" * 64),
          A.Evidence(role="native_log", format="agentdojo-native/0.1.35", sha256=sha(native),
                     bytes=len(native), path=raw_path(sha(native)))]
    header = A.Header(
        execution_id=eid, mode="live", source="agentdojo",
        backend=A.Backend(id="agentdojo", environment_id="agentdojo-83217c67",
                          identity_sha256="6" * 64, benchmark_version="v1.2.2"),
        task=A.Task(source="agentdojo", suite="banking", user_task_id="user_task_0",
                    cell_key="banking/user_task_0/none/none", defense_id=defence,
                    unit=f"banking/user_task_0/none/none|{defence}|r0", attempt=1),
        agent=A.Agent(model="scripted", endpoint_kind="scripted",
                      endpoint="http://127.0.0.1:8000/v1", element="OpenAILLM"),
        producer=A.Producer(version="0.1.0", mapper="agentdojo.capture", mapper_version="0.1",
                            test_only=True),
        evidence=ev if evidence else [], started_at="2026-11-29T10:52:16.003218Z",
        ended_at="2026-11-29T10:52:17.5Z", plan_sha256="1" * 64, config_digest="5" * 64)
    if failed:
        records = [A.Decision(code="setup_refusal", text="the model has no display name",
                              t=0.1)]
        outcome = A.Outcome(status="failed", session_status="errored",
                            issues=[A.Issue(code="map.capture_error", detail="errored")],
                            reason="config stop")
    else:
        records = [
            A.ModelCall(call_id="c1", t=0.18, request_sha256="a" * 64, reply_sha256="b" * 64,
                        attempts=[A.WireAttempt(attempt_id="a1", attempt_index=0,
                                                request_sha256="a" * 64,
                                                response_sha256="b" * 64, http_status=200)],
                        reply=A.Message(role="assistant", tool_calls=[A.ToolCallRequest(
                            id="call_0", function="get_iban", arguments={})])),
            A.ToolCall(tool_call_id="call_0", call_id="c1", function="get_iban",
                       arguments={}, result="DE89370400440532013000", t=0.3),
            A.ModelCall(call_id="c2", t=0.5, attempts=[
                A.WireAttempt(attempt_id="a2", attempt_index=0, http_status=500,
                              error_type="InternalServerError"),
                A.WireAttempt(attempt_id="a3", attempt_index=1, http_status=200)], retries=1,
                        reply=A.Message(role="assistant", content="Your IBAN is DE89…")),
        ]
        outcome = A.Outcome(status="ok", session_status="complete", execution_observed=True,
                            utility=True, security=True)
    return A.AER(header=header, records=records, outcome=outcome)


def write_corpus(parent: Path, aers: list[A.AER], *, skip_prov: bool = False) -> Path:
    """A working corpus `<parent>/live-demo.partial` holding ``aers`` as T0 writes them."""
    from agentprov_core.evidence.derive import derive

    root = parent / "live-demo.partial"
    (root / "raw").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps(
        {"format": "agentprov-live-corpus/0.1", "corpus_id": CORPUS_ID}))
    store, ledger, ex = RawStore(root / "raw"), Ledger(root / "ledger.jsonl"), Executions(root)
    for seq, aer in enumerate(aers):
        eid = aer.header.execution_id
        capture, native = logs(eid)
        store.put_bytes(capture)
        store.put_bytes(native)
        ledger.append(Attempt(
            seq=seq, invocation="i", unit=aer.header.task.unit, cell_key="c",
            defence="none", repeat=0, attempt=1, session_id=eid, started_at="t",
            ended_at="t", status="errored" if aer.outcome.status == "failed" else "complete",
            conclusive=True, capture_sha256=sha(capture), native_sha256=sha(native)))
        aer_bytes = A.encode(aer)
        files = {"aer": aer_bytes, **derive(aer, aer_bytes, root, skip_prov=skip_prov)}
        d = ex.write(eid, files)
        v = msgspec.json.decode(files["validation"])
        ex.append_index(IndexEntry(
            execution_id=eid, unit=aer.header.task.unit, ledger_seq=seq,
            mapper="agentdojo.capture", status=aer.outcome.status,
            execution_observed=aer.outcome.execution_observed,
            issues=[i.code for i in aer.outcome.issues], validation=v["status"],
            aer_sha256=d["aer"], sem_sha256=d["sem"], prov_sha256=d.get("prov"),
            validation_sha256=d["validation"], mapped_at="2026-11-29T10:52:18Z"))
    return root


def five() -> list[A.AER]:
    """The spec's example: five executions, four conclusive, one failed in the config stop."""
    return [make_aer(f"s-{i:016x}") for i in range(4)] + [make_aer("s-failed", failed=True)]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpora", five())


def flip(path: Path, at: int = 10) -> None:
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


SPEC_LINE = ("validated 5 execution(s) of agentdojo-live-demo (working) in release mode, "
             "tiers aer,sem,prov,linkage: 5 passed, 0 failed; linkage resolved 5/5 (100.00%); "
             "stored results reproduced 0, differ 0")


# --------------------------------------------------------------------- the summary line
@pytest.mark.req("R-27.2", "R-27.1", "R-27.9")
def test_strict_prints_the_spec_line(cli, corpus: Path):
    r = cli("validate", "--corpus", corpus.with_name("live-demo"), "--strict")
    assert r.code == 0, r.out + r.err
    assert r.out.strip() == SPEC_LINE


@pytest.mark.req("R-27.2")
def test_default_mode_and_json(cli, corpus: Path):
    r = cli("validate", "--corpus", corpus)
    assert r.code == 0, r.out + r.err
    assert r.out.strip() == SPEC_LINE.replace("release mode", "standard mode")
    r = cli("validate", "--corpus", corpus, "--strict", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["format"] == "agentprov-validate-report/0.1"
    assert (doc["executions"], doc["passed"], doc["failed"]) == (5, 5, 0)
    assert doc["linkage"] == {"resolved": 5, "total": 5}
    assert doc["stored_results"] == {"reproduced": 0, "differ": 0}
    assert doc["summary"] == SPEC_LINE


# --------------------------------------------------------------------- tampering is named
@pytest.mark.req("R-27.2")
@pytest.mark.parametrize("name", ["aer", "sem", "prov", "validation"])
def test_a_flipped_byte_is_named(cli, corpus: Path, name: str):
    eid = "s-0000000000000002"
    target = corpus / "executions" / eid / f"{name}.json"
    before = sha(target.read_bytes())
    flip(target)
    after = sha(target.read_bytes())
    r = cli("validate", "--corpus", corpus, "--strict")
    assert r.code == 1, r.out + r.err
    tier = {"validation": "validation"}.get(name, name)
    line = (f"failed: execution {eid} tier {tier} file executions/{eid}/{name}.json: "
            f"the index records sha256 {before}, the file has {after}")
    assert line in r.out.splitlines(), r.out
    assert "5 execution(s)" in r.out and "4 passed, 1 failed" in r.out
    assert all(f"execution {eid}" in x for x in r.out.splitlines() if x.startswith("failed:"))


@pytest.mark.req("R-27.2")
def test_a_flipped_byte_in_a_raw_capture_log_fails_linkage(cli, corpus: Path):
    eid = "s-0000000000000001"
    digest = sha(logs(eid)[0])
    p = corpus / raw_path(digest)
    flip(p, at=3)
    r = cli("validate", "--corpus", corpus, "--strict")
    assert r.code == 1
    assert (f"failed: execution {eid} tier linkage file {raw_path(digest)}: has sha256 "
            f"{sha(p.read_bytes())}, the evidence names {digest}") in r.out.splitlines(), r.out
    assert "4 passed, 1 failed; linkage resolved 4/5 (80.00%)" in r.out
    # the stored validation (made when the log was intact) no longer reproduces
    assert f"execution {eid} tier validation file executions/{eid}/validation.json" in r.out


@pytest.mark.req("R-27.2")
def test_a_missing_raw_file_fails_linkage(cli, corpus: Path):
    eid = "s-failed"
    digest = sha(logs(eid)[1])
    (corpus / raw_path(digest)).unlink()
    r = cli("validate", "--corpus", corpus)
    assert r.code == 1
    assert (f"failed: execution {eid} tier linkage file {raw_path(digest)}: missing from the "
            f"corpus (sha256 {digest})") in r.out.splitlines(), r.out
    assert "linkage resolved 4/5 (80.00%)" in r.out


def test_a_missing_execution_file_is_named(cli, corpus: Path):
    eid = "s-0000000000000000"
    (corpus / "executions" / eid / "sem.json").unlink()
    r = cli("validate", "--corpus", corpus)
    assert r.code == 1
    assert f"failed: execution {eid} tier sem file executions/{eid}/sem.json: missing" in r.out


# --------------------------------------------------------------------- not a corpus
@pytest.mark.req("R-27.2")
def test_not_a_corpus(cli, tmp_path: Path):
    r = cli("validate", "--corpus", tmp_path / "nowhere")
    assert (r.code, r.error["error"]) == (2, "corpus.usage.not_found")
    (tmp_path / "plain").mkdir()
    r = cli("validate", "--corpus", tmp_path / "plain")
    assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus")


def test_exclusive_options(cli, corpus: Path):
    for pair in (("--strict", "--release"), ("--release", "--skip-prov-conformance"),
                 ("--strict", "--skip-prov-conformance")):
        r = cli("validate", "--corpus", corpus, *pair)
        assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive"), pair


# --------------------------------------------------------------------- --release: SHACL
def test_release_runs_the_shacl_tier(cli, corpus: Path):
    r = cli("validate", "--corpus", corpus, "--release")
    assert r.code == 0, r.out + r.err
    assert r.out.strip() == SPEC_LINE.replace("linkage:", "linkage,shacl:")


def test_release_fails_a_graph_that_violates_a_shape(cli, tmp_path: Path):
    # an AER without evidence: its graph passes the prov and linkage tiers, but the AER
    # entity was derived from nothing (shape S7)
    root = write_corpus(tmp_path, [make_aer("s-good"), make_aer("s-bare", evidence=False)])
    r = cli("validate", "--corpus", root, "--strict")
    assert r.code == 0, r.out + r.err
    r = cli("validate", "--corpus", root, "--release")
    assert r.code == 1, r.out + r.err
    assert ("failed: execution s-bare tier shacl file executions/s-bare/prov.json: SHACL "
            "prov-agentprov.ttl: S7: the AER was derived from stored evidence at "
            "<https://agentprov.dev/id/s-bare/aer.json>") in r.out.splitlines(), r.out
    assert "1 passed, 1 failed" in r.out


def test_release_without_its_libraries(monkeypatch, tmp_path: Path):
    from agentprov_core.errors import AgentprovError
    from agentprov_core.evidence import derive, validation

    aer = make_aer("s-x")
    b = A.encode(aer)
    files = derive.derive(aer, b, tmp_path)
    monkeypatch.setitem(sys.modules, "pyshacl", None)
    with pytest.raises(AgentprovError) as e:
        validation.validate(b, files["sem"], files["prov"], tmp_path, release=True)
    assert (e.value.code, e.value.exit_code) == ("validate.environment.release", 3)
    assert "pyshacl" in e.value.message


# --------------------------------------------------------------------- skipping PROV
@pytest.mark.req("R-27.12")
def test_skip_prov_conformance(cli, corpus: Path):
    r = cli("validate", "--corpus", corpus, "--skip-prov-conformance")
    assert r.code == 0, r.out + r.err
    lines = r.out.strip().splitlines()
    assert lines[0] == ("validated 5 execution(s) of agentdojo-live-demo (working) in "
                        "standard mode, tiers aer,sem,linkage (prov skipped): 0 passed, "
                        "0 failed, 5 unvalidated; linkage resolved 5/5 (100.00%); stored "
                        "results reproduced 0, differ 0")
    assert lines[1].startswith("unvalidated: the prov tier was skipped")


@pytest.mark.req("R-27.12")
def test_a_corpus_derived_without_prov_is_unvalidated(cli, tmp_path: Path):
    root = write_corpus(tmp_path, five(), skip_prov=True)
    assert not list(root.glob("executions/*/prov.json"))
    rows = [json.loads(x) for x in (root / "executions.jsonl").read_text().splitlines()]
    assert {(x["validation"], x["prov_sha256"]) for x in rows} == {("unvalidated", None)}
    r = cli("validate", "--corpus", root)
    assert r.code == 0, r.out + r.err
    assert "0 passed, 0 failed, 5 unvalidated" in r.out
    r = cli("validate", "--corpus", root, "--strict")
    assert r.code == 1
    assert "release mode needs it" in r.out


# --------------------------------------------------------------------- the tiers, in process
def _files(aer: A.AER, root: Path) -> tuple[bytes, dict[str, bytes]]:
    from agentprov_core.evidence.derive import derive

    b = A.encode(aer)
    return b, derive(aer, b, root)


def test_aer_tier_names_the_failing_field(tmp_path: Path):
    from agentprov_core.evidence import validation

    b, files = _files(make_aer("s-x"), tmp_path)
    doc = json.loads(b)
    doc["header"]["task"]["attempt"] = "one"
    bad = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    v = validation.validate(bad, files["sem"], files["prov"], tmp_path)
    assert v.status == "failed" and v.execution_id is None
    (problem,) = v.tier("aer").problems
    assert "$.header.task.attempt" in problem.what
    assert [t.status for t in v.tiers] == ["failed", "not_run", "not_run", "not_run"]


def test_prov_tier_needs_every_call_and_the_right_digests(tmp_path: Path):
    from agentprov_core.evidence import validation

    aer = make_aer("s-x")
    store = RawStore(tmp_path / "raw")
    for log in logs("s-x"):
        store.put_bytes(log)
    b, files = _files(aer, tmp_path)
    assert validation.validate(b, files["sem"], files["prov"], tmp_path).status == "passed"
    graph = json.loads(files["prov"])
    del graph["activity"]["apid:s-x/model-call/c2"]
    graph["entity"]["apid:s-x/sem.json"]["agentprov:sha256"] = "0" * 64
    v = validation.validate(b, files["sem"], json.dumps(graph).encode(), tmp_path)
    whats = [p.what for p in v.tier("prov").problems]
    assert any("no activity apid:s-x/model-call/c2 for the model call c2" in w for w in whats)
    assert any("names apid:s-x/model-call/c2" in w for w in whats)  # a dangling reference
    assert any("entity apid:s-x/sem.json (sem.json) carries sha256 " + "0" * 64 in w
               for w in whats)
    assert v.tier("linkage").status == "failed"  # the SEM entity's digest resolves to nothing
    # an identifier of two kinds: the prov library's unification refuses it
    graph = json.loads(files["prov"])
    graph["entity"]["apid:s-x/session"] = {"agentprov:sha256": "0" * 64}
    v = validation.validate(b, files["sem"], json.dumps(graph).encode(), tmp_path)
    assert any("violates PROV-CONSTRAINTS (unification): cannot unify apid:s-x/session"
               in p.what for p in v.tier("prov").problems)
    assert Problem(file="prov.json", what=f"an entity with sha256 {'0' * 64} names no "
                   "agentprov:path") in v.tier("linkage").problems


def test_sem_tier_compares_bytes(tmp_path: Path):
    from agentprov_core.evidence import validation

    b, files = _files(make_aer("s-x"), tmp_path)
    sem = json.loads(files["sem"])
    sem["execution_id"] = "s-y"
    other = json.dumps(sem, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    v = validation.validate(b, other, files["prov"], tmp_path)
    (problem,) = v.tier("sem").problems
    assert problem.what.startswith("differs from the SEM re-derived from the AER")
    assert "$.execution_id" in problem.what


# --------------------------------------------------------------------- determinism
def test_derivation_is_deterministic(tmp_path: Path):
    from agentprov_core.evidence import prov

    for aer in (make_aer("s-x", defence="tool_filter"), make_aer("s-f", failed=True)):
        b, files = _files(aer, tmp_path)
        assert _files(aer, tmp_path)[1] == files
        from agentprov_core.evidence import sem as semmod

        sem = semmod.derive(aer)
        assert prov.derive(aer, b, sem, files["sem"]) == files["prov"]
        assert prov.derive(aer, b, sem, files["sem"]) == files["prov"]
    # across processes (a different hash seed orders sets differently)
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); "
            "import test_prov_validate as t, hashlib; from pathlib import Path; "
            f"b, f = t._files(t.make_aer('s-x', defence='tool_filter'), Path({str(tmp_path)!r})); "
            "print(hashlib.sha256(f['prov'] + f['validation']).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT,
                              check=True).stdout for seed in ("1", "2")}
    assert len(digests) == 1


def test_the_stored_graph_is_what_the_librarys_json_serialiser_writes(tmp_path: Path):
    """The stored PROV bytes are the canonical form of the prov library's own PROV-JSON
    serialisation of the graph (``tests/test_prov_writer.py`` holds the writer to it on
    more graphs); and deriving and validating them never loads the library's format registry
    (which imports rdflib)."""
    from provlib import library_bytes

    from agentprov_core.evidence import sem as semmod

    for aer in (make_aer("s-x", defence="tool_filter"), make_aer("s-f", failed=True)):
        b, files = _files(aer, tmp_path)
        assert files["prov"] == library_bytes(aer, b, semmod.derive(aer), files["sem"])
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); "
            "import test_prov_validate as t; from pathlib import Path; "
            f"t._files(t.make_aer('s-x', defence='tool_filter'), Path({str(tmp_path)!r})); "
            "print(sorted(m for m in sys.modules if m == 'rdflib' or "
            "m.startswith('prov.serializers.provrdf')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_prov_graph_shape(tmp_path: Path):
    """The graph names what docs/formats/prov.md says it names."""
    _, files = _files(make_aer("s-x", defence="tool_filter"), tmp_path)
    g = json.loads(files["prov"])
    assert g["prefix"] == {"agentprov": "https://agentprov.dev/ns#",
                           "apid": "https://agentprov.dev/id/"}
    assert set(g["activity"]) == {
        "apid:s-x/session", "apid:s-x/map", "apid:s-x/derive-sem",
        "apid:s-x/model-call/c1", "apid:s-x/model-call/c1/attempt/0",
        "apid:s-x/model-call/c2", "apid:s-x/model-call/c2/attempt/0",
        "apid:s-x/model-call/c2/attempt/1", "apid:s-x/tool-call/0"}
    capture, native = logs("s-x")
    assert set(g["entity"]) == {"apid:s-x/aer.json", "apid:s-x/sem.json",
                                f"apid:raw/sha256/{sha(capture)}",
                                f"apid:raw/sha256/{sha(native)}"}
    assert set(g["agent"]) == {"apid:agent/agentprov/0.1.0",
                               "apid:agent/environment/agentdojo-83217c67",
                               next(a for a in g["agent"] if "/endpoint/" in a),
                               "apid:agent/defence/tool_filter"}
    assert g["activity"]["apid:s-x/session"]["prov:startTime"] == \
        "2026-11-29T10:52:16.003218+00:00"
    for kind in ("wasGeneratedBy", "used", "wasAssociatedWith", "wasDerivedFrom",
                 "actedOnBehalfOf", "wasInformedBy"):
        assert g[kind], kind
    _, files = _files(make_aer("s-n"), tmp_path)
    assert not any("/defence/" in a for a in json.loads(files["prov"])["agent"])


def test_only_the_prov_librarys_own_warnings_are_problems_of_the_graph(tmp_path: Path,
                                                                       monkeypatch):
    """A warning the prov library raises reading prov.json is a warning of the prov tier;
    any other warning raised meanwhile (a ResourceWarning of an object collected then, or
    another thread's) is not the graph's and leaves the validation as it was."""
    import gc

    from prov.model import ProvDocument

    from agentprov_core.evidence import validation

    b, files = _files(make_aer("s-x"), tmp_path)
    store = RawStore(tmp_path / "raw")
    for log in logs("s-x"):
        store.put_bytes(log)
    clean = validation.validate(b, files["sem"], files["prov"], tmp_path)
    assert clean.status == "passed" and clean.tier("prov").problems == []

    real = ProvDocument.deserialize

    def collects_an_unclosed_file(*a, **kw):
        open(__file__, "rb")  # noqa: SIM115 - unclosed on purpose: its collection warns
        gc.collect()
        return real(*a, **kw)

    monkeypatch.setattr(ProvDocument, "deserialize", staticmethod(collects_an_unclosed_file))
    noisy = validation.validate(b, files["sem"], files["prov"], tmp_path)
    assert noisy.tier("prov").problems == [] and noisy == clean
    monkeypatch.undo()

    graph = json.loads(files["prov"])
    graph["entity"]["apid:s-x/aer.json"]["agentprov:note"] = {"$": "x", "lang": "not a tag!!"}
    v = validation.validate(b, files["sem"], json.dumps(graph).encode(), tmp_path)
    (problem,) = v.tier("prov").problems
    assert problem.level == "warning" and problem.what.startswith(
        "prov library warning: the language tag 'not a tag!!'"), problem
