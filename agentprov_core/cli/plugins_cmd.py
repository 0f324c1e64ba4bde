"""``agentprov plugins``: which plugin distributions are installed, loaded or broken."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option, table


@click.command()
@format_option
def plugins(fmt: str) -> None:
    """List plugin distributions and versions, their hooks, sources, backend projects and
    load errors."""
    from agentprov_core.backend import projects
    from agentprov_core.plugins import manager

    pm = manager()
    sources = pm.sources()
    backends = projects.survey()
    by_plugin: dict[str, list[str]] = {}
    for name, entry in sources.items():
        by_plugin.setdefault(entry.plugin.name, []).append(name)
    of_plugin: dict[str, list[str]] = {}
    for b in backends:
        of_plugin.setdefault(b["plugin"], []).append(b["name"])
    recs = [dict(r.as_json(), sources=sorted(by_plugin.get(r.name, [])),
                 backends=sorted(of_plugin.get(r.name, []))) for r in pm.records]
    if fmt == "json":
        echo_json({"format": "agentprov-plugins/0.1", "plugins": recs,
                   "duplicates": pm.duplicates, "backends": backends})
        return
    rows = [[r["name"], r["distribution"] or "-", r["version"] or "-", r["status"],
             ", ".join(r["sources"]) or "-", ", ".join(r["backends"]) or "-"] for r in recs]
    click.echo(table(rows, ["Plugin", "Distribution", "Version", "Status", "Sources",
                            "Backends"]))
    for r in recs:
        if r["error"]:
            click.echo(f"  error: {r['name']} ({r['distribution']} {r['version']}): {r['error']}")
    for d in pm.duplicates:
        click.echo(f"  duplicate: {d}")
    for b in backends:
        if b["problem"]:
            click.echo(f"  backend {b['name']} ({b['status']}): {b['problem']}")
