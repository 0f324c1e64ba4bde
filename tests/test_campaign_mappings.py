"""The campaign maps ledgered attempts in a background thread (``run.mappings.Mappings``): the
next cell starts while the last one is mapped; the tally counts mappings on T0's main
thread, in ledger order, and a mapping that raises is counted failed, never lost."""

from __future__ import annotations

import threading

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.run import mappings
from agentprov_core.run.summary import Tally


def attempt(seq: int) -> Attempt:
    return Attempt(seq=seq, invocation="i", unit=f"u{seq}", cell_key=f"c{seq}", defence="none",
                   repeat=0, attempt=1, session_id=f"s-{seq}", started_at="t", ended_at="t",
                   status="complete", conclusive=True)


class Mapped:
    def __init__(self, issues: list[str]) -> None:
        self.entry = type("E", (), {"issues": issues, "live_vs_native": "agree"})()


def test_mappings_run_behind_the_loop_and_are_counted_in_ledger_order(monkeypatch):
    release = threading.Event()
    order: list[int] = []

    def fake_map(p, wc, entry):
        if entry.seq == 0:
            release.wait(10)  # the first mapping is slow: the loop goes on meanwhile
        order.append(entry.seq)
        if entry.seq == 1:
            raise RuntimeError("a mapper bug")
        return Mapped([f"code.{entry.seq}"])

    monkeypatch.setattr(mappings, "map_attempt", fake_map)
    monkeypatch.setattr(mappings, "warm_mapping", lambda prepared: None)
    tally = Tally()
    m = mappings.Mappings(None, None, tally)
    for seq in range(3):
        m.submit(attempt(seq), None)  # queued: handed to the thread by start()
    m.start()
    m.harvest()
    assert tally.attempts == 0 and order == []  # nothing is counted ahead of the first
    release.set()
    m.close()
    assert order == [0, 1, 2]
    assert (tally.attempts, tally.derived, tally.map_failed, tally.conclusive) == (3, 2, 1, 3)
    assert tally.map_failures[0]["session_id"] == "s-1"
    assert "RuntimeError: a mapper bug" in tally.map_failures[0]["error"]
    assert dict(tally.issues) == {"code.0": 1, "code.2": 1}


def test_staging_directories_are_removed_behind_the_loop_before_the_campaign_ends(
        monkeypatch, tmp_path):
    from agentprov_core.corpus.working import WorkingCorpus

    monkeypatch.setattr(mappings, "warm_mapping", lambda prepared: None)
    wc = WorkingCorpus(tmp_path / "c.partial")
    dirs = [wc.staging(f"s-{i}") for i in range(3)]
    for d in dirs:
        (d / "capture.jsonl").write_text("x")
    threads: list[str] = []
    real = wc.drop_staging

    def drop(sid):
        threads.append(threading.current_thread().name)
        real(sid)

    wc.drop_staging = drop
    m = mappings.Mappings(None, wc, Tally())
    for i in range(3):
        m.drop_later(f"s-{i}")
    assert all(d.exists() for d in dirs)  # queued until the loop has launched the next cell
    m.start()
    m.close()
    assert not any(d.exists() for d in dirs)
    assert threads and all(t.startswith("agentprov-map") for t in threads)


def test_the_mappings_read_the_manifest_again_when_it_changed_and_check_it(tmp_path):
    """Each mapping reads the manifest; it is parsed and checked again only when the file
    changed, and a change made behind T0's back is still refused."""
    import json

    import pytest

    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.errors import AgentprovError

    wc = WorkingCorpus(tmp_path / "c.partial")
    wc.root.mkdir()
    wc.write_manifest({"source": "agentdojo", "n": 1})
    first = wc.manifest_as_read()
    assert wc.manifest_as_read() is first  # unchanged: not read again
    wc.write_manifest({"source": "agentdojo", "n": 2})
    assert wc.manifest_as_read()["n"] == 2  # T0 rewrote it: read again
    path = wc.root / "manifest.json"
    doc = json.loads(path.read_text())
    doc["n"] = 3  # changed behind T0's back: its manifest_sha256 no longer matches
    path.write_text(json.dumps(doc))
    with pytest.raises(AgentprovError) as exc:
        wc.manifest_as_read()
    assert exc.value.code == "cli.environment.corpus"
