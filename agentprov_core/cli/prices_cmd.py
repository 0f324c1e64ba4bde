"""``agentprov prices``: the dated price table, your overrides, and a refresh from
OpenRouter's public model list (never automatic)."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option, table


@click.group(context_settings={"max_content_width": 100})
def prices() -> None:
    """What `agentprov estimate` prices a model at (USD per million tokens)."""


@prices.command("list")
@click.option("--endpoint", metavar="NAME", help="Only this endpoint's prices.")
@format_option
def list_(endpoint: str | None, fmt: str) -> None:
    """Every price known, the one in force first: your overrides, the refreshed OpenRouter
    list, the shipped table. A local endpoint has no per-token cost."""
    from agentprov_core.estimate import prices as pr

    rows, seen = [], set()
    for p in pr.every():
        if endpoint and p.endpoint != endpoint:
            continue
        shadowed = (p.endpoint, p.model) in seen
        seen.add((p.endpoint, p.model))
        rows.append((p, shadowed))
    if fmt == "json":
        echo_json({"format": "agentprov-price-list-view/0.1",
                   "prices": [dict(p.as_json(), in_force=not s) for p, s in rows],
                   "local_endpoints": "no per-token cost"})
        return
    body = [[p.endpoint, p.model, f"{p.input:g}", f"{p.output:g}", p.as_of,
             ("(shadowed) " if s else "") + (p.label if p.origin != "table" else p.source)]
            for p, s in rows]
    click.echo(table(body, ["endpoint", "model", "input", "output", "as of", "source"])
               if body else "no prices")
    click.echo("A local endpoint (local = true in endpoints.toml) has no per-token cost.")


@prices.command("set")
@click.argument("endpoint")
@click.argument("model")
@click.option("--input", "price_in", required=True, metavar="USD",
              help="USD per million input tokens.")
@click.option("--output", "price_out", required=True, metavar="USD",
              help="USD per million output tokens.")
@click.option("--as-of", "as_of", metavar="YYYY-MM-DD", help="The date the price holds for [today].")
def set_(endpoint: str, model: str, price_in: str, price_out: str, as_of: str | None) -> None:
    """Override the price of MODEL at ENDPOINT (stored in $AGENTPROV_HOME/prices.json)."""
    from agentprov_core.estimate import prices as pr
    from agentprov_core.live import endpoints as epmod

    ep = epmod.resolve(endpoint, "ENDPOINT", epmod.load())
    pin = pr.parse_price("--input", price_in)
    pout = pr.parse_price("--output", price_out)
    day = pr.parse_date("--as-of", as_of) if as_of is not None else pr.today().isoformat()
    if not model.strip():
        from agentprov_core.errors import AgentprovError

        raise AgentprovError("cli.usage.option_value", option="MODEL", value=repr(model),
                             what="a model id")
    p = pr.set_override(ep.name, model, pin, pout, day)
    note = " (a local endpoint has no per-token cost: the estimate prices it at 0)" \
        if ep.local else ""
    click.echo(f"{p.endpoint} {p.model}: input ${pin}/M, output ${pout}/M as of {p.as_of} "
               f"({pr.OVERRIDE_SOURCE}){note}")


@prices.command("refresh")
@click.option("--allow-network", is_flag=True, help="Read OpenRouter's public model list (a network call).")
def refresh(allow_network: bool) -> None:
    """Read OpenRouter's public model list (GET /api/v1/models, no key) into
    $AGENTPROV_HOME/prices-openrouter.json. A network call: never automatic."""
    from agentprov_core.errors import AgentprovError
    from agentprov_core.estimate import prices as pr

    if not allow_network:
        raise AgentprovError("cli.refused.prices_network", url=pr.models_url())
    got, url = pr.refresh()
    click.echo(f"openrouter: {len(got)} price(s) as of {pr.today().isoformat()} from {url} "
               f"(stored in {pr.refreshed_file()})")
