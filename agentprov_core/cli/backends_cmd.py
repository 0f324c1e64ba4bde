"""``agentprov backends``: build and check the environments backends run in."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def backends() -> None:
    """Build and check backend environments ($AGENTPROV_HOME/envs/<id>/)."""


def refuse_unbuildable(name: str) -> None:
    """A backend whose project this build lacks is answered first, whatever the options
    (exit 5, ``build.unsupported.no_backend``): uv could only fail. An unknown name is left
    to the build's own lookup."""
    from agentprov_core.backend import build as b
    from agentprov_core.backend import slots
    from agentprov_core.errors import AgentprovError

    try:
        meta = b.backend_meta(name)
    except AgentprovError:
        return
    if (why := slots.unbuildable(meta)) is not None:
        raise AgentprovError("build.unsupported.no_backend", backend=meta.backend, why=why)


def _override(rec: dict) -> str:
    """What the upstream line adds for a commit a test-only variable named."""
    over = rec.get("test_override")
    return f"; the test-only override {over}, not the pinned commit" if over else ""


@backends.command("build")
@click.argument("backend")
@click.option("--dry-run", is_flag=True, help="Print the build plan; write nothing.")
@click.option("--offline-check", is_flag=True,
              help="Verify an existing build from its files and a network-blocked hello.")
@click.option("--allow-network", is_flag=True, help="Let uv download packages (else --offline).")
@click.option("--env-file", metavar="PATH", help="An .env for builds that need one.")
@click.option("--defence-assets", metavar="ID[,ID…]",
              help="Provision these registry defence assets (pinned code and weights) from the "
                   "fetch cache into the environment, or none (agentdojo only).")
@click.option("--defence-source", metavar="[ID=]DIR", multiple=True,
              help="Read an asset's pinned files from a local tree instead (every file must "
                   "match its sha256 and git blob id; no network). Repeatable as ID=DIR.")
@click.option("--dataset", metavar="DIR",
              help="Copy the backend's dataset from this local copy into the environment (it "
                   "is never downloaded): every file hashed, its counts checked.")
@click.option("--source-repo", metavar="URL",
              help="Fetch the pinned upstream commit into the fetch cache from this git URL, "
                   "path or bundle (a mirror, an air-gapped copy) instead of the upstream "
                   "(git-pinned backends only; never on a dry run).")
def build(backend: str, dry_run: bool, offline_check: bool, allow_network: bool,
          env_file: str | None, defence_assets: str | None,
          defence_source: tuple[str, ...], dataset: str | None,
          source_repo: str | None) -> int:
    """Build BACKEND's environment from its committed uv.lock, and record its identity."""
    from agentprov_core.backend import build as b
    from agentprov_core.backend import buildprobe
    from agentprov_core.errors import AgentprovError

    refuse_unbuildable(backend)
    if dry_run and offline_check:
        raise AgentprovError("cli.usage.exclusive", first="--dry-run", second="--offline-check")
    if offline_check and (defence_assets is not None or defence_source):
        raise AgentprovError("cli.usage.exclusive", first="--offline-check",
                             second="--defence-assets" if defence_assets is not None
                             else "--defence-source")
    if offline_check and dataset is not None:
        raise AgentprovError("cli.usage.exclusive", first="--offline-check", second="--dataset")
    if offline_check and source_repo is not None:
        raise AgentprovError("cli.usage.exclusive", first="--offline-check",
                             second="--source-repo")
    if env_file is not None and not Path(env_file).is_file():
        raise AgentprovError("cli.usage.env_file", path=env_file)
    bp = b.plan_build(backend, allow_network, defence_assets, defence_source, dataset,
                      source_repo)
    if bp.upstream is not None and not offline_check:  # an upstream that is not public
        from agentprov_core.backend import upstream

        upstream.require_reachable(bp.upstream, source_repo)
    if dry_run:
        for line in b.dry_run_lines(bp):
            click.echo(line)
        return 0
    if offline_check:
        m = b.offline_check(bp)
        click.echo(f"agentprov backends build --offline-check: {bp.env_id} verified "
                   "(marker, lock, RECORD, guarded files, hello identity)")
        if m.upstream:
            click.echo(f"  upstream: {m.upstream['repository']} at {m.upstream['commit']} "
                       f"(tree {m.upstream['tree']}; agentprov/upstream.json re-hashed)"
                       + _override(m.upstream))
        if m.defence_assets:
            click.echo("  defence assets (every file re-hashed): " + ", ".join(
                f"{aid} {len(rec['files'])} file(s)" for aid, rec in sorted(
                    m.defence_assets.items())))
        if m.task_files:
            click.echo(f"  task files (every file re-hashed): {len(m.task_files)}")
        if m.dataset:
            click.echo(f"  dataset {m.dataset['name']} ({m.dataset['kind']}; every file "
                       f"re-hashed): {len(m.dataset['files'])} file(s); {m.dataset['note']}")
        for line in buildprobe.probe_lines(m):  # the build's probe, reported, not re-run
            click.echo(line)
        return 0
    from agentprov_core.backend.interpreters import find_python312

    python = find_python312()
    what, m = b.build(bp, python)
    from agentprov_core.backend import lockcache, projects

    lockcache.record(projects.require(bp.meta.backend), projects.lock_problem)
    click.echo(f"agentprov backends build: {bp.env_id} {what} at {bp.env_dir} "
               f"({len(m.distributions)} distributions; Python {m.python})")
    if m.task_files:
        click.echo(f"  task files: {len(m.task_files)} hashed")
    if m.dataset:
        from agentprov_core.backend.datasets import describe

        click.echo("  " + describe(m.dataset))
    if m.upstream:
        click.echo(f"  upstream: {m.upstream['repository']} at {m.upstream['commit']} (tree "
                   f"{m.upstream['tree']})" + _override(m.upstream))
    for aid, rec in sorted((m.defence_assets or {}).items()):
        click.echo(f"  defence asset {aid}: {len(rec['files'])} file(s) verified (sha256 and "
                   f"git blob id), digest {rec['sha256'][:16]}…")
    return 0


@backends.command("catalogue")
@click.argument("source")
@click.option("--out", metavar="FILE",
              help="Write the catalogue to FILE (the plugin's catalogue.json) instead of "
                   "printing it.")
def catalogue(source: str, out: str | None) -> int:
    """Ask the built environment's worker for SOURCE's catalogue and print it (or write it
    to FILE) as a committed snapshot: canonical JSON, provenance ``snapshot`` naming the
    environment and its packages. A plugin author regenerates the catalogue.json that
    ``run`` plans with before the environment is built."""
    import msgspec

    from agentprov_core.backend import environments
    from agentprov_core.backend.session import worker_catalogue
    from agentprov_core.catalogue import dumps
    from agentprov_core.errors import AgentprovError
    from agentprov_core.plugins import source_entry
    from agentprov_core.run.prepare import gate_backend

    gate_backend(source)  # a source with no backend, or one this build cannot build: exit 5
    src = source_entry(source).source
    env_id = environments.require_built(src.meta)  # exit 3 naming the build that can work
    cat = worker_catalogue(src)
    if cat is None:
        raise AgentprovError("cli.environment.no_catalogue", source=source,
                             why=f"the worker of {env_id} does not serve it (its hello names "
                                 "no such source)")
    cat = msgspec.structs.replace(cat, provenance=msgspec.structs.replace(
        cat.provenance, kind="snapshot", generator=f"agentprov backends catalogue {source}",
        note=f"the catalogue the worker of {env_id} served, committed for T0 to plan with "
             "before the environment is built"), defences=[])
    text = dumps(cat)
    if out is None:
        click.echo(text, nl=False)
        return 0
    Path(out).write_text(text, encoding="utf-8")
    click.echo(f"agentprov backends catalogue: {source}'s catalogue from the worker of "
               f"{env_id} written to {out}")
    return 0
