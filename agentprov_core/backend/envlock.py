"""An environment's lock: runs of one backend environment share it, a build or an offline
check holds it alone (``cli.environment.env_busy``, exit 3, when it is taken), never
waited for.
"""

from __future__ import annotations

import os
from pathlib import Path

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError


class EnvLock:
    """An environment's lock file, held shared (runs: any number at once) or exclusive (a
    build or an offline check: alone), never waited for.

    POSIX ``flock(2)`` on ``$AGENTPROV_HOME/envs/<env id>.lock``: the lock filelock's
    ``UnixFileLock`` takes is the exclusive one on the same file, so either excludes the
    other. The lock belongs to the open file, which no child inherits, and dies with its
    process (a killed T0 leaves nothing held). Where ``fcntl`` is missing (Windows), filelock's
    exclusive lock is taken for both, so there runs of one environment exclude each other too.
    """

    def __init__(self, env_id: str, path: Path, shared: bool) -> None:
        self.env_id = env_id
        self.lock_file = str(path)
        self.shared = shared
        self._fd: int | None = None
        self._fallback = None

    def acquire(self) -> EnvLock:
        try:
            import fcntl
        except ImportError:  # Windows: exclusive only
            from filelock import FileLock, Timeout

            self._fallback = FileLock(self.lock_file, timeout=0)
            try:
                self._fallback.acquire()
            except Timeout:
                raise self._busy() from None
            return self
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise self._busy() from None
        self._fd = fd
        return self

    def _busy(self) -> AgentprovError:
        return AgentprovError("cli.environment.env_busy", env_id=self.env_id,
                              lock=self.lock_file)

    def release(self) -> None:
        if self._fallback is not None:
            self._fallback.release()
            self._fallback = None
        if self._fd is not None:
            os.close(self._fd)  # closing the file releases its flock
            self._fd = None

    def __enter__(self) -> EnvLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def env_lock(env_id: str, shared: bool = False) -> EnvLock:
    d = paths.home() / "envs"
    d.mkdir(parents=True, exist_ok=True)
    return EnvLock(env_id, d / f"{env_id}.lock", shared)


def hold(env_id: str, shared: bool = False) -> EnvLock:
    """Hold the environment's lock, or refuse at once (exit 3,
    ``cli.environment.env_busy``): runs share it (``shared``), a build or an offline check
    holds it alone, so a build or a check and a run of one environment exclude each other."""
    return env_lock(env_id, shared).acquire()
