"""The plugin manager: entry points of the group ``agentprov``, loaded once, lazily, safely.

* Loaded on first use, never for ``agentprov --help``.
* A plugin that fails to import, registers a malformed hook, or raises from a hook is
  recorded (distribution, version, error) and fails only the commands that need it.
* ``AGENTPROV_LOAD_PLUGINS``: a comma-separated allowlist of plugin or distribution names
  (set but empty: no plugin is loaded, only the core's built-ins).
* ``AGENTPROV_DISABLED_PLUGINS``: a comma-separated list of plugin or distribution names
  not to load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, Any

import pluggy

from agentprov_core import hookspecs

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.source import Source

GROUP = "agentprov"
hookimpl = pluggy.HookimplMarker("agentprov")


@dataclass
class PluginRecord:
    name: str
    distribution: str | None
    version: str | None
    status: str  # loaded | failed | disabled | not-allowed | builtin
    error: str | None = None
    hooks: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "distribution": self.distribution, "version": self.version,
                "status": self.status, "error": self.error, "hooks": self.hooks}


@dataclass
class SourceEntry:
    source: Source
    plugin: PluginRecord


@dataclass
class Plugins:
    pm: pluggy.PluginManager
    records: list[PluginRecord]
    _sources: dict[str, SourceEntry] | None = None
    duplicates: list[str] = field(default_factory=list)

    @property
    def hook(self):
        return self.pm.hook

    def record(self, name: str) -> PluginRecord | None:
        for r in self.records:
            if r.name == name or r.distribution == name:
                return r
        return None

    def sources(self) -> dict[str, SourceEntry]:
        if self._sources is None:
            self._sources = {}
            for impl in self.pm.hook.agentprov_sources.get_hookimpls():  # registration order
                rec = self.record(impl.plugin_name) or PluginRecord(impl.plugin_name, None,
                                                                     None, "loaded")
                try:
                    found = list(impl.function() or ())
                except Exception as exc:  # a plugin's bug must not take the CLI down
                    rec.status, rec.error = "failed", f"agentprov_sources: {_describe(exc)}"
                    continue
                for src in found:
                    name = src.meta.name
                    if name in self._sources:
                        self.duplicates.append(
                            f"source {name!r} from {rec.name} ignored: already registered by "
                            f"{self._sources[name].plugin.name}")
                        continue
                    self._sources[name] = SourceEntry(src, rec)
        return self._sources

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


def build(entry_points: list[metadata.EntryPoint] | None = None) -> Plugins:
    """A fresh plugin manager (tests call this; the CLI uses :func:`manager`)."""
    from agentprov_core import builtin

    pm = pluggy.PluginManager("agentprov")
    pm.add_hookspecs(hookspecs)
    pm.register(builtin, name=builtin.NAME)
    from agentprov_core import __version__

    records = [PluginRecord(builtin.NAME, "agentprov", __version__, "builtin",
                            hooks=_hooks_of(pm, builtin))]
    allow = _names("AGENTPROV_LOAD_PLUGINS")
    deny = _names("AGENTPROV_DISABLED_PLUGINS") or set()
    eps = entry_points if entry_points is not None else list(metadata.entry_points(group=GROUP))
    seen: set[str] = set()
    for ep in sorted(eps, key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        dname = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
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
    return build()
