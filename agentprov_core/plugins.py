"""The plugin manager: entry points of the group ``agentprov``, loaded once, lazily, safely.

* Loaded on first use, never for ``agentprov --help``.
* The entry points are read from the index kept beside the environment while the
  installed distributions are unchanged, and scanned otherwise
  (:mod:`agentprov_core.base.entrypoints`).
* A plugin that fails to import, registers a malformed hook, or raises from a hook is
  recorded (distribution, version, error) and fails only the commands that need it.
* ``AGENTPROV_LOAD_PLUGINS``: a comma-separated allowlist of plugin or distribution names
  (set but empty: no plugin is loaded, only the core's built-ins).
* ``AGENTPROV_DISABLED_PLUGINS``: a comma-separated list of plugin or distribution names
  not to load.
"""

from __future__ import annotations

import gc
import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import pluggy

from agentprov_core import hookspecs
from agentprov_core.base import entrypoints
from agentprov_core.base.entrypoints import EntryPointRef
from agentprov_core.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.backendproject import BackendProject
    from agentprov_core.mapping import Mapper
    from agentprov_core.source import Source

GROUP = "agentprov"
#: the core's own hook implementations, loaded by name as pytest loads its default plugins:
#: the manager depends on no implementation module, and they stand above it
BUILTIN = "agentprov_core.builtin"
__all__ = ["GROUP", "BUILTIN", "hookimpl", "Plugins", "PluginRecord", "SourceEntry",
           "BackendEntry", "MapperEntry", "build", "manager", "source_entry"]


@dataclass
class PluginRecord:
    name: str
    distribution: str | None
    version: str | None
    status: str  # loaded | failed | disabled | not-allowed | builtin
    error: str | None = None
    hooks: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        """The contributing distribution as messages name it (``agentprov-agentdojo
        0.1.0``; ``plugin NAME`` for a plugin registered without one)."""
        if self.distribution is None:
            return f"plugin {self.name}"
        return f"{self.distribution} {self.version}"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "status": self.status, "error": self.error, "hooks": self.hooks}


@dataclass
class SourceEntry:
    source: Source
    plugin: PluginRecord


@dataclass
class BackendEntry:
    project: BackendProject
    plugin: PluginRecord


@dataclass
class MapperEntry:
    mapper: Mapper
    plugin: PluginRecord


@dataclass
class Plugins:
    pm: pluggy.PluginManager
    records: list[PluginRecord]
    _sources: dict[str, SourceEntry] | None = None
    duplicates: list[str] = field(default_factory=list)
    #: the plugin refused for a source it contributes under another name than its entry
    #: point's, by that source's name and its backend's
    misnamed: dict[str, PluginRecord] = field(default_factory=dict)
    _backends: dict[str, list[BackendEntry]] | None = None
    _mappers: dict[str, MapperEntry] | None = None

    @property
    def hook(self):
        return self.pm.hook

    def record(self, name: str) -> PluginRecord | None:
        for r in self.records:
            if r.name == name or r.distribution == name:
                return r
        return None

    def _contributed(self, hook: str) -> Iterator[tuple[PluginRecord, list[Any]]]:
        """What each plugin's ``hook`` returns, in registration order; a plugin whose hook
        raises is recorded as failed and skipped (its bug must not take the CLI down)."""
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            rec = self.record(impl.plugin_name) or PluginRecord(impl.plugin_name, None,
                                                                 None, "loaded")
            try:
                found = list(impl.function() or ())
            except Exception as exc:
                rec.status, rec.error = "failed", f"{hook}: {_describe(exc)}"
                continue
            yield rec, found

    def sources(self) -> dict[str, SourceEntry]:
        if self._sources is None:
            found = [(rec, src) for rec, srcs in self._contributed("agentprov_sources")
                     for src in srcs if self._named(rec, src)]
            for rec, src in found:
                self._check_name(rec, src)
            self._sources = self._first_by_name(
                "source", ((rec, src.meta.name, SourceEntry(src, rec)) for rec, src in found
                           if rec.status != "failed"))
        return self._sources

    def _check_name(self, rec: PluginRecord, src: Any) -> None:
        """A plugin's source is named as its entry point is (the name ``run``, ``plugins``
        and the evidence use for both); else the plugin is recorded as failed, with the
        fix, and contributes nothing (its backend project included)."""
        name = src.meta.name
        if rec.status == "builtin" or name == rec.name:
            return
        rec.status = "failed"
        rec.error = (f"source {name!r} comes from the entry point {rec.name!r}: the "
                     f"entry-point name must be the source's name (name the entry point "
                     f"{name} in the distribution's [project.entry-points.agentprov] table)")
        for key in (name, getattr(src.meta, "backend", None)):
            if isinstance(key, str) and key:
                self.misnamed.setdefault(key, rec)

    @staticmethod
    def _named(rec: PluginRecord, src: Any) -> bool:
        """Whether ``src`` has a string ``meta.name``; if not, its plugin is recorded as
        failed (its bug must not take the CLI down)."""
        if isinstance(getattr(getattr(src, "meta", None), "name", None), str):
            return True
        rec.status = "failed"
        rec.error = (f"agentprov_sources: returned a {type(src).__name__} whose meta.name is "
                     "not a string (a Source with a SourceMeta)")
        return False

    def _first_by_name(self, kind: str, named: Iterator[tuple[PluginRecord, str, Any]]
                       ) -> dict[str, Any]:
        """``(plugin, name, entry)`` by name, the first registered keeping a name; a later
        one is ignored and reported under :attr:`duplicates`."""
        out: dict[str, Any] = {}
        for rec, name, entry in named:
            if name in out:
                self.duplicates.append(f"{kind} {name!r} from {rec.name} ignored: already "
                                       f"registered by {out[name].plugin.name}")
                continue
            out[name] = entry
        return out

    def backends(self) -> dict[str, list[BackendEntry]]:
        """Every contributed backend project by name, in registration order. A name with
        more than one entry is a conflict: no build may choose between distributions."""
        if self._backends is None:
            from agentprov_core.backendproject import BackendProject

            self.sources()  # a plugin refused for its source's name contributes no backend
            self._backends = {}
            for rec, found in self._contributed("agentprov_backends"):
                if rec.status == "failed":
                    continue
                for project in found:
                    if not isinstance(project, BackendProject):
                        rec.status = "failed"
                        rec.error = (f"agentprov_backends: returned {type(project).__name__}, "
                                     "not a BackendProject")
                        continue
                    self._backends.setdefault(project.name, []).append(
                        BackendEntry(project, rec))
        return self._backends

    def mappers(self) -> dict[str, MapperEntry]:
        """Every contributed mapper by name, in registration order (the order in which a
        mapper is found by evidence format). A name already registered is ignored and
        reported as a duplicate, as a source's is."""
        if self._mappers is None:
            def named() -> Iterator[tuple[PluginRecord, str, MapperEntry]]:
                for rec, found in self._contributed("agentprov_mappers"):
                    for m in found:
                        name = getattr(m, "name", None)
                        if not isinstance(name, str) or not name:
                            rec.status = "failed"
                            rec.error = (f"agentprov_mappers: returned {type(m).__name__}, "
                                         "which has no name (not a Mapper)")
                            continue
                        yield rec, name, MapperEntry(m, rec)

            self._mappers = self._first_by_name("mapper", named())
        return self._mappers

    def contributions(self) -> dict[str, dict[str, list[str]]]:
        """What each plugin (by name) contributes: the names of its ``sources``,
        ``backends``, ``mappers`` and ``executors``, sorted (a duplicate stays with the
        plugin that registered it first; a backend contributed twice is listed under both)."""
        kinds = ("sources", "backends", "mappers", "executors")
        out: dict[str, dict[str, list[str]]] = {
            r.name: {k: [] for k in kinds} for r in self.records}

        def add(rec: PluginRecord, kind: str, name: str) -> None:
            out.setdefault(rec.name, {k: [] for k in kinds})[kind].append(name)

        for name, entry in self.sources().items():
            add(entry.plugin, "sources", name)
        for name, found in self.backends().items():
            for b in found:
                add(b.plugin, "backends", name)
        for name, m in self.mappers().items():
            add(m.plugin, "mappers", name)
        for rec, metas in self._contributed("agentprov_executors"):
            for meta in metas:
                add(rec, "executors", meta.name)
        for kinds in out.values():
            for names in kinds.values():
                names.sort()
        return out

    def failed(self) -> list[PluginRecord]:
        return [r for r in self.records if r.status == "failed"]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _names(var: str) -> set[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return {n.strip() for n in raw.split(",") if n.strip()}


def _hooks_of(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    return sorted(c.name for c in pm.get_hookcallers(plugin) or ())


def build(entry_points: list[EntryPointRef] | None = None) -> Plugins:
    """A fresh plugin manager (tests call this; the CLI uses :func:`manager`): the
    built-ins, then ``entry_points`` (by default the group's, from the installed
    distributions: :func:`agentprov_core.base.entrypoints.entry_points`)."""
    builtin = importlib.import_module(BUILTIN)
    pm = pluggy.PluginManager("agentprov")
    pm.add_hookspecs(hookspecs)
    pm.register(builtin, name=builtin.NAME)
    from agentprov_core import __version__

    records = [PluginRecord(builtin.NAME, "agentprov", __version__, "builtin",
                            hooks=_hooks_of(pm, builtin))]
    allow = _names("AGENTPROV_LOAD_PLUGINS")
    deny = _names("AGENTPROV_DISABLED_PLUGINS") or set()
    eps = entry_points if entry_points is not None else entrypoints.entry_points(GROUP)
    seen: set[str] = set()
    for ep in sorted(eps, key=lambda e: e.name):
        dname, version = ep.distribution, ep.version
        if ep.name in seen:
            records.append(PluginRecord(ep.name, dname, version, "failed",
                                        f"duplicate plugin name {ep.name!r}"))
            continue
        seen.add(ep.name)
        rec = PluginRecord(ep.name, dname, version, "loaded")
        records.append(rec)
        if allow is not None and ep.name not in allow and dname not in allow:
            rec.status = "not-allowed"
            continue
        if ep.name in deny or dname in deny:
            rec.status = "disabled"
            continue
        try:
            plugin = ep.load()
        except BaseException as exc:  # noqa: BLE001 - SystemExit in a plugin is a failure too
            if isinstance(exc, KeyboardInterrupt):
                raise
            rec.status, rec.error = "failed", _describe(exc)
            continue
        try:
            pm.register(plugin, name=ep.name)
            pm.check_pending()
        except Exception as exc:
            if pm.is_registered(plugin):
                pm.unregister(plugin)
            rec.status, rec.error = "failed", _describe(exc)
            continue
        rec.hooks = _hooks_of(pm, plugin)
    return Plugins(pm, records)


@cache
def manager() -> Plugins:
    """The plugin manager of this process, built on first use.

    What is alive once it is built (the modules imported so far, the plugins and their
    classes) lives until the process ends: the collector pauses while the plugins are
    imported and then leaves all of it aside (:func:`gc.freeze`), so that no later
    collection, the one at exit included, walks it again (about a sixth of ``agentprov
    info``'s CPU time, docs/performance.md).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return build()
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def suites_of_backend(backend: str) -> set[str] | None:
    """The suites of ``backend`` by the catalogues of its installed sources (``None`` when
    none is installed): what the defence registry's ``suites`` are checked against
    (:func:`agentprov_core.registries.defences.check_suites`)."""
    found = [e.source for e in manager().sources().values() if e.source.meta.backend == backend]
    if not found:
        return None
    return {s.name for src in found for s in src.catalogue().suites}


def installed_parts() -> dict[str, Any]:
    """A part (:class:`~agentprov_core.registries.parts.PartEntry`) for each installed
    source, from its plugin's metadata: what ``registry/parts.toml`` overrides, and what a
    maintainer toggles for a plugin the file does not name."""
    from agentprov_core.registries.parts import PartEntry

    return {n: PartEntry(name=n, label=e.source.meta.label,
                         live_status=e.source.meta.live_status, caveat=e.source.meta.caveat,
                         distribution=e.plugin.distribution)
            for n, e in manager().sources().items()}


def parts() -> dict[str, Any]:
    """Every part, with the overlay's live statuses: the parts registry's, and each
    installed source's it does not hold (:func:`installed_parts`)."""
    from agentprov_core.registries import parts as partsmod

    return partsmod.load(installed=installed_parts())


def refuse_failed(name: str) -> None:
    """Exit 3 (``cli.environment.plugin_failed``) when ``name`` is a plugin that failed to
    load, or a source or backend a failed plugin contributes under another entry-point
    name."""
    from agentprov_core.errors import AgentprovError

    plugins = manager()
    plugins.sources()
    rec = plugins.misnamed.get(name) or next(
        (r for r in plugins.failed() if r.name == name), None)
    if rec is not None:
        raise AgentprovError("cli.environment.plugin_failed", source=name,
                             distribution=rec.distribution, version=rec.version,
                             error=rec.error)


def source_entry(name: str) -> SourceEntry:
    """The installed source ``name``, or the right refusal (unknown, missing, failed)."""
    from agentprov_core.errors import AgentprovError

    plugins = manager()
    sources = plugins.sources()
    if name in sources:
        return sources[name]
    refuse_failed(name)
    rec = plugins.record(name)
    if rec is not None and rec.status in ("disabled", "not-allowed"):
        why = ("AGENTPROV_DISABLED_PLUGINS names it" if rec.status == "disabled"
               else "AGENTPROV_LOAD_PLUGINS does not name it")
        raise AgentprovError("cli.usage.source_disabled", name=name,
                             distribution=rec.distribution, version=rec.version,
                             status=rec.status, why=why)
    known = ", ".join(sorted(sources)) or "none"
    part = parts().get(name)
    if part is not None and part.distribution:
        raise AgentprovError("cli.usage.source_not_installed", name=name,
                             distribution=part.distribution, known=known)
    raise AgentprovError("cli.usage.unknown_source", name=name, known=known)
