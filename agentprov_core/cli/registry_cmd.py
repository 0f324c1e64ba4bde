"""``agentprov registry``: list the registries, and toggle defences and part statuses in the
overlay (``$AGENTPROV_HOME/registry/``) read over them. Every command checks both registries
and their overlays first (keys, types, suites against the sources' catalogues, part names
against the installed plugins) and writes nothing when one is invalid; the one exception is
the overlay a command writes, which it repairs: a toggle rewrites its own entry whole and
checks the result, and ``reset [NAME]`` removes an entry or the whole overlay."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option, table


@click.group()
def registry() -> None:
    """List the registries, and toggle entries in the overlay
    ($AGENTPROV_HOME/registry/) read over them; the registry files are never edited."""


@registry.group()
def defences() -> None:
    """The defence registry (backends/shared/src/agentprov_backend/defences.toml)."""


def _checked_defences(with_overlay: bool = True):
    """The defence registry checked whole: its path, its overlay's, its own entries and
    the entries as the overlay toggles them (its own again when ``with_overlay`` is false:
    a toggle checks the overlay it writes as it will be)."""
    from agentprov_core.backend import defassets
    from agentprov_core.base import paths
    from agentprov_core.plugins import suites_of_backend
    from agentprov_core.registries import overlay
    from agentprov_core.registries.defences import load_registry

    base = paths.defence_registry()
    own = load_registry(base, suites_of=suites_of_backend)
    defassets.load(base)
    over = overlay.path_of(base)
    return base, over, own, load_registry(base, over) if with_overlay else own


@defences.command("list")
@format_option
def defences_list(fmt: str) -> None:
    """List the defence registry's entries (with the overlay's toggles)."""
    import msgspec

    *_, entries = _checked_defences()
    if fmt == "json":
        echo_json([msgspec.to_builtins(e) for e in entries])
        return
    rows = []
    for e in entries:
        state = "refused" if e.replaces_pipeline else "enabled" if e.enabled else "disabled"
        rows.append([e.name, state, ", ".join(e.backends) or "-",
                     ", ".join(e.suites) if e.suites else "all", e.summary])
    click.echo(table(rows, ["Defence", "State", "Backends", "Suites", "What it is"]))


def _environments(base) -> list[str]:
    """One line per built environment: whether it runs as it did (a toggle changes none of
    its files, and ``enabled`` is checked when a run is planned), or was already built from
    another defence registry and needs a rebuild."""
    from agentprov_core.backend import marker
    from agentprov_core.backend.environments import registry_changes
    from agentprov_core.base import paths

    envs = paths.home() / "envs"
    ok, stale = [], []
    for d in sorted(envs.iterdir()) if envs.is_dir() else ():
        try:
            m = marker.read(d)
        except (OSError, ValueError):
            continue
        changed = registry_changes(d, m)
        if not changed:
            ok.append(m.environment_id)
        else:
            stale.append(f"environment {m.environment_id} was built from a defence registry "
                         f"that differs from {paths.display(base)} in what the worker runs "
                         f"({', '.join(changed[:6])}): rebuild it with agentprov backends "
                         f"build {m.backend}")
    head = ("built environments unaffected (no file of theirs changes; runs check the "
            "toggle when they are planned): " + ", ".join(ok)) if ok else \
        "no built environment is affected"
    return [head, *stale]


def _toggle(name: str, enabled: bool) -> None:
    from agentprov_core.base import paths
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries.defences import REGISTRY_FORMAT, read_overlay
    from agentprov_core.registries.edit import set_overlay

    base, over, own, entries = _checked_defences(with_overlay=False)
    _checked_parts()  # the other registry and its overlay: nothing is written when invalid
    by_name = {e.name: e for e in entries}
    if name not in by_name:
        raise AgentprovError("cli.usage.registry_unknown_entry", kind="defence", name=name,
                             registry=paths.display(base), known=", ".join(sorted(by_name)))
    if by_name[name].replaces_pipeline and enabled:
        raise AgentprovError("run.unsupported.defence_replaces_pipeline", source="registry",
                             defence=name)
    default = next(e.enabled for e in own if e.name == name)
    changed = set_overlay(over, base, REGISTRY_FORMAT, "defences", name, "enabled", enabled,
                          default, lambda text: read_overlay(over, text, own))
    word = "enabled" if enabled else "disabled"
    click.echo(f"defence {name}: {word}" + ("" if changed else " (unchanged)")
               + f" in {paths.display(over)} (over {paths.display(base)})")
    for line in _environments(base):
        click.echo(line)


@defences.command("enable")
@click.argument("name")
def defences_enable(name: str) -> None:
    """Enable defence NAME (in the overlay; built environments keep working)."""
    _toggle(name, True)


@defences.command("disable")
@click.argument("name")
def defences_disable(name: str) -> None:
    """Disable defence NAME: every run with it is refused (exit 5); other runs and built
    environments are unaffected."""
    _toggle(name, False)


@registry.group()
def parts() -> None:
    """The parts registry (registry/parts.toml)."""


@defences.command("reset")
@click.argument("name", required=False)
def defences_reset(name: str | None) -> None:
    """Remove defence NAME's toggle from the overlay (its registry value holds again), or
    without NAME the whole overlay: repairs an overlay a hand edit broke."""
    from agentprov_core.base import paths
    from agentprov_core.registries import defences

    _reset(paths.defence_registry(), "defences", name, defences)


def _reset(base, table: str, name: str | None, module, own=None) -> None:
    """``registry TABLE reset [NAME]`` of the registry file ``base`` (``module`` reads it
    and its overlay; ``own``: the entries the overlay may name, the file's by default). Only
    the result's overlay is checked: the command repairs it."""
    from agentprov_core.registries import overlay
    from agentprov_core.registries.edit import reset_overlay

    over = overlay.path_of(base)
    if name is None:
        click.echo(reset_overlay(over, table, None, lambda text: None))
        return
    if own is None:
        own, _ = module.read_file(base)
    click.echo(reset_overlay(over, table, name,
                             lambda text: module.read_overlay(over, text, own)))


def _checked_parts(with_overlay: bool = True):
    """The parts registry checked whole: its path, its overlay's, the parts a maintainer
    can toggle (the file's, and each installed source's it does not hold) and the parts
    as the overlay sets them (its own again when ``with_overlay`` is false)."""
    from agentprov_core.plugins import installed_parts, manager
    from agentprov_core.registries import overlay
    from agentprov_core.registries.parts import check_names, load, parts_file, read_file

    base = parts_file()
    own, text = read_file(base)
    plugins = manager()
    sources = plugins.sources()
    provided: dict[str, list[str]] = {}
    for r in plugins.records:
        if r.status == "loaded" and r.distribution:
            provided.setdefault(r.distribution, [])
    for n, e in sources.items():
        if e.plugin.distribution:
            provided.setdefault(e.plugin.distribution, []).append(n)
    check_names(base, text, own, set(sources), provided)
    over = overlay.path_of(base)
    installed = installed_parts()
    own |= {n: p for n, p in installed.items() if n not in own}
    return base, over, own, load(base, over, installed) if with_overlay else own


@parts.command("list")
@format_option
def parts_list(fmt: str) -> None:
    """List the parts and their live status (with the overlay's)."""
    import msgspec

    *_, entries = _checked_parts()
    if fmt == "json":
        echo_json([msgspec.to_builtins(e) for e in entries.values()])
        return
    click.echo(table([[e.name, e.live_status, e.caveat] for e in entries.values()],
                     ["Part", "Live status", "Caveat"]))


@parts.command("set-status")
@click.argument("name")
@click.argument("status", type=click.Choice(["planned", "partial", "full"]))
def parts_set_status(name: str, status: str) -> None:
    """Set part NAME's live status (planned, partial or full), in the overlay."""
    from agentprov_core.base import paths
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries.edit import set_overlay
    from agentprov_core.registries.parts import PARTS_FORMAT, read_overlay

    base, over, own, _ = _checked_parts(with_overlay=False)
    _checked_defences()  # the other registry and its overlay: nothing is written when invalid
    if name not in own:
        raise AgentprovError("cli.usage.registry_unknown_entry", kind="part", name=name,
                             registry=f"{paths.display(base)} nor a part of an installed "
                                      "plugin", known=", ".join(sorted(own)))
    changed = set_overlay(over, base, PARTS_FORMAT, "parts", name, "live_status", status,
                          own[name].live_status, lambda text: read_overlay(over, text, own))
    click.echo(f"part {name}: live status {status}" + ("" if changed else " (unchanged)")
               + f" in {paths.display(over)} (over {paths.display(base)})")


@parts.command("reset")
@click.argument("name", required=False)
def parts_reset(name: str | None) -> None:
    """Remove part NAME's live status from the overlay (its registry value holds again), or
    without NAME the whole overlay: repairs an overlay a hand edit broke."""
    from agentprov_core.plugins import installed_parts
    from agentprov_core.registries import parts as module

    base = module.parts_file()
    own, _ = module.read_file(base)
    installed = installed_parts()
    _reset(base, "parts", name, module, own | {n: p for n, p in installed.items() if n not in own})
