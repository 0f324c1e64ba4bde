"""``agentprov info``: the parts table of "Status on this build"."""

from __future__ import annotations

from typing import Any

import click

from agentprov_core.cli.common import echo_json, format_option, table


def parts_rows() -> list[dict[str, Any]]:
    from agentprov_core import plugins as plugins_mod
    from agentprov_core.plugins import manager
    from agentprov_core.registries import parts as partsmod

    plugins = manager()
    sources = plugins.sources()
    failed = {r.name: r for r in plugins.failed()}
    rows = []
    own, _ = partsmod.read_file(partsmod.parts_file())
    registry = plugins_mod.parts()  # with the overlay's live statuses, a plugin's too
    contributed = backend_projects()
    for name, part in registry.items():
        if name not in own:
            continue  # a part only its plugin declares: below
        entry = sources.get(name)
        row = {"name": name, "label": part.label, "live_status": part.live_status,
               "caveat": part.caveat, "distribution": part.distribution,
               "source": "registry", "plugin": None, "note": None}
        if entry is not None:
            row["plugin"] = {"name": entry.plugin.name, "distribution": entry.plugin.distribution,
                             "version": entry.plugin.version}
            row["backend"] = entry.source.meta.backend
            row["backend_project"] = contributed.get(entry.source.meta.backend)
            _buildable(row, entry.source.meta)
            _contributed_by(row, entry)
        elif name in failed:
            rec = failed[name]
            row["note"] = (f"its plugin {rec.distribution} {rec.version} failed to load: "
                           f"{rec.error}")
        elif (rec := plugins.record(name)) is not None and rec.status != "loaded":
            row["note"] = (f"its plugin {rec.distribution} {rec.version} is {rec.status} "
                           "(AGENTPROV_LOAD_PLUGINS / AGENTPROV_DISABLED_PLUGINS)")
        else:
            row["note"] = (f"its plugin is not installed: pip install {part.distribution}"
                           if part.distribution else "no plugin provides it")
        rows.append(row)
    for name in sorted(set(sources) - set(own)):
        entry = sources[name]
        meta = entry.source.meta
        rows.append({"name": name, "label": meta.label,
                     "live_status": registry[name].live_status,
                     "caveat": meta.caveat, "distribution": entry.plugin.distribution,
                     "source": "plugin", "backend": meta.backend,
                     "backend_project": contributed.get(meta.backend),
                     "plugin": {"name": entry.plugin.name,
                                "distribution": entry.plugin.distribution,
                                "version": entry.plugin.version},
                     "note": None})
        _buildable(rows[-1], meta)
        _contributed_by(rows[-1], entry)
    return rows


def _contributed_by(row: dict[str, Any], entry) -> None:
    """``mapper`` (the mapper that maps the part's live evidence: the one its source names,
    else the first that reads capture/0.1; ``null`` for a part without a backend) and
    ``contributed_by``: the distribution of its source plugin, of its backend project and
    of that mapper (``null`` where none is contributed). A named mapper that is not
    registered is the part's note."""
    from agentprov_core.backend import projects
    from agentprov_core.errors import AgentprovError
    from agentprov_core.mapping import MapperUnavailable, mapper_for_source
    from agentprov_core.plugins import manager

    meta = entry.source.meta
    try:
        located = projects.locate(meta.backend)
    except AgentprovError:  # contributed by more than one: backend_project says so
        located = None
    mapper = None
    if meta.backend is not None:
        try:
            mapper = mapper_for_source(meta.name)
        except MapperUnavailable:
            mapper = None
        except AgentprovError as exc:
            row["note"] = row["note"] or exc.message
    mappers = manager().mappers()
    by = next((e.plugin.origin for e in mappers.values() if e.mapper is mapper), None)
    row["mapper"] = getattr(mapper, "name", None)
    row["contributed_by"] = {"source": entry.plugin.origin,
                             "backend": located.origin if located is not None else None,
                             "mapper": by}


def _buildable(row: dict[str, Any], meta) -> None:
    """``buildable`` (true, false, or null when nothing here can tell) and ``unbuildable``
    (why not) of the part's backend, read from its project under ``backends/``
    (:mod:`agentprov_core.backend.slots`)."""
    from agentprov_core.backend import slots

    project = slots.project_dir(meta)  # located once: the reason and the answer read it
    why = slots.unbuildable_at(project)
    row["unbuildable"] = why
    if meta.backend is None or why is not None:
        row["buildable"] = False
    else:  # null: no project under backends/ to judge by (its build names what is missing)
        row["buildable"] = True if project is not None else None
    row["unpublished"] = None if why is not None else unpublished(meta)


def unpublished(meta) -> str | None:
    """What the table says of a backend built from an upstream that is not public
    (``BackendProject.unpublished``): that, and whether an environment of it is built in
    ``$AGENTPROV_HOME``; ``None`` for any other backend."""
    from agentprov_core.backend import environments, projects, upstream
    from agentprov_core.backend.marker import MARKER
    from agentprov_core.errors import AgentprovError

    try:
        loc = projects.locate(meta.backend)
        project = loc.entry.project if loc is not None else None
        if project is None or project.upstream != "" or not project.unpublished:
            return None
        env_id = environments.environment_id(meta)
    except AgentprovError:  # another part of the row names it
        return None
    if (environments.environment_dir(env_id) / MARKER).is_file():
        over = project.pin_override if upstream.pinned(project)[1] else None
        return (f"{project.unpublished}: {env_id} is built here from a copy" + (
            f" of a fixture's commit (the test-only override {over}), not of the fork"
            if over else ""))
    return (f"{project.unpublished}, and no environment of its pinned commit "
            f"{environments.pinned_commit(meta)} is built here (agentprov backends build "
            f"{meta.backend} --source-repo URL builds one from a copy)")


def caveat_line(row: dict[str, Any]) -> str:
    """The caveat as the table shows it: with why no run of the part can start, when its
    backend cannot be built in this build."""
    if row.get("unbuildable"):
        return (f"{row['caveat']}; no backend in this build: {row['unbuildable']} "
                f"(agentprov run {row['name']} exits 5)")
    if row.get("unpublished"):
        return f"{row['caveat']}; {row['unpublished']}"
    return row["caveat"]


def contributed_line(row: dict[str, Any]) -> str:
    """Which distribution contributes the part's source, backend project and mapper."""
    by = row["contributed_by"]
    mapper = f"{row['mapper']} ({by['mapper']})" if row.get("mapper") and by["mapper"] else None
    return (f"source {by['source']}; backend {by['backend'] or 'none'}; "
            f"mapper {mapper or 'none'}")


def backend_projects() -> dict[str, dict[str, Any] | None]:
    """Which distribution contributes each backend's project, and its state as ``agentprov
    plugins`` reports it (``ok``, ``lock mismatch``, ``unlocked``, ``missing``,
    ``conflict``): each lock compared with its project, so a project that cannot be built
    is never shown as fine; a conflicting name shows its first here."""
    from agentprov_core.backend import projects

    out: dict[str, dict[str, Any] | None] = {}
    for b in projects.survey():
        out.setdefault(b["name"], {k: b[k] for k in ("distribution", "version", "plugin",
                                                     "project", "status", "problem")})
    return out


@click.command()
@format_option
def info(fmt: str) -> None:
    """Show the live parts of this build: live status and the real-model runs so far."""
    rows = parts_rows()
    if fmt == "json":
        from agentprov_core import __version__

        echo_json({"format": "agentprov-info/0.1", "agentprov": __version__, "parts": rows})
        return
    body = [[r["label"], r["live_status"], caveat_line(r)] for r in rows]
    click.echo(table(body, ["Part", "Live status", "Real-model runs so far (from its caveat)"]))
    for r in rows:
        if r["note"]:
            click.echo(f"  note: {r['label']}: {r['note']}")
    for r in rows:
        if r.get("contributed_by"):
            click.echo(f"  from: {r['label']}: {contributed_line(r)}")
    click.echo("partial: real-model runs admitted for a stated subset; planned: scripted runs "
               "only. A finished live corpus seals as agentprov-corpus/0.3 (agentprov package); "
               "\"Live Capture\" is claimed for none until an approved, sealed, non-test live "
               "corpus exists.")
