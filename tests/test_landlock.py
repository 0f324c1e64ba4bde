"""The cells' Landlock ruleset (``agentprov_backend.landlock``) without a sandbox around it:
the rights it handles for each ABI, and a real process restricted by it (needs a kernel
with Landlock; skips, saying so, without one)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from conftest import load_backend_module

landlock = load_backend_module("landlock")


def test_the_handled_rights_follow_the_abi():
    v1 = landlock.handled(1)
    assert v1 & landlock.WRITE_FILE and v1 & landlock.MAKE_REG and v1 & landlock.REMOVE_FILE
    assert not v1 & (landlock.REFER | landlock.TRUNCATE)
    assert landlock.handled(2) == v1 | landlock.REFER
    assert landlock.handled(7) == v1 | landlock.REFER | landlock.TRUNCATE
    assert not landlock.handled(7) & (1 << 2 | 1 << 3)  # reading is never handled


def test_off_linux_there_is_no_landlock(monkeypatch):
    monkeypatch.setattr(landlock.sys, "platform", "darwin")
    assert landlock.abi_version() == 0
    with pytest.raises(landlock.Unavailable):
        landlock.restrict(["/tmp"])
    assert landlock.confine_cell("/tmp") is None


@pytest.mark.req("R-4.10")
@pytest.mark.skipif(landlock.abi_version() < 1, reason="this kernel has no Landlock")
def test_a_confined_process_writes_only_its_session_home_and_tmp(tmp_path, monkeypatch):
    root = tmp_path / "staging"
    own, sib, home, tmp = root / "s-a", root / "s-b", root / "home", tmp_path / "t"
    for d in (own, sib, home, tmp):
        d.mkdir(parents=True)
    (sib / "capture.jsonl").write_text("{}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        os.close(r)
        seen = {"applied": landlock.confine_cell(str(own))}
        for name, path, mode in (("own", own / "x", "w"), ("home", home / "h", "w"),
                                 ("tmp", tmp / "t", "w"), ("null", Path("/dev/null"), "w"),
                                 ("sibling", sib / "capture.jsonl", "a"),
                                 ("root", root / "planted.py", "w")):
            try:
                with open(path, mode) as f:
                    f.write("x")
                seen[name] = "done"
            except OSError as exc:
                seen[name] = errno.errorcode[exc.errno]
        try:
            os.rename(own / "x", sib / "x")
            seen["rename out"] = "done"
        except OSError as exc:
            seen["rename out"] = errno.errorcode[exc.errno]
        os.write(w, json.dumps(seen).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        seen = json.loads(f.read())
    os.waitpid(pid, 0)
    assert seen["applied"]["abi"] == landlock.abi_version()
    assert {k: seen[k] for k in ("own", "home", "tmp", "null")} == dict.fromkeys(
        ("own", "home", "tmp", "null"), "done")
    assert (seen["sibling"], seen["root"]) == ("EACCES", "EACCES")
    assert seen["rename out"] in ("EACCES", "EXDEV")
    assert (sib / "capture.jsonl").read_text() == "{}\n" and not (root / "planted.py").exists()
    assert not (sib / "x").exists()
