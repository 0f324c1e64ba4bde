"""Helpers shared by the subcommands."""

from __future__ import annotations

from typing import Any

import click

from agentprov_core.errors import AgentprovError

format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                             default="text", show_default=True, help="Output format.")


def echo_json(obj: Any) -> None:
    """Pretty JSON, sorted keys, one-space indent (msgspec's encoder: the standard library's
    falls back to pure Python whenever it indents). Floats never reach these documents."""
    import msgspec

    click.echo(msgspec.json.format(msgspec.json.encode(obj, order="sorted"), indent=1).decode())


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for r in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)


def source_entry(name: str):
    """The installed source ``name``, or the right refusal (unknown, missing, failed)."""
    from agentprov_core.plugins import manager
    from agentprov_core.registries import parts as partsmod

    plugins = manager()
    sources = plugins.sources()
    if name in sources:
        return sources[name]
    for rec in plugins.failed():
        if rec.name == name:
            raise AgentprovError("cli.environment.plugin_failed", source=name,
                                 distribution=rec.distribution, version=rec.version,
                                 error=rec.error)
    rec = plugins.record(name)
    if rec is not None and rec.status in ("disabled", "not-allowed"):
        why = ("AGENTPROV_DISABLED_PLUGINS names it" if rec.status == "disabled"
               else "AGENTPROV_LOAD_PLUGINS does not name it")
        raise AgentprovError("cli.usage.source_disabled", name=name,
                             distribution=rec.distribution, version=rec.version,
                             status=rec.status, why=why)
    known = ", ".join(sorted(sources)) or "none"
    part = partsmod.load().get(name)
    if part is not None and part.distribution:
        raise AgentprovError("cli.usage.source_not_installed", name=name,
                             distribution=part.distribution, known=known)
    raise AgentprovError("cli.usage.unknown_source", name=name, known=known)
