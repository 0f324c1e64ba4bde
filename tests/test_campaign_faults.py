"""Bad input and faults in live runs: a worker or T0 killed mid-cell, signals,
damaged raw logs, a full disk, a scripted endpoint that fails, hangs or closes, two runs on
one corpus, a different configuration, two runs sharing one environment, and T0 killed
between an attempt's ledger line and its execution.

Each test runs the real CLI (T0) as a subprocess against the real AgentDojo environment and
the scripted transport, and checks after the fault that the working corpus is consistent,
that nothing settled is lost, that re-running the same command finishes the rest, and that
no settled unit is run twice.

Where a fault needs a cell in flight, the script delays its first reply (``delay_s``) and the
test waits until the cell's capture log shows a wire request without its answer. Re-runs use
the same command line; the script file behind it is rewritten to answer at once (the script's
contents are not part of the configuration digest), which keeps the file fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, child_env, snapshot

from agentprov_core.testing.procs import group_members, workers_of

pytestmark = pytest.mark.slow

READ = {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "bill-december-2023.txt"}}],
        "note": "a read-only banking tool"}
DONE = {"content": "I have read the bill; nothing was paid.", "note": "the final answer"}
FAST = [READ, DONE]


def unit(task: int) -> str:
    return f"banking/user_task_{task}/none/none|none|r0"


def write_script(path: Path, replies: list[dict]) -> Path:
    path.write_text(json.dumps(replies), encoding="utf-8")
    return path


def slow(delay: float) -> list[dict]:
    """The fast script with its first reply held back ``delay`` seconds."""
    return [dict(READ, delay_s=delay), DONE]


def run_args(corpus: Path, script: Path, tasks: str = "0", *extra: str) -> list[str]:
    return ["run", "agentdojo", "--corpus", str(corpus), "--campaign", "faults",
            "--suite", "banking", "--user-tasks", tasks, "--llm-script", str(script), *extra]


# ------------------------------------------------------------------ processes
def wait_for(predicate, timeout: float = 120.0, what: str = "a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


class Runs:
    """T0 subprocesses of one test. Whatever a test leaves running (a T0, the worker of a
    killed T0 and its process group) is killed at the end, by id."""

    def __init__(self, env_home: Path, tmp: Path) -> None:
        self.env = child_env()
        self.env["AGENTPROV_HOME"] = str(env_home)
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []
        self.workers: set[int] = set()
        self.n = 0

    def start(self, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        self.n += 1
        out = open(self.tmp / f"t0-{self.n}.out", "w+")  # noqa: SIM115 - read back by result()
        err = open(self.tmp / f"t0-{self.n}.err", "w+")  # noqa: SIM115
        p = subprocess.Popen([sys.executable, "-m", "agentprov_core", *args], stdout=out,
                             stderr=err, env={**self.env, **(env or {})}, cwd=ROOT, text=True)
        p.out_file, p.err_file = out, err  # type: ignore[attr-defined]
        self.procs.append(p)
        return p

    def finish(self, p: subprocess.Popen, timeout: float = 180.0) -> tuple[int, str, str]:
        code = p.wait(timeout=timeout)
        outs = []
        for f in (p.out_file, p.err_file):  # type: ignore[attr-defined]
            f.flush()
            f.seek(0)
            outs.append(f.read())
            f.close()
        return code, outs[0], outs[1]

    def run(self, args: list[str], timeout: float = 180.0) -> tuple[int, str, str]:
        return self.finish(self.start(args), timeout)

    def worker_of(self, p: subprocess.Popen) -> int:
        """The pid of T0's campaign worker (``python -m agentprov_backend.worker``; call it
        once a cell is in flight: planning starts a short-lived worker of its own)."""
        pid = wait_for(lambda: workers_of(p.pid), 60, "the worker process")[0]
        self.workers.add(pid)
        return pid

    def cleanup(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.out_file, p.err_file):  # type: ignore[attr-defined]
                f.close()
        for w in self.workers:  # the worker started its own process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(w, signal.SIGKILL)


@pytest.fixture
def runs(agentdojo_env, tmp_path):
    r = Runs(agentdojo_env.home, tmp_path)
    yield r
    r.cleanup()


# ------------------------------------------------------------------ the corpus
def partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def raw_path(part: Path, sha: str) -> Path:
    return part / "raw" / "sha256" / sha[:2] / sha


def intact(part: Path, sha: str | None) -> bool:
    p = raw_path(part, sha) if sha else None
    return p is not None and p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == sha


def read_ledger(part: Path, *, torn_inside: bool = False) -> list[dict]:
    """The ledger's entries. Every line parses, except at most one torn line, which must be
    the last (or, with ``torn_inside``, may have had entries appended after it)."""
    path = part / "ledger.jsonl"
    if not path.exists():
        return []
    lines = [ln for ln in path.read_bytes().split(b"\n") if ln.strip()]
    entries, bad = [], []
    for i, line in enumerate(lines):
        try:
            entries.append(json.loads(line))
        except ValueError:
            bad.append(i)
    assert len(bad) <= 1, f"ledger lines {bad} do not parse"
    if bad and not torn_inside:
        assert bad == [len(lines) - 1], f"ledger line {bad[0] + 1} does not parse"
    return entries


def capture_records(part: Path, sha: str) -> list[dict]:
    return [json.loads(x) for x in raw_path(part, sha).read_bytes().splitlines()]


def check_consistent(part: Path, *, damaged: frozenset[str] = frozenset(),
                     torn_inside: bool = False) -> list[dict]:
    """The corpus is consistent: the manifest parses; the ledger parses (but for a torn
    line); every entry's capture log (and native log) is in the raw store and hashes to its
    name (except the objects a test damaged on purpose), its hash chain holds, it ends, its
    end is the entry's status and its head is the entry's head digest. Returns the entries."""
    import agentprov_capture

    manifest = json.loads((part / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["format"] == "agentprov-live-corpus/0.1"
    entries = read_ledger(part, torn_inside=torn_inside)
    assert [e["seq"] for e in entries] == list(range(len(entries)))
    for e in entries:
        if e["status"] == "quarantined":
            continue
        for key in ("capture_sha256", "native_sha256"):
            sha = e.get(key)
            if sha and sha not in damaged:
                assert intact(part, sha), f"{e['session_id']}: {key} {sha} missing or altered"
        sha = e["capture_sha256"]
        assert sha, f"{e['session_id']}: no capture log stored"
        if sha in damaged:
            continue
        chain = agentprov_capture.check(raw_path(part, sha).read_bytes(), require_end=False)
        assert chain.ok, (e["session_id"], chain.problems)
        assert chain.end is not None and chain.end["status"] == e["status"], e["session_id"]
        assert chain.head_sha256 == e["capture_head_sha256"]
    return entries


def check_each_unit_once(part: Path, entries: list[dict], units: set[str]) -> None:
    """Exactly one conclusive entry per unit whose logs are intact, and no attempt at a unit
    after that entry."""
    good = [e for e in entries if e["conclusive"] and intact(part, e["capture_sha256"])
            and (e["native_sha256"] is None or intact(part, e["native_sha256"]))]
    assert Counter(e["unit"] for e in good) == Counter(units), [
        (e["unit"], e["status"]) for e in entries]
    for g in good:
        later = [e for e in entries if e["unit"] == g["unit"] and e["seq"] > g["seq"]]
        assert later == [], f"{g['unit']} was attempted again after it settled"


def check_rerun_kept(before: list[dict], after: list[dict], part: Path) -> list[dict]:
    """Nothing the first run ledgered was lost or rewritten, and the re-run attempted no
    unit the first run had settled. Returns the re-run's entries."""
    assert after[:len(before)] == before
    settled = {e["unit"] for e in before if e["conclusive"] and intact(part, e["capture_sha256"])
               and (e["native_sha256"] is None or intact(part, e["native_sha256"]))}
    new = after[len(before):]
    assert not settled & {e["unit"] for e in new}, "a settled unit was run twice"
    return new


def staged_sessions(part: Path) -> set[str]:
    d = part / "staging"
    return {p.name for p in d.iterdir() if p.name.startswith("s-")} if d.is_dir() else set()


def in_flight(part: Path) -> list[str]:
    """Sessions whose capture log shows a wire request still waiting for its answer."""
    out = []
    for cap in sorted((part / "staging").glob("s-*/capture.jsonl")):
        try:
            data = cap.read_bytes()
        except OSError:
            continue
        asked = data.count(b'"kind":"wire_request"')
        answered = data.count(b'"kind":"wire_response"') + data.count(b'"kind":"wire_error"')
        if asked > answered and b'"kind":"end"' not in data:
            out.append(cap.parent.name)
    return out


def ledger_len(part: Path) -> int:
    return len(read_ledger(part))


# ------------------------------------------------------------------ 1. the worker killed
@pytest.mark.req("R-21.20", "R-21.28", "R-21.30", "R-21.32")
def test_worker_killed_mid_cell(runs, tmp_path):
    """SIGKILL to the worker while a cell waits for a reply: T0 seals that session aborted
    itself (a note and the end, ``sealed_by: parent``), ledgers it, ends the worker's orphans
    (its forkserver and the cell), stops with exit 1; the re-run does the rest."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", slow(3))
    part = partial(corpus)
    args = run_args(corpus, script, "0-1")
    t0 = runs.start(args)
    wait_for(lambda: ledger_len(part) == 1, what="the first unit's ledger entry")
    victim = wait_for(lambda: in_flight(part), what="the second cell in flight")[0]
    worker = runs.worker_of(t0)
    os.kill(worker, signal.SIGKILL)
    code, out, err = runs.finish(t0)
    assert code == 1, err
    assert "the worker ended; the sessions in flight were sealed aborted" in err
    assert "1 conclusive, 0 inconsistent, 1 inconclusive" in out
    entries = check_consistent(part)
    assert [(e["unit"], e["status"]) for e in entries] == [(unit(0), "complete"),
                                                           (unit(1), "aborted")]
    aborted = entries[1]
    assert aborted["session_id"] == victim
    recs = capture_records(part, aborted["capture_sha256"])
    assert recs[-2]["kind"] == "note" and recs[-2]["code"] == "session.worker_failed"
    assert (recs[-1]["kind"], recs[-1]["status"], recs[-1]["sealed_by"]) == (
        "end", "aborted", "parent")
    assert "exited (code -9) with a request in flight" in recs[-1]["reason"]
    # nothing the worker started outlives it (an orphaned cell would write on)
    wait_for(lambda: not group_members(worker), 5, "the worker's forkserver and cell to end")
    assert staged_sessions(part) == set()
    manifest = json.loads((part / "manifest.json").read_text())
    assert manifest["partial"] is True and manifest["stops"][-1] == {
        "at": manifest["stops"][-1]["at"], "stop": "worker", "exit": 1}

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err
    assert "1 of 2 unit(s) done before" in out
    after = check_consistent(part)
    new = check_rerun_kept(entries, after, part)
    assert [(e["unit"], e["status"], e["attempt"]) for e in new] == [(unit(1), "complete", 2)]
    check_each_unit_once(part, after, {unit(0), unit(1)})


# ------------------------------------------------------------------ 2. T0 killed (and 7)
@pytest.mark.req("R-21.28", "R-21.30", "R-14.1")
def test_t0_killed_mid_cell_then_rerun(runs, tmp_path):
    """While a cell is in flight, a second run on the same corpus is refused (exit 4,
    ``cli.refused.corpus_busy``) and writes nothing. Then T0 is killed (SIGKILL): the lock
    dies with it, the killed session stays in staging unledgered, and the re-run is not
    refused and completes every unit. A torn ledger line (as T0 killed mid-append leaves)
    does not stop the re-runs either."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", slow(5))
    part = partial(corpus)
    args = run_args(corpus, script, "0-1")
    t0 = runs.start(args)
    first = wait_for(lambda: in_flight(part), what="the first cell in flight")[0]

    # 7. two runs on one corpus at once: the second is refused and writes nothing
    def state():
        return {k: v for k, v in snapshot(part).items() if not k.startswith(f"staging/{first}/")}

    before = state()
    code, out, err = runs.run(["--error-format", "json", *args])
    assert code == 4, err
    error = json.loads(err.strip().splitlines()[-1])
    assert (error["error"], error["exit"]) == ("cli.refused.corpus_busy", 4)
    assert out == ""
    assert in_flight(part) == [first], "the fault window closed: use a longer delay_s"
    assert state() == before

    wait_for(lambda: ledger_len(part) == 1, what="the first unit's ledger entry")
    killed = wait_for(lambda: in_flight(part), what="the second cell in flight")[0]
    worker = runs.worker_of(t0)
    t0.kill()
    assert runs.finish(t0)[0] == -signal.SIGKILL
    wait_for(lambda: not group_members(worker), 30, "the orphaned worker to end")
    entries = check_consistent(part)
    assert [(e["unit"], e["status"]) for e in entries] == [(unit(0), "complete")]
    assert staged_sessions(part) == {killed}
    # T0 killed in the middle of an append would leave a torn last line: simulate one
    ledger = part / "ledger.jsonl"
    whole = ledger.read_bytes()
    with open(ledger, "ab") as f:
        f.write(whole[:100])
    check_consistent(part)

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err  # not refused: the corpus lock died with T0
    assert "1 of 2 unit(s) done before" in out
    after = check_consistent(part, torn_inside=True)
    new = check_rerun_kept(entries, after, part)
    assert [(e["unit"], e["status"]) for e in new] == [(unit(1), "complete")]
    check_each_unit_once(part, after, {unit(0), unit(1)})
    assert killed not in {e["session_id"] for e in after}
    assert staged_sessions(part) == {killed}  # the killed attempt's staging stays
    # and the ledger with its torn line inside still reads: another re-run has nothing to do
    code, out, err = runs.run(args)
    assert (code, out.strip().splitlines()[-1].split("; ")[-1]) == (
        0, "2 of 2 unit(s) done before"), err


# ------------------------------------------------------------------ 3. signals
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.req("R-21.26", "R-21.20", "R-21.28", "R-14.1")
def test_interrupt_seals_the_session_in_flight(runs, tmp_path, signum):
    """SIGINT or SIGTERM mid-cell: exit 130, the session in flight sealed aborted by the
    parent and ledgered, the manifest partial; the re-run completes."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", slow(60))
    part = partial(corpus)
    args = run_args(corpus, script)
    t0 = runs.start(args)
    victim = wait_for(lambda: in_flight(part), what="the cell in flight")[0]
    worker = runs.worker_of(t0)
    t0.send_signal(signum)
    code, out, err = runs.finish(t0, timeout=30)
    assert code == 130, err
    assert "interrupted: in-flight sessions were sealed aborted and ledgered" in err
    entries = check_consistent(part)
    assert [(e["unit"], e["status"], e["session_id"]) for e in entries] == [
        (unit(0), "aborted", victim)]
    recs = capture_records(part, entries[0]["capture_sha256"])
    assert (recs[-2]["kind"], recs[-2]["code"]) == ("note", "session.interrupted")
    assert (recs[-1]["status"], recs[-1]["sealed_by"]) == ("aborted", "parent")
    manifest = json.loads((part / "manifest.json").read_text())
    assert manifest["partial"] is True
    assert manifest["stops"][-1]["stop"] == "interrupt" and manifest["stops"][-1]["exit"] == 130
    wait_for(lambda: not group_members(worker), 5, "the worker's processes to end")
    assert staged_sessions(part) == set()

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err
    after = check_consistent(part)
    new = check_rerun_kept(entries, after, part)
    assert [(e["unit"], e["status"], e["attempt"]) for e in new] == [(unit(0), "complete", 2)]
    check_each_unit_once(part, after, {unit(0)})


@pytest.mark.req("R-21.27", "R-21.28")
def test_a_second_sigint_exits_at_once(runs, tmp_path):
    """Two SIGINTs in quick succession: T0 exits 130 at once. A session in flight is either
    ledgered (sealed aborted) or left in staging, never lost silently; the re-run completes."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", slow(60))
    part = partial(corpus)
    args = run_args(corpus, script)
    t0 = runs.start(args)
    victim = wait_for(lambda: in_flight(part), what="the cell in flight")[0]
    runs.worker_of(t0)
    t0.send_signal(signal.SIGINT)
    time.sleep(0.02)  # two signals sent together could be merged into one by the kernel
    t0.send_signal(signal.SIGINT)
    sent = time.monotonic()
    code, out, err = runs.finish(t0, timeout=30)
    # 130; or, when the second signal lands after T0 has finished, in the interpreter's last
    # milliseconds, death by that SIGINT (which a shell reports as 130 too)
    assert code in (130, -signal.SIGINT), err
    assert time.monotonic() - sent < 5
    assert "Traceback" not in err
    entries = check_consistent(part)
    ledgered = {e["session_id"] for e in entries}
    assert victim in ledgered or victim in staged_sessions(part)
    assert all(e["status"] == "aborted" for e in entries)

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err
    after = check_consistent(part)
    check_rerun_kept(entries, after, part)
    check_each_unit_once(part, after, {unit(0)})


# ------------------------------------------------------------------ 4. damaged raw logs
@pytest.mark.req("R-21.30", "R-21.28", "R-8.4")
def test_a_damaged_log_in_the_raw_store_unsettles_exactly_its_unit(runs, tmp_path):
    """One byte of a stored capture log changed (unit 0), then a stored native log cut short
    (unit 1): each damage makes the dry run count one settled unit fewer, and the next run
    re-attempts exactly the damaged units (new entries; the old ones stay) and exits 0."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", FAST)
    part = partial(corpus)
    args = run_args(corpus, script, "0-2")
    all_units = {unit(0), unit(1), unit(2)}

    def settled_line() -> str:
        code, out, err = runs.run([*args, "--dry-run"])
        assert code == 0, err
        return out.splitlines()[1].split("; ")[1]

    code, out, err = runs.run(args)
    assert code == 0, err
    first = check_consistent(part)
    check_each_unit_once(part, first, all_units)
    assert settled_line() == "3 unit(s) already settled"
    by_unit = {e["unit"]: e for e in first}

    # a changed byte inside one capture record (a tool result) of unit 0
    cap = raw_path(part, by_unit[unit(0)]["capture_sha256"])
    data = bytearray(cap.read_bytes())
    at = data.index(b'"kind":"tool_result"') + len('"kind":"tool_result"') + 10
    data[at] ^= 0x01
    os.chmod(cap, 0o644)
    cap.write_bytes(bytes(data))
    assert settled_line() == "2 unit(s) already settled"
    # a native log of unit 1 cut short
    native = raw_path(part, by_unit[unit(1)]["native_sha256"])
    os.chmod(native, 0o644)
    native.write_bytes(native.read_bytes()[:100])
    assert settled_line() == "1 unit(s) already settled"
    damaged = frozenset({by_unit[unit(0)]["capture_sha256"], by_unit[unit(1)]["native_sha256"]})

    code, out, err = runs.run(args)
    assert code == 0, err
    assert "1 of 3 unit(s) done before" in out
    after = check_consistent(part, damaged=damaged)
    new = check_rerun_kept(first, after, part)
    assert sorted((e["unit"], e["status"], e["attempt"]) for e in new) == [
        (unit(0), "complete", 2), (unit(1), "complete", 2)]
    check_each_unit_once(part, after, all_units)
    assert settled_line() == "3 unit(s) already settled"


# ------------------------------------------------------------------ 5. a full disk
def fill(path: Path) -> None:
    """Write ``path`` until the filesystem has no byte left."""
    with open(path, "ab", buffering=0) as f:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 9, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * chunk)


@pytest.mark.req("R-14.1", "R-21.28", "R-21.30")
def test_a_full_disk_under_the_corpus(runs, tmp_path):
    """The corpus on a 4 MiB tmpfs (needs root to mount; skipped elsewhere), filled to the
    last byte while the second of two cells is in flight: T0 reports the failed write without
    a traceback (exit 1 or 3, never 70), the ledger stays consistent and keeps the first
    unit; once space is freed the re-run completes the second unit only."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4M", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root)")
    try:
        corpus, script = mnt / "c", write_script(tmp_path / "s.json", slow(2))
        part = partial(corpus)
        args = run_args(corpus, script, "0-1")
        t0 = runs.start(["--error-format", "json", *args])
        wait_for(lambda: ledger_len(part) == 1, what="the first unit's ledger entry")
        wait_for(lambda: in_flight(part), what="the second cell in flight")
        filler = mnt / "filler"
        fill(filler)
        assert os.statvfs(mnt).f_bavail == 0
        code, out, err = runs.finish(t0)
        assert code in (1, 3), err
        assert "Traceback" not in err and "internal error" not in err
        if code == 3:
            error = json.loads(err.strip().splitlines()[-1])
            assert error["error"] == "cli.environment.corpus"
            assert "No space left on device" in error["message"]
        assert not list(part.glob(".manifest-*"))  # no temporary manifest left behind
        entries = check_consistent(part)
        assert entries[0]["unit"] == unit(0) and entries[0]["conclusive"]

        filler.unlink()
        write_script(script, FAST)
        code, out, err = runs.run(args)
        assert code == 0, err
        after = check_consistent(part, torn_inside=True)
        new = check_rerun_kept(entries, after, part)
        assert unit(0) not in {e["unit"] for e in new}
        check_each_unit_once(part, after, {unit(0), unit(1)})
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


# ------------------------------------------------------------------ 6. the endpoint fails
@pytest.mark.req("R-21.12", "R-21.13", "R-21.19", "R-21.33", "R-21.32")
def test_http_500_every_reply(runs, tmp_path):
    """A persistent HTTP 500: AgentDojo's tenacity (3 attempts) around the SDK's 2 retries
    makes 9 wire requests, all recorded and linked to the first; the cell ends errored,
    exit 1, and the quality line shows the 8 retries. The re-run completes."""
    error = {"http_error": {"status": 500, "headers": {"retry-after-ms": "10"}},
             "note": "retry-after-ms keeps the SDK's backoff short; tenacity's is its own"}
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", [error] * 9)
    part = partial(corpus)
    args = run_args(corpus, script)
    code, out, err = runs.run(args)
    assert code == 1, err
    assert "  quality  scripted: 1 call(s), 8 retries, 0 abnormal finish(es), 0 wire error(s)" \
        in err
    entries = check_consistent(part)
    assert [(e["unit"], e["status"], e["conclusive"]) for e in entries] == [
        (unit(0), "errored", False)]
    recs = capture_records(part, entries[0]["capture_sha256"])
    requests = [r for r in recs if r["kind"] == "wire_request"]
    assert len(requests) == 9
    assert {r["first_attempt_id"] for r in requests} == {requests[0]["attempt_id"]}
    assert [r["attempt_index"] for r in requests] == list(range(9))
    assert [r["status"] for r in recs if r["kind"] == "wire_response"] == [500] * 9
    assert recs[-1]["status"] == "errored"

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err
    after = check_consistent(part)
    check_rerun_kept(entries, after, part)
    check_each_unit_once(part, after, {unit(0)})


@pytest.mark.req("R-21.20", "R-21.19", "R-21.32")
def test_a_hanging_endpoint_and_the_cell_timeout(runs, tmp_path):
    """An endpoint that never answers and ``--cell-timeout 20`` (long enough for a cell to
    reach its first request on a loaded machine): the worker ends the cell and
    seals its session aborted (a ``cell.timeout`` note, then the end); exit 1. The re-run
    completes."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", [{"hang": True}])
    part = partial(corpus)
    args = run_args(corpus, script, "0", "--cell-timeout", "20")
    code, out, err = runs.run(args)
    assert code == 1, err
    entries = check_consistent(part)
    assert [(e["unit"], e["status"]) for e in entries] == [(unit(0), "aborted")]
    recs = capture_records(part, entries[0]["capture_sha256"])
    assert (recs[-2]["kind"], recs[-2]["code"]) == ("note", "cell.timeout")
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "aborted"
    assert "outlived --cell-timeout 20s" in recs[-1]["reason"]
    assert [r["kind"] for r in recs].count("wire_request") == 1

    write_script(script, FAST)
    code, out, err = runs.run(run_args(corpus, script, "0"))  # the default timeout
    assert code == 0, err
    after = check_consistent(part)
    check_rerun_kept(entries, after, part)
    check_each_unit_once(part, after, {unit(0)})


@pytest.mark.req("R-21.12", "R-21.19", "R-21.32")
def test_an_endpoint_that_closes_the_connection(runs, tmp_path):
    """An endpoint that closes every connection without answering: every attempt is a
    ``wire_error`` (9 of them, retries included), the cell ends errored, exit 1. The re-run
    completes."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", [{"close": True}] * 9)
    part = partial(corpus)
    args = run_args(corpus, script)
    code, out, err = runs.run(args)
    assert code == 1, err
    assert "9 wire error(s)" in err
    entries = check_consistent(part)
    assert [(e["unit"], e["status"]) for e in entries] == [(unit(0), "errored")]
    recs = capture_records(part, entries[0]["capture_sha256"])
    errors = [r for r in recs if r["kind"] == "wire_error"]
    assert len(errors) == 9 and not [r for r in recs if r["kind"] == "wire_response"]
    assert all(r["stage"] == "send" for r in errors)

    write_script(script, FAST)
    code, out, err = runs.run(args)
    assert code == 0, err
    after = check_consistent(part)
    check_rerun_kept(entries, after, part)
    check_each_unit_once(part, after, {unit(0)})


# ------------------------------------------------------------------ 8. mixed configuration
@pytest.mark.req("R-15.13", "R-2.14", "R-2.13")
def test_a_different_configuration_on_the_same_corpus(runs, tmp_path):
    """Another model on the same local server is a different configuration: refused (exit
    4, ``cli.refused.mixed_config``) without writing anything; with ``--allow-mixed-config``
    it is accepted and the manifest holds both digests (both runs start no cell:
    ``--limit 0``)."""
    from tests.test_local_models import FakeServer, openai_compat_routes
    from tests.test_real_campaign import answer

    routes = openai_compat_routes(tmp_path)  # serves "Qwen/Qwen3-8B" and "tiny"
    routes[("POST", "/v1/chat/completions")] = lambda body: (200, answer(json.loads(body)))
    server = FakeServer(routes)
    try:
        corpus = tmp_path / "c"
        part = partial(corpus)

        def args(model: str) -> list[str]:
            return ["run", "agentdojo", "--corpus", str(corpus), "--campaign", "faults",
                    "--suite", "banking", "--user-tasks", "0", "--endpoint", "openai_compat",
                    "--base-url", server.base_url, "--model-id", model, "--containment",
                    "vm", "--i-consent-to-local-run"]

        code, out, err = runs.run([*args("Qwen/Qwen3-8B"), "--limit", "0"])
        assert code == 0, err
        first = json.loads((part / "manifest.json").read_text())["config_digests"]
        assert len(first) == 1
        before = snapshot(part)
        code, out, err = runs.run(["--error-format", "json", *args("tiny")])
        assert code == 4, err
        error = json.loads(err.strip().splitlines()[-1])
        assert (error["error"], error["exit"]) == ("cli.refused.mixed_config", 4)
        assert snapshot(part) == before
        code, out, err = runs.run([*args("tiny"), "--allow-mixed-config", "--limit", "0"])
        assert code == 0, err
        manifest = json.loads((part / "manifest.json").read_text())
        assert len(manifest["config_digests"]) == 2 and first[0] in manifest["config_digests"]
        assert check_consistent(part) == []
    finally:
        server.close()


# ------------------------------------------------------------------ readers during a run
def read_all(part: Path) -> dict[str, object]:
    """verify, validate --strict, stats and recompute --dry-run of ``part``, in-process
    (the CLI's own functions, on the real files), as a reader sees the corpus now."""
    from agentprov_core.audit import stats as statsmod
    from agentprov_core.audit.validation import Run
    from agentprov_core.audit.verification import verify_corpus
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.evidence import recompute as rc

    report = verify_corpus(part)
    run = Run(part, strict=True, release=False, skip_prov=False, fmt="json")
    validate_failed = run.corpus()
    c = open_corpus(part)
    counts = statsmod.tables(c, ("counts",))["counts"][0]
    s = rc.run(c.root, c.manifest, None)
    return {"verify": [f.line() for f in report.failed],
            "held": run.snap.held,
            "validate": run.tally.failures + run.tally.corpus_problems if validate_failed
            else [],
            "recompute": [r.reasons for r in s.details] if not s.ok else [],
            "attempts": counts["attempts"], "records": counts["records"]}


@pytest.mark.req("R-27.2", "R-27.3", "R-27.4", "R-27.5")
def test_readers_during_a_run_see_a_consistent_corpus(runs, tmp_path):
    """A scripted campaign whose endpoint answers slowly (0.3 s a reply, five cells), read
    over and over while it writes: verify, validate --strict, stats and recompute --dry-run
    never report a failure of a healthy corpus, and say that a run holds it; once it has
    finished, every read passes without that note."""
    corpus = tmp_path / "c"
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": 0.3,
                                  "replies": FAST}), encoding="utf-8")
    part = partial(corpus)
    p = runs.start(run_args(corpus, script, "0-4"))
    wait_for(lambda: (part / "ledger.jsonl").exists(), 120, "the first ledger entry")
    reads, held, seen_attempts = [], 0, set()
    while p.poll() is None:
        got = read_all(part)
        reads.append(got)
        held += bool(got["held"])
        seen_attempts.add(got["attempts"])
        assert not got["verify"] and not got["validate"] and not got["recompute"], got
    code, out, err = runs.finish(p)
    assert code == 0, err
    assert len(reads) >= 20 and held >= len(reads) - 5, (len(reads), held)  # the last: unlocked
    assert len(seen_attempts) >= 3, seen_attempts  # the reads saw the corpus grow
    final = read_all(part)
    assert final == {"verify": [], "held": False, "validate": [], "recompute": [],
                     "attempts": 5, "records": 5}
    r = runs.run(["verify", "--corpus", str(part)])
    assert r[0] == 0 and "in_progress" not in r[1], r


@pytest.mark.req("R-27.4")
def test_a_byte_flipped_in_a_real_corpus_is_detected(runs, tmp_path):
    """The real T0's corpus of a scripted campaign (a setup refusal among its cells): a bit
    flipped at 64 places of every evidence file is caught by verify or validate --strict
    (test_corpus_tools flips every byte of the files no other file's digest covers)."""
    from test_corpus_tools import evidence_files, undetected_flips

    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", FAST)
    code, out, err = runs.run([*run_args(corpus, script, "0-1"), "--attack",
                               "important_instructions", "--injection-tasks", "0",
                               "--benign", "include"])
    assert code == 1 and "a cell's setup refused this configuration" in err, err
    part = partial(corpus)
    assert read_all(part)["verify"] == []
    names = {str(p.relative_to(part)).split("/")[0] for p in evidence_files(part)}
    assert names == {"manifest.json", "ledger.jsonl", "executions.jsonl", "executions", "raw"}
    assert undetected_flips(part, samples=64) == []


# ------------------------------------------------------------------ 9. a shared environment
@pytest.mark.req("R-6.14", "R-21.28")
def test_two_runs_share_the_environment_and_a_build_waits_for_both(runs, tmp_path):
    """Two campaigns on two corpora, started at the same instant on one environment: both
    run at once (each has a cell in flight while the other does) and both exit 0. While they
    run, a build and an offline check of that environment are refused (exit 3,
    ``cli.environment.env_busy``); once they have ended, the offline check passes."""
    # each cell's first reply is held back long enough that both runs are still in flight
    # when the two builds return, even on a loaded machine (6 s was not, at load 10)
    script = write_script(tmp_path / "s.json", slow(15))
    a, b = tmp_path / "a", tmp_path / "b"
    t1, t2 = runs.start(run_args(a, script, "0-1")), runs.start(run_args(b, script, "0-1"))
    wait_for(lambda: in_flight(partial(a)) and in_flight(partial(b)),
             what="a cell in flight in both corpora at once")
    for extra in ((), ("--offline-check",)):
        code, out, err = runs.run(["--error-format", "json", "backends", "build", "agentdojo",
                                   *extra])
        assert code != 0 or (t1.poll() is None and t2.poll() is None), \
            f"the build ran after a run had ended (too slow a machine for this test): {out}"
        error = json.loads(err.strip().splitlines()[-1])
        assert (code, error["error"]) == (3, "cli.environment.env_busy"), err
    assert t1.poll() is None and t2.poll() is None, "a run ended before the builds were tried"
    for t, corpus in ((t1, a), (t2, b)):
        code, out, err = runs.finish(t)
        assert code == 0, err
        assert out.strip().endswith("0 of 2 unit(s) done before")
        check_each_unit_once(partial(corpus), check_consistent(partial(corpus)),
                             {unit(0), unit(1)})
    code, out, err = runs.run(["backends", "build", "agentdojo", "--offline-check"])
    assert code == 0, err


# ------------------------------------------------------------------ 10. the mapping window
def index_lines(part: Path) -> list[dict]:
    path = part / "executions.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] \
        if path.exists() else []


@pytest.mark.req("R-21.28", "R-2.10", "R-27.9")
def test_t0_killed_between_the_ledger_line_and_the_execution(runs, tmp_path):
    """T0 killed (SIGKILL, by the test-only fault ``AGENTPROV_TEST_KILL_T0=ledger:1``) right
    after the first attempt's ledger line, before its execution: the corpus holds a settled
    unit without an execution. The re-run maps it first, says so on stderr with the count,
    runs the other unit, and ends with exactly one execution per attempt; a further re-run
    maps nothing again and rewrites nothing."""
    corpus, script = tmp_path / "c", write_script(tmp_path / "s.json", slow(2))
    part = partial(corpus)
    args = run_args(corpus, script, "0-1")
    t0 = runs.start(args, env={"AGENTPROV_TEST_KILL_T0": "ledger:1"})
    wait_for(lambda: in_flight(part), what="the first cell in flight")
    worker = runs.worker_of(t0)
    code, out, err = runs.finish(t0)
    write_script(script, FAST)
    assert code == -signal.SIGKILL, err
    wait_for(lambda: not group_members(worker), 30, "the orphaned worker to end")
    entries = check_consistent(part)
    assert [(e["unit"], e["status"]) for e in entries] == [(unit(0), "complete")]
    assert index_lines(part) == []  # the attempt is ledgered, never mapped
    manifest = json.loads((part / "manifest.json").read_text())
    assert any(n.startswith("AGENTPROV_TEST_KILL_T0") for n in manifest["live"]["test_overrides"])

    code, out, err = runs.run(args)
    assert code == 0, err
    assert ("agentprov run: 1 attempt(s) in the ledger had no execution (an earlier run ended "
            "before mapping them): 1 mapped now, 0 failed") in err
    assert out.strip().endswith("1 conclusive, 0 inconsistent, 0 inconclusive; 2 derived, "
                                "0 failed; 1 of 2 unit(s) done before")
    after = check_consistent(part)
    check_each_unit_once(part, after, {unit(0), unit(1)})
    index = index_lines(part)
    assert sorted(x["ledger_seq"] for x in index) == [e["seq"] for e in after] == [0, 1]
    assert [x["execution_id"] for x in index] == [after[0]["session_id"], after[1]["session_id"]]
    for x in index:
        d = part / "executions" / x["execution_id"]
        assert hashlib.sha256((d / "aer.json").read_bytes()).hexdigest() == x["aer_sha256"]
    before = snapshot(part / "executions") | {"index": (part / "executions.jsonl").read_bytes()}

    code, out, err = runs.run(args)
    assert code == 0 and "had no execution" not in err, err
    assert out.strip().endswith("0 derived, 0 failed; 2 of 2 unit(s) done before")
    assert snapshot(part / "executions") | {
        "index": (part / "executions.jsonl").read_bytes()} == before
    code, out, err = runs.run(["verify", "--corpus", str(part)])
    assert code == 0, out + err
