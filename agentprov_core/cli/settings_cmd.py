"""``agentprov settings``: read and edit ``$AGENTPROV_HOME/settings.toml`` (D-828), keyed by
the schema of :mod:`agentprov_core.settings`; comments in the file survive an edit."""

from __future__ import annotations

import click

from agentprov_core.cli.common import echo_json, format_option


@click.group(context_settings={"max_content_width": 100})
def settings() -> None:
    """Read and edit the settings ($AGENTPROV_HOME/settings.toml).

    The keys: compute.preset; endpoints.<name>.base_url (an endpoint of endpoints.toml);
    local_models.<endpoint>.<model id>.{size_gb,active_params_b,context_tokens,kv_gb_per_trace}
    (a local endpoint; the model id may hold dots and slashes, as given or TOML-quoted:
    local_models.omlx."Qwen3.5-4B-MLX-4bit".size_gb). A key outside these, or a value of
    the wrong type, is refused (exit 2) and nothing is written.
    """


def _registry():
    """The endpoint registry the keys' endpoint names are checked against."""
    from agentprov_core.live import endpoints

    return endpoints.load()


def _show(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@settings.command("set", short_help="Set KEY to VALUE.")
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Set KEY to VALUE (a number for a model fact, a URL for a base URL)."""
    from agentprov_core import settings as st

    registry = _registry()
    k = st.parse_key(key, registry)
    v = st.parse_value(k, value)
    st.set_value(k, v, registry)
    click.echo(f"{k.text} = {_show(v)}")


@settings.command("get", short_help="Print KEY's value (exit 1 when it is not set).")
@click.argument("key")
def get(key: str) -> int:
    """Print KEY's value; when it is not set, print nothing on stdout and exit 1 (as
    ``git config`` does: not an error, an answer)."""
    from agentprov_core import settings as st

    k = st.parse_key(key, _registry())
    v = st.get(k)
    if v is None:
        click.echo(f"{k.text} is not set", err=True)
        return 1
    click.echo(_show(v))
    return 0


@settings.command("unset", short_help="Remove KEY.")
@click.argument("key")
def unset(key: str) -> None:
    """Remove KEY (and the tables it leaves empty); a key that is not set stays so (exit 0)."""
    from agentprov_core import settings as st

    k = st.parse_key(key, _registry())
    click.echo(f"unset {k.text}" if st.unset(k) else f"{k.text} was not set")


@settings.command("list", short_help="Every key that is set, with its value.")
@format_option
def list_(fmt: str) -> None:
    """Every key that is set, with its value (keys in the quoted form get and set accept)."""
    from agentprov_core import settings as st

    rows = st.entries(_registry())
    if fmt == "json":
        echo_json({"format": "agentprov-settings/0.1", "file": str(st.path()),
                   "settings": {k.text: (_show(v) if isinstance(v, float) else v)
                                for k, v in rows}})
        return
    if not rows:
        click.echo(f"no settings ({st.path()} sets nothing)")
    for k, v in rows:
        click.echo(f"{k.text} = {_show(v)}")
