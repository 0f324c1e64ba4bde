"""The sources this backend environment serves, found through entry points.

A source's worker package registers one :class:`agentprov_backend.source.WorkerSource`
under the entry-point group ``agentprov.worker``; the entry point's name is the source's
name. The worker library itself names no source: the hello lists what is installed (and
what failed to load, with its error), and a request for anything else is refused.

A worker package that fails to import, or registers something that is not a
``WorkerSource``, fails only its own source (``worker.source_unavailable``): the others
keep serving.

Never imports ``agentprov_core``; :func:`entry_points` reads the installed metadata only,
and a source's module is imported the first time the source is asked for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

from agentprov_backend.source import WorkerSource

GROUP = "agentprov.worker"


class SourceUnavailable(LookupError):
    """A source this environment does not serve, or whose worker package fails to load."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Registered:
    """One entry point of the group, before it is loaded."""

    name: str
    value: str
    distribution: str | None
    version: str | None

    def describe(self) -> dict[str, Any]:
        return {"entry_point": self.value, "distribution": self.distribution,
                "version": self.version}


@cache
def entry_points() -> dict[str, Registered]:
    """Every ``agentprov.worker`` entry point installed here, by source name (the first of a
    name wins: a second registration of a name is an error T0 reports from the hello)."""
    out: dict[str, Registered] = {}
    for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        dist = getattr(ep, "dist", None)
        out.setdefault(ep.name, Registered(
            ep.name, ep.value, _dist_name(dist), dist.version if dist is not None else None))
    return out


def duplicates() -> dict[str, list[str]]:
    """Source names registered by more than one entry point: name -> their values."""
    seen: dict[str, list[str]] = {}
    for ep in metadata.entry_points(group=GROUP):
        seen.setdefault(ep.name, []).append(ep.value)
    return {k: sorted(v) for k, v in seen.items() if len(v) > 1}


def _dist_name(dist: Any) -> str | None:
    if dist is None:
        return None
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return name.lower().replace("_", "-") if name else None


_loaded: dict[str, WorkerSource | SourceUnavailable] = {}
_lock = threading.Lock()


def source(name: str) -> WorkerSource:
    """The worker source registered as ``name``, loaded once; raises
    :class:`SourceUnavailable` when none is, or when it fails to load."""
    with _lock:
        if name not in _loaded:
            _loaded[name] = _load(name)
        found = _loaded[name]
    if isinstance(found, SourceUnavailable):
        raise found
    return found


def _load(name: str) -> WorkerSource | SourceUnavailable:
    reg = entry_points().get(name)
    if reg is None:
        served = ", ".join(entry_points()) or "no source"
        return SourceUnavailable("worker.unknown_source",
                                 f"this backend environment serves {served}, not {name!r}")
    where = f"{reg.distribution or 'an unnamed distribution'} ({GROUP} {name} = {reg.value})"
    try:
        ep = next(e for e in metadata.entry_points(group=GROUP, name=name) if e.value == reg.value)
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken worker package fails only its source
        return SourceUnavailable("worker.source_unavailable",
                                 f"{where} fails to load: {type(exc).__name__}: {exc}")
    if isinstance(obj, type) and issubclass(obj, WorkerSource):
        obj = obj()
    if not isinstance(obj, WorkerSource):
        return SourceUnavailable("worker.source_unavailable",
                                 f"{where} registers an object of type "
                                 f"{type(obj).__name__!r}, not an "
                                 "agentprov_backend.source.WorkerSource")
    if obj.name != name:
        return SourceUnavailable("worker.source_unavailable",
                                 f"{where} says its name is {obj.name!r}, not {name!r}")
    return obj


def served() -> dict[str, dict[str, Any]]:
    """What the hello says of each registered source: where it comes from, and ``error``
    when it cannot be served (the message says why)."""
    out: dict[str, dict[str, Any]] = {}
    for name, reg in entry_points().items():
        entry = reg.describe()
        try:
            source(name)
        except SourceUnavailable as exc:
            entry["error"] = str(exc)
        out[name] = entry
    for name, values in duplicates().items():
        out[name]["error"] = (f"{len(values)} entry points of {GROUP} register {name!r} "
                              f"({', '.join(values)})")
    return out
