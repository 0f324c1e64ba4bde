"""``agentprov stats``: tables of a corpus's records and executions
(agentprov_core/audit/stats.py defines the columns of ``counts`` and ``issues``,
agentprov_core/audit/results.py the results table, compare.py ``--compare``)."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, table


def _tables(ctx: click.Context, _param: click.Parameter, value: str | None
            ) -> tuple[str, ...] | None:
    from agentprov_core.audit.stats import TABLES

    if value is None:
        return None
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    unknown = [n for n in names if n not in TABLES]
    if unknown or not names:
        raise click.BadParameter(f"{', '.join(unknown) or value!r}: the tables are "
                                 f"{', '.join(TABLES)}", ctx=ctx)
    return names


@click.command()
@click.argument("corpora", nargs=-1, metavar="[DIR]…")
@click.option("--corpus", metavar="DIR",
              help="The corpus (DIR or DIR.partial, as the run wrote it); or give it as DIR.")
@click.option("--tables", "names", metavar="NAMES", default=None, callback=_tables,
              help="Comma-separated: counts, issues, results.  [default: counts]")
@click.option("--by", "by", metavar="KEYS", default=None,
              help="The results table's grouping, comma-separated, from: corpus, source, "
                   "mode, model, suite, attack, defence, user_task, injection_task, repeat.  "
                   "[default: model,suite,attack,defence]")
@click.option("--compare", is_flag=True,
              help="Compare the results tables of the corpora given as DIR_A DIR_B [DIR_C …]: "
                   "each later one against the first.")
@click.option("--across-benchmarks", "across", is_flag=True,
              help="With --compare: compare corpora of different sources or benchmark "
                   "versions (refused without it).")
@click.option("--format", "fmt", metavar="FORMAT", default="text", show_default=True,
              help="Output format: text, json, tsv, md.")
def stats(corpora: tuple[str, ...], corpus: str | None, names: tuple[str, ...] | None,
          by: str | None, compare: bool, across: bool, fmt: str) -> None:
    """Tables of a corpus: counts (one row per source and profile: records, executions
    observed, outcome statuses), issues (register codes) and results (utility and attack
    success rates with 95% Wilson intervals; docs/results.md). With --compare, the results
    of two or more corpora and their differences."""
    from agentprov_core.audit.results import DEFAULT_BY, check_by
    from agentprov_core.cli.results_render import FORMATS
    from agentprov_core.errors import AgentprovError

    if fmt not in FORMATS:
        raise AgentprovError("stats.usage.format", format=fmt, what="stats",
                             formats=", ".join(FORMATS))
    keys = check_by(by.split(",") if by is not None else DEFAULT_BY)
    if compare:
        _compare(corpora, corpus, names, keys, fmt, across)
        return
    if corpus is not None and corpora:
        raise AgentprovError("cli.usage.exclusive", first="--corpus", second="DIR")
    if len(corpora) > 1:
        raise AgentprovError("cli.usage.exclusive", first=corpora[0], second=corpora[1])
    given = corpus if corpus is not None else (corpora[0] if corpora else None)
    if given is None:
        raise AgentprovError("stats.usage.corpus_needed")
    _one(given, names or ("counts",), keys, fmt)


def _compare(corpora: tuple[str, ...], corpus: str | None, names: tuple[str, ...] | None,
             keys: list[str], fmt: str, across: bool) -> None:
    from agentprov_core.audit.compare import compare
    from agentprov_core.cli.results_render import render_comparison
    from agentprov_core.corpus.opening import open_corpus
    from agentprov_core.errors import AgentprovError

    given = ([corpus] if corpus is not None else []) + list(corpora)
    if names is not None and names != ("results",):
        other = ",".join(n for n in names if n != "results")
        raise AgentprovError("stats.usage.compare_tables", tables=other)
    if len(given) < 2:
        raise AgentprovError("stats.usage.compare_corpora", given=len(given))
    opened = [open_corpus(g) for g in given]
    result = compare(opened, keys, across)
    if fmt == "json":
        echo_json(result)
        return
    click.echo(render_comparison(result, fmt))


def _one(given: str, names: tuple[str, ...], keys: list[str], fmt: str) -> None:
    from agentprov_core.audit import stats as statsmod
    from agentprov_core.audit.results import results_table
    from agentprov_core.cli.results_render import render_table
    from agentprov_core.corpus.opening import open_corpus

    c = open_corpus(given)
    plain = tuple(n for n in names if n != "results")
    result: dict = statsmod.tables(c, plain) if plain else {}
    if "results" in names:
        result["results"] = results_table(c, keys)
    if fmt == "json":
        echo_json({"format": "agentprov-stats/0.1", "corpus": str(c.root),
                   "corpus_id": c.corpus_id, "state": c.state,
                   "tables": {n: result[n] for n in names}})
        return
    blocks = []
    for name in names:
        if name == "results":
            text = render_table(result[name], fmt)
        else:
            cols = statsmod.columns(name)
            rows = [[str(r[k]) for k in cols] for r in result[name]]
            if fmt == "tsv":
                text = "\n".join("\t".join(r) for r in [list(cols), *rows])
            elif fmt == "md":
                from agentprov_core.cli.results_render import grid

                text = grid(list(cols), rows, fmt)
            else:
                text = table(rows, list(cols))
        blocks.append(f"# {name}\n{text}" if len(names) > 1 else text)
    click.echo("\n\n".join(blocks))
