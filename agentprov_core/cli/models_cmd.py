"""``agentprov models``: what a local server serves (read-only, loopback only), the
observed identity of one of its models, or an API endpoint's cached model list."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from agentprov_core.cli.common import echo_json, format_option

if TYPE_CHECKING:
    from agentprov_core.live.keys import KeySource

OUT_FORMAT = "agentprov-models/0.1"
FOLDERS_FORMAT = "agentprov-model-folders/0.1"


def _usage(what: str) -> None:
    from agentprov_core.errors import AgentprovError

    raise AgentprovError("cli.usage.models_options", what=what)


def _variable(var: str | None, options: KeySource) -> str | None:
    if not var:
        return None
    from agentprov_core.live import keys

    return keys.read_variable(var, options)


def _optional_key(var: str | None, options: KeySource) -> Any:
    """The optional key of a local endpoint (OMLX_API_KEY), or None when it is not set:
    nothing is sent then (R-11.26)."""
    if not var:
        return None
    from agentprov_core.errors import AgentprovError
    from agentprov_core.live import keys

    try:
        return keys.read_key(var, options)
    except AgentprovError as exc:
        if exc.code in ("cli.environment.credential", "cli.environment.keychain_unavailable"):
            return None
        raise


@click.command(context_settings={"max_content_width": 100})
@click.option("--endpoint", "endpoint_name", required=True, metavar="NAME",
              help="An endpoint of endpoints.toml (local servers: ollama, omlx, lmstudio, "
                   "mlx_lm, llamacpp, vllm; `local` is ollama; openai_compat: any "
                   "OpenAI-compatible server, with --base-url).")
@click.option("--model-id", metavar="ID", help="Add this model's observed identity record "
              "(local), or check it against the cached list (API).")
@click.option("--pick", is_flag=True, help="Without --model-id: pick a served model from a "
              "numbered list on a terminal (as a run does); without a terminal, exit 3 "
              "listing the served ids.")
@click.option("--no-hash-weights", is_flag=True,
              help="Record the weight files' sizes only (no sha256).")
@click.option("--model-dir", type=click.Path(file_okay=False), metavar="PATH",
              help="The model's folder, when the server does not name it.")
@click.option("--base-url", metavar="URL", help="A local server's base URL (loopback).")
@click.option("--allow-network", is_flag=True,
              help="API endpoints: refresh the cached list (list calls only, no tokens).")
@click.option("--keychain", is_flag=True, help="Read a key from the keychain only.")
@click.option("--env-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="Read a key and variables from this .env file only.")
@click.option("--find-folders", is_flag=True, help="With --model-id (a local endpoint): list "
              "the folders on this machine that may hold the model (names only; no server "
              "contacted).")
@format_option
def models(endpoint_name: str, model_id: str | None, pick: bool, no_hash_weights: bool,
           model_dir: str | None, base_url: str | None, allow_network: bool, keychain: bool,
           env_file: str | None, find_folders: bool, fmt: str) -> None:
    """Ask a running local server what it serves (read-only: GET requests to loopback, no
    inference, short timeouts) and, with --model-id, observe that model's identity
    (agentprov-local-model/0.2: server kind, version and fingerprint, the listing entry,
    the server-side identity, the weight files with their sha256, and its digest).

    For an API endpoint, show the provider's model list from a dated cache without any
    network access; --allow-network refreshes it.
    """
    from agentprov_core.live import endpoints

    if keychain and env_file:
        _usage("--keychain and --env-file are exclusive")
    from agentprov_core.live.keys import KeySource

    options = KeySource(keychain=keychain, env_file=env_file)
    registry = endpoints.load()
    ep = endpoints.resolve(endpoint_name, "--endpoint", registry)
    if find_folders:
        return _find_folders(ep, model_id, fmt, pick=pick, no_hash_weights=no_hash_weights,
                             model_dir=model_dir, base_url=base_url, allow_network=allow_network)
    if not ep.local:
        for flag, given in (("--pick", pick), ("--no-hash-weights", no_hash_weights),
                            ("--model-dir", model_dir), ("--base-url", base_url)):
            if given:
                _usage(f"{flag} applies to local endpoints; {ep.name} is an API endpoint")
        return _api(ep, model_id, allow_network, options, fmt)
    if allow_network:
        _usage(f"--allow-network refreshes an API endpoint's cached list; {ep.name} is a "
               "local server, asked on loopback")
    if pick and model_id:
        _usage("--pick chooses a model when --model-id is not given; give one of them")
    return _local(ep, model_id, pick, no_hash_weights, model_dir, base_url, options, fmt)


def _find_folders(ep: Any, model_id: str | None, fmt: str, **others: Any) -> None:
    """The folders that may hold the model (:mod:`agentprov_core.live.local.folders`)."""
    from agentprov_core.live.local import folders

    if not ep.local:
        _usage(f"--find-folders looks for a local model's folders; {ep.name} is an API endpoint")
    if not model_id:
        _usage("--find-folders needs --model-id ID (the model whose folders to look for)")
    for name, given in others.items():
        if given:
            _usage(f"--find-folders contacts no server and reads no weights; drop "
                   f"--{name.replace('_', '-')}")
    found = folders.find(model_id)
    if fmt == "json":
        echo_json({"format": FOLDERS_FORMAT, "endpoint": ep.name, "model_id": model_id,
                   "folders": [{"app": c.app, "path": str(c.path)} for c in found]})
        return
    if not found:
        click.echo(f"no folder on this machine looks like it holds {model_id!r} (looked in "
                   "the Hugging Face cache, oMLX, LM Studio, Ollama and llama.cpp's cache)")
        return
    click.echo(f"{len(found)} folder(s) that may hold {model_id!r} (by name; give one to a "
               "run with --model-dir PATH):")
    width = max(len(c.app) for c in found)
    for c in found:
        click.echo(f"  {c.app:<{width}}  {c.path}")


def _local(ep: Any, model_id: str | None, pick: bool, no_hash: bool, model_dir: str | None,
           base_url: str | None, options: KeySource, fmt: str) -> None:
    import msgspec

    from agentprov_core.live import endpoints
    from agentprov_core.live.local import identity as li

    env = {}
    value = _variable(ep.base_url_variable, options)
    if value:
        env[ep.base_url_variable] = value
    url, source = endpoints.resolve_base_url(ep, base_url, env)
    endpoints.check_url(ep, url, source, allow_custom=False, allow_lan=False)
    key = _optional_key(ep.optional_key, options)
    endpoints.check_secret_free(url, {key.name: key.reveal()} if key is not None else {})
    opts = li.ObserveOptions(hash_weights=not no_hash, model_dir=model_dir, key=key,
                             key_variable=ep.optional_key)
    target = msgspec.structs.replace(ep, base_url=url)
    srv = li.served(target, opts)
    if pick and not model_id:
        model_id = li.choose_model(srv, variable=ep.model_variable)
    ident = li.observe(target, model_id, opts) if model_id else None
    if fmt == "json":
        echo_json({"format": OUT_FORMAT, "endpoint": ep.name, "class": "local",
                   "kind": srv.kind, "base_url": srv.base_url, "version": srv.version,
                   "fingerprint": srv.fingerprint, "served": srv.ids,
                   "identity": ident.to_json() if ident else None})
        return
    from agentprov_core.live.local.kinds import KINDS

    label = KINDS[srv.kind].label + (f" {srv.version}" if srv.version else "")
    if srv.verified:
        how = f"recognised by {', '.join(srv.fingerprint)}"
    else:
        said = srv.fingerprint.get("Server")
        how = ("kind not verified: any OpenAI-style listing is accepted"
               + (f"; Server: {said}" if said else ""))
    click.echo(f"{ep.name}: {label} at {endpoints.shown(srv.base_url)} ({how})")
    click.echo(f"serves {len(srv.ids)} model(s):")
    for mid in srv.ids:
        click.echo(f"  {mid}{'   <- observed' if mid == model_id else ''}")
    if ident is not None:
        _print_identity(ident)


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)


#: The generation defaults the human listing shows (all of them are in the record).
SAMPLING = ("n_predict", "temperature", "top_k", "top_p", "min_p", "seed")


def _short(v: Any) -> str:
    """A float a server reported as 0.800000011920929 (kept so in the record), shown as 0.8."""
    try:
        return f"{float(v):.6g}" if isinstance(v, str) else str(v)
    except ValueError:
        return v


def _print_identity(ident: Any) -> None:
    import json

    def show(k: str, v: Any) -> str:
        if k == "generation_defaults" and isinstance(v, dict):  # dozens of sampler settings
            main = [f"{n}={_short(v[n])}" for n in SAMPLING if n in v]
            rest = len(v) - len(main)
            return " ".join(main) + (f" (+{rest} more: --format json)" if rest else "")
        return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)

    rows: list[tuple[str, str]] = [("digest", ident.digest)]
    if ident.server.fingerprint.get("verified") is False:  # the listing entry is all it says
        rows += [("kind", "not verified (openai_compat)"),
                 ("listing_entry", show("", ident.listing_entry))]
    rows += [(k, show(k, v)) for k, v in ident.server_identity.items()
             if v not in (None, {}, [])]
    if ident.files is None:
        rows.append(("files", f"none recorded ({ident.files_note or 'not named'})"))
    else:
        how = "sha256" if ident.weights_hashed else "sizes only (--no-hash-weights)"
        rows.append(("files", f"{len(ident.files)} from {ident.files_source}, {how}"))
    width = max(len(k) for k, _ in rows + [("observed state", "")]) + 2
    click.echo(f"identity {ident.format} of {ident.model_id}")
    for k, v in rows:
        click.echo(f"  {k:<{width}}{v}")
    for f in ident.files or []:
        click.echo(f"    {f.sha256 or '-' * 64}  {_human(f.size):>10}  {f.path}")
    state = {k: v for k, v in ident.observed_state.get("server", {}).items()
             if v is not None}
    state.update(ident.observed_state.get("listing", {}))
    if state:
        shown = ", ".join(f"{k}={show(k, v)}" for k, v in state.items())
        click.echo(f"  {'observed state':<{width}}{shown} (outside the digest)")


def _api(ep: Any, model_id: str | None, allow_network: bool, options: KeySource,
         fmt: str) -> None:
    from agentprov_core.errors import AgentprovError
    from agentprov_core.live import endpoints
    from agentprov_core.live.local import apimodels

    if allow_network:
        env = {}
        value = _variable(ep.base_url_variable, options)
        if value:
            env[ep.base_url_variable] = value
        url, source = endpoints.resolve_base_url(ep, None, env)
        endpoints.check_url(ep, url, source, allow_custom=False, allow_lan=False)
        key = None
        if ep.key and ep.name not in apimodels.PUBLIC_LISTS:
            try:
                from agentprov_core.live import keys
            except ImportError:  # pragma: no cover - a build without the keys module
                raise AgentprovError("cli.environment.models_fetch", endpoint=ep.name,
                                     url=endpoints.shown(url),
                                     why="this build cannot read keys") from None
            key = keys.read_key(ep.key, options).reveal()
        endpoints.check_secret_free(url, {ep.key: key} if key else {})
        lst = apimodels.refresh(ep, url, key)
    else:
        lst = apimodels.read_cache(ep.name)
        if lst is None:
            raise AgentprovError("cli.environment.models_cache", endpoint=ep.name,
                                 path=str(apimodels.cache_file(ep.name)))
    absent = model_id is not None and model_id not in lst.models
    if absent:
        click.echo(f"warning: {model_id!r} is not in {ep.name}'s model list of "
                   f"{lst.fetched_at} (a warning, never a refusal: the list may be stale; "
                   "--allow-network refreshes it)", err=True)
    if fmt == "json":
        echo_json({"format": OUT_FORMAT, "endpoint": ep.name, "class": "api",
                   "list": apimodels.as_json(lst),
                   "model_id": model_id, "listed": None if model_id is None else not absent})
        return
    fetched = "fetched now" if allow_network else "from the cache; --allow-network refreshes it"
    click.echo(f"{ep.name}: {len(lst.models)} model(s) as of {lst.fetched_at} ({fetched})")
    if model_id is not None:
        click.echo(f"{model_id}: {'not listed' if absent else 'listed'}")
    else:
        for mid in lst.models:
            click.echo(f"  {mid}")
    sys.stdout.flush()
