"""T0's side of the worker protocol (``agentprov-worker/0.1``, docs/protocol.md).

The worker is started as ``<env>/bin/python -m agentprov_backend.worker`` with a private
HOME, the staging directory as its working directory, and an environment scrubbed to an
allowlist (no key of any kind reaches it here). With ``network=False`` it runs in a new
network namespace (bubblewrap, else ``unshare``), so it cannot reach any host.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
from functools import cache
from pathlib import Path
from typing import Any

from agentprov_core.errors import AgentprovError

ALLOWED_ENV = ("LANG", "LC_ALL", "TZ")


@cache
def network_block_prefix() -> tuple[str, ...]:
    """A command prefix that runs a program without network, or raise exit 3."""
    tried = []
    options = []
    bwrap = shutil.which("bwrap")
    if bwrap:
        options.append((bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent",
                        "--"))
    unshare = shutil.which("unshare")
    if unshare:
        options.append((unshare, "--net", "--"))
        options.append((unshare, "--user", "--map-root-user", "--net", "--"))
    for prefix in options:
        try:
            ok = subprocess.run([*prefix, "true"], capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return prefix
        tried.append(os.path.basename(prefix[0]) + (" -r" if "--user" in prefix else ""))
    raise AgentprovError("cli.environment.no_network_block",
                         detail="tried " + (", ".join(tried) or "nothing: neither bwrap nor unshare"))


def scrubbed_env(env_dir: Path, staging: Path) -> dict[str, str]:
    home = staging / "home"
    tmp = staging / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in ALLOWED_ENV if k in os.environ}
    env |= {"HOME": str(home), "TMPDIR": str(tmp), "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PYTHONUTF8": "1"}
    return env


class Worker:
    def __init__(self, env_id: str, env_dir: Path, staging: Path, *, network: bool = False,
                 timeout: float = 300.0) -> None:
        self.env_id = env_id
        self.timeout = timeout
        self._next = 0
        argv = [str(env_dir / "bin" / "python"), "-m", "agentprov_backend.worker"]
        if not network:
            argv = [*network_block_prefix(), *argv]
        self.stderr_path = staging / "worker.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        try:
            self.proc = subprocess.Popen(argv, cwd=staging, env=scrubbed_env(env_dir, staging),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._stderr, text=True, bufsize=1)
        except OSError as exc:
            self._stderr.close()
            raise AgentprovError("cli.environment.worker", env_id=env_id,
                                 detail=f"cannot start: {exc}") from None
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)

    def _fail(self, detail: str) -> AgentprovError:
        self._stderr.flush()
        tail = self.stderr_path.read_text(errors="replace").strip().splitlines()[-3:]
        if tail:
            detail += " (stderr: " + " | ".join(tail) + ")"
        return AgentprovError("cli.environment.worker", env_id=self.env_id, detail=detail)

    def request(self, kind: str, **fields: Any) -> Any:
        self._next += 1
        msg = {"id": self._next, "type": kind, **fields}
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._fail(f"it exited (code {self.proc.poll()}) before {kind}") from None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self._sel.select(timeout=left):
                raise self._fail(f"no answer to {kind} within {self.timeout:.0f}s")
            line = self.proc.stdout.readline()
            if not line:
                raise self._fail(f"it exited (code {self.proc.wait()}) during {kind}")
            reply = json.loads(line)
            if reply.get("id") == self._next:
                break
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise self._fail(f"{kind}: {err.get('code')}: {err.get('message')}")
        return reply["result"]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.write(json.dumps({"id": 0, "type": "shutdown"}) + "\n")
                    self.proc.stdin.flush()
                    self.proc.wait(timeout=10)
                except (BrokenPipeError, subprocess.TimeoutExpired):
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self._sel.close()
            self._stderr.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
