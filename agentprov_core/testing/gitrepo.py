"""Git repositories made for tests and benchmarks (real git, a scrubbed environment): the
sources a fetch cache fetches from, such as a fixture fork of AutoDojo whose tree holds an
attack cache file at a known path."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: no user or system configuration, a fixed author and date: the same files make the same
#: commit id on every machine
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def git(repo: Path, *args: str) -> str:
    """``git -C repo ARGS``; its stdout, stripped."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), **GIT_ENV}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_repo(root: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> str:
    """A git repository at the new directory ``root`` whose one commit holds ``files`` (and
    the symbolic ``links``, name -> target); the commit's full id."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", "-b", "main")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    for name, target in (links or {}).items():
        (root / name).symlink_to(target)
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "fixture")
    return git(root, "rev-parse", "HEAD")


def fork_environ(home: Path, commit: str):
    """The variables under which ``commit`` is AutoDojo's pinned fork commit (the test
    override) and ``home`` agentprov's home, set in this process for a ``with`` block."""
    from agentprov_core.backend.autodojofork import PIN_OVERRIDE
    from agentprov_core.testing.fixtures import _environ

    return _environ({"AGENTPROV_HOME": str(home), PIN_OVERRIDE: commit})


def fetch_fork(src: Path, commit: str, home: Path) -> None:
    """Fetch the fixture fork ``src``'s ``commit`` into the fetch cache of ``home``, as
    AutoDojo's fork (``$AGENTPROV_HOME/fetch/autodojo.git``)."""
    from agentprov_core.backend import fetchcache
    from agentprov_core.backend.autodojofork import fork_pin

    with fork_environ(home, commit):
        fetchcache.ensure(fork_pin(), source_repo=str(src))
