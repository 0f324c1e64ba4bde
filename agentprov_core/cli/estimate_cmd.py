"""``agentprov estimate SOURCE``: what a run would cost and take, before it starts."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json
from agentprov_core.cli.run import _opts


@click.command(context_settings={"max_content_width": 100})
@click.argument("source")
@click.option("--stats-corpus", "stats_corpus", multiple=True, metavar="DIR",
              help="A corpus whose executions' counts give the cell statistics (repeatable, "
                   "at most 16; read from its index only).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="text, or one agentprov-estimate/0.1 document.")
@_opts
@click.pass_context
def estimate(ctx: click.Context, source: str, stats_corpus: tuple[str, ...], fmt: str,
             **options) -> int:
    """Estimate the cost and time of `agentprov run SOURCE` with the same options, at p50
    and p90 and as a worst case, without a model call and writing nothing.

    Cell statistics come from the --stats-corpus corpora, else from the shipped priors,
    else from a conservative default; prices from `agentprov prices` (never from
    --price-in/--price-out, which price the caps). Without a key option the plan is made
    with a scripted stand-in, and the estimate says so.
    """
    from agentprov_core.estimate import cellstats
    from agentprov_core.estimate import estimate as est
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest

    given = {name for name in options
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    corpora = cellstats.read_corpora(stats_corpus) if stats_corpus else None
    # what an estimate never does: run, probe, or print a catalogue or a dry plan
    for name, flag in (("catalogue", "--catalogue"), ("dry_run", "--dry-run"),
                       ("plan_json", "--plan-json"), ("preflight_only", "--preflight-only"),
                       ("tune_jobs", "--tune-jobs"), ("tune_out", "--tune-out")):
        if options.get(name):
            from agentprov_core.errors import AgentprovError

            raise AgentprovError("cli.usage.estimate_option", option=flag)
    req = RunRequest.of(source, options, given)
    prepared = planning.prepare(req, estimate=True)
    stand_in = planning.estimate_stand_in(req, prepared.endpoint)
    result = est.build(prepared, corpora=corpora, priors=cellstats.load_priors(),
                       stand_in=stand_in)
    if fmt == "json":
        echo_json(est.document(result))
    else:
        click.echo(est.text(result))
    return 0
