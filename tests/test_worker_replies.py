"""T0's reader of the worker's replies: the worker is untrusted, so a reply line is bounded
and a failure quotes only the end of the file T0 opened for the worker's stderr.

The worker here is a real subprocess started by :class:`~agentprov_core.backend.workerclient.Worker`
exactly as a backend's worker is (``<env>/bin/python -P -m agentprov_backend.worker``), whose
``bin/python`` is a small program that misbehaves: no backend environment is needed to
play a hostile worker.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from agentprov_core.backend import workerclient
from agentprov_core.errors import AgentprovError


def hostile_env(tmp_path: Path, body: str) -> Path:
    """An environment directory whose ``bin/python`` runs ``body`` (Python) and ignores
    the worker's own arguments."""
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    prog = env / "bin" / "python"
    prog.write_text(f"#!{sys.executable}\nimport os, sys, time\n{body}\n", encoding="utf-8")
    prog.chmod(prog.stat().st_mode | stat.S_IXUSR)
    return env


def started(tmp_path: Path, name: str, body: str) -> workerclient.Worker:
    """A :class:`Worker` started on the hostile environment running ``body``."""
    staging = tmp_path / name
    staging.mkdir()
    return workerclient.Worker("e-1", hostile_env(tmp_path / f"{name}-env", body), staging,
                               network=True, timeout=60)


def test_a_reply_line_over_the_bound_ends_the_worker(tmp_path, monkeypatch):
    """A worker that answers with a line longer than MAX_REPLY (no newline in sight) is
    ended, and the request in flight fails naming why, instead of T0 reading on."""
    monkeypatch.setattr(workerclient, "MAX_REPLY", 1 << 16)
    w = started(tmp_path, "staging", "sys.stdin.readline()\nwhile True:\n"
                                     "    sys.stdout.write('x' * 4096); sys.stdout.flush()")
    try:
        with pytest.raises(AgentprovError) as err:
            w.request("hello")
        assert err.value.code == "cli.environment.worker"
        assert f"a reply line over {1 << 16} characters" in str(err.value)
        assert w.proc.wait(timeout=30) != 0  # ended by T0, not left writing
    finally:
        w.kill()


def test_a_failure_quotes_the_end_of_the_workers_stderr_only(tmp_path, monkeypatch):
    """A worker that writes megabytes to stderr and exits: the failure quotes its last
    lines (read from the end, at most STDERR_TAIL bytes); a worker that replaces
    ``worker.stderr`` by a link to a host file gets nothing of that file quoted."""
    monkeypatch.setattr(workerclient, "STDERR_TAIL", 4096)
    w = started(tmp_path, "staging", "sys.stderr.write('noise\\n' * 500000)\n"
                                     "sys.stderr.write('the last line\\n'); sys.exit(3)")
    try:
        with pytest.raises(AgentprovError, match=r"the last line\)") as err:
            w.request("hello")
        assert len(str(err.value)) < 1000
    finally:
        w.kill()

    secret = tmp_path / "host.txt"
    secret.write_text("HOSTFILE-SENTINEL-c1d2\n", encoding="utf-8")
    w = started(tmp_path, "staging-b", "os.unlink('worker.stderr'); "
                f"os.symlink({str(secret)!r}, 'worker.stderr'); sys.exit(3)")
    try:
        with pytest.raises(AgentprovError) as err:
            w.request("hello")
        assert "HOSTFILE-SENTINEL" not in str(err.value)
        assert os.path.islink(tmp_path / "staging-b" / "worker.stderr")  # the link was there to follow
    finally:
        w.kill()
