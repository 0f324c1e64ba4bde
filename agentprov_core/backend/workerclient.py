"""T0's side of the worker protocol (``agentprov-worker/0.1``, docs/protocol.md).

The worker is started as ``<env>/bin/python -P -m agentprov_backend.worker`` with a private
HOME, the staging directory as its working directory, and an environment scrubbed to an
allowlist (no key of any kind reaches it here). ``-P`` (and ``PYTHONSAFEPATH=1``, which the
forkserver and every Python it starts inherit) keeps the working directory off the import
path: a cell that plants ``staging/agentprov_backend/worker.py`` is not what the next worker
on the corpus imports. With ``network=False`` it runs in a new
network namespace (bubblewrap, else ``unshare``), so it cannot reach any host.

Under an enforced containment (``containment=`` a :class:`~agentprov_core.backend.containment.Recorded`
of ``declared_by: probe``, e.g. ``bwrap``) the argv is wrapped by the provider
(:func:`agentprov_core.backend.containment.wrap_argv`): the worker then sees only its environment,
the Python install, its staging directory, private home and TMPDIR, and reaches only the
ports of ``allowed`` (host loopback ports through a :class:`~agentprov_core.backend.sandbox.bridge.Bridge`,
the egress proxy through its Unix socket). A declared containment changes nothing here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.base import timing
from agentprov_core.errors import AgentprovError

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.backend.containment import Allowed, Recorded
    from agentprov_core.backend.sandbox.bridge import Bridge

ALLOWED_ENV = ("LANG", "LC_ALL", "TZ")
#: the longest reply line T0 reads from the worker, in characters (the largest legitimate
#: one, a full plan's per-cell check, is a few MB); a longer line ends the worker
MAX_REPLY = 64 << 20
#: how much of the end of ``worker.stderr`` a failure quotes from
STDERR_TAIL = 64 << 10


def worker_argv(env_dir: Path) -> list[str]:
    """How the worker is started: the environment's Python in safe-path mode (``-P``: the
    working directory, the staging root, is not on the import path)."""
    return [str(env_dir / "bin" / "python"), "-P", "-m", "agentprov_backend.worker"]


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


def scrubbed_env(env_dir: Path, staging: Path, tmp: Path | None = None) -> dict[str, str]:
    """The worker's whole environment. ``tmp`` is its TMPDIR: a short path (the forkserver's
    Unix socket lives there, and socket paths are limited to about 100 bytes)."""
    home = staging / "home"
    tmp = tmp or staging / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in ALLOWED_ENV if k in os.environ}
    env |= {"HOME": str(home), "TMPDIR": str(tmp), "PATH": f"{env_dir / 'bin'}:/usr/bin:/bin",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PYTHONSAFEPATH": "1",
            "PYTHONUTF8": "1"}
    return env


class Worker:
    """A running worker. :meth:`submit` sends a request and returns a future; a reader
    thread matches answers to requests by id, so run-cell requests can be in flight
    together (the worker answers them in any order)."""

    def __init__(self, env_id: str, env_dir: Path, staging: Path, *, network: bool = False,
                 timeout: float = 300.0, extra_env: dict[str, str] | None = None,
                 containment: Recorded | None = None, allowed: Allowed | None = None) -> None:
        self.env_id = env_id
        self.timeout = timeout
        staging = Path(os.path.abspath(staging))  # its cwd, HOME and the cells' paths
        self._next = 0
        self._lock = threading.Lock()
        self._pending: dict[int, Future] = {}
        self._t_start = time.time()
        argv = worker_argv(env_dir)
        import tempfile

        self._tmp = Path(tempfile.mkdtemp(prefix="agentprov-w-"))
        env = scrubbed_env(env_dir, staging, self._tmp) | (extra_env or {}) | \
            timing.worker_env(self._tmp)
        self._bridge: Bridge | None = None
        self.argv = self._argv(argv, env_dir, staging, network, containment, allowed)
        self.stderr_path = staging / "worker.stderr"
        from agentprov_core.backend.sandbox.profile import close_fds, pass_fds

        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        try:
            self.proc = subprocess.Popen(self.argv, cwd=staging, env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr,
                                         text=True, bufsize=1, start_new_session=True,
                                         pass_fds=pass_fds(self.argv))
        except OSError as exc:
            self._stderr.close()
            self._release()
            raise AgentprovError("cli.environment.worker", env_id=env_id,
                                 detail=f"cannot start: {exc}") from None
        finally:
            close_fds(self.argv)  # the seccomp filter's: bwrap holds its own copy
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        timing.emit("worker.start", self._t_start, network=network,
                    contained=containment is not None)

    def _argv(self, argv: list[str], env_dir: Path, staging: Path, network: bool,
              containment: Recorded | None, allowed: Allowed | None) -> list[str]:
        from agentprov_core.backend import containment as cm

        if not cm.enforced(containment):
            return argv if network else [*network_block_prefix(), *argv]
        allowed = allowed or cm.Allowed()
        try:
            if allowed.loopback_ports:
                from agentprov_core.backend.sandbox.bridge import Bridge

                self._bridge = Bridge(tuple(allowed.loopback_ports))
            routes = dict(self._bridge.sockets if self._bridge else {})
            routes.update({int(port): path for port, path in allowed.unix_sockets})
            return cm.wrap_argv(containment, argv, staging, staging / "home", routes,
                                env_dir=env_dir, tmp=self._tmp)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _read(self) -> None:
        broken = None
        while line := self.proc.stdout.readline(MAX_REPLY + 1):
            if len(line) > MAX_REPLY:  # the worker is untrusted: its lines are bounded
                broken = f"it sent a reply line over {MAX_REPLY} characters"
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                break
            try:
                reply = json.loads(line)
            except (ValueError, RecursionError):  # the worker is untrusted: a line that is
                continue                          # no answer is not one
            if not isinstance(reply, dict):
                continue
            with self._lock:
                fut = self._pending.pop(reply.get("id"), None)
            if fut is not None:
                fut.set_result(reply)
        code = self.proc.wait()
        if code != 0:  # killed or crashed: end what it started (its forkserver and cells)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(self._fail(broken or
                                         f"it exited (code {code}) with a request in flight"))

    def _fail(self, detail: str) -> AgentprovError:
        self._stderr.flush()
        tail = self._stderr_tail().strip().splitlines()[-3:]
        if tail:
            detail += " (stderr: " + " | ".join(tail) + ")"
        return AgentprovError("cli.environment.worker", env_id=self.env_id, detail=detail)

    def _stderr_tail(self) -> str:
        """The end of ``worker.stderr``: the file T0 opened for it, never what the worker
        may have put at its name since (a link, a FIFO), and never more than its last
        :data:`STDERR_TAIL` bytes."""
        try:
            fd = os.open(self.stderr_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return ""
        with os.fdopen(fd, "rb") as f:
            try:
                ours = os.fstat(self._stderr.fileno())
            except ValueError:  # closed: the worker has ended
                return ""
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (ours.st_dev, ours.st_ino):
                return ""
            f.seek(max(0, st.st_size - STDERR_TAIL))
            return f.read(STDERR_TAIL).decode(errors="replace")

    def submit(self, kind: str, **fields: Any) -> Future:
        fut: Future = Future()
        with self._lock:
            self._next += 1
            rid = self._next
            if self.proc.poll() is not None:
                raise self._fail(f"it exited (code {self.proc.returncode}) before {kind}")
            self._pending[rid] = fut
            try:
                self.proc.stdin.write(json.dumps({"id": rid, "type": kind, **fields}) + "\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                self._pending.pop(rid, None)
                raise self._fail(f"it exited (code {self.proc.poll()}) before {kind}") from None
        fut.kind = kind  # type: ignore[attr-defined]
        return fut

    def result(self, fut: Future, timeout: float | None = None) -> Any:
        try:
            reply = fut.result(timeout=timeout if timeout is not None else self.timeout)
        except FutureTimeout:
            raise self._fail(f"no answer to {fut.kind} within "  # type: ignore[attr-defined]
                             f"{timeout or self.timeout:.0f}s") from None
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise self._fail(f"{fut.kind}: {err.get('code')}: {err.get('message')}")  # type: ignore[attr-defined]
        return reply["result"]

    def request(self, kind: str, **fields: Any) -> Any:
        with timing.span("worker.call", kind=kind):
            return self.result(self.submit(kind, **fields))

    def kill(self) -> None:
        """End the worker and every process it started (its own process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        t = time.time()
        try:
            if self.proc.poll() is None:
                try:
                    with self._lock:
                        self.proc.stdin.write(json.dumps({"id": 0, "type": "shutdown"}) + "\n")
                        self.proc.stdin.flush()
                    self.proc.wait(timeout=30)
                except (BrokenPipeError, subprocess.TimeoutExpired):
                    self.kill()
        finally:
            self._reader.join(timeout=5)
            self._stderr.close()
            timing.emit("worker.close", t)
            timing.absorb(self._tmp)
            self._release()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
