"""``agentprov plugins``: which plugin distributions are installed, loaded or broken."""

from __future__ import annotations

from typing import Any

import click

from agentprov_core.cli.common import echo_json, format_option, table


def source_rows(pm) -> list[dict[str, Any]]:
    """Every registered source with the mapper it names for its live evidence and why that
    mapper cannot map it (``problem``, ``None`` when it can or the source names none)."""
    from agentprov_core.mapping import named_problem

    rows = []
    for name, entry in sorted(pm.sources().items()):
        mapper = entry.source.meta.mapper
        why = named_problem(mapper, entry.source.meta.evidence_format)
        rows.append({"name": name, "plugin": entry.plugin.name,
                     "distribution": entry.plugin.distribution,
                     "version": entry.plugin.version, "mapper": mapper,
                     "problem": None if why is None else
                     f"names the mapper {mapper!r} for its live evidence, which cannot map "
                     f"it: {why}"})
    return rows


@click.command()
@format_option
def plugins(fmt: str) -> None:
    """List plugin distributions and versions, their hooks, sources, backend projects,
    mappers and load errors."""
    from agentprov_core.backend import projects
    from agentprov_core.plugins import manager

    pm = manager()
    made = pm.contributions()
    backends = projects.survey()
    sources = source_rows(pm)
    recs = [dict(r.as_json(), **made[r.name]) for r in pm.records]
    if fmt == "json":
        echo_json({"format": "agentprov-plugins/0.1", "plugins": recs,
                   "duplicates": pm.duplicates, "backends": backends, "sources": sources})
        return
    rows = [[r["name"], r["distribution"] or "-", r["version"] or "-", r["status"],
             ", ".join(r["sources"]) or "-", ", ".join(r["backends"]) or "-",
             ", ".join(r["mappers"]) or "-"] for r in recs]
    click.echo(table(rows, ["Plugin", "Distribution", "Version", "Status", "Sources",
                            "Backends", "Mappers"]))
    for r in recs:
        if r["error"]:
            click.echo(f"  error: {r['name']} ({r['distribution']} {r['version']}): {r['error']}")
    for d in pm.duplicates:
        click.echo(f"  duplicate: {d}")
    for b in backends:
        if b["problem"]:
            click.echo(f"  backend {b['name']} ({b['status']}): {b['problem']}")
    for s in sources:
        if s["problem"]:
            click.echo(f"  source {s['name']} ({s['plugin']}): {s['problem']}")
