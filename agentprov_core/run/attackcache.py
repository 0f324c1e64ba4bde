"""AutoDojo's attack cache, as T0 checks it before anything is staged or spawned.

``--attack autodojo --autodojo-cache PATH --autodojo-variant K`` replays a cache file that
the fork's optimiser wrote. Two checks, at two of the specification's steps:

* step 1, usage (exit 2, ``cli.usage.autodojo_cache``): the file is strict JSON (no
  duplicate keys, no ``NaN``) of the shape ``{"injection_tasks": {TASK: {VECTOR:
  [VARIANT, ...]}}}``, a variant a string or ``null`` (a hole the optimiser left), and every
  injection task it names is one of the plan's suites
  (:mod:`agentprov_core.plan.cachefile`).
* step 5, identity (exit 3): the file's git blob id is a blob of the tree of the pinned fork
  commit in the fetch cache (``git ls-tree``), whose bytes (``git cat-file``) hash to the
  file's sha256; :func:`verify`. ``cli.environment.autodojo_cache_commit``: the commit is
  not in the fetch cache (a dry run never fetches, and the fork has no public URL to fetch
  from), or the cache holds another commit for it;
  ``cli.environment.autodojo_cache_blob``: no blob of the pinned tree is the file.

A vector whose variant list has no string at index ``K`` cannot serve the variant: the
attack falls back to the injection task's goal there, and the run reports how many vectors
do (:func:`fallbacks`). The verified file is stored in the corpus's raw store with its git
origin (:func:`store`).

The pinned commit is ``aa458794``. Tests replace it with a fixture fork's commit through
:data:`~agentprov_core.backend.autodojofork.PIN_OVERRIDE`, read only by
:func:`agentprov_core.backend.autodojofork.pinned`; a corpus made under the override records
it (``test_only``, and the override named in ``live.test_overrides``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.backend import fetchcache
from agentprov_core.backend.autodojofork import FORK, PIN_OVERRIDE, fork_pin, pinned
from agentprov_core.errors import AgentprovError
from agentprov_core.plan.cachefile import Cache, Fallbacks, fallbacks, load

if TYPE_CHECKING:
    from agentprov_core.corpus.working import WorkingCorpus

__all__ = ["Cache", "Checked", "Fallbacks", "Origin", "check", "fallbacks", "load", "store",
           "verify"]

# ------------------------------------------------------------------------ step 5 (exit 3)
@dataclass(frozen=True)
class Origin:
    """Where a verified cache file comes from: one blob of the pinned tree."""

    repository: str
    commit: str
    path: str
    blob: str
    sha256: str
    size: int
    #: the commit came from :data:`PIN_OVERRIDE` (tests only)
    test_only: bool

    def message(self) -> str:
        return (f"attack cache verified: blob {self.blob[:12]} is {self.path} of "
                f"{self.repository}@{self.commit[:8]}")

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"repository": self.repository, "commit": self.commit,
                               "path": self.path, "blob": self.blob, "sha256": self.sha256,
                               "size": self.size}
        if self.test_only:
            out["test_only"] = True
            out["override"] = PIN_OVERRIDE
        return out


def _commit_error(commit: str, why: str) -> AgentprovError:
    return AgentprovError("cli.environment.autodojo_cache_commit", commit=commit,
                          path=fetchcache.repo_path(FORK), why=why)


def commit_in_cache(*, allow_network: bool = False, dry_run: bool = True) -> str:
    """The full id of the pinned commit in the fetch cache (fetched from the upstream only
    with ``allow_network`` and never on a dry run), or ``autodojo_cache_commit``."""
    pin = fork_pin()
    repo = fetchcache.repo_path(FORK)
    if not re.fullmatch(r"[0-9a-f]{8,40}", pin.commit):
        raise _commit_error(pin.commit, f"{PIN_OVERRIDE} is not a commit id")
    try:
        may_fetch = allow_network and not dry_run and bool(pin.upstream)
        held = (repo / "HEAD").is_file() and fetchcache.resolve(repo, pin.commit) is not None
        if not may_fetch and not held:
            raise _commit_error(pin.commit, "the fetch cache does not hold it" + (
                "; a dry run never fetches" if allow_network and dry_run else ""))
        return fetchcache.ensure(pin, allow_network=allow_network and not dry_run)
    except AgentprovError as exc:
        if exc.code == "cli.environment.autodojo_cache_commit":
            raise
        raise _commit_error(pin.commit, exc.message) from None


def verify(cache: Cache, *, allow_network: bool = False, dry_run: bool = True) -> Origin:
    """Find the cache file in the tree of the pinned fork commit: its git blob id among the
    tree's blobs (``git ls-tree``), whose bytes (``git cat-file``) hash to the file's
    sha256. Nothing is checked out or written (but the fetch ``allow_network`` permits)."""
    _, test_only = pinned()
    commit = commit_in_cache(allow_network=allow_network, dry_run=dry_run)
    repo = fetchcache.repo_path(FORK)
    want = fetchcache.blob_id(cache.data)
    try:
        entries = [e for e in fetchcache.ls_tree(repo, commit)
                   if e.type == "blob" and e.object == want]
        if not entries:
            raise AgentprovError("cli.environment.autodojo_cache_blob", path=str(cache.path),
                                 blob=want, commit=commit[:8],
                                 why="no blob of the pinned tree has this id")
        data = fetchcache.blob(repo, want)
    except fetchcache.GitFailed as exc:
        raise _commit_error(commit[:8], f"git could not read it ({exc})") from None
    if hashlib.sha256(data).hexdigest() != cache.sha256:
        raise AgentprovError("cli.environment.autodojo_cache_blob", path=str(cache.path),
                             blob=want, commit=commit[:8],
                             why="the blob's bytes do not hash to the file's sha256")
    entry = min(entries, key=lambda e: e.path)  # the same bytes at two paths: the first
    return Origin(repository=FORK, commit=commit, path=entry.path, blob=want,
                  sha256=cache.sha256, size=len(cache.data), test_only=test_only)


# ------------------------------------------------------------------------- the corpus
def store(wc: WorkingCorpus, checked: Checked) -> dict[str, Any]:
    """Put the verified file in the corpus's raw store and return what the manifest records
    of it (``attack_caches[sha256]``): the raw path, the git origin and the fallbacks."""
    sha = wc.store.put_bytes(checked.cache.data)
    assert sha == checked.origin.sha256
    return {"raw": f"raw/sha256/{sha[:2]}/{sha}"} | checked.record()


# ------------------------------------------------------------------- both steps, at T0
@dataclass(frozen=True)
class Checked:
    """A cache file read, shaped, verified and counted: what the run records."""

    cache: Cache
    origin: Origin
    fallbacks: Fallbacks

    def same_as_plan(self, content: dict[str, Any]) -> None:
        """The plan hashes the file once more (its ``backend_config``): it must be the
        verified file, not one changed since."""
        got = (content.get("backend_config") or {}).get("autodojo", {}).get("cache_sha256")
        if got != self.origin.sha256:
            raise AgentprovError("cli.environment.autodojo_cache_blob",
                                 path=str(self.cache.path), blob=self.origin.blob,
                                 commit=self.origin.commit[:8],
                                 why="the file changed while it was checked")

    def record(self) -> dict[str, Any]:
        return {"origin": self.origin.record(), "variants": self.fallbacks.record()}


def check(path: str | Path, variant: int, known: dict[str, list[str]],
          injection_tasks: list[str], *, allow_network: bool = False,
          dry_run: bool = True) -> Checked:
    """Read the cache file once: its shape (exit 2), then its identity in the pinned
    fork's tree (exit 3), then how many of the plan's vectors serve ``variant``."""
    cache = load(path, known)
    origin = verify(cache, allow_network=allow_network, dry_run=dry_run)
    return Checked(cache, origin, fallbacks(cache, variant, injection_tasks))
