"""``agentprov view``: a static HTML site of one or more corpora (agentprov_core/view/,
docs/view.md), written outside the corpus, and optionally served on loopback."""

from __future__ import annotations

import click


@click.command()
@click.argument("corpora", nargs=-1, metavar="[DIR]…")
@click.option("--corpus", "more", metavar="DIR", multiple=True,
              help="A corpus (DIR or DIR.partial); give it again for a second corpus, whose "
                   "executions of the same cells can be compared side by side.")
@click.option("--out", metavar="SITE", default=None,
              help="Where the site is written (replaced if an earlier view wrote it).  "
                   "[default: $AGENTPROV_HOME/views/<corpus id>]")
@click.option("--serve", is_flag=True,
              help="Serve the site on 127.0.0.1 (a free port) until Ctrl-C.")
@click.option("--no-verify", is_flag=True,
              help="Do not run verify's checks (each execution's verdict is then not shown).")
def view(corpora: tuple[str, ...], more: tuple[str, ...], out: str | None, serve: bool,
         no_verify: bool) -> None:
    """Write a static, self-contained HTML site of a corpus: the results table and a plot of
    utility against attack success, the run's records, every execution's trajectory with its
    injections marked and its evidence (verify's verdict, the stored files and their
    digests, the PROV graph), two attempts side by side. Nothing is loaded from the
    network; the site opens from file:// (docs/view.md)."""
    from pathlib import Path

    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError
    from agentprov_core.view.site import build

    given = [*corpora, *more]
    if not given:
        raise AgentprovError("view.usage.corpus_needed")
    opened = [open_corpus(g) for g in given]
    site = build(opened, Path(out) if out else None, verify=not no_verify)
    click.echo(f"agentprov view: wrote {site / 'index.html'}")
    if serve:
        from agentprov_core.view.serve import server, url

        srv = server(site)
        click.echo(f"agentprov view: serving {url(srv)} (Ctrl-C stops)")
        try:
            srv.serve_forever()
        finally:
            srv.server_close()
