"""AutoDojo's attack cache, as T0 checks it before anything is staged or spawned.

``--attack autodojo --autodojo-cache PATH --autodojo-variant K`` replays a cache file that
the fork's optimiser wrote. Two checks, at two of the specification's steps:

* step 1, usage (exit 2, ``cli.usage.autodojo_cache``): the file is strict JSON (no
  duplicate keys, no ``NaN``) of the shape ``{"injection_tasks": {TASK: {VECTOR:
  [VARIANT, ...]}}}``, a variant a string or ``null`` (a hole the optimiser left), and every
  injection task it names is one of the plan's suites; :func:`load`.
* step 5, identity (exit 3): the file's git blob id is a blob of the tree of the pinned fork
  commit in the fetch cache (``git ls-tree``), whose bytes (``git cat-file``) hash to the
  file's sha256; :func:`verify`. ``cli.environment.autodojo_cache_commit``: the commit is
  not in the fetch cache (a dry run never fetches; a run fetches only with
  ``--allow-network``), or the cache holds another commit for it;
  ``cli.environment.autodojo_cache_blob``: no blob of the pinned tree is the file.

A vector whose variant list has no string at index ``K`` cannot serve the variant: the
attack falls back to the injection task's goal there, and the run reports how many vectors
do (:func:`fallbacks`). The verified file is stored in the corpus's raw store with its git
origin (:func:`store`).

The pinned commit is ``aa458794``. Tests replace it with a fixture fork's commit through
:data:`PIN_OVERRIDE`, read only by :func:`pinned`; a corpus made under the override records
it (``test_only``, and the override named in ``live.test_overrides``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.backend import fetchcache
from agentprov_core.backend.autodojofork import FORK, PIN_OVERRIDE, fork_pin, pinned
from agentprov_core.base import inputfile
from agentprov_core.errors import AgentprovError

if TYPE_CHECKING:
    from agentprov_core.catalogue import Catalogue
    from agentprov_core.corpus.working import WorkingCorpus

#: the largest cache file read
MAX_BYTES = 256 * 1024 * 1024
OPTION = "--autodojo-cache"


# ------------------------------------------------------------------------ step 1 (exit 2)
@dataclass(frozen=True)
class Cache:
    """A cache file as read at step 1: its bytes, sha256 and vectors."""

    path: Path
    data: bytes
    sha256: str
    #: injection task -> vector -> variants (a variant ``None``: a hole)
    tasks: dict[str, dict[str, list[str | None]]]


def _bad(path: str | Path, field: str, what: str, fix: str) -> AgentprovError:
    return AgentprovError("cli.usage.autodojo_cache", path=str(path), field=field, what=what,
                          fix=fix)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


SHAPE = '{"injection_tasks": {TASK: {VECTOR: [VARIANT, ...]}}}'


def load(path: str | Path, known: dict[str, list[str]]) -> Cache:
    """Read and check the cache file ``path`` against the injection tasks of the plan's
    suites (``known``: suite -> its injection tasks); exit 2 naming the file, the field and
    the fix."""
    copy = "use the cache file from the pinned fork unchanged"
    try:
        data = inputfile.read_bytes(path, MAX_BYTES)
        # the shape is three levels deep: a deeper file fails the shape check below, and
        # one deep enough to exhaust the parser is RecursionError (not a depth pre-scan,
        # which costs ten times the parse on a large cache)
        doc = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates,
                         parse_constant=_no_constant)
    except RecursionError:
        raise _bad(path, "(the file)", "nests arrays and objects too deeply for JSON of "
                   f"the shape {SHAPE}", copy) from None
    except inputfile.Unreadable as exc:
        raise _bad(path, "(the file)", str(exc), "give the path of a cache file") from None
    except UnicodeDecodeError as exc:
        raise _bad(path, "(the file)", f"is not UTF-8 ({exc.reason} at byte {exc.start})",
                   copy) from None
    except ValueError as exc:  # JSONDecodeError, a duplicate key, NaN
        raise _bad(path, "(the file)", f"is not strict JSON ({inputfile.number_error(exc)})",
                   copy) from None
    shape = f"the shape is {SHAPE}"
    if not isinstance(doc, dict) or "injection_tasks" not in doc:
        raise _bad(path, "injection_tasks", "missing" if isinstance(doc, dict)
                   else f"the file is a JSON {type(doc).__name__}, not an object", shape)
    tasks = doc["injection_tasks"]
    if not isinstance(tasks, dict) or not tasks:
        raise _bad(path, "injection_tasks", "must be a non-empty object of injection tasks",
                   shape)
    names = {t: s for s, ts in known.items() for t in ts}
    for task, vectors in tasks.items():
        field = f"injection_tasks.{task}"
        if task not in names:
            suites = ", ".join(known) or "none"
            raise _bad(path, field, f"no such injection task in the plan's suite(s) {suites}",
                       "run a suite whose injection tasks the cache names (--suite), or use "
                       "that suite's cache file")
        if not isinstance(vectors, dict) or not vectors:
            raise _bad(path, field, "must be a non-empty object of injection vectors", shape)
        for vector, variants in vectors.items():
            vfield = f"{field}.{vector}"
            if not isinstance(variants, list):
                raise _bad(path, vfield, "must be a list of variants (strings)", shape)
            for i, v in enumerate(variants):
                if v is not None and not isinstance(v, str):
                    raise _bad(path, f"{vfield}[{i}]",
                               f"a variant is a string (or null), not a JSON "
                               f"{type(v).__name__}", shape)
    return Cache(Path(path), data, hashlib.sha256(data).hexdigest(), tasks)


@dataclass(frozen=True)
class Fallbacks:
    """How the variant serves the plan's injection tasks."""

    variant: int
    #: vectors of the plan's injection tasks in the cache
    vectors: int
    #: of them, those that cannot serve the variant (they take the injection task's goal)
    fallbacks: int
    #: the plan's injection tasks the cache holds no vector of (every vector falls back)
    absent: tuple[str, ...]

    def line(self) -> str:
        out = (f"attack cache: variant {self.variant}: {self.vectors - self.fallbacks} of "
               f"{self.vectors} vector(s) serve it; {self.fallbacks} fall back to the "
               "injection task's goal")
        if self.absent:
            out += (f"; {len(self.absent)} injection task(s) not in the cache fall back "
                    f"entirely ({', '.join(self.absent)})")
        return out

    def record(self) -> dict[str, Any]:
        return {"variant": self.variant, "vectors": self.vectors,
                "fallbacks": self.fallbacks, "absent_injection_tasks": list(self.absent)}


def fallbacks(cache: Cache, variant: int, injection_tasks: list[str]) -> Fallbacks:
    """Count, over the plan's injection tasks, the vectors that cannot serve ``variant``:
    their list has no string at that index."""
    vectors = falls = 0
    absent = []
    for task in dict.fromkeys(injection_tasks):
        held = cache.tasks.get(task)
        if held is None:
            absent.append(task)
            continue
        for variants in held.values():
            vectors += 1
            if not (variant < len(variants) and isinstance(variants[variant], str)):
                falls += 1
    return Fallbacks(variant, vectors, falls, tuple(absent))


def known_injection_tasks(cat: Catalogue, suites: list[str] | None) -> dict[str, list[str]]:
    """The injection tasks of the plan's suites (all suites when it names none)."""
    want = suites or [s.name for s in cat.suites]
    return {s.name: list(s.injection_tasks) for s in cat.suites if s.name in want}


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
        if not allow_network or dry_run or not pin.upstream:
            if not (repo / "HEAD").is_file() or fetchcache.resolve(repo, pin.commit) is None:
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
