"""The ``agentprov`` command: a lazy group, so ``--help`` imports no subcommand."""

from __future__ import annotations

import os
import sys
from importlib import import_module

import click

from agentprov_core import __version__

# name -> (module, attribute, one-line help). Modules are imported only when invoked.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "backends": ("agentprov_core.cli.backends_cmd", "backends", "Build and check backend environments."),
    "import": ("agentprov_core.cli.import_cmd", "import_", "Import a benchmark's own result files into an import corpus."),
    "info": ("agentprov_core.cli.info", "info", "Show the live parts of this build and their status."),
    "models": ("agentprov_core.cli.models_cmd", "models", "What a local server serves (read-only), or an API's cached model list."),
    "plugin": ("agentprov_core.cli.plugin_cmd", "plugin", "Start a source plugin of your own (plugin new NAME)."),
    "plugins": ("agentprov_core.cli.plugins_cmd", "plugins", "List plugin distributions, versions and load errors."),
    "run": ("agentprov_core.cli.run", "run", "Plan, dry-run or run a benchmark source live."),
    "registry": ("agentprov_core.cli.registry_cmd", "registry", "List the registries; toggle defences and part statuses (in an overlay)."),
    "keys": ("agentprov_core.cli.keys_cmd", "keys", "Store and inspect endpoint keys in the OS keychain (names only); signing keys."),
    "validate": ("agentprov_core.cli.validate", "validate", "Validate a corpus's executions: tiers aer, sem, prov, linkage."),
    "recompute": ("agentprov_core.cli.recompute", "recompute", "Re-derive SEM, PROV and validation from the stored AERs."),
    "verify": ("agentprov_core.cli.verify", "verify", "Re-walk a corpus's capture chains, raw store digests and references; check a seal or a proof."),
    "stats": ("agentprov_core.cli.stats", "stats", "Tables of a corpus's records and executions."),
    "view": ("agentprov_core.cli.view_cmd", "view", "Write a static HTML site of a corpus: results, executions, evidence."),
    "settings": ("agentprov_core.cli.settings_cmd", "settings", "Read and edit the settings (settings.toml): presets, base URLs, local model facts."),
    "estimate": ("agentprov_core.cli.estimate_cmd", "estimate", "Estimate a run's cost and time at p50 and p90, without a model call."),
    "prices": ("agentprov_core.cli.prices_cmd", "prices", "The dated price table: list, set an override, refresh (network)."),
    "package": ("agentprov_core.cli.package", "package", "Seal a finished live corpus for release (agentprov-corpus/0.3, signed)."),
    "prove": ("agentprov_core.cli.prove", "prove", "Write the proof bundle of one execution of a sealed corpus."),
}

_state = {"command": "", "error_format": "text"}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        _state["command"] = name
        return getattr(import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from agentprov_core.plugins import manager

    click.echo(f"agentprov {__version__}")
    for line in version_lines(manager()):
        click.echo(line)
    ctx.exit(0)


def version_lines(plugins) -> list[str]:
    """One line per plugin distribution: its version, the state of a plugin that is not
    loaded, and what it contributes (its sources, backend projects, mappers and executors), read from
    the hooks' results only."""
    made = plugins.contributions()
    by_dist: dict[str, list] = {}
    for rec in plugins.records:
        if rec.status != "builtin":
            by_dist.setdefault(rec.origin, []).append(rec)
    lines = []
    for origin, recs in by_dist.items():
        odd = [r for r in recs if r.status != "loaded"]
        state = ""
        if odd and len(recs) == 1:
            state = f" ({odd[0].status})"
        elif odd:
            state = " (" + ", ".join(f"plugin {r.name} {r.status}" for r in odd) + ")"
        parts = []
        for kind in ("source", "backend", "mapper", "executor"):
            names = [n for r in recs for n in made[r.name][kind + "s"]]
            if names:
                parts.append(f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}")
        lines.append(f"  {origin}{state}" + (": " + "; ".join(parts) if parts else ""))
    return lines


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                               "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and the installed plugins.")
@click.option("--error-format", type=click.Choice(["text", "json"]), default=None,
              help="How errors are printed on stderr (also AGENTPROV_ERROR_FORMAT).")
def cli(error_format: str | None) -> None:
    """agentprov: run agent-security benchmarks live and record what happened as evidence
    anyone can check.

    Exit codes: 0 ok, 1 failures, 2 usage, 3 environment, 4 refused by a guard,
    5 unsupported, 70 internal, 130 interrupted.
    """
    if error_format:
        _state["error_format"] = error_format


def main(argv: list[str] | None = None) -> None:
    _state["error_format"] = os.environ.get("AGENTPROV_ERROR_FORMAT", "text")
    try:
        rv = cli.main(args=argv, prog_name="agentprov", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("agentprov: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        # An AgentprovError can only exist once its module is loaded: --help never pays for it.
        errors = sys.modules.get("agentprov_core.errors")
        if errors is not None and isinstance(exc, errors.AgentprovError):
            render = errors.render_json if _state["error_format"] == "json" else errors.render
            click.echo(render(exc, _state["command"]), err=True)
            sys.exit(exc.exit_code)
        # exit 70 is a bug: say so, never a bare traceback
        if os.environ.get("AGENTPROV_DEBUG"):
            raise
        click.echo(f"agentprov: internal error: {type(exc).__name__}: {exc}\n"
                   "  This is a bug in agentprov; re-run with AGENTPROV_DEBUG=1 for the "
                   "traceback and report it.", err=True)
        sys.exit(70)
    sys.exit(rv if isinstance(rv, int) else 0)
