"""capture/0.1 as ``agentprov_capture`` defines it (packages/capture): the writer the worker
uses and the chain check T0 uses, run here in the fast suite (the package is standard
library only and installed with the core)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import agentprov_capture as capture
import pytest

ROOT = Path(__file__).resolve().parent.parent


CELL = {"suite": "banking", "user_task_id": "user_task_0", "attack": "none",
        "injection_task_id": None, "cell_key": "banking/user_task_0/none/none"}
HEADER = {"session_id": "s-test", "cell": CELL, "unit": "u-test", "attempt": 1,
          "backend": {"environment_id": "agentdojo-00000000", "identity_sha256": "0" * 64},
          "plan_sha256": "1" * 64, "config_digest": "sha256:" + "2" * 64,
          "declared_instrumentation": ["http_backoff@1 policy: stock_sdk",
                                       "recording_transport@1"]}


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def write_session(path: Path, sentinel: str = "unused") -> object:
    w = capture.CaptureWriter(path, HEADER)
    w.append("model_call_start", call_id="c1", element="OpenAILLM", model="gpt-4o")
    w.append("wire_request", attempt_id="a1", call_id="c1", first_attempt_id="a1",
             method="POST", url=f"http://127.0.0.1:9/v1/chat/completions?key={sentinel}",
             headers=[("Authorization", f"Bearer {sentinel}"), ("Content-Type",
                      "application/json"), ("X-Stainless-Retry-Count", "0"),
                      ("api-key", sentinel), ("x-api-key", sentinel),
                      ("Cookie", f"s={sentinel}"), ("OpenAI-Api-Key", sentinel),
                      ("X-Stainless-Auth", sentinel)],
             **capture.body_fields(b'{"model":"gpt-4o","temperature":0.7}'))
    w.append("wire_response", attempt_id="a1", call_id="c1", status=200,
             headers={"content-type": "application/json", "set-cookie": f"k={sentinel}",
                      "x-ratelimit-remaining-tokens": "999"},
             **capture.body_fields(b'{"id":"x","choices":[]}'))
    w.append("model_call_end", call_id="c1", status="ok")
    w.append("tool_result", tool="get_balance", arguments={}, result="1810.0", error=None)
    w.append("environment_digest", name="post", sha256="3" * 64)
    w.append("note", code="test.note", text="a note")
    w.end("complete", reason=None)
    return w


def test_the_file_is_on_disk_before_each_wire_request_leaves(tmp_path, monkeypatch):
    """fsync after the header, after every wire_request (so the request, and every record
    before it, is durable before it is sent) and after the end; other records are written
    at once (a dead worker loses nothing) and become durable with the next fsync."""
    synced: list[int] = []  # the file size at each fsync of the log
    real_fsync = os.fsync
    path = tmp_path / "c.jsonl"

    def fsync(fd):
        real_fsync(fd)
        if path.exists() and os.fstat(fd).st_ino == path.stat().st_ino:
            synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(capture.writer.os, "fsync", fsync)
    write_session(path)
    recs = path.read_bytes().splitlines(keepends=True)
    ends = [sum(len(r) for r in recs[:i + 1]) for i in range(len(recs))]
    kinds = [json.loads(r)["kind"] for r in recs]
    assert synced == [ends[i] for i, k in enumerate(kinds)
                      if k in ("header", "wire_request", "end")]
    assert len(synced) == 3 < len(recs)


@pytest.mark.req("R-2.7")
def test_chain_verifies_and_every_record_is_canonical(tmp_path):
    p = tmp_path / "capture.jsonl"
    w = write_session(p)
    ok, n, head, problems = capture.verify(p)
    assert (ok, problems) == (True, [])
    assert n == 9 and head == w.head_sha256
    raw = p.read_bytes().splitlines()
    recs = [json.loads(x) for x in raw]
    assert [r["seq"] for r in recs] == list(range(9))
    assert recs[0]["prev"] is None and recs[0]["kind"] == "header"
    assert recs[0]["format"] == "capture/0.1"
    for prev_line, rec in zip(raw, recs[1:], strict=False):
        assert rec["prev"] == hashlib.sha256(prev_line).hexdigest()
    for line, rec in zip(raw, recs, strict=True):
        assert capture.canonical(rec) == line
        assert isinstance(rec["t"], float)
    assert head == hashlib.sha256(raw[-1]).hexdigest()
    assert recs[-1]["counts"]["wire_request"] == 1 and recs[-1]["counts"]["header"] == 1
    # a float in a recorded body is the wire's (kept); the writer's own fields refuse them
    assert recs[2]["body"] == {"model": "gpt-4o", "temperature": 0.7}


@pytest.mark.req("R-2.7")
def test_headers_are_allowlisted_and_no_secret_reaches_the_file(tmp_path):
    sentinel = f"sk-SENTINEL-{uuid.uuid4().hex}"
    p = tmp_path / "capture.jsonl"
    write_session(p, sentinel)
    data = p.read_bytes()
    assert sentinel.encode() not in data
    req = lines_of(p)[2]
    assert req["headers"] == {"content-type": "application/json",
                              "x-stainless-retry-count": "0"}
    assert req["headers_dropped"] == ["api-key", "authorization", "cookie", "openai-api-key",
                                      "x-api-key", "x-stainless-auth"]
    assert req["url"] == "http://127.0.0.1:9/v1/chat/completions"
    assert req["query_keys"] == ["key"]
    resp = lines_of(p)[3]
    assert resp["headers"] == {"content-type": "application/json",
                               "x-ratelimit-remaining-tokens": "999"}
    assert resp["headers_dropped"] == ["set-cookie"]


@pytest.mark.req("R-2.7")
@pytest.mark.parametrize("where", ["header", "middle", "last"])
def test_one_corrupted_byte_is_reported_at_its_record(tmp_path, where):
    p = tmp_path / "capture.jsonl"
    w = write_session(p)
    lines = p.read_bytes().splitlines(keepends=True)
    k = {"header": 0, "middle": 4, "last": len(lines) - 1}[where]
    line = bytearray(lines[k])
    # still valid, canonical JSON: a letter of the kind, or (last) a digit of a count
    mark = b'"note":' if where == "last" else b'"kind":"'
    i = line.index(mark) + len(mark)
    line[i] = ord("X") if where != "last" else ord("7")
    lines[k] = bytes(line)
    p.write_bytes(b"".join(lines))
    if where == "last":  # only the head recorded elsewhere (the ledger) can tell
        ok, _, head, problems = capture.verify(p)
        assert ok and head != w.head_sha256
        ok, _, _, problems = capture.verify(p, expected_head=w.head_sha256)
    else:
        ok, _, _, problems = capture.verify(p)
    assert not ok
    assert problems and all(x.startswith(f"record {k}:") for x in problems), problems


@pytest.mark.req("R-2.7")
def test_verifier_reports_seq_prev_torn_and_unsealed(tmp_path):
    p = tmp_path / "capture.jsonl"
    write_session(p)
    lines = p.read_bytes().splitlines(keepends=True)
    # a corrupted prev: record 3 names itself, not its predecessor
    bad = json.loads(lines[3])
    bad["prev"] = "0" * 64
    q = tmp_path / "prev.jsonl"
    q.write_bytes(b"".join([*lines[:3], capture.canonical(bad) + b"\n", *lines[4:]]))
    ok, _, _, problems = capture.verify(q)
    assert not ok and all(x.startswith("record 3:") for x in problems), problems
    # a dropped record
    q.write_bytes(b"".join(lines[:4] + lines[5:]))
    ok, _, _, problems = capture.verify(q)
    assert not ok and any("seq is 5, expected 4" in x for x in problems)
    # a torn last line (a write cut short), and no end
    q.write_bytes(b"".join(lines[:5]) + lines[5][:20])
    ok, n, _, problems = capture.verify(q)
    assert not ok and n == 5
    assert "record 5: torn (the file does not end with a newline)" in problems
    assert "the log has no end record (unsealed)" in problems
    # not canonical (a space added), although the same JSON value
    q.write_bytes(b"".join([lines[0].replace(b'{"', b'{ "', 1), *lines[1:]]))
    ok, _, _, problems = capture.verify(q)
    assert not ok and "record 0: not in canonical form" in problems


@pytest.mark.req("R-2.7", "R-21.18")
def test_end_is_written_once_and_nothing_after_it(tmp_path):
    p = tmp_path / "capture.jsonl"
    w = capture.CaptureWriter(p, HEADER)
    w.append("note", code="x", text="y")
    with pytest.raises(capture.CaptureError, match="status"):
        w.end("stopped")  # there is no stopped status
    w.end("errored", reason="RuntimeError: boom")
    with pytest.raises(capture.CaptureError, match="ended"):
        w.end("complete")
    with pytest.raises(capture.CaptureError, match="ended"):
        w.append("note", code="x", text="y")
    recs = lines_of(p)
    assert [r["kind"] for r in recs] == ["header", "note", "end"]
    assert recs[-1]["status"] == "errored" and recs[-1]["reason"] == "RuntimeError: boom"
    assert capture.verify(p)[0]
    # a session file is never continued by a new writer
    with pytest.raises(FileExistsError):
        capture.CaptureWriter(p, HEADER)
    with pytest.raises(capture.CaptureError, match="already ended"):
        capture.CaptureWriter.reopen(p)


def test_parent_can_append_the_aborted_end_to_an_unsealed_log(tmp_path):
    p = tmp_path / "capture.jsonl"
    w = capture.CaptureWriter(p, HEADER)
    w.append("note", code="x", text="y")
    w.close()  # the worker died here
    assert capture.verify(p)[3] == ["the log has no end record (unsealed)"]
    assert capture.verify(p, require_end=False)[0]
    r = capture.CaptureWriter.reopen(p)
    assert r.seq == 2 and r.head_sha256 == w.head_sha256
    r.append("note", code="session.worker_died", text="the worker exited with -9")
    r.end("aborted", reason="worker_died")
    ok, n, _, problems = capture.verify(p)
    assert ok and n == 4, problems
    assert lines_of(p)[-1]["counts"] == {"header": 1, "note": 2}


def test_writer_refuses_bad_records(tmp_path):
    p = tmp_path / "capture.jsonl"
    with pytest.raises(capture.CaptureError, match="declared_instrumentation"):
        capture.CaptureWriter(p, dict(HEADER, declared_instrumentation=["no version"]))
    with pytest.raises(capture.CaptureError, match="lacks"):
        capture.CaptureWriter(p, {k: v for k, v in HEADER.items() if k != "cell"})
    assert not p.exists()
    w = capture.CaptureWriter(p, HEADER)
    with pytest.raises(capture.CaptureError, match="unknown record kind"):
        w.append("model_call", call_id="c")
    with pytest.raises(capture.CaptureError, match="lacks"):
        w.append("note", code="x")
    with pytest.raises(capture.CaptureError, match="set by the writer"):
        w.append("note", code="x", text="y", seq=7)
    with pytest.raises(capture.CaptureError, match="float"):
        w.append("note", code="x", text="y", elapsed=0.5)
    with pytest.raises(capture.CaptureError, match="written by the writer"):
        w.append("end", status="complete")
    assert capture.verify(p, require_end=False)[1] == 1  # nothing but the header


def test_body_encodings():
    assert capture.body_fields(b"")["body_encoding"] == "empty"
    assert capture.body_fields(b'{"a":[1,2.5]}')["body"] == {"a": [1, 2.5]}
    assert capture.body_fields(b"data: {}\n\n")["body_encoding"] == "text"
    assert capture.body_fields(b"NaN")["body_encoding"] == "text"  # not strict JSON
    b = capture.body_fields(b"\xff\x00")
    assert b["body_encoding"] == "base64" and b["body"] == "/wA="
    assert b["body_sha256"] == hashlib.sha256(b"\xff\x00").hexdigest() and b["body_bytes"] == 2


@pytest.mark.req("R-2.7")
def test_the_writers_log_passes_the_check_and_every_flipped_byte_fails_it(tmp_path):
    """What the worker writes is what T0 accepts, and a change of any one byte of it is
    found by the check T0 runs (against the head the ledger records), with msgspec parsing
    first and with the standard library alone, in the same words."""
    p = tmp_path / "capture.jsonl"
    w = write_session(p)
    data = p.read_bytes()
    for fast in (None, False):
        chain = capture.check(data, w.head_sha256, fast=fast)
        assert (chain.ok, chain.n_records, chain.head_sha256) == (True, 9, w.head_sha256)
        assert chain.header["format"] == capture.FORMAT and chain.end["status"] == "complete"
        assert [r["seq"] for r in chain.records] == list(range(9))
    for i in range(len(data)):
        flipped = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
        got = capture.check(flipped, w.head_sha256)
        assert not got.ok, i
        assert got.problems == capture.check(flipped, w.head_sha256, fast=False).problems, i


@pytest.mark.req("R-2.7")
@pytest.mark.parametrize("log", ["benchmarks/fixtures/session/capture.jsonl",
                                 "tests/fixtures/defended/tool_filter/capture.jsonl",
                                 "tests/fixtures/defended/undefended/capture.jsonl"])
def test_logs_the_worker_wrote_before_still_verify_byte_for_byte(log):
    """Committed logs of real sessions: every line is still the canonical form of its
    record and its sha256 the next record's prev, so stored corpora keep verifying."""
    data = (ROOT / log).read_bytes()
    lines = data.split(b"\n")[:-1]
    chain = capture.check(data)
    assert chain.ok and chain.n_records == len(lines) > 2, chain.problems
    assert chain.head_sha256 == hashlib.sha256(lines[-1]).hexdigest()
    for line, rec in zip(lines, chain.records, strict=True):
        assert capture.canonical(rec) == line
    assert capture.check(data, fast=False).problems == []


@pytest.mark.parametrize(("t", "canonical"), [("1e16", False), ("1e+16", True),
                                              ("1.5", True), ("1.50", False),
                                              ("2.8e-05", True), ("0.000028", False),
                                              ("1E-07", False), ("1e-07", True)])
def test_a_float_only_msgspec_writes_so_is_not_canonical(t, canonical):
    """msgspec writes some floats otherwise than Python (``1e16``, Python ``1e+16``; a
    header's ``2.8e-05`` as ``0.000028``): a line in msgspec's form comes back from msgspec
    byte-identical, and is still refused as not canonical; a line in Python's is accepted,
    by msgspec's parse as by the standard library's."""
    from agentprov_capture.chain import _accelerator

    line = b'{"format":"capture/0.1","kind":"header","prev":null,"seq":0,"t":' + t.encode() + b"}"
    want = [] if canonical else ["record 0: not in canonical form"]
    for fast in (None, False):
        assert capture.check(line + b"\n", require_end=False, fast=fast).problems == want
    # the fast path itself accepts exactly the canonical lines (no parse by the standard
    # library for a header's t)
    assert (_accelerator()(line) is not None) == canonical
