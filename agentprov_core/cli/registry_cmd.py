"""``agentprov registry``: toggle defences and part statuses in the registry files."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option, table


@click.group()
def registry() -> None:
    """Edit the registry files (registry/*.toml) in place; comments and layout survive."""


@registry.group()
def defences() -> None:
    """The defence registry (backends/shared/src/agentprov_backend/defences.toml)."""


@defences.command("list")
@format_option
def defences_list(fmt: str) -> None:
    """List the defence registry's entries."""
    import msgspec

    from agentprov_core.registries.defences import load_registry

    entries = load_registry()
    if fmt == "json":
        echo_json([msgspec.to_builtins(e) for e in entries])
        return
    rows = []
    for e in entries:
        state = "refused" if e.replaces_pipeline else "enabled" if e.enabled else "disabled"
        rows.append([e.name, state, ", ".join(e.backends) or "-",
                     ", ".join(e.suites) if e.suites else "all", e.summary])
    click.echo(table(rows, ["Defence", "State", "Backends", "Suites", "What it is"]))


def _toggle(name: str, enabled: bool) -> None:
    from agentprov_core.base import paths
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries.defences import load_registry
    from agentprov_core.registries.edit import set_value

    path = paths.defence_registry()
    entries = {e.name: e for e in load_registry(path)}
    if name in entries and entries[name].replaces_pipeline and enabled:
        raise AgentprovError("run.unsupported.defence_replaces_pipeline", source="registry",
                             defence=name)
    changed = set_value(path, "defences", name, "enabled", enabled, "defence")
    word = "enabled" if enabled else "disabled"
    click.echo(f"defence {name}: {word}" + ("" if changed else " (unchanged)")
               + f" in {paths.display(path)}")


@defences.command("enable")
@click.argument("name")
def defences_enable(name: str) -> None:
    """Enable defence NAME."""
    _toggle(name, True)


@defences.command("disable")
@click.argument("name")
def defences_disable(name: str) -> None:
    """Disable defence NAME: every run with it is refused (exit 5)."""
    _toggle(name, False)


@registry.group()
def parts() -> None:
    """The parts registry (registry/parts.toml)."""


@parts.command("list")
@format_option
def parts_list(fmt: str) -> None:
    """List the parts and their live status."""
    import msgspec

    from agentprov_core.registries.parts import load

    entries = load()
    if fmt == "json":
        echo_json([msgspec.to_builtins(e) for e in entries.values()])
        return
    click.echo(table([[e.name, e.live_status, e.caveat] for e in entries.values()],
                     ["Part", "Live status", "Caveat"]))


@parts.command("set-status")
@click.argument("name")
@click.argument("status", type=click.Choice(["planned", "partial", "full"]))
def parts_set_status(name: str, status: str) -> None:
    """Set part NAME's live status (planned, partial or full)."""
    from agentprov_core.base import paths
    from agentprov_core.registries.edit import set_value
    from agentprov_core.registries.parts import parts_file

    path = parts_file()
    changed = set_value(path, "parts", name, "live_status", status, "part")
    click.echo(f"part {name}: live status {status}" + ("" if changed else " (unchanged)")
               + f" in {paths.display(path)}")
