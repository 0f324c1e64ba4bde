"""T0 treats what the worker stages and returns as hostile input (docs/containment.md, "What
T0 refuses from staging"): a real cell in the real worker stages a symlink to a host file or
to the corpus's ledger, a hard link, a FIFO, a socket, a sparse file of 8 GiB, or returns a
native log path that is absolute, climbs out with ``..``, holds a NUL byte or is 10,000
characters long (the test-only hook ``AGENTPROV_TEST_HOSTILE``, done by the cell's own
process after it ended, declared as ``test_fault@1``). Each run goes through the real CLI,
under the default containment and under ``--containment bwrap`` (a local endpoint on
loopback; skipped where bubblewrap cannot run).

For each: the session is ``errored`` with ``map.staging_refused`` and the refusal in its
ledger entry (and in its AER when its capture log was kept); the campaign exits 1 and the
next cell runs and completes; the host file's content (a key-shaped sentinel) is in no byte
of the corpus, of stdout or of stderr, and the host file is unchanged; the ledger holds
exactly one line per attempt (nothing appended through a link)."""

from __future__ import annotations

import json
import os
import stat
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, bwrap_unusable

from agentprov_core.corpus import staged
from agentprov_core.run import testfaults

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"

#: kind -> what the refusal in the session's ledger entry says
CASES = {
    "capture_symlink_host": "capture.jsonl: a symlink, not a regular file",
    "capture_symlink_ledger": "capture.jsonl: a symlink, not a regular file",
    "native_symlink_host": "none.json: a symlink, not a regular file",
    "native_dotdot": "native_log ../",
    "native_absolute": "is an absolute path",
    "native_nul": "holds a NUL byte",
    "native_long_name": "is 10000 characters long (at most 1024)",
    "fifo": "none.json: a FIFO, not a regular file",
    "socket": "agentprov-test.sock: a socket, not a regular file",
    "hardlink": "none.json: a hard link (2 names for one file)",
    "huge_sparse": f"none.json: {8 << 30} bytes, over the cap of {staged.NATIVE_MAX} bytes",
}
#: the kinds whose refused file is the native log (the others' native log is kept)
NATIVE_REFUSED = {"native_symlink_host", "native_dotdot", "native_absolute", "native_nul",
                  "native_long_name", "fifo", "hardlink", "huge_sparse",
                  "symlink_other_session"}


def corpus_bytes(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` with its bytes, never following a link (a link
    left in the corpus is itself reported, by its target)."""
    out: dict[str, bytes] = {}
    for d, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            p = Path(d) / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(p.relative_to(root))] = b"symlink -> " + os.readlink(p).encode()
            elif stat.S_ISREG(st.st_mode):
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def ledger(work: Path) -> list[dict]:
    return [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]


def raw(work: Path, sha: str) -> bytes:
    return (work / "raw" / "sha256" / sha[:2] / sha).read_bytes()


def host_file(tmp_path: Path) -> tuple[Path, str]:
    """A host file outside staging holding a unique key-shaped sentinel (the operator's)."""
    sentinel = "sk-proj-SENTINEL" + uuid.uuid4().hex + uuid.uuid4().hex
    d = tmp_path / "operator"
    d.mkdir()
    f = d / "credentials.env"
    f.write_text(f"OPENAI_API_KEY={sentinel}\n")
    return f, sentinel


@pytest.fixture
def local_server(tmp_path):
    """A loopback llama.cpp stand-in that answers like a model following instructions."""
    from tests.test_local_models import FakeServer, llamacpp_routes
    from tests.test_real_campaign import answer

    routes = llamacpp_routes(tmp_path)
    routes[("POST", "/v1/chat/completions")] = lambda body: (200, answer(json.loads(body)))
    server = FakeServer(routes)
    yield server
    server.close()


def run_args(containment: str, corpus: Path, tasks: str, request) -> list[str]:
    """The run's arguments; ``--canary 0``: an errored attempt among the canary's cells
    stops a campaign (A11) whatever made it errored, and these tests show the next cell
    runs."""
    args = ["run", "agentdojo", "--corpus", str(corpus), "--campaign", "hostile",
            "--suite", "banking", "--user-tasks", tasks, "--canary", "0"]
    if containment == "default":
        return [*args, "--llm-script", str(LIVE_DEMO)]
    why = bwrap_unusable()
    if why is None:
        from tests.test_real_campaign import bwrap_ok

        why = bwrap_ok(request.getfixturevalue("agentdojo_env"))
    if why is not None:
        pytest.skip(why)
    server = request.getfixturevalue("local_server")
    return [*args, "--endpoint", "llamacpp", "--base-url", server.base_url, "--model-id", "m",
            "--containment", "bwrap", "--i-consent-to-local-run"]


def check_refused(work: Path, entry: dict, why: str, native_refused: bool) -> None:
    """The refused session: errored with map.staging_refused, its refusal on record; its
    native log not stored when it was what was refused."""
    assert (entry["status"], entry["conclusive"]) == ("errored", False)
    assert entry["reason"].startswith("map.staging_refused: "), entry["reason"]
    assert any(why in r for r in entry["staging_refused"]), entry["staging_refused"]
    if native_refused:
        assert entry["native_sha256"] is None and entry["native_path"] is None
    assert entry["utility"] is None and entry["security"] is None
    rows = {r["ledger_seq"]: r for r in map(json.loads, (work / "executions.jsonl")
                                              .read_text().splitlines())}
    if entry["capture_sha256"] is None:  # the capture log was refused: nothing to map
        assert entry["seq"] not in rows
        return
    header = json.loads(raw(work, entry["capture_sha256"]).splitlines()[0])
    assert any(i.startswith("test_fault@1 hostile: ")
               for i in header["declared_instrumentation"])  # the fault is on the record
    row = rows[entry["seq"]]
    assert row["status"] == "failed" and "map.staging_refused" in row["issues"]
    aer = json.loads((work / "executions" / row["execution_id"] / "aer.json").read_text())
    assert aer["outcome"]["reason"] == entry["reason"]
    assert any(i["code"] == "map.staging_refused" and why in i["detail"]
               for i in aer["outcome"]["issues"])


@pytest.mark.slow
@pytest.mark.req("R-2.3", "R-21.19", "R-21.32")
@pytest.mark.parametrize("containment", ["default", "bwrap"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_hostile_staging_is_refused_and_the_campaign_goes_on(e2e_cli, tmp_path, request,
                                                             kind, containment):
    target, sentinel = host_file(tmp_path)
    before = target.read_bytes()
    corpus = tmp_path / "h"
    work = corpus.with_name("h.partial")
    r = e2e_cli(*run_args(containment, corpus, "0-1", request),
                env={testfaults.TEST_HOSTILE: f"{kind}:{target}"}, json_errors=False)
    assert r.code == 1, r.out + r.err  # one errored session: exit 1, never 70
    assert "Traceback" not in r.err
    first, second = ledger(work)  # exactly one line per attempt: none through a link
    assert [first["seq"], second["seq"]] == [0, 1]
    check_refused(work, first, CASES[kind], kind in NATIVE_REFUSED)
    assert (second["status"], second["conclusive"]) == ("complete", True)  # the next cell ran
    assert second["native_sha256"] is not None
    assert "map.staging_refused x1" in r.err
    assert "1 conclusive, 0 inconsistent, 1 inconclusive" in r.out
    assert target.read_bytes() == before  # nothing written into the host file
    for name, data in corpus_bytes(work).items():
        assert sentinel.encode() not in data, name
    assert sentinel not in r.out and sentinel not in r.err
    assert not (work / "quarantine").exists()  # refused, never read: nothing to quarantine
    assert not list((work / "staging").glob("s-*"))  # the refused session's staging removed
    manifest = json.loads((work / "manifest.json").read_text())
    assert any(o.startswith(f"{testfaults.TEST_HOSTILE}: ")
               for o in manifest["live"]["test_overrides"])
    if containment == "bwrap":  # the cell staged it inside the sandbox
        assert manifest["producer"]["sandbox"]["kind"] == "bwrap"
    v = e2e_cli("verify", "--corpus", corpus, json_errors=False)  # the corpus still holds
    assert v.code == 0 and " 0 failed" in v.out + v.err, v.out + v.err


@pytest.mark.slow
@pytest.mark.req("R-2.3", "R-21.19")
@pytest.mark.parametrize("containment", ["default", "bwrap"])
def test_a_link_to_another_sessions_staging_is_refused(e2e_cli, tmp_path, request,
                                                       containment):
    corpus = tmp_path / "o"
    work = corpus.with_name("o.partial")
    args = run_args(containment, corpus, "0-2", request)
    r = e2e_cli(*args, "--limit", "1", "--keep-staging", json_errors=False)
    assert r.code == 0, r.out + r.err
    (kept,) = ledger(work)
    other = work / "staging" / kept["session_id"] / "capture.jsonl"
    assert other.is_file()  # the first session's staging, kept
    blobs = set(corpus_bytes(work / "raw"))
    r = e2e_cli(*args, env={testfaults.TEST_HOSTILE: f"symlink_other_session:{other}"},
                json_errors=False)
    assert r.code == 1, r.out + r.err
    first, refused, last = ledger(work)
    assert first == kept
    check_refused(work, refused, "none.json: a symlink, not a regular file", True)
    assert last["status"] == "complete"
    stored = {refused["capture_sha256"], last["capture_sha256"], last["native_sha256"]}
    new = {Path(n).name for n in set(corpus_bytes(work / "raw")) - blobs}
    assert new == stored  # nothing of the other session was stored again for this one


def test_the_worker_and_t0_name_the_same_hostile_faults():
    from conftest import load_backend_module

    assert load_backend_module("cells", "agentprov_dojo").HOSTILE_FAULTS == testfaults.HOSTILE_FAULTS
    assert set(CASES) | {"symlink_other_session"} == set(testfaults.HOSTILE_FAULTS)


# ---------------------------------------------------------------- T0's reader, in process
def session(tmp_path: Path) -> Path:
    s = tmp_path / "c.partial" / "staging" / "s-1"
    (s / "native" / "p").mkdir(parents=True)
    (s / "capture.jsonl").write_bytes(b'{"kind":"header","seq":0}\n')
    (s / "native" / "p" / "none.json").write_bytes(b"{}")
    return s


@pytest.mark.req("R-2.3")
def test_the_reader_refuses_every_non_regular_entry_without_reading_it(tmp_path):
    s = session(tmp_path)
    target, sentinel = host_file(tmp_path)
    (s / "link").symlink_to(target)
    (s / "native" / "up").symlink_to("../../..")  # a link to a directory: not walked
    os.mkfifo(s / "fifo")
    os.link(target, s / "hard")
    with open(s / "sparse", "wb") as f:
        f.truncate(8 << 30)
    (s / "bad\nname").write_bytes(b"x")
    got = staged.read(s, native="native/p/none.json")
    assert set(got.files) == {"capture.jsonl", "native/p/none.json"}
    assert sorted(got.refused) == sorted([
        "bad\\nname: a name that holds a control character",
        "fifo: a FIFO, not a regular file",
        "hard: a hard link (2 names for one file)",
        "link: a symlink, not a regular file",
        "native/up: a symlink, not a regular file",
        f"sparse: {8 << 30} bytes, over the cap of {staged.OTHER_MAX} bytes"])
    assert all(sentinel.encode() not in b for b in got.files.values())


def test_a_session_of_more_entries_than_the_cap_is_refused_past_it(tmp_path):
    s = session(tmp_path)
    for i in range(staged.MAX_ENTRIES):
        (s / f"f{i:04d}").write_bytes(b"")
    got = staged.read(s)
    assert got.refused == [f"the session: more than {staged.MAX_ENTRIES} entries (the rest "
                           "were not read)"]
    assert len(got.files) <= staged.MAX_ENTRIES


def test_the_session_directory_itself_is_never_followed(tmp_path):
    s = session(tmp_path)
    other = s.with_name("s-2")
    other.symlink_to(s)  # another session's directory under this one's name
    got = staged.read(other)
    assert got.files == {} and len(got.refused) == 1 and "is a symlink" in got.refused[0]


def test_a_fifo_swapped_in_after_lstat_is_refused_on_its_descriptor(tmp_path):
    """What the descriptor check catches: the open never blocks on a FIFO (O_NONBLOCK) and
    fstat refuses it, whatever lstat saw before."""
    s = session(tmp_path)
    os.mkfifo(s / "late")
    fd = os.open(s, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(staged.Refused, match="a FIFO, not a regular file"):
            staged.open_file(fd, "late", os.O_RDONLY, staged.OTHER_MAX)
        (s / "lnk").symlink_to(s / "capture.jsonl")
        with pytest.raises(staged.Refused, match="a symlink"):
            staged.open_file(fd, "lnk", os.O_RDONLY, staged.OTHER_MAX)
    finally:
        os.close(fd)


@pytest.mark.req("R-21.20")
def test_seal_never_writes_through_a_link(tmp_path):
    import agentprov_capture

    from agentprov_core.evidence import capture_end

    s = session(tmp_path)
    ledger_file = s.parent.parent / "ledger.jsonl"
    ledger_file.write_bytes(b'{"seq":0,"kind":"header","t":0}\n')
    before = ledger_file.read_bytes()
    (s / "capture.jsonl").unlink()
    (s / "capture.jsonl").symlink_to("../../ledger.jsonl")
    assert capture_end.append_end(s / "capture.jsonl", "aborted", "x", "session.worker_failed") \
        is False
    assert ledger_file.read_bytes() == before
    (s / "capture.jsonl").unlink()
    os.mkfifo(s / "capture.jsonl")  # never blocks, never written
    assert capture_end.append_end(s / "capture.jsonl", "aborted", "x", "session.worker_failed") \
        is False
    (s / "capture.jsonl").unlink()
    (s / "capture.jsonl").write_bytes(
        b'{"format":"capture/0.1","kind":"header","prev":null,"seq":0,"t":1}\n')
    assert capture_end.append_end(s / "capture.jsonl", "aborted", "x", "session.worker_failed")
    data = (s / "capture.jsonl").read_bytes()
    assert agentprov_capture.check(data).ok and agentprov_capture.check(data).end["status"] == "aborted"


@pytest.mark.parametrize("name,why", [
    ("../../ledger.jsonl", "has a '..' component"), ("/etc/passwd", "is an absolute path"),
    ("native/\x00x", "holds a NUL byte"), ("n" * 10_000, "is 10000 characters long"),
    ("native//x.json", "has an empty or '.' component"), ("./x", "has an empty or '.' component"),
    ("x" * 256, "has a component of 256 bytes"), (["x"], "is a list, not a path")])
def test_a_returned_path_outside_staging_is_refused(name, why):
    assert why in staged.bad_name(name)
    result, refused = staged.returned({"status": "complete", "native_log": name})
    assert "native_log" not in result and len(refused) == 1 and why in refused[0]


def test_the_results_fields_are_taken_by_type():
    result, refused = staged.returned({
        "status": "quarantined", "utility": "yes", "security": False, "calls": True,
        "reason": "r" * 5000, "setup_refusal": {"message": 1},
        "native_log": "native/p/none.json"})
    assert result == {"status": "errored", "security": False, "reason": "r" * 2000 + "…",
                      "native_log": "native/p/none.json"}
    assert [r.split(": ", 1)[1].split(" ")[0] for r in refused] == [
        "status", "utility", "calls", "setup_refusal"]
    assert staged.returned(["not", "an", "object"])[0] == {"status": "errored"}


def test_a_name_shown_in_a_refusal_holds_no_key():
    assert "sk-" not in staged.shown("sk-proj-" + "A" * 40)


def test_a_staged_name_that_is_not_utf8_is_refused(tmp_path):
    s = session(tmp_path)
    (s / os.fsdecode(b"bad\xff")).write_bytes(b"x")
    got = staged.read(s)
    assert got.refused == ["bad\\udcff: a name that is not UTF-8"]
    assert "bad\udcff" not in got.files


@pytest.mark.req("R-21.21")
def test_a_key_only_in_the_native_log_quarantines_the_session(tmp_path):
    """The redaction scan covers every file T0 stores, the native log among them."""
    from tests.test_ingest import setup

    attempt, wc, fl, p = setup(tmp_path)
    sentinel = "sk-proj-SENTINEL" + uuid.uuid4().hex
    log = fl.staging / "native" / "log.json"
    log.write_bytes(log.read_bytes().replace(b"{", json.dumps(
        {"leak": sentinel}).encode()[:-1] + b",", 1))
    assert sentinel.encode() not in (fl.staging / "capture.jsonl").read_bytes()
    entry = attempt.ingest(p, wc, fl, {"status": "complete", "native_log":
                                       "native/log.json", "calls": 2}, "inv", [0])
    assert entry.status == "quarantined" and entry.capture_sha256 is None
    assert "native/log.json: a key-shaped string" in entry.reason
    assert not (wc.root / "raw").exists() or not any(
        sentinel.encode() in f.read_bytes() for f in (wc.root / "raw").rglob("*") if f.is_file())
    assert sentinel not in (wc.root / "ledger.jsonl").read_text()
