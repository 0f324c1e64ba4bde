"""T0's ingest of a finished attempt (``run.attempt.ingest``): each staged file is read once
(the chain check, the redaction scan and the raw store see the same bytes), and a native
log is stored only when it is a file in the attempt's staging directory, whatever path the
worker names (the worker is hostile): a path outside it errors the session
(``map.staging_refused``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.test_mapping import complete_session, native_log


def setup(tmp_path: Path):
    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.run import attempt
    from agentprov_core.run.units import Unit

    wc = WorkingCorpus(tmp_path / "c.partial")
    staging = wc.staging("s-1")
    complete_session(staging / "capture.jsonl")
    (staging / "native").mkdir()
    (staging / "native" / "log.json").write_bytes(native_log())
    (tmp_path / "outside.json").write_bytes(b'{"not": "staged"}')
    unit = Unit(SimpleNamespace(key="banking/user_task_0/none/none"), 0, "u", 1)
    fl = attempt.Flight(unit, "s-1", staging, "2026-11-29T00:00:00Z", None)
    from agentprov_core.plugins import source_entry
    from agentprov_core.run.options import RunOptions

    p = SimpleNamespace(request=SimpleNamespace(options=RunOptions()), doc=None, cells=[],
                        source=source_entry("agentdojo").source,
                        plan=SimpleNamespace(defence="none", plan_sha256="p", config_digest="c"))
    return attempt, wc, fl, p


def test_each_staged_file_is_read_once_and_stored_as_read(tmp_path, monkeypatch):
    attempt, wc, fl, p = setup(tmp_path)
    cap = (fl.staging / "capture.jsonl").read_bytes()
    reads: list[str] = []
    real = os.open

    def counting(path, flags, *args, **kwargs):  # every staged file is opened to be read
        reads.append(os.path.basename(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting)
    result = {"status": "complete", "native_log": "native/log.json", "calls": 2}
    entry = attempt.ingest(p, wc, fl, result, "inv", [0])
    monkeypatch.undo()
    assert reads.count("capture.jsonl") == 1 and reads.count("log.json") == 1, reads
    assert entry.status == "complete" and entry.capture_sha256 == hashlib.sha256(cap).hexdigest()
    assert wc.store.path(entry.capture_sha256).read_bytes() == cap
    assert entry.native_path == "native/log.json"
    assert wc.store.path(entry.native_sha256).read_bytes() == native_log()
    assert not fl.staging.exists()  # dropped after the ledger entry


@pytest.mark.parametrize("named", ["../../outside.json", "/abs/outside.json",
                                   ["native/log.json"], "native/../native/log.json"])
def test_a_native_log_is_stored_only_as_a_file_of_its_staging(tmp_path, named):
    attempt, wc, fl, p = setup(tmp_path)
    if isinstance(named, str) and named.startswith("/abs/"):
        named = str(tmp_path / "outside.json")
    entry = attempt.ingest(p, wc, fl, {"status": "complete", "native_log": named,
                                        "calls": 2}, "inv", [0])
    assert entry.capture_sha256 is not None
    assert entry.native_sha256 is None and entry.native_path is None
    assert entry.status == "errored" and entry.reason.startswith("map.staging_refused: ")
    assert len(entry.staging_refused) == 1 and "native_log" in entry.staging_refused[0]
    stored = b"".join(x.read_bytes() for x in (wc.root / "raw").rglob("*") if x.is_file())
    assert b"not" not in stored
