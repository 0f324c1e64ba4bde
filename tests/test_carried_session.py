"""A session staged on another host travels to T0 as bytes (``staged.carry_session`` on the
host, ``staged.land_session`` into T0's staging): what the host's reader refused travels
with it and makes T0's ingest refuse the session; what lands is written by T0's own rules
(plain names, fresh regular files never through a link, bounded sizes)."""

from __future__ import annotations

import os
from pathlib import Path

from agentprov_core.corpus import staged


def test_a_carried_session_lands_as_it_was_staged(tmp_path: Path):
    there = tmp_path / "node" / "s-1"
    (there / "logs").mkdir(parents=True)
    (there / "capture.jsonl").write_bytes(b'{"kind":"start"}\n')
    (there / "logs" / "native.json").write_bytes(b"{}")
    os.symlink("/etc/passwd", there / "stolen")
    carried = staged.carry_session(there, {"status": "complete", "native_log": "logs/native.json",
                                           "staging_refused": ["planted by the worker"]})
    assert set(carried["files"]) == {"capture.jsonl", "logs/native.json"}
    # the host's own refusal replaces whatever the worker put in that field
    assert carried["result"]["staging_refused"] == ["stolen: a symlink, not a regular file"]
    here = tmp_path / "t0" / "s-1"
    assert staged.land_session(here, carried["files"]) == []
    assert staged.read(here, native="logs/native.json").files == carried["files"]
    result, refused = staged.returned(carried["result"])
    assert refused == ["stolen: a symlink, not a regular file"]
    assert result["status"] == "complete"


def test_land_refuses_names_out_of_staging_links_and_non_bytes(tmp_path: Path):
    here = tmp_path / "t0" / "s-1"
    here.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    os.symlink(outside, here / "capture.jsonl")  # left by an earlier writer: never followed
    refused = staged.land_session(here, {"../escape": b"x", "/abs": b"x", "a//b": b"x",
                                         "capture.jsonl": b"over the link", "n": "text"})
    assert outside.read_bytes() == b"untouched"
    assert not (tmp_path / "t0" / "escape").exists()
    assert len(refused) == 5, refused
    assert any(r.startswith("capture.jsonl: could not be written") for r in refused)
    assert staged.land_session(here, ["not", "a", "mapping"]) == [
        "the carried session: a list, not a mapping of files"]
    _, why = staged.returned({"status": "complete", "staging_refused": "not a list"})
    assert why == ["the worker's result: staging_refused is not a list of refusals"]


def test_land_writes_nested_files_in_any_order_and_holds_no_descriptor(tmp_path: Path):
    here = tmp_path / "t0" / "s-1"
    files = {f"native/d{i % 7}/e{i % 3}/{i}.json": str(i).encode() for i in range(60)}
    files |= {"capture.jsonl": b"{}\n", "native/d1.json": b"beside its directory",
              "native/d1-x/y.json": b"y", "native/d1/e0": b"a file where a directory is"}
    fds = len(os.listdir("/proc/self/fd"))
    refused = staged.land_session(here, files)
    assert len(os.listdir("/proc/self/fd")) == fds
    # a name that is a file cannot also be a directory of other names
    below = sorted((n for n in files if n.startswith("native/d1/e0/")),
                   key=lambda n: n.split("/"))
    assert refused == [f"{n}: could not be written (Not a directory)" for n in below]
    assert staged.read(here).files == {n: b for n, b in files.items() if n not in below}


def test_land_refuses_a_name_deeper_than_the_reader_reads(tmp_path: Path):
    here = tmp_path / "t0" / "s-1"
    deep = "/".join(["d"] * (staged.MAX_DEPTH + 1)) + "/f"
    ok = "/".join(["d"] * staged.MAX_DEPTH) + "/f"
    refused = staged.land_session(here, {deep: b"x", ok: b"y"})
    assert refused == [f"{staged.shown(deep)}: more than {staged.MAX_DEPTH} directories deep"]
    assert staged.read(here).files == {ok: b"y"}
