"""``agentprov keys``: store endpoint keys in the OS keychain and show which are set.

Names only, ever: no subcommand prints, logs or writes a value anywhere but the keychain.
NAME must be a key variable the endpoint registry names (``key`` or ``optional_key`` in
``registry/endpoints.toml``; ``agentprov keys status`` lists them): a typo is refused
(exit 2) rather than stored where no run would read it, and ``list``/``status`` can answer
without enumerating the keychain, which ``keyring`` cannot do. An endpoint added to the
registry (``AGENTPROV_REGISTRY``) brings its key variable with it.

A keychain that is only a failing, null or plaintext backend (headless Linux without a
Secret Service) is refused by every subcommand with ``cli.environment.keychain_unavailable``
(exit 3), which points to ``--env-file`` and ``--env-stdin``.
"""

from __future__ import annotations

import sys

import click

from agentprov_core.cli.common import echo_json, format_option, table


@click.group(context_settings={"max_content_width": 100})
def keys() -> None:
    """Store endpoint keys in the OS keychain (service "agentprov") and show which are set.

    Only names are ever shown. NAME is a key variable of the endpoint registry, such as
    OPENROUTER_API_KEY. Without a usable keychain (a failing or plaintext keyring backend),
    give keys to a run with --env-file PATH or --env-stdin instead.
    """


def _read_value(name: str, from_stdin: bool) -> str:
    from agentprov_core.errors import AgentprovError

    if from_stdin:
        data = sys.stdin.read()
        lines = [ln for ln in data.splitlines() if ln.strip()]
        if len(lines) != 1:
            raise AgentprovError("cli.usage.key_value", variable=name,
                                 what="on stdin must be exactly one non-empty line"
                                      f" (got {len(lines)})")
        value = lines[0].strip()
    else:
        if not sys.stdin.isatty():
            raise AgentprovError("cli.usage.key_prompt")
        value = click.prompt(f"{name} (input hidden)", hide_input=True,
                             prompt_suffix=": ", show_default=False, err=True).strip()
    if not value:
        raise AgentprovError("cli.usage.key_value", variable=name, what="is empty")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise AgentprovError("cli.usage.key_value", variable=name,
                             what="holds spaces or control characters inside")
    return value


@keys.command("set", short_help="Store the key NAME in the keychain (input hidden).")
@click.argument("name")
@click.option("--stdin", "from_stdin", is_flag=True,
              help="Read the key as one line on stdin instead of prompting.")
def set_(name: str, from_stdin: bool) -> int:
    """Store the key NAME in the keychain: prompt without echo, or one line with --stdin."""
    from agentprov_core.live import keys as k

    endpoints = k.check_key_name(name)
    kr = k.keychain()  # refuse an unusable keychain before asking for anything
    value = _read_value(name, from_stdin)
    replaced = k.keychain_has(name, kr)
    backend = k.store_key(name, value, kr)
    del value
    verb = "replaced" if replaced else "stored"
    click.echo(f"keys: {verb} {name} in the keychain ({backend}, service {k.SERVICE}); "
               f"used by: {', '.join(endpoints)}")
    return 0


def _rows(names: list[str]) -> tuple[str, list[dict]]:
    """The keychain backend's name, and a row per key variable (``names``, or every one)."""
    from agentprov_core.live import keys as k

    known = k.key_variables()
    for n in names:
        k.check_key_name(n)
    kr = k.keychain()
    return k.backend_name(kr), [{"name": n, "set": k.keychain_has(n, kr),
                                 "endpoints": known[n]} for n in (names or list(known))]


@keys.command(short_help="Which key variables are set in the keychain (names only).")
@click.argument("name", required=False)
@format_option
def status(name: str | None, fmt: str) -> int:
    """Whether each key variable (or NAME) is set in the keychain. Names only."""
    from agentprov_core.live import keys as k

    backend, rows = _rows([name] if name else [])
    if fmt == "json":
        echo_json({"service": k.SERVICE, "backend": backend, "keys": rows})
        return 0
    click.echo(f"keychain: {backend} (service {k.SERVICE})")
    click.echo(table([[r["name"], "set" if r["set"] else "not set", ", ".join(r["endpoints"])]
                      for r in rows], ["NAME", "KEYCHAIN", "ENDPOINTS"]))
    return 0


@keys.command("list")
@format_option
def list_(fmt: str) -> int:
    """The names of the keys stored in the keychain (names only)."""
    rows = [r for r in _rows([])[1] if r["set"]]
    if fmt == "json":
        echo_json([r["name"] for r in rows])
        return 0
    for r in rows:
        click.echo(r["name"])
    if not rows:
        click.echo("keys: no key is stored in the keychain (agentprov keys set NAME)", err=True)
    return 0


@keys.group(short_help="Ed25519 keys that sign sealed corpora (agentprov package --sign-key).")
def signing() -> None:
    """Ed25519 keys that sign sealed corpora. The private half stays in the OS keychain
    (service agentprov-signing); without a usable keychain, in a file of mode 0600 under
    $AGENTPROV_HOME/signing-keys, which `new` names and warns about. It is never printed."""


@signing.command("new")
@click.argument("name")
def signing_new(name: str) -> int:
    """Make the signing key NAME (never replaces one)."""
    from agentprov_core.live import signingkeys

    key, why = signingkeys.new(name)
    click.echo(f"keys: made the signing key {key.name} (key {key.fingerprint}); its public "
               f"key is {key.public_path}")
    if why is None:
        click.echo(f"keys: its private key is in the {key.where}")
    else:
        click.echo(f"keys: warning: no usable OS keychain ({why}); the private key is in the "
                   f"file {key.where} (mode 0600): anyone who can read that file can sign "
                   "as you; keep it on this machine's own disk, out of backups you share",
                   err=True)
    return 0


@signing.command("export-public")
@click.argument("name")
def signing_export_public(name: str) -> int:
    """Print the public key NAME (PEM): give it to readers, for verify --trusted-key."""
    from agentprov_core.base import dsse
    from agentprov_core.live import signingkeys

    pub, _ = signingkeys.public(name)
    click.echo(dsse.public_pem(pub).decode("ascii"), nl=False)
    return 0


@signing.command("list")
@format_option
def signing_list(fmt: str) -> int:
    """The signing keys: name, fingerprint, where the private key is."""
    from agentprov_core.live import signingkeys

    rows = [{"name": k.name, "fingerprint": k.fingerprint, "private_key": k.where}
            for k in signingkeys.listed()]
    if fmt == "json":
        echo_json(rows)
        return 0
    if rows:
        click.echo(table([[r["name"], r["fingerprint"], r["private_key"]] for r in rows],
                         ["NAME", "FINGERPRINT", "PRIVATE KEY"]))
    else:
        click.echo("keys: no signing key (agentprov keys signing new NAME)", err=True)
    return 0
