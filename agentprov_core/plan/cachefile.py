"""AutoDojo's attack cache file as the usage step reads it (step 1, exit 2).

A cache file (``--autodojo-cache PATH``) is strict JSON (no duplicate keys, no ``NaN``) of
the shape ``{"injection_tasks": {TASK: {VECTOR: [VARIANT, ...]}}}``, a variant a string or
``null`` (a hole the optimiser left); every injection task it names is one of the plan's
suites'. A refusal is ``cli.usage.autodojo_cache``, naming the file, the field and the fix.
:func:`fallbacks` counts the plan's vectors that cannot serve a variant. What T0 then
checks of the file's identity is :mod:`agentprov_core.run.attackcache`'s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.base import inputfile
from agentprov_core.errors import AgentprovError

if TYPE_CHECKING:
    from agentprov_core.catalogue import Catalogue

#: the largest cache file read
MAX_BYTES = 256 * 1024 * 1024


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
