"""The defence registry and the rules T0 applies to ``--defence`` before anything starts.

Every refusal here is exit 5 with the specification's message (R-22.13 … R-22.17) and is
raised before any worker starts, so nothing is started and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from agentprov_core.base import paths, tomlfile
from agentprov_core.catalogue import Defence as DefenceEntry
from agentprov_core.errors import AgentprovError
from agentprov_core.registries import fields
from agentprov_core.registries import overlay as overlaymod

__all__ = ["DefenceEntry", "load_registry", "check"]

REGISTRY_FORMAT = "agentprov-defence-registry/0.1"
#: a registry entry's ``needs`` that only an OpenAI-style wire meets: AgentDojo's tool
#: filter (``OpenAILLMToolFilter``) calls the agent's model through the OpenAI client
NEEDS_OPENAI_ELEMENT = "an OpenAI-style element"


#: the defence registry's top-level keys and tables
TOP = ["format", "defences", "assets"]


def read_file(path: Path) -> tuple[list[DefenceEntry], str]:
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != REGISTRY_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{REGISTRY_FORMAT}"')
    fields.check_top(path, text, data, TOP, "the defence registry")
    assets = data.get("assets") or {}
    out = []
    for name, entry in (data.get("defences") or {}).items():
        table = f"defences.{name}"
        d = fields.convert(path, text, table, entry, DefenceEntry, "a defence", name=name)
        for aid in d.assets:
            if aid not in assets:
                raise fields.refuse(path, text, table, "assets",
                                    f"names {aid!r}, which has no [assets.{aid}] table",
                                    "add the table, or name one of "
                                    + (", ".join(sorted(assets)) or "none"))
        out.append(d)
    return out, text


def check_suites(path: Path, text: str, entries: list[DefenceEntry],
                 suites_of: Callable[[str], set[str] | None]) -> None:
    """Every suite an entry names is a suite of each backend that builds it, by the
    catalogue of an installed source of that backend (``suites_of``: ``None`` when no
    installed source has that backend, and nothing can be checked)."""
    for d in entries:
        for backend in d.backends if d.suites is not None else ():
            known = suites_of(backend)
            for suite in d.suites if known is not None else ():
                if suite not in known:
                    raise fields.refuse(
                        path, text, f"defences.{d.name}", "suites",
                        f"names {suite!r}, which is not a suite of the {backend} backend",
                        "use " + ", ".join(sorted(known)))


def load_registry(path: Path | None = None, overlay: Path | None = None,
                  suites_of: Callable[[str], set[str] | None] | None = None
                  ) -> list[DefenceEntry]:
    """The registry's entries, each checked (exit 2 naming file, line, field and fix).

    :param path: the registry file; by default :func:`paths.defence_registry`, read with
        its overlay (``$AGENTPROV_HOME/registry/defences.toml``, :mod:`.overlay`).
    :param overlay: an overlay file to read over ``path``.
    :param suites_of: the suites of a backend (see :func:`check_suites`)."""
    if path is None:
        path = paths.defence_registry()
        overlay = overlay or overlaymod.path_of(path)
    entries, text = read_file(path)
    if suites_of is not None:
        check_suites(path, text, entries, suites_of)
    if overlay is not None:
        enabled = read_overlay(overlay, None, entries)
        entries = [msgspec.structs.replace(d, enabled=enabled[d.name]) if d.name in enabled
                   else d for d in entries]
    return sorted(entries, key=lambda d: d.name)


def read_overlay(overlay: Path, text: str | None,
                 entries: list[DefenceEntry]) -> dict[str, bool]:
    """The overlay's ``enabled`` by defence (``text``: the overlay's, else read)."""
    return overlaymod.read(overlay, text, REGISTRY_FORMAT, "defences", "enabled",
                           [d.name for d in entries],
                           lambda v: None if isinstance(v, bool) else "write true or false")


#: the keys of a defence entry that change nothing a worker runs: T0 reads ``enabled`` (and
#: the overlay's) before any worker starts, and ``summary`` is a description
NOT_RUN = frozenset({"enabled", "summary"})


def run_changes(built: str, now: str) -> list[str]:
    """The fields of the defence registry text ``now`` that differ from ``built`` (the text
    an environment installed) in what a worker runs: every key but :data:`NOT_RUN`'s, of
    every defence and asset table, as ``[defences.melon].assets`` (a table added or
    removed by its name alone). Both texts are already checked (:func:`read_file`)."""
    import tomllib

    def runs(text: str) -> dict[str, dict]:
        data = tomllib.loads(text)
        out = {f"defences.{n}": {k: v for k, v in e.items() if k not in NOT_RUN}
               for n, e in (data.get("defences") or {}).items()}
        out |= {f"assets.{n}": dict(e) for n, e in (data.get("assets") or {}).items()}
        return out

    a, b = runs(built), runs(now)
    changed = []
    for table in sorted(a.keys() | b.keys()):
        if table not in a or table not in b:
            changed.append(f"[{table}] {'added' if table in b else 'removed'}")
            continue
        changed += [f"[{table}].{k}" for k in sorted(a[table].keys() | b[table].keys())
                    if a[table].get(k) != b[table].get(k)]
    return changed


def built_by(entries: list[DefenceEntry], backend: str | None) -> list[DefenceEntry]:
    """The enabled, non-replacing entries that ``backend`` builds."""
    return [d for d in entries
            if backend in d.backends and d.enabled and not d.replaces_pipeline]


def check(source: str, backend: str | None, defence: str, suites: list[str],
          entries: list[DefenceEntry], registry: str, wire: str = "openai",
          agent_endpoint: str | None = None,
          defence_endpoint: str | None = None) -> DefenceEntry | None:
    """Refuse ``defence`` for this plan, or return its entry (``None`` for ``none``).

    :param wire: the agent endpoint's wire family (``openai``, ``anthropic``); the scripted
        transport is ``openai``.
    :param agent_endpoint: the agent endpoint's name, for the message.
    :param defence_endpoint: ``--defence-endpoint`` (a defence's own model, MELON's
        embeddings), judged once the defence is known to run here: missing for a defence
        that calls a model, or given for one that calls none, is a usage error (2); given
        where it is needed, it is refused (exit 5), because this build does not wire a
        second key and a second egress pair."""
    if defence == "none":
        if defence_endpoint:
            raise AgentprovError("cli.usage.defence_endpoint_unused", endpoint=defence_endpoint,
                                 defence=defence)
        return None
    by_name = {d.name: d for d in entries}
    entry = by_name.get(defence)
    if entry is None:
        built = ", ".join(d.name for d in built_by(entries, backend)) or "none"
        raise AgentprovError("run.unsupported.defence_unknown", source=source, defence=defence,
                             registry=registry, backend=backend, built=built)
    if entry.replaces_pipeline:
        raise AgentprovError("run.unsupported.defence_replaces_pipeline", source=source,
                             defence=defence)
    if backend not in entry.backends:
        raise AgentprovError("run.unsupported.defence_backend", source=source, defence=defence,
                             backend=backend, builders=", ".join(entry.backends) or "no backend")
    if not entry.enabled:
        raise AgentprovError("run.unsupported.defence_disabled", source=source, defence=defence,
                             registry=registry)
    if wire != "openai" and NEEDS_OPENAI_ELEMENT in entry.needs:
        raise AgentprovError("run.unsupported.defence_wire", source=source, defence=defence,
                             endpoint=agent_endpoint or wire,
                             style=f"{wire.capitalize()}-style")
    if entry.suites is not None:
        for suite in suites:
            if suite not in entry.suites:
                raise AgentprovError("run.unsupported.defence_suite", source=source,
                                     defence=defence, suite=suite,
                                     suites=" and ".join(entry.suites))
    if entry.endpoint and not defence_endpoint:
        raise AgentprovError("cli.usage.defence_endpoint_missing", defence=defence)
    if defence_endpoint and not entry.endpoint:
        raise AgentprovError("cli.usage.defence_endpoint_unused", endpoint=defence_endpoint,
                             defence=defence)
    if defence_endpoint:
        raise AgentprovError("run.unsupported.defence_endpoint", source=source,
                             defence=defence, endpoint=defence_endpoint)
    return entry
