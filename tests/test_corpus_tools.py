"""The corpus tools `verify`, `stats`, `package` and `recompute`, through the real CLI, over a
small synthetic working corpus written the way T0 writes one.

The corpus (built in `tmp_path`, never read from elsewhere) is the specification's example:
five executions of agentdojo under the live profile, four conclusive and one failed in a
config stop (a setup refusal, no model call). Capture logs are written by the real
`agentprov_capture.CaptureWriter`, stored in the raw
store beside a native log, ledgered through `Ledger.append`; each AER is built from the
structs of `agentprov_core.evidence.aer`, its SEM, PROV and validation derived by
`agentprov_core.evidence.derive.derive`, and written by `Executions.write` and
`append_index`. The fault tests change one thing at a time and assert where `verify` says
it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import agentprov_capture as capture
import msgspec
import pytest
from conftest import snapshot

from agentprov_core import __version__
from agentprov_core.corpus import selfdigest
from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.store import RawStore
from agentprov_core.corpus.working import WorkingCorpus, unit_key
from agentprov_core.evidence import aer as A
from agentprov_core.evidence.executions import Executions, IndexEntry


def _mapper_version() -> str:
    """The installed agentdojo.capture's version (the AERs here claim to be its work)."""
    try:
        from agentprov_core.mapping import mapper_for

        return str(mapper_for("capture/0.1").version)
    except Exception:  # the mapper is not installed: recompute then explains nothing by it
        return "1"


MAPPER_VERSION = _mapper_version()

PLAN = "1" * 64
CONFIG = "2" * 64
ENV_ID = "agentdojo-83217c67"
IDENTITY = "6" * 64
CORPUS_ID = "agentdojo-live-demo"
MANIFEST = {
    "format": "agentprov-live-corpus/0.1", "corpus_id": CORPUS_ID, "source": "agentdojo",
    "profile": "agentdojo-live@3", "registry_parts": "live", "backend": "agentdojo",
    "working": True, "test_only": True, "synthetic": True, "partial": False,
    "created_at": "2026-11-29T10:52:06.836005Z", "updated_at": "2026-11-29T10:52:17.114498Z",
    "plans": [PLAN], "config_digests": [CONFIG],
    "backend_identity": {"environment_id": ENV_ID, "identity_sha256": IDENTITY},
    "producer": {"agentprov": "0.1.0", "python": "3.11.7", "sandbox": None},
    "live": {"transport": "scripted", "endpoint_class": None, "llm_element": "native"},
    "stops": [{"at": "2026-11-29T10:52:17.114546Z", "exit": 1, "stop": "config"}],
}
# (user task, attack, conclusive): the example's four conclusive cells and the config stop
CELLS = [("user_task_0", None, True), ("user_task_1", None, True),
         ("user_task_0", "important_instructions", False),
         ("user_task_0", "important_instructions", True),
         ("user_task_1", "important_instructions", True)]
REPLY = b'{"id":"r","choices":[{"message":{"role":"assistant","content":"Done: 1810.0"}}]}'


def _cell(task: str, attack: str | None) -> dict:
    inj = "injection_task_0" if attack else None
    key = f"banking/{task}/{attack or 'none'}/{inj or 'none'}"
    return {"suite": "banking", "user_task_id": task, "attack": attack,
            "injection_task_id": inj, "cell_key": key}


def _session(path: Path, session: str, cell: dict, unit: str, attempt: int,
             conclusive: bool) -> None:
    w = capture.CaptureWriter(path, {
        "session_id": session, "cell": cell, "unit": unit, "attempt": attempt,
        "backend": {"environment_id": ENV_ID, "identity_sha256": IDENTITY},
        "plan_sha256": PLAN, "config_digest": CONFIG, "source": "agentdojo",
        "benchmark_version": "v1.2.2", "test_only": True,  # as the worker writes them
        "declared_instrumentation": ["recording_transport@1 mode: observe"]}, durable=False)
    if not conclusive:
        w.append("note", code="session.setup_refused", text="the attack names the model")
        w.end("errored", reason="setup refusal")
        return
    w.append("model_call_start", call_id="c1", element="OpenAILLM", model="scripted")
    w.append("wire_request", attempt_id="a1", call_id="c1", first_attempt_id="a1",
             method="POST", url="http://127.0.0.1:9/v1/chat/completions",
             headers=[("Content-Type", "application/json")],
             **capture.body_fields(b'{"model":"scripted","messages":[]}'))
    w.append("wire_response", attempt_id="a1", call_id="c1", status=200,
             headers={"content-type": "application/json"}, **capture.body_fields(REPLY))
    w.append("model_call_end", call_id="c1", status="ok")
    w.append("tool_result", tool="get_balance", arguments={}, result="1810.0", error=None)
    w.append("environment_digest", name="post", sha256="3" * 64)
    w.end("complete", reason=None, utility=True, security=False, calls=1)  # as the worker


def _aer(a: Attempt, cell: dict, cap: str, head: str, cap_bytes: int, native: str | None,
         native_bytes: int, started_at: str) -> A.AER:
    evidence = [A.Evidence(role="capture", format="capture/0.1", sha256=cap, bytes=cap_bytes,
                           path=f"raw/sha256/{cap[:2]}/{cap}", head_sha256=head)]
    if native:
        evidence.append(A.Evidence(role="native_log", format="agentdojo-native/0.1.35",
                                   sha256=native, bytes=native_bytes,
                                   path=f"raw/sha256/{native[:2]}/{native}"))
    header = A.Header(
        execution_id=a.session_id, mode="live", source="agentdojo",
        backend=A.Backend(id="agentdojo", environment_id=ENV_ID, identity_sha256=IDENTITY,
                          benchmark_version="v1.2.2"),
        task=A.Task(source="agentdojo", suite="banking", user_task_id=cell["user_task_id"],
                    injection_task_id=cell["injection_task_id"], attack=cell["attack"],
                    cell_key=cell["cell_key"], unit=a.unit, attempt=a.attempt),
        agent=A.Agent(model="scripted", endpoint_kind="scripted", element="OpenAILLM"),
        instrumentation=["recording_transport@1 mode: observe"],
        producer=A.Producer(version=__version__, mapper="agentdojo.capture",
                            mapper_version=MAPPER_VERSION, test_only=True),
        evidence=evidence, plan_sha256=PLAN, config_digest=CONFIG,
        started_at=started_at, ended_at=a.ended_at)
    if not a.conclusive:
        return A.AER(header=header, records=[A.Note(code="session.setup_refused",
                                                    text="the attack names the model")],
                     outcome=A.Outcome(status="failed", session_status="errored",
                                       issues=[A.Issue(code="map.capture_error"),
                                               A.Issue(code="map.no_execution_observed")]))
    rsha = hashlib.sha256(REPLY).hexdigest()
    records = [
        A.ModelCall(call_id="c1", element="OpenAILLM", model_requested="scripted",
                    reply_sha256=rsha, served_model="scripted", finish_reason="stop",
                    reply=A.Message(role="assistant", content="Done: 1810.0"),
                    attempts=[A.WireAttempt(attempt_id="a1", attempt_index=0,
                                            response_sha256=rsha, http_status=200)]),
        A.ToolCall(function="get_balance", arguments={}, result="1810.0"),
        A.EnvironmentDigest(name="post", sha256="3" * 64)]
    return A.AER(header=header, records=records, outcome=A.Outcome(
        status="ok", session_status="complete", execution_observed=True, utility=True,
        security=False, live_vs_native=A.LiveVsNative(checked=True, agree=True,
                                                      compared=["messages"])))


def build_corpus(base: Path, name: str = "live-demo") -> Path:
    """The example corpus at ``base/name.partial``; returns its root."""
    from agentprov_core.evidence import validated
    from agentprov_core.evidence.derive import derive_attested
    from agentprov_core.evidence.live_mapping import _validation_status
    from agentprov_core.evidence.sem import verdict

    root = base / f"{name}.partial"
    root.mkdir(parents=True)
    wc = WorkingCorpus(root)
    wc.write_manifest(MANIFEST)
    store, ledger, ex = RawStore(root / "raw"), Ledger(root / "ledger.jsonl"), Executions(root)
    staging = base / f".staging-{name}"
    staging.mkdir()
    for seq, (task, attack, conclusive) in enumerate(CELLS):
        cell = _cell(task, attack)
        unit = unit_key(cell["cell_key"], "none", 0)
        attempt = 2 if (attack and conclusive and task == "user_task_0") else 1
        session = f"s-{seq:04d}abcdef0123"
        path = staging / f"{session}.jsonl"
        _session(path, session, cell, unit, attempt, conclusive)
        data = path.read_bytes()
        head = hashlib.sha256(data.rstrip(b"\n").rsplit(b"\n", 1)[-1]).hexdigest()
        cap = store.put_bytes(data)
        native = native_size = None
        if conclusive:
            nb = json.dumps({"suite": "banking", "user_task": task, "utility": True,
                             "security": False, "session": session}).encode()
            native, native_size = store.put_bytes(nb), len(nb)
        a = Attempt(seq=seq, invocation="1099cb0463c1", unit=unit, cell_key=cell["cell_key"],
                    defence="none", repeat=0, attempt=attempt, session_id=session,
                    started_at=f"2026-11-29T10:52:{10 + seq:02d}.000000Z",
                    ended_at=f"2026-11-29T10:52:{11 + seq:02d}.000000Z",
                    status="complete" if conclusive else "errored", conclusive=conclusive,
                    capture_sha256=cap, capture_head_sha256=head,
                    capture_records=len(data.splitlines()), native_sha256=native,
                    native_path="native/x.json" if native else None,
                    utility=True if conclusive else None,
                    security=False if conclusive else None,
                    reason=None if conclusive else "setup refusal", calls=1 if conclusive else 0,
                    plan_sha256=PLAN, config_digest=CONFIG)
        ledger.append(a)
        record = _aer(a, cell, cap, head, len(data), native, native_size or 0,
                      json.loads(data.split(b"\n", 1)[0])["started_at"])  # the mapper's
        aer_bytes = A.encode(record)
        files, attested = derive_attested(record, aer_bytes, root)
        d = ex.write(session, {"aer": aer_bytes, **files})
        ex.append_index(IndexEntry(
            execution_id=session, unit=unit, ledger_seq=seq, mapper="agentdojo.capture",
            status=record.outcome.status, execution_observed=record.outcome.execution_observed,
            issues=sorted({i.code for i in record.outcome.issues}),
            live_vs_native=verdict(record), validation=_validation_status(files["validation"]),
            aer_sha256=d["aer"], sem_sha256=d["sem"], prov_sha256=d.get("prov"),
            validation_sha256=d["validation"], mapped_at=a.ended_at))
        validated.append(root, [attested])  # as T0 records a clean validation
    shutil.rmtree(staging)
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def corpus(pristine: Path, tmp_path: Path) -> Path:
    """A private copy of the example corpus (the tests damage it)."""
    root = tmp_path / "corpora" / pristine.name
    shutil.copytree(pristine, root)
    return root


# ----------------------------------------------------------------------------- helpers
def ledger_entries(root: Path) -> list[Attempt]:
    return Ledger(root / "ledger.jsonl").read()


def index_entries(root: Path) -> list[IndexEntry]:
    return Executions(root).entries()


def capture_of(root: Path, seq: int = 0) -> Path:
    e = ledger_entries(root)[seq]
    return RawStore(root / "raw").path(e.capture_sha256)


def flip(path: Path, offset: int, mask: int = 0x01) -> None:
    """Flip bits of one byte of ``path`` (read-only files too)."""
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def rewrite_lines(path: Path, edit) -> None:
    os.chmod(path, 0o644)
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()
    lines = edit(lines)
    path.write_bytes(b"\n".join(lines) + b"\n" + tail)


def failed_lines(out: str) -> list[str]:
    return [ln.strip() for ln in out.splitlines() if ln.strip().startswith("failed:")]


SUMMARY_OK = ("agentprov verify: level chain: passed with unverified checks; 0 failed, "
              "1 unverified or tombstoned\n"
              "  unverified: checksums.absent at checksums.sha256: a working tree has no "
              "checksums.sha256 (it is written at sealing)\n")


# ----------------------------------------------------------------------------- verify
@pytest.mark.req("R-27.4", "R-27.11")
def test_verify_on_a_working_tree_passes_with_the_one_unverified_check(cli, corpus):
    r = cli("verify", "--corpus", corpus.with_name("live-demo"))
    assert (r.code, r.out, r.err) == (0, SUMMARY_OK, "")
    j = cli("verify", "--corpus", corpus, "--format", "json")
    doc = json.loads(j.out)
    assert j.code == 0 and doc["result"] == "passed with unverified checks"
    assert doc["counts"]["capture_logs"] == 5 and doc["counts"]["executions"] == 5
    assert [f["code"] for f in doc["findings"]] == ["checksums.absent"]


@pytest.mark.req("R-27.4")
def test_verify_checks_what_the_standard_library_check_checks(corpus, tmp_path):
    """verify's chain check (msgspec parses first) gives the standard library's answers,
    damaged or not, and ``agentprov_capture.verify`` of the file the same."""
    from agentprov_core.audit.verification import check_capture

    path = capture_of(corpus, 0)
    data = path.read_bytes()
    lines = data.split(b"\n")[:-1]
    variants = {"intact": data, "cut": b"\n".join(lines[:-1]) + b"\n",
                "torn": data[:-5], "reordered": b"\n".join([lines[0], lines[2], lines[1],
                                                            *lines[3:]]) + b"\n",
                "spaced": data.replace(b'"seq":3,', b'"seq": 3,'),
                "float": data.replace(b'"t":', b'"t":1e-07,"u":', 1),
                "flipped": data[:200] + bytes([data[200] ^ 1]) + data[201:]}
    for name, blob in variants.items():
        p = tmp_path / f"v-{name}.jsonl"
        p.write_bytes(blob)
        head = hashlib.sha256(lines[-1]).hexdigest()
        ref = capture.check(blob, head, fast=False)
        mine = check_capture(blob, head)
        assert (mine.problems, mine.n_records, mine.head_sha256) == (
            ref.problems, ref.n_records, ref.head_sha256), name
        assert capture.verify(p, expected_head=head) == (ref.ok, ref.n_records,
                                                         ref.head_sha256, ref.problems)
        assert ref.ok == (name == "intact")


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("kind", ["capture", "native_log", "aer", "sem", "prov", "validation",
                                  "ledger", "index", "manifest"])
def test_a_flipped_byte_fails_verify_naming_the_file(cli, corpus, kind):
    e = ledger_entries(corpus)[1]
    store = RawStore(corpus / "raw")
    eid = e.session_id
    want_in = ""
    if kind == "capture":
        path = store.path(e.capture_sha256)
        lines = path.read_bytes().split(b"\n")
        offset = sum(len(x) + 1 for x in lines[:3]) + lines[3].index(b'"call_id":"c1"') + 12
        flip(path, offset)  # c1 -> c0 in record 3
        want = [f"failed: raw.digest at {path.relative_to(corpus)}",
                f"failed: capture.chain at {path.relative_to(corpus)}: record 3: its sha256 is "
                "not the prev of record 4 (record 3 was altered)"]
    elif kind == "native_log":
        path = store.path(e.native_sha256)
        flip(path, 10)
        want = [f"failed: raw.digest at {path.relative_to(corpus)}: its sha256 is"]
    elif kind in ("aer", "sem", "prov", "validation"):
        path = corpus / "executions" / eid / f"{kind}.json"
        flip(path, path.read_bytes().index(b"agentdojo") + 2 if kind != "validation" else 40)
        want = [f"failed: executions.digest at executions/{eid}/{kind}.json: its sha256 is"]
        if kind != "validation":  # validation.json, intact, says which side changed
            want.append(f"failed: executions.digest at executions/{eid}/{kind}.json: its "
                        "sha256 is ")
            want_in = "(the file was altered: validation.json, intact, cites"
    elif kind == "ledger":
        path = corpus / "ledger.jsonl"
        data = path.read_bytes()
        at = data.index(e.capture_sha256.encode()) + 5
        flip(path, at, data[at] ^ ord("x"))  # a digest no longer hex
        want = ["failed: ledger.reference at ledger.jsonl: line 2 (seq 1): capture_sha256"]
        other = corpus.with_name("other.partial")
        shutil.copytree(corpus, other)
        flip(path, at, data[at] ^ ord("x"))  # back
        flip(path, at, data[at] ^ ord("0") or 0x01)  # still hex: a digest the store lacks
        r = cli("verify", "--corpus", corpus)
        assert any(g.startswith("failed: raw.missing at raw/sha256/") and
                   f"ledger.jsonl line 2 (session {eid}) names it as the capture log" in g
                   for g in failed_lines(r.out)), r.out
        corpus = other
    elif kind == "index":
        path = corpus / "executions.jsonl"
        data = path.read_bytes()
        sem = index_entries(corpus)[1].sem_sha256
        flip(path, data.index(sem.encode()) + 3, 0x02)
        want = [f"failed: executions.digest at executions/{eid}/sem.json: its sha256 is"]
        want_in = "(that line was altered: validation.json, intact, cites the file)"
    else:
        path = corpus / "manifest.json"
        data = path.read_bytes()
        flip(path, data.index(CONFIG.encode()) + 7, 0x03)  # the configuration digest
        want = ["failed: manifest.config_digests at manifest.json: the ledger records the "
                f"configuration digest {CONFIG}, which the manifest's config_digests does not "
                "list"]
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1, r.out + r.err
    assert r.out.startswith("agentprov verify: level chain: failed; ")
    got = failed_lines(r.out)
    for w in want:
        assert any(g.startswith(w) for g in got), (w, r.out)
    assert want_in in r.out


@pytest.mark.req("R-27.4")
def test_a_manifest_that_no_longer_parses_fails_verify(cli, corpus):
    path = corpus / "manifest.json"
    data = path.read_bytes()
    flip(path, data.index(b'"working": true') + 11, 0x20)  # true -> tRue
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1
    assert failed_lines(r.out)[0].startswith(
        "failed: manifest.unreadable at manifest.json: manifest.json is not readable JSON")


@pytest.mark.req("R-27.4")
def test_a_hand_edited_manifest_fails_its_form(cli, corpus):
    path = corpus / "manifest.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps(doc, sort_keys=True, indent=2) + "\n")
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1 and failed_lines(r.out) == [
        "failed: manifest.digest at manifest.json: its bytes no longer match its "
        "manifest_sha256: it was altered after T0 wrote it",
        "failed: manifest.form at manifest.json: it is not in the form T0 writes (JSON, sorted "
        "keys, indent 1, one newline): it was edited after it was written"]


@pytest.mark.req("R-27.4")
def test_a_removed_capture_record_fails_naming_the_log_and_record(cli, corpus):
    path = capture_of(corpus, 3)
    rel = str(path.relative_to(corpus))
    rewrite_lines(path, lambda ls: ls[:4] + ls[5:])
    r = cli("verify", "--corpus", corpus)
    got = failed_lines(r.out)
    assert r.code == 1
    assert f"failed: capture.chain at {rel}: record 4: seq is 5, expected 4" in got
    assert any(g.startswith(f"failed: raw.digest at {rel}") for g in got)
    assert any(g.startswith(f"failed: capture.records at {rel}: it holds 7 record(s)")
               for g in got), got


@pytest.mark.req("R-27.4")
def test_reordered_capture_records_fail(cli, corpus):
    path = capture_of(corpus, 0)
    rel = str(path.relative_to(corpus))
    rewrite_lines(path, lambda ls: [ls[0], ls[1], ls[3], ls[2], *ls[4:]])
    got = failed_lines(cli("verify", "--corpus", corpus).out)
    assert f"failed: capture.chain at {rel}: record 2: seq is 3, expected 2" in got
    assert f"failed: capture.chain at {rel}: record 3: seq is 2, expected 3" in got


@pytest.mark.req("R-27.4")
def test_an_altered_last_record_shows_against_the_ledger_head(cli, corpus):
    path = capture_of(corpus, 0)
    rel = str(path.relative_to(corpus))
    data = path.read_bytes()
    flip(path, data.rindex(b'"complete"') + 3)
    got = failed_lines(cli("verify", "--corpus", corpus).out)
    assert any(g.startswith(f"failed: capture.chain at {rel}: record 7: the head sha256")
               for g in got), got


@pytest.mark.req("R-27.4")
def test_a_missing_raw_file_fails_naming_it_and_its_ledger_line(cli, corpus):
    e = ledger_entries(corpus)[4]
    path = RawStore(corpus / "raw").path(e.capture_sha256)
    path.unlink()
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1
    assert (f"failed: raw.missing at {path.relative_to(corpus)}: ledger.jsonl line 5 "
            f"(session {e.session_id}) names it as the capture log; the raw store does not "
            "hold it") in failed_lines(r.out)


@pytest.mark.req("R-27.4")
def test_a_removed_or_reordered_ledger_line_fails(cli, corpus, tmp_path):
    other = tmp_path / "other.partial"
    shutil.copytree(corpus, other)
    rewrite_lines(corpus / "ledger.jsonl", lambda ls: ls[:1] + ls[2:])
    got = failed_lines(cli("verify", "--corpus", corpus).out)
    assert ("failed: ledger.seq at ledger.jsonl: line 2: seq is 2, expected 1 (a line was "
            "removed, inserted or reordered)") in got
    rewrite_lines(other / "ledger.jsonl", lambda ls: [ls[1], ls[0], *ls[2:]])
    got = failed_lines(cli("verify", "--corpus", other).out)
    assert "failed: ledger.seq at ledger.jsonl: line 1: seq is 1, expected 0 (a line was " \
           "removed, inserted or reordered)" in got


@pytest.mark.req("R-27.4", "R-27.11")
def test_a_torn_ledger_line_is_unverified_not_failed(cli, corpus):
    with open(corpus / "ledger.jsonl", "ab") as f:
        f.write(b'{"seq":5,"invocation":"x","unit":')
    r = cli("verify", "--corpus", corpus)
    assert r.code == 0
    assert r.out.splitlines()[0] == ("agentprov verify: level chain: passed with unverified "
                                     "checks; 0 failed, 2 unverified or tombstoned")
    assert "  unverified: ledger.torn at ledger.jsonl: line 6: a write cut short" in r.out


@pytest.mark.req("R-27.4", "R-27.11")
def test_an_unmapped_attempt_fails_unless_a_run_holds_the_corpus(cli, corpus):
    """What an index append cut short leaves: an execution directory no line names
    (unverified) and a ledgered attempt without an execution: a failure when no run is
    writing the corpus, in progress while one holds its lock."""
    from filelock import FileLock

    eid = index_entries(corpus)[2].execution_id
    rewrite_lines(corpus / "executions.jsonl", lambda ls: ls[:2] + ls[3:])
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1, r.out
    assert f"  unverified: executions.unindexed at executions/{eid}: no line of " \
           "executions.jsonl names it" in r.out
    assert failed_lines(r.out) == [
        f"failed: executions.unmapped at ledger.jsonl: line 3 (session {eid}): its attempt has "
        "no execution in executions.jsonl, and no run is writing the corpus (its mapping "
        "failed or was cut short: see the manifest's mapping_failures); re-run the same "
        "command to map it"]
    (corpus / ".lock").touch()  # a lock file no one holds: as a finished run leaves it
    assert cli("verify", "--corpus", corpus).code == 1
    lock = FileLock(str(corpus / ".lock"), timeout=0)  # what a run holds while it writes
    with lock:
        r = cli("verify", "--corpus", corpus)
        v = cli("validate", "--corpus", corpus, "--strict")
    assert r.code == 0, r.out
    assert f"  unverified: executions.in_progress at ledger.jsonl: line 3 (session {eid}): " \
           "its attempt has no execution in executions.jsonl yet" in r.out
    assert "  unverified: corpus.in_progress at .lock: a run holds the corpus (its .lock is " \
           "locked): this is what it had written when the check began (up to " \
           "executions.jsonl line 4, ledger.jsonl line 5)" in r.out
    assert v.code == 0, v.out
    assert v.out.splitlines()[-1].startswith("note: a run holds the corpus")
    assert v.out.splitlines()[-1].endswith("; 1 attempt(s) are not mapped yet")
    v = cli("validate", "--corpus", corpus, "--strict")
    assert v.code == 1 and f"line 3: attempt {eid} has a capture log but no execution" in v.out


@pytest.mark.req("R-27.4")
def test_stray_and_unindexed_files_are_reported(cli, corpus):
    extra = RawStore(corpus / "raw").put_bytes(b"nothing names me")
    (corpus / "raw" / "sha256" / "ab").mkdir(exist_ok=True)
    (corpus / "raw" / "sha256" / "ab" / ("ab" + "0" * 62)).write_bytes(b"x")
    r = cli("verify", "--corpus", corpus, "--format", "json")
    doc = json.loads(r.out)
    found = {(f["kind"], f["code"], f["path"]) for f in doc["findings"]}
    assert ("unverified", "raw.unreferenced", f"raw/sha256/{extra[:2]}/{extra}") in found
    assert ("failed", "raw.digest", "raw/sha256/ab/ab" + "0" * 62) in found
    assert r.code == 1


@pytest.mark.req("R-27.4")
def test_a_torn_capture_the_ledger_recorded_is_tombstoned(cli, corpus):
    """A log damaged before it was stored is evidence: T0 ledgered it errored, with the
    damage named; verify checks its bytes and does not hold the chain against it."""
    led = corpus / "ledger.jsonl"
    entries = ledger_entries(corpus)
    store = RawStore(corpus / "raw")
    data = store.path(entries[2].capture_sha256).read_bytes()[:-7]  # torn last line
    torn = store.put_bytes(data)
    os.chmod(led, 0o644)
    entries[2] = msgspec.structs.replace(
        entries[2], capture_sha256=torn, reason="setup refusal; capture log damaged: "
        "record 3: not JSON")
    led.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in entries))
    r = cli("verify", "--corpus", corpus, "--format", "json")
    doc = json.loads(r.out)
    kinds = {(f["kind"], f["code"]) for f in doc["findings"]}
    assert ("tombstoned", "capture.damaged") in kinds
    assert not [f for f in doc["findings"] if f["kind"] == "failed" and f["code"].startswith(
        "capture.")]


@pytest.mark.req("R-27.4")
def test_verify_answers_the_same_in_threads_and_in_processes(cli, corpus):
    """A large corpus is checked by two processes, a small one by threads: same answers."""
    rewrite_lines(capture_of(corpus, 1), lambda ls: [ls[0], ls[2], ls[1], *ls[3:]])
    flip(corpus / "executions" / index_entries(corpus)[4].execution_id / "sem.json", 5)
    (RawStore(corpus / "raw").path(ledger_entries(corpus)[0].native_sha256)).unlink()
    runs = [cli("verify", "--corpus", corpus, "--format", "json",
                env={"AGENTPROV_VERIFY_PROCESSES": v}) for v in ("0", "1")]
    assert runs[0].code == runs[1].code == 1
    assert json.loads(runs[0].out) == json.loads(runs[1].out)
    assert len(json.loads(runs[0].out)["findings"]) >= 5


@pytest.mark.req("R-27.4")
def test_verify_of_the_current_directory(cli, corpus):
    """``--corpus .`` from inside the corpus (a path with no name of its own) is checked
    like the corpus named by its path."""
    r = cli("verify", "--corpus", ".", cwd=corpus)
    assert (r.code, r.out) == (0, SUMMARY_OK), r.err
    r = cli("verify", "--corpus", "..", cwd=corpus / "raw")
    assert (r.code, r.out) == (0, SUMMARY_OK), r.err


def _killed(base: str, item: object) -> None:
    """A task whose process is killed before it answers (SIGKILL: no cleanup, no reply)."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("task", ["check_attempt_encoded", "check_execution_encoded"])
def test_a_checking_process_killed_is_an_error_never_a_pass(corpus, monkeypatch, task):
    """One of verify's two processes killed mid-check (the ledger's tasks, or the
    executions'): the whole check is an error naming the corpus, never a report that
    passes without what that process was checking."""
    from agentprov_core.audit import verification
    from agentprov_core.errors import AgentprovError

    monkeypatch.setenv("AGENTPROV_VERIFY_PROCESSES", "1")
    assert not verification.verify_corpus(corpus).failed  # with processes, intact: passes
    monkeypatch.setattr(verification, task, _killed)
    with pytest.raises(AgentprovError) as got:
        verification.verify_corpus(corpus)
    assert got.value.code == "verify.environment.worker_lost"
    assert str(corpus) in str(got.value)


@pytest.mark.req("R-27.4")
def test_a_directory_that_is_not_a_corpus(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("verify", "--corpus", tmp_path / "empty")
    assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus")
    r = cli("verify", "--corpus", tmp_path / "nowhere")
    assert (r.code, r.error["error"]) == (2, "corpus.usage.not_found")
    for cmd in (["stats"], ["recompute", "--dry-run"]):
        r = cli(*cmd, "--corpus", tmp_path / "empty")
        assert (r.code, r.error["error"]) == (3, "corpus.environment.not_a_corpus")


# ----------------------------------------------------------------------------- stats
@pytest.mark.req("R-27.5")
def test_stats_counts(cli, corpus):
    r = cli("stats", "--corpus", corpus, "--tables", "counts")
    assert r.code == 0, r.err
    header, row = r.out.splitlines()
    assert header.split() == [
        "source_id", "profile", "registry_parts", "attempts", "units", "records",
        "n_executions", "quarantined", "status_ok", "status_ok_with_issues", "status_failed",
        "validation_passed", "live_vs_native_disagree"]
    got = dict(zip(header.split(), row.split(), strict=True))
    assert {k: got[k] for k in ("source_id", "profile", "registry_parts", "records",
                                "n_executions", "status_ok", "status_ok_with_issues",
                                "status_failed")} == {
        "source_id": "agentdojo", "profile": "agentdojo-live@3", "registry_parts": "live",
        "records": "5", "n_executions": "4", "status_ok": "4", "status_ok_with_issues": "0",
        "status_failed": "1"}
    assert (got["attempts"], got["units"]) == ("5", "4")
    assert header.index("profile") == row.index("agentdojo-live@3")  # aligned columns
    tsv = cli("stats", "--corpus", corpus, "--format", "tsv").out.splitlines()
    assert tsv[1].split("\t")[:3] == ["agentdojo", "agentdojo-live@3", "live"]
    doc = json.loads(cli("stats", "--corpus", corpus, "--tables", "counts,issues",
                         "--format", "json").out)
    assert doc["tables"]["counts"][0]["n_executions"] == 4
    assert {(i["code"], i["records"]) for i in doc["tables"]["issues"]} == {
        ("map.capture_error", 1), ("map.no_execution_observed", 1)}


# ----------------------------------------------------------------------------- package
@pytest.mark.req("R-27.14")
def test_package_without_spec_exits_2_first(cli, corpus, tmp_path):
    before = snapshot(corpus.parent)
    r = cli("package", "--corpus", corpus, "--corpus-version", "0.1.0", json_errors=False)
    assert (r.code, r.err) == (2, "agentprov package: package needs --spec FILE (the corpus "
                                  "spec: what is released, under which licence)\n")
    r = cli("package", "--corpus", tmp_path / "not-there")  # before the corpus is looked at
    assert (r.code, r.error["error"]) == (2, "package.usage.spec")
    assert snapshot(corpus.parent) == before


# ----------------------------------------------------------------------------- recompute
RECOMPUTE_OK = ("agentprov recompute: units=5 plan=sem,prov,validation workers=0\n"
                "agentprov recompute: would derive 5 execution(s); recomputed stages: "
                "sem,prov,validation; 5 identical, 0 changed (explained), 0 unexplained, "
                "0 failed, 0 unverified; 0 index row(s) refreshed\n")


@pytest.mark.req("R-27.3", "R-27.7")
def test_recompute_dry_run_reproduces_every_stored_file(cli, corpus):
    before = snapshot(corpus)
    r = cli("recompute", "--corpus", corpus.with_name("live-demo"), "--dry-run")
    assert (r.code, r.out, r.err) == (0, RECOMPUTE_OK, "")
    assert snapshot(corpus) == before


@pytest.mark.req("R-27.7")
def test_a_hand_edited_aer_is_unexplained(cli, corpus):
    eid = index_entries(corpus)[3].execution_id
    path = corpus / "executions" / eid / "aer.json"
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b'"utility":true', b'"utility":false'))
    r = cli("recompute", "--corpus", corpus, "--dry-run")
    assert r.code == 1
    assert r.out.splitlines()[1] == (
        "agentprov recompute: would derive 5 execution(s); recomputed stages: "
        "sem,prov,validation; 4 identical, 0 changed (explained), 1 unexplained, 0 failed, "
        "0 unverified; 0 index row(s) refreshed")
    assert f"  {eid}: unexplained: executions/{eid}/aer.json no longer matches the aer_sha256" \
        in r.out


@pytest.mark.req("R-27.7")
def test_recompute_classifies_missing_edited_and_explained(cli, corpus):
    ids = [e.execution_id for e in index_entries(corpus)]
    (corpus / "executions" / ids[0] / "sem.json").unlink()  # unverified
    prov = corpus / "executions" / ids[1] / "prov.json"  # a stored PROV edited: unexplained
    flip(prov, 30)
    # an AER re-indexed as if mapped by another agentprov: its stored SEM is older
    led = corpus / "executions.jsonl"
    entries = index_entries(corpus)
    aer_path = corpus / "executions" / ids[2] / "aer.json"
    old = A.decode(aer_path.read_bytes())
    new = msgspec.structs.replace(old, header=msgspec.structs.replace(
        old.header, producer=msgspec.structs.replace(old.header.producer, version="0.0.9")))
    os.chmod(aer_path, 0o644)
    aer_path.write_bytes(A.encode(new))
    sem_path = corpus / "executions" / ids[2] / "sem.json"
    os.chmod(sem_path, 0o644)
    sem_path.write_bytes(sem_path.read_bytes().replace(b'"format":"agentprov-sem/0.1"',
                                                       b'"format":"agentprov-sem/0.0"'))
    entries[2] = msgspec.structs.replace(
        entries[2], aer_sha256=hashlib.sha256(aer_path.read_bytes()).hexdigest(),
        sem_sha256=hashlib.sha256(sem_path.read_bytes()).hexdigest())
    led.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in entries))
    r = cli("recompute", "--corpus", corpus, "--dry-run")
    assert r.code == 1, r.out + r.err
    assert ("2 identical, 1 changed (explained), 1 unexplained, 0 failed, 1 unverified; "
            "1 index row(s) refreshed") in r.out, r.out
    assert f"  {ids[0]}: unverified: executions/{ids[0]}/sem.json is missing" in r.out
    assert f"  {ids[1]}: unexplained: executions/{ids[1]}/prov.json no longer matches" in r.out
    assert (f"  {ids[2]}: changed: sem: the stored files were derived by agentprov 0.0.9 (the "
            "AER's producer); this is agentprov") in r.out
    assert "the stored sem.json is agentprov-sem/0.0; this build derives agentprov-sem/0.1" \
        in r.out
    assert (f"  {ids[2]}: changed: prov,validation: the stored files were derived by agentprov "
            "0.0.9") in r.out


@pytest.mark.req("R-27.7")
def test_recompute_out_writes_a_new_tree_and_never_the_corpus(cli, corpus, tmp_path):
    before = snapshot(corpus)
    out = tmp_path / "re"
    r = cli("recompute", "--corpus", corpus, "--out", out)
    assert r.code == 0, r.out + r.err
    assert r.out.splitlines()[1].startswith("agentprov recompute: derived 5 execution(s);")
    assert f"agentprov recompute: wrote 5 execution(s) and 5 index row(s) to {out}" in r.out
    assert snapshot(corpus) == before
    assert (out / "executions.jsonl").read_bytes() == (corpus / "executions.jsonl").read_bytes()
    for e in index_entries(corpus):
        for name in ("aer", "sem", "prov", "validation"):
            assert (out / "executions" / e.execution_id / f"{name}.json").read_bytes() == \
                (corpus / "executions" / e.execution_id / f"{name}.json").read_bytes()
    assert json.loads((out / "recompute.json").read_text())["written"] == 5
    again = cli("recompute", "--corpus", corpus, "--out", out)  # not into a used directory
    assert (again.code, again.error["error"]) == (2, "recompute.usage.out")
    inside = cli("recompute", "--corpus", corpus, "--out", corpus / "re")
    assert (inside.code, inside.error["error"]) == (2, "recompute.usage.out")
    none = cli("recompute", "--corpus", corpus)
    assert (none.code, none.error["error"]) == (2, "recompute.usage.out_needed")
    both = cli("recompute", "--corpus", corpus, "--dry-run", "--out", tmp_path / "new")
    assert (both.code, both.error["error"]) == (2, "recompute.usage.out")
    assert not (tmp_path / "new").exists()
    assert snapshot(corpus) == before


@pytest.mark.req("R-27.8")
def test_remap_of_a_live_corpus_is_refused(cli, corpus, tmp_path):
    before = snapshot(corpus)
    for extra in ([], ["--dry-run"], ["--out", str(tmp_path / "o")]):
        r = cli("recompute", "--corpus", corpus, "--remap", *extra)
        assert (r.code, r.error["error"]) == (5, "recompute.unsupported.remap_live")
    assert not (tmp_path / "o").exists()
    assert snapshot(corpus) == before


# ------------------------------------------------------------------ the preflight probe's logs
def add_preflight(root: Path, session: str = "pf-0123456789abcdef") -> tuple[Path, Path]:
    """One probe call as T0 keeps it: a capture log (written by the real CaptureWriter) in
    ``preflight/sha256/``, named by a line of ``preflight/ledger.jsonl``."""
    tmp = root / "staging" / session / "capture.jsonl"
    tmp.parent.mkdir(parents=True)
    w = capture.CaptureWriter(tmp, {
        "session_id": session, "cell": {"suite": None, "user_task_id": None, "attack": None,
                                        "injection_task_id": None, "cell_key": "preflight",
                                        "kind": "preflight"},
        "unit": None, "attempt": 1, "plan_sha256": PLAN, "config_digest": CONFIG,
        "backend": {"environment_id": ENV_ID, "identity_sha256": IDENTITY},
        "declared_instrumentation": ["preflight_probe@1 calls: 1"]}, durable=False)
    w.append("model_call_start", call_id="c1", element="OpenAILLM", model="scripted")
    w.append("wire_request", attempt_id="a1", call_id="c1", first_attempt_id="a1",
             method="POST", url="http://127.0.0.1:9/v1/chat/completions",
             headers=[("Content-Type", "application/json")],
             **capture.body_fields(b'{"model":"scripted","messages":[]}'))
    w.append("wire_response", attempt_id="a1", call_id="c1", status=200,
             headers={"content-type": "application/json"}, **capture.body_fields(REPLY))
    w.append("model_call_end", call_id="c1", status="ok")
    w.end("complete", reason=None)
    data = tmp.read_bytes()
    sha = RawStore(root / "preflight").put_bytes(data)
    shutil.rmtree(tmp.parent)
    head = hashlib.sha256(data.split(b"\n")[-2]).hexdigest()
    entry = {"at": "2026-11-29T10:52:07Z", "invocation": "0" * 12, "session_id": session,
             "call": 1, "status": "complete", "capture_sha256": sha,
             "capture_head_sha256": head, "billed_calls": 1, "plan_sha256": PLAN,
             "config_digest": CONFIG}
    ledger = root / "preflight" / "ledger.jsonl"
    with open(ledger, "a", encoding="utf-8") as f:
        f.write(selfdigest.json_line(entry))  # as T0 writes it
    return RawStore(root / "preflight").path(sha), ledger


@pytest.mark.req("R-27.4", "R-18.4")
def test_verify_checks_the_preflight_probes_logs(cli, corpus):
    log, ledger = add_preflight(corpus)
    rel = log.relative_to(corpus)
    j = cli("verify", "--corpus", corpus, "--format", "json")
    doc = json.loads(j.out)
    assert j.code == 0 and doc["counts"]["preflight_calls"] == 1, j.out
    assert [f["code"] for f in doc["findings"]] == ["checksums.absent"]

    original = log.read_bytes()
    flip(log, original.index(b'"status":200') + 10)  # 200 -> 201 in the reply record
    r = cli("verify", "--corpus", corpus)
    assert r.code == 1
    assert failed_lines(r.out)[:2] == [
        f"failed: preflight.digest at {rel}: its sha256 is "
        f"{hashlib.sha256(log.read_bytes()).hexdigest()}, not its name: the file was altered",
        f"failed: preflight.chain at {rel}: record 3: its sha256 is not the prev of record 4 "
        "(record 3 was altered)"]
    log.write_bytes(original)

    line = ledger.read_bytes()
    altered = ("failed: preflight.digest at preflight/ledger.jsonl: line 1: its bytes no longer "
               "match its line_sha256: the line was altered after T0 wrote it")
    ledger.write_bytes(line.replace(b'"call": 1', b'"call":1'))
    r = cli("verify", "--corpus", corpus)
    assert failed_lines(r.out) == [altered, "failed: preflight.form at preflight/ledger.jsonl: "
                                   "line 1: not in the form T0 writes: the line was edited"]
    ledger.write_bytes(line.replace(PLAN.encode(), b"7" * 64))
    r = cli("verify", "--corpus", corpus)
    assert failed_lines(r.out) == [altered, f"failed: preflight.header at {rel}: record 0: "
                                   f"plan_sha256 is '{PLAN}'; preflight/ledger.jsonl line 1 "
                                   f"records '{'7' * 64}'"]
    ledger.write_bytes(line)

    log.unlink()
    r = cli("verify", "--corpus", corpus)
    assert failed_lines(r.out) == [f"failed: preflight.missing at {rel}: preflight/ledger.jsonl "
                                   "line 1 names it; preflight/ does not hold it"]
    log.write_bytes(original)
    stray = log.with_name("f" * 64)
    stray.write_bytes(b"x")
    r = cli("verify", "--corpus", corpus)
    assert r.code == 0 and (f"unverified: preflight.unreferenced at "
                            f"{stray.relative_to(corpus)}: no line of preflight/ledger.jsonl "
                            "names it") in r.out


# ------------------------------------------------------------------ facts held in two places
def _seal_struct_lines(path: Path, entries: list) -> None:
    """Rewrite a JSON-lines file of structs as T0 writes each line (its line_sha256 filled
    in): an edit then shows only where the fact is held twice."""
    os.chmod(path, 0o644)
    path.write_bytes(b"".join(
        selfdigest.with_line_digest(msgspec.json.encode(msgspec.structs.replace(e, line_sha256="")))
        + b"\n" for e in entries))


def edit_ledger(root: Path, seq: int, **changes) -> None:
    entries = ledger_entries(root)
    entries[seq] = msgspec.structs.replace(entries[seq], **changes)
    _seal_struct_lines(root / "ledger.jsonl", entries)


def edit_index(root: Path, i: int, **changes) -> None:
    entries = index_entries(root)
    entries[i] = msgspec.structs.replace(entries[i], **changes)
    _seal_struct_lines(root / "executions.jsonl", entries)


def edit_execution_file(root: Path, i: int, name: str, edit) -> None:
    """Rewrite one of execution ``i``'s files with ``edit(bytes) -> bytes`` and record its new
    sha256 in the index line (resealed): only a cross-check can see the edit."""
    eid = index_entries(root)[i].execution_id
    path = root / "executions" / eid / f"{name}.json"
    os.chmod(path, 0o644)
    path.write_bytes(edit(path.read_bytes()))
    edit_index(root, i, **{f"{name}_sha256": hashlib.sha256(path.read_bytes()).hexdigest()})


def edit_aer(root: Path, i: int, **outcome_or_header) -> None:
    def edit(data: bytes) -> bytes:
        aer = A.decode(data)
        h, o = aer.header, aer.outcome
        for key, value in outcome_or_header.items():
            part, _, field = key.rpartition("__")
            if part == "outcome":
                o = msgspec.structs.replace(o, **{field: value})
            elif part in ("task", "producer", "backend"):
                h = msgspec.structs.replace(h, **{part: msgspec.structs.replace(
                    getattr(h, part), **{field: value})})
            else:
                h = msgspec.structs.replace(h, **{field: value})
        return A.encode(msgspec.structs.replace(aer, header=h, outcome=o))
    edit_execution_file(root, i, "aer", edit)


def edit_manifest(root: Path, edit) -> None:
    m = json.loads((root / "manifest.json").read_text())
    edit(m)
    WorkingCorpus(root).write_manifest(m)  # as T0 writes it: sealed


def verify_failures(root: Path) -> list[str]:
    from agentprov_core.audit.verification import verify_corpus

    return [ln for ln in verify_corpus(root).lines(per_file=99) if ln.startswith("failed:")]


S1 = "s-0001abcdef0123"  # the second attempt: conclusive, utility true, security false
CAP1 = f"ledger.jsonl line 2 (session {S1})"
AER1 = f"failed: executions.aer at executions/{S1}/aer.json: "
OTHER = "a" * 64
UNIT1 = "banking/user_task_1/none/none|none|r0"


def _cap(root: Path, seq: int = 1) -> str:
    return f"failed: capture.{{}} at {raw_rel(ledger_entries(root)[seq].capture_sha256)}: "


def raw_rel(sha: str) -> str:
    return f"raw/sha256/{sha[:2]}/{sha}"


FACTS = {
    # the ledger entry against its capture log's end record and header, and its AER
    "ledger utility": (lambda r: edit_ledger(r, 1, utility=False), [
        ("end", f"record 7: utility is True; {CAP1} records False"),
        AER1 + "outcome.utility is True; ledger.jsonl line 2 records False"]),
    "ledger security": (lambda r: edit_ledger(r, 1, security=True), [
        ("end", f"record 7: security is False; {CAP1} records True"),
        AER1 + "outcome.security is False; ledger.jsonl line 2 records True"]),
    "ledger calls": (lambda r: edit_ledger(r, 1, calls=2), [
        ("end", f"record 7: calls is 1; {CAP1} records 2")]),
    "ledger status": (lambda r: edit_ledger(r, 1, status="incomplete", conclusive=False), [
        ("status", f"record 7: end status 'complete'; {CAP1} records 'incomplete'")]),
    "ledger conclusive": (lambda r: edit_ledger(r, 1, conclusive=False), [
        "failed: ledger.conclusive at ledger.jsonl: line 2 (seq 1): conclusive is False and "
        "status 'complete'"]),
    "ledger unit": (lambda r: edit_ledger(r, 1, unit=UNIT1.replace("r0", "r1"), repeat=1), [
        ("header", f"record 0: unit is '{UNIT1}'; {CAP1} records "
                   f"'{UNIT1.replace('r0', 'r1')}'"),
        AER1 + f"header.task.unit is '{UNIT1}'; ledger.jsonl line 2 records "
               f"'{UNIT1.replace('r0', 'r1')}'",
        AER1 + "header.task.repeat is 0; ledger.jsonl line 2 records 1",
        f"failed: executions.ledger at executions.jsonl: line 2 ({S1}): unit '{UNIT1}'; "
        "ledger.jsonl line 2 records"]),
    "ledger cell key": (lambda r: edit_ledger(r, 1, cell_key="banking/user_task_9/none/none",
                                              unit="banking/user_task_9/none/none|none|r0"), [
        ("header", f"record 0: cell.cell_key is 'banking/user_task_1/none/none'; {CAP1} "
                   "records 'banking/user_task_9/none/none'"),
        AER1 + "header.task.cell_key is 'banking/user_task_1/none/none'; ledger.jsonl line 2 "
               "records 'banking/user_task_9/none/none'"]),
    "ledger defence": (lambda r: edit_ledger(r, 1, defence="spotlighting",
                                             unit=UNIT1.replace("|none|", "|spotlighting|")), [
        AER1 + "header.task.defense_id is 'none'; ledger.jsonl line 2 records 'spotlighting'"]),
    "ledger attempt": (lambda r: edit_ledger(r, 1, attempt=3), [
        ("header", f"record 0: attempt 1; {CAP1} records 3".replace("attempt 1", "attempt is 1")),
        AER1 + "header.task.attempt is 1; ledger.jsonl line 2 records 3"]),
    "ledger session id": (lambda r: edit_ledger(r, 1, session_id="s-ffffabcdef0123"), [
        ("header", f"record 0: session_id is '{S1}'; ledger.jsonl line 2 (session "
                   "s-ffffabcdef0123) records 's-ffffabcdef0123'"),
        f"failed: executions.ledger at executions.jsonl: line 2 ({S1}): ledger_seq 1 is "
        "session s-ffffabcdef0123"]),
    "ledger plan digest": (lambda r: edit_ledger(r, 1, plan_sha256=OTHER), [
        ("header", f"record 0: plan_sha256 is '{PLAN}'; {CAP1} records '{OTHER}'"),
        AER1 + f"header.plan_sha256 is '{PLAN}'; ledger.jsonl line 2 records '{OTHER}'",
        f"failed: manifest.plans at manifest.json: the ledger records the plan digest {OTHER}"]),
    "ledger config digest": (lambda r: edit_ledger(r, 1, config_digest=OTHER), [
        ("header", f"record 0: config_digest is '{CONFIG}'; {CAP1} records '{OTHER}'"),
        AER1 + f"header.config_digest is '{CONFIG}'; ledger.jsonl line 2 records '{OTHER}'"]),
    "ledger capture head": (lambda r: edit_ledger(r, 1, capture_head_sha256=OTHER), [
        ("chain", "record 7: the head sha256"),
        f"{AER1[:-2].replace('executions.aer', 'executions.evidence')}: its capture head is"]),
    "ledger record count": (lambda r: edit_ledger(r, 1, capture_records=7), [
        ("records", f"it holds 8 record(s); {CAP1} records 7")]),
    # the index line against its AER and its validation.json
    "index unit": (lambda r: edit_index(r, 1, unit="x|none|r0"), [
        f"failed: executions.ledger at executions.jsonl: line 2 ({S1}): unit 'x|none|r0'",
        AER1 + f"header.task.unit is '{UNIT1}'; executions.jsonl line 2 records 'x|none|r0'"]),
    "index status": (lambda r: edit_index(r, 1, status="failed"), [
        AER1 + "outcome.status is 'ok'; executions.jsonl line 2 records 'failed'"]),
    "index observed": (lambda r: edit_index(r, 1, execution_observed=False), [
        AER1 + "outcome.execution_observed is True; executions.jsonl line 2 records False"]),
    "index mapper": (lambda r: edit_index(r, 1, mapper="other.mapper"), [
        AER1 + "header.producer.mapper is 'agentdojo.capture'; executions.jsonl line 2 "
               "records 'other.mapper'"]),
    "index issues": (lambda r: edit_index(r, 1, issues=["map.capture_error"]), [
        AER1 + "outcome.issues is []; executions.jsonl line 2 records ['map.capture_error']"]),
    "index live vs native": (lambda r: edit_index(r, 1, live_vs_native="disagree"), [
        AER1 + "outcome.live_vs_native is 'agree'; executions.jsonl line 2 records 'disagree'"]),
    "index validation": (lambda r: edit_index(r, 1, validation="failed"), [
        AER1 + "validation.json status is 'passed'; executions.jsonl line 2 records 'failed'"]),
    "index ledger seq": (lambda r: edit_index(r, 1, ledger_seq=2), [
        f"failed: executions.ledger at executions.jsonl: line 2 ({S1}): ledger_seq 2 is "
        "session s-0002abcdef0123"]),
    # the AER against its ledger entry and capture log (its index line re-recording it)
    "aer utility": (lambda r: edit_aer(r, 1, outcome__utility=False), [
        AER1 + "outcome.utility is False; ledger.jsonl line 2 records True",
        AER1 + "outcome.utility is False; the capture log (ledger.jsonl line 2) records True"]),
    "aer security": (lambda r: edit_aer(r, 1, outcome__security=True), [
        AER1 + "outcome.security is True; ledger.jsonl line 2 records False"]),
    "aer session status": (lambda r: edit_aer(r, 1, outcome__session_status="incomplete"), [
        AER1 + "outcome.session_status is 'incomplete'; the capture log (ledger.jsonl line 2) "
               "records 'complete'"]),
    "aer attempt": (lambda r: edit_aer(r, 1, task__attempt=2), [
        AER1 + "header.task.attempt is 2; ledger.jsonl line 2 records 1"]),
    "aer test_only": (lambda r: edit_aer(r, 1, producer__test_only=False), [
        "failed: manifest.test_only at manifest.json: test_only is true; an AER records "
        "false"]),
    "aer started_at": (lambda r: edit_aer(r, 1, started_at="2026-01-01T00:00:00.000000Z"), [
        AER1 + "header.started_at is '2026-01-01T00:00:00.000000Z'; the capture log"]),
    "aer backend": (lambda r: edit_aer(r, 1, backend__identity_sha256=OTHER), [
        AER1 + f"header.backend.identity_sha256 is '{OTHER}'; the capture log (ledger.jsonl "
               f"line 2) records '{IDENTITY}'"]),
    "aer benchmark version": (lambda r: edit_aer(r, 1, backend__benchmark_version="v1"), [
        AER1 + "header.backend.benchmark_version is 'v1'; the capture log"]),
    "aer source": (lambda r: edit_aer(r, 1, source="agentdyn"), [
        AER1 + "header.source is 'agentdyn'; the capture log (ledger.jsonl line 2) records "
               "'agentdojo'",
        "failed: manifest.source at manifest.json: an AER or capture header's source is "
        "'agentdyn'"]),
    "validation cites": (lambda r: edit_execution_file(
        r, 1, "validation", lambda b: b.replace(index_entries(r)[1].sem_sha256.encode(),
                                                OTHER.encode())), [
        AER1 + f"validation.json sem_sha256 is '{OTHER}'; executions.jsonl line 2 records"]),
    # the manifest against the capture headers, the AERs and itself
    "manifest test_only": (lambda r: edit_manifest(r, lambda m: m.update(test_only=False)), [
        "failed: manifest.test_only at manifest.json: test_only is false; a capture header "
        "records true (a scripted corpus is never a real one)",
        "failed: manifest.test_only at manifest.json: test_only is false; an AER records true",
        "failed: manifest.test_only at manifest.json: test_only is false and synthetic true",
        "failed: manifest.test_only at manifest.json: test_only is false and live.transport "
        "'scripted'"]),
    "manifest relabelled real": (lambda r: edit_manifest(r, lambda m: m.update(
        test_only=False, synthetic=False, live=dict(m["live"], transport="endpoint"))), [
        "failed: manifest.test_only at manifest.json: test_only is false; a capture header "
        "records true"]),
    "manifest source": (lambda r: edit_manifest(r, lambda m: m.update(source="agentdyn")), [
        "failed: manifest.source at manifest.json: an AER or capture header's source is "
        "'agentdojo'; the manifest's is 'agentdyn'"]),
    "manifest backend": (lambda r: edit_manifest(r, lambda m: m["backend_identity"].update(
        identity_sha256=OTHER)), [
        f"failed: manifest.backend at manifest.json: a capture header names the backend "
        f"{ENV_ID} ({IDENTITY})"]),
    "manifest plans": (lambda r: edit_manifest(r, lambda m: m.update(plans=[OTHER])), [
        f"failed: manifest.plans at manifest.json: the ledger records the plan digest {PLAN}"]),
    "manifest working": (lambda r: edit_manifest(r, lambda m: m.update(working=False)), [
        "failed: manifest.working at manifest.json"]),
}


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("fact", sorted(FACTS))
def test_a_fact_held_twice_and_changed_in_one_place_fails_verify(corpus, fact):
    """Each fact the corpus holds in two places (ledger, capture header and end record,
    AER, index line, validation.json, manifest), changed in one of them and the file
    resealed as T0 writes it (its line_sha256, the index's digest of it), fails verify with
    the failure that names both."""
    edit, want = FACTS[fact]
    assert verify_failures(corpus) == []
    edit(corpus)
    got = verify_failures(corpus)
    for w in want:
        if isinstance(w, tuple):
            w = _cap(corpus).format(w[0]) + w[1]
        assert any(g.startswith(w) for g in got), (w, got)
    assert not [g for g in got if ".digest " in g or g.startswith("failed: ledger.form")], got


@pytest.mark.req("R-27.2", "R-27.4")
def test_validate_strict_checks_what_the_index_line_repeats(cli, corpus):
    edit_index(corpus, 1, live_vs_native="disagree", mapper="other.mapper")
    r = cli("validate", "--corpus", corpus, "--strict")
    assert r.code == 1, r.out
    assert (f"failed: execution {S1} tier index file executions.jsonl: outcome.live_vs_native "
            "is 'agree'; executions.jsonl records 'disagree'") in r.out.splitlines()
    assert (f"failed: execution {S1} tier index file executions.jsonl: header.producer.mapper "
            "is 'agentdojo.capture'; executions.jsonl records 'other.mapper'") in r.out.splitlines()


@pytest.mark.req("R-27.4", "R-18.4")
@pytest.mark.parametrize("field,value,want", [
    ("status", "errored", "failed: preflight.status at {rel}: record 5: end status 'complete'; "
                          "preflight/ledger.jsonl line 1 records 'errored'"),
    ("call", 2, "failed: preflight.header at {rel}: record 0: attempt is 1; "
                "preflight/ledger.jsonl line 1 records 2"),
    ("billed_calls", 0, "failed: preflight.billed at {rel}: it bills 1 call(s); "
                        "preflight/ledger.jsonl line 1 records 0 (the caps count them)"),
])
def test_a_preflight_fact_held_twice(corpus, field, value, want):
    log, ledger = add_preflight(corpus)
    entry = json.loads(ledger.read_text())
    entry[field] = value
    entry.pop("line_sha256")
    ledger.write_text(selfdigest.json_line(entry))
    assert verify_failures(corpus) == [want.format(rel=log.relative_to(corpus))]


# ------------------------------------------------------------------ a byte flipped anywhere
def evidence_files(root: Path) -> list[Path]:
    """Every file of a corpus that carries evidence (staging/, quarantine/ and .lock do
    not: docs/corpus-tools.md)."""
    out = [root / "manifest.json", root / "ledger.jsonl"]
    for sub in ("executions.jsonl", "preflight/ledger.jsonl"):
        if (root / sub).exists():
            out.append(root / sub)
    for d in ("executions", "raw", "preflight/sha256"):
        out += sorted(p for p in (root / d).rglob("*") if p.is_file()) if (root / d).is_dir() \
            else []
    return out


def flip_offsets(root: Path, path: Path, rng, exhaustive: bool, samples: int = 24
                 ) -> list[int]:
    """Where to flip ``path``: ``samples`` places (its first and last byte among them); with
    ``exhaustive``, every byte of the manifest and of the first line of each file T0
    appends lines to (its lines are alike: one line holds every field's position), which
    no digest of another file covers."""
    data = path.read_bytes()
    rel = str(path.relative_to(root))
    if exhaustive and rel in ("manifest.json", "ledger.jsonl", "executions.jsonl",
                              "preflight/ledger.jsonl"):
        end = len(data) if rel == "manifest.json" else data.index(b"\n") + 1
        return list(range(end)) + [len(data) - 1]
    return sorted({0, len(data) - 1, *(rng.randrange(len(data)) for _ in range(samples - 2))})


def undetected_flips(root: Path, exhaustive: bool = False, samples: int = 24,
                     seed: int = 1129) -> list[str]:
    """Flip one bit of one byte at a time (:func:`flip_offsets`, two masks: a low bit, and
    the case bit of a letter) in every evidence file, and return the flips neither
    ``verify`` nor ``validate --strict`` fails (both in-process, on the real files)."""
    import random

    from agentprov_core.audit.validation import Run
    from agentprov_core.audit.verification import verify_corpus

    rng = random.Random(seed)
    missed = []
    files = evidence_files(root)
    assert files
    for path in files:
        data = path.read_bytes()
        mode = path.stat().st_mode
        os.chmod(path, 0o644)
        for at in flip_offsets(root, path, rng, exhaustive, samples):
            for mask in (0x01, 0x20):
                path.write_bytes(data[:at] + bytes([data[at] ^ mask]) + data[at + 1:])
                try:
                    caught = bool(verify_corpus(root).failed)
                except Exception as exc:  # noqa: BLE001 - a crash is a finding of its own
                    caught = f"verify raised {type(exc).__name__}: {exc}"
                if caught is False:
                    run = Run(root, strict=True, release=False, skip_prov=False, fmt="json")
                    caught = run.corpus()
                if caught is not True:
                    missed.append(f"{path.relative_to(root)} byte {at} ^ {mask:#x}: "
                                  f"{caught or 'not detected'}")
        path.write_bytes(data)
        os.chmod(path, mode)
    return missed


@pytest.mark.req("R-27.4")
@pytest.mark.parametrize("exhaustive", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_byte_flipped_in_any_evidence_file_is_detected(corpus, exhaustive):
    """Every file that carries evidence: the manifest, the ledger, the index, each
    execution's four files, the raw store, the preflight ledger and its logs (sampled;
    every byte of the files no other file's digest covers in tox -e e2e, about 7,000
    flips)."""
    add_preflight(corpus)
    names = {str(p.relative_to(corpus)).split("/")[0] for p in evidence_files(corpus)}
    assert names == {"manifest.json", "ledger.jsonl", "executions.jsonl", "executions", "raw",
                     "preflight"}
    assert undetected_flips(corpus, exhaustive) == []


@pytest.mark.req("R-27.4", "R-21.28")
def test_a_run_does_not_rewrite_an_altered_manifest(cli, corpus, script, home):
    """A byte changed in a manifest field nothing else holds (created_at) fails verify by
    the manifest's own digest, and a run refuses to resume the corpus (exit 3) rather than
    rewrite the manifest and hide the change."""
    path = corpus / "manifest.json"
    data = path.read_bytes()
    flip(path, data.index(b'"created_at": "2026-11-29T10') + 16)  # 2026 -> 2027
    assert verify_failures(corpus) == [
        "failed: manifest.digest at manifest.json: its bytes no longer match its "
        "manifest_sha256: it was altered after T0 wrote it"]
    from conftest import make_marker

    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    make_marker(home, environments.environment_id(source_entry("agentdojo").source.meta))
    before = snapshot(corpus.parent)
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpus.with_name("live-demo"),
            "--campaign", "demo", "--suite", "banking", "--llm-script", script)
    assert (r.code, r.error["error"]) == (3, "cli.environment.corpus"), r.err
    assert "manifest.json no longer matches its manifest_sha256" in r.error["message"]
    assert snapshot(corpus.parent) == before
