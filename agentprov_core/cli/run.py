"""``agentprov run SOURCE``: plan, dry-run or run a benchmark source live."""

from __future__ import annotations

import time

import click

from agentprov_core.cli.common import echo_json

C = click.Choice


def _opts(f):
    options = [
        # what to do
        click.option("--catalogue", is_flag=True, help="Print the backend's suites, tasks, attacks and defences as one JSON document; no model call, nothing written."),
        click.option("--dry-run", is_flag=True, help="Check everything up to the plan and print it; run no cell, write nothing."),
        click.option("--plan-json", is_flag=True, help="With --dry-run: the plan as one agentprov-run-dry-plan/0.1 document on stdout."),
        click.option("--preflight-only", is_flag=True, help="Run only the endpoint probe and exit; needs consent, takes no caps."),
        # corpus
        click.option("--corpus", metavar="DIR", help="The corpus directory (outside the repository); written as DIR.partial while working."),
        click.option("--campaign", metavar="NAME", help="The campaign: the corpus id is <source>-live-<campaign>."),
        # cells
        click.option("--plan", "plan", metavar="PLAN.toml", help="A committed plan (agentprov-run-plan/0.1) instead of the cell options."),
        click.option("--suite", multiple=True, metavar="S[,S...]", help="Suites (default: the backend's)."),
        click.option("--benchmark-version", metavar="V", help="The benchmark version (default: the backend's)."),
        click.option("--user-tasks", metavar="SPEC", help="all, ids, or index ranges over the tasks sorted by number (0-2,5)."),
        click.option("--injection-tasks", metavar="SPEC", help="As --user-tasks, for injection tasks."),
        click.option("--attack", multiple=True, metavar="A[,A...]", help="Attacks; none means benign cells only."),
        click.option("--benign", type=C(["include", "exclude", "only"]), help="Whether benign (unattacked) cells are included [include]."),
        click.option("--repeats", type=int, metavar="N", help="Independent repeats per cell [1]."),
        click.option("--defence", metavar="NAME", help="One defence for the whole plan [none]."),
        click.option("--autodojo-cache", metavar="PATH", help="AutoDojo: the attack cache file (with --attack autodojo)."),
        click.option("--autodojo-variant", type=int, metavar="K", help="AutoDojo: the variant index, an integer >= 0."),
        # inspect
        click.option("--task", metavar="NAME", help="Inspect: a catalogue task."),
        click.option("--task-param", multiple=True, metavar="KEY=VALUE", help="Inspect: a declared task parameter (repeatable)."),
        click.option("--samples", metavar="limit:N|ID,ID...", help="Inspect: the first N samples of the split, or explicit ids."),
        click.option("--split", metavar="NAME", help="Inspect: the dataset split [the task's default]."),
        click.option("--epochs", type=int, metavar="N", help="Inspect: epochs per sample, 1 to 10 [1]."),
        click.option("--message-limit", type=int, metavar="N", help="Inspect: messages per sample, 1 to 500 (required)."),
        click.option("--token-limit", type=int, metavar="N", help="Inspect: tokens per sample, up to 10,000,000 (required)."),
        click.option("--time-limit", type=int, metavar="SECONDS", help="Inspect: seconds per sample, up to 86,400 (required)."),
        click.option("--max-connections", type=int, metavar="N", help="Inspect: concurrent model calls in a cell, 1 to 64 [4]."),
        click.option("--cell-size", type=int, metavar="N", help="Inspect: samples per cell, 1 to 500 [25, or 1 under caps]."),
        click.option("--judge", multiple=True, metavar="ROLE=MODEL", help="Inspect: the model of a scorer role (repeatable; every role required)."),
        # model
        click.option("--model", metavar="SHORTHAND", help="An endpoint of endpoints.toml."),
        click.option("--endpoint", metavar="NAME", help="An endpoint, named explicitly (with --model-id)."),
        click.option("--model-id", metavar="ID", help="The model id (there are no defaults)."),
        click.option("--llm-script", metavar="FILE", help="The scripted transport: a JSON list of replies (never a real run)."),
        click.option("--model-display-name", metavar="NAME", help="The name attacks address the model by."),
        click.option("--llm-element", type=C(["native", "gateway_compat"]), help="The LLM element [native]."),
        click.option("--temperature", type=str, metavar="T", help="A sampling temperature to transmit."),
        click.option("--temperature-policy", type=C(["as-benchmark", "inject"]), help="How a configured parameter the stock element does not transmit is treated."),
        click.option("--max-tokens", metavar="N|harness-default", help="Required on Anthropic endpoints; refused on OpenAI-style ones."),
        click.option("--reasoning-effort", metavar="LEVEL", help="Not on Anthropic endpoints."),
        click.option("--base-url", metavar="URL", help="Override a local endpoint's base URL."),
        click.option("--allow-lan-endpoint", is_flag=True, help="Admit a literal private address (recorded)."),
        click.option("--allow-custom-endpoint", is_flag=True, help="Admit an API base URL off the registered host (recorded)."),
        click.option("--allow-text-tool-calls", is_flag=True, help="Accept text-encoded tool calls (recorded)."),
        click.option("--no-hash-weights", is_flag=True, help="Local model: record the weight files' sizes, not their sha256."),
        click.option("--model-dir", metavar="PATH", help="Local model: the weights' folder, when the server does not name it."),
        click.option("--model-size-gb", metavar="GB", help="Local model: the weights' size in GB (before the setting and the folder)."),
        click.option("--active-params-b", metavar="B", help="Local model: the active parameters, in billions."),
        click.option("--context-tokens", metavar="N", help="Local model: the context length in tokens."),
        click.option("--kv-gb-per-trace", metavar="GB", help="Local model: the KV cache of one trace, in GB."),
        click.option("--accept-served-model", multiple=True, metavar="ID", help="Accept a served model id (repeatable, recorded)."),
        click.option("--defence-endpoint", metavar="NAME", help="The endpoint of a defence's own model (MELON's embeddings); refused in this build (exit 5)."),
        # keys
        click.option("--keychain", is_flag=True, help="Read the key from the OS keychain only."),
        click.option("--env-file", metavar="PATH", help="Read the key from this .env file only."),
        click.option("--env-stdin", is_flag=True, help="Read one JSON object of variables on stdin."),
        # consent, caps, containment
        click.option("--i-consent-to-api-costs", is_flag=True, help="Consent to billed calls (also satisfies a local run)."),
        click.option("--i-consent-to-local-run", is_flag=True, help="Consent for a local server only."),
        click.option("--max-calls", type=int, metavar="N", help="At most N billed calls for the whole corpus."),
        click.option("--max-cost-usd", type=float, metavar="USD", help="At most this spend, as an upper bound."),
        click.option("--price-in", type=float, metavar="USD", help="USD per million input tokens, for the caps."),
        click.option("--price-out", type=float, metavar="USD", help="USD per million output tokens, for the caps."),
        click.option("--containment", type=C(["sandbox-exec", "bwrap", "dedicated-user", "vm"]), help="The declared containment of the worker (sandbox-exec on macOS and bwrap on Linux need a passed build-time probe)."),
        # campaign control and resume
        click.option("--max-attempts", type=int, metavar="N", help="Attempts per unit, across invocations [3]."),
        click.option("--retry-inconsistent", is_flag=True, help="Re-attempt units whose accounting is inconsistent."),
        click.option("--allow-mixed-config", is_flag=True, help="Admit a different configuration digest in the corpus."),
        click.option("--canary", type=int, metavar="N", help="Units the canary watches [10]; 0 disables."),
        click.option("--cell-timeout", type=int, metavar="S", help="Seconds per cell [1800]."),
        click.option("--executor", metavar="NAME", help="Where the cells run: an installed executor [local]; another name is refused, naming those installed."),
        click.option("--ray-address", metavar="ADDR", help="--executor ray: the cluster to connect to [$RAY_ADDRESS] (docs/cluster.md)."),
        click.option("--skip-refused-nodes", is_flag=True, help="Run on the hosts the executor accepted when it refuses others (recorded); else exit 3."),
        click.option("--jobs", type=int, metavar="N", help="Cells at once; above the host's maximum is refused."),
        click.option("--start-stagger", type=float, metavar="S", help="Seconds between cell starts."),
        click.option("--adaptive-jobs", type=C(["on", "off"]), help="The adaptive start gate: fewer cells in flight while the endpoint answers 429/503 or Retry-After [on for an API endpoint, else off]."),
        click.option("--preset", metavar="NAME", help="A compute preset (registry/presets/): --jobs, start stagger and request timeout for a local server."),
        click.option("--m5ultra", is_flag=True, help="The m5ultra preset (as --preset m5ultra)."),
        click.option("--tune-jobs", metavar="V1,V2,...", help="The concurrency sweep against a local server: each value's arm runs the same cells (docs/local-models.md)."),
        click.option("--tune-out", metavar="DIR", help="The sweep's directory [$AGENTPROV_HOME/calibration/tune-jobs-<time>/]."),
        click.option("--keep-staging", is_flag=True, help="Keep the staging directories."),
        click.option("--limit", type=int, metavar="N", help="Start at most N units in this invocation."),
        click.option("--control-file", metavar="PATH", help="A file through which a drain can be requested."),
        click.option("--allow-network", is_flag=True, help="Let T0 fetch what a verification needs (never on a dry run)."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


@click.command(context_settings={"max_content_width": 100})
@click.argument("source")
@_opts
@click.pass_context
def run(ctx: click.Context, source: str, **options) -> int:
    """Plan, dry-run or run SOURCE live (agentdojo, autodojo, agentdyn, agentharm, ...).

    Checks run in the specification's order: usage (2); live status, backend and defence
    refusals (5) and the environment (3); API caps (4) before any key is read, the key (3),
    the endpoint URL (4) and the containment (4); then the plan, where --dry-run stops;
    then consent (4).
    """
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest

    started = time.monotonic()
    from agentprov_core.base import timing

    timing.emit("t0.run", time.time())
    given = {name for name in options
             if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}
    req = RunRequest.of(source, options, given)  # the options, parsed once
    if req.options.tune_jobs is not None:  # the concurrency sweep (run/tunejobs.py)
        from agentprov_core.estimate.estimate import cell_seconds
        from agentprov_core.run import tunejobs

        planning.gate_backend(source)
        return tunejobs.run(req, started, cell_seconds)
    if req.options.catalogue:
        from agentprov_core.plugins import source_entry
        from agentprov_core.run.runrequest import check_usage

        check_usage(req)
        src = source_entry(source).source
        planning.gate_capability(src)
        import msgspec

        echo_json(msgspec.to_builtins(planning.catalogue_for_print(src)))
        return 0
    from agentprov_core.run import sequence

    with timing.span("prepare"):
        prepared = planning.prepare(req)
    prepared = sequence.checked(prepared)
    if req.options.dry_run:
        from agentprov_core.cli.dryrun import print_dry_run

        return print_dry_run(prepared, started)
    consented = sequence.consented(prepared)  # step 7: cli.refused.consent (4)
    from agentprov_core.run import campaign

    # the preflight probe (a real model), then the campaign (agentprov_core/run/campaign.py)
    return campaign.start(prepared, consented)
