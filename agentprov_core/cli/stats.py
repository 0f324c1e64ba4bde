"""``agentprov stats``: tables of a corpus's records and executions
(agentprov_core/audit/stats.py defines the columns)."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, table


def _tables(ctx: click.Context, _param: click.Parameter, value: str) -> tuple[str, ...]:
    from agentprov_core.audit.stats import TABLES

    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in TABLES]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or value!r}: the tables are "
                                 f"{', '.join(TABLES)}", ctx=ctx)
    return names


@click.command()
@click.option("--corpus", metavar="DIR", required=True,
              help="The corpus (DIR or DIR.partial, as the run wrote it).")
@click.option("--tables", "names", metavar="NAMES", default="counts", show_default=True,
              callback=_tables, help="Comma-separated: counts, issues.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "tsv"]), default="text",
              show_default=True, help="Output format.")
def stats(corpus: str, names: tuple[str, ...], fmt: str) -> None:
    """Tables of a corpus: counts (one row per source and profile: records, executions
    observed, outcome statuses) and issues (register codes)."""
    from agentprov_core.audit import stats as statsmod
    from agentprov_core.corpus.opening import open_corpus

    c = open_corpus(corpus)
    result = statsmod.tables(c, names)
    if fmt == "json":
        echo_json({"format": "agentprov-stats/0.1", "corpus": str(c.root),
                   "corpus_id": c.corpus_id, "state": c.state, "tables": result})
        return
    blocks = []
    for name in names:
        cols = statsmod.columns(name)
        rows = [[str(r[k]) for k in cols] for r in result[name]]
        if fmt == "tsv":
            text = "\n".join("\t".join(r) for r in [list(cols), *rows])
        else:
            text = table(rows, list(cols))
        blocks.append(f"# {name}\n{text}" if len(names) > 1 else text)
    click.echo("\n\n".join(blocks))
