"""``agentprov plugin new NAME``: a new source plugin to start from, written from the
template of the worked example (``agentprov_core/templates/source_plugin``).

The template is the example with its names made placeholders; rendered with the example's
names it is the example byte for byte, its README aside (tests/test_plugin_new.py), so the
skeleton is what the plugin guide walks through and what passes the contract suite.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

from agentprov_core.errors import AgentprovError

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "source_plugin"
SUFFIX = ".tmpl"
#: a source name that is also a Python package's (``NAME_worker``) and an entry point's
NAME = re.compile(r"[a-z][a-z0-9]{1,39}")
#: names agentprov's own sources hold
TAKEN = ("agentdojo", "agentdyn", "agentharm", "autodojo", "inspect", "rope")


def names(name: str, distribution: str | None = None) -> dict[str, str]:
    """The template's placeholders for the source ``name`` and its distribution."""
    dist = distribution or f"agentprov-{name}"
    return {"@package@": re.sub(r"[-.]+", "_", dist).lower(), "@distribution@": dist,
            "@Class@": name.capitalize(), "@NAME@": name.upper(), "@name@": name}


def render(name: str, distribution: str | None = None) -> dict[str, str]:
    """The new plugin's files, relative path to text."""
    subs = names(name, distribution)
    out = {}
    for path in sorted(TEMPLATE.rglob("*" + SUFFIX)):
        rel, text = path.relative_to(TEMPLATE).as_posix()[:-len(SUFFIX)], path.read_text(
            encoding="utf-8")
        for key, value in subs.items():
            rel, text = rel.replace(key, value), text.replace(key, value)
        out[rel] = text
    return out


@click.group()
def plugin() -> None:
    """Start a source plugin of your own."""


@plugin.command("new")
@click.argument("name")
@click.option("--out", "out", type=click.Path(path_type=Path), default=None,
              help="The directory to write (default: ./agentprov-NAME); it must not exist.")
@click.option("--distribution", default=None,
              help="The distribution's name (default: agentprov-NAME).")
def new(name: str, out: Path | None, distribution: str | None) -> None:
    """Write a new source plugin NAME: the plugin (source, backend project, mapper), its
    catalogue, and a backend project with a worker package serving a small mail benchmark,
    ready to build, run scripted and pass the contract suite."""
    if not NAME.fullmatch(name):
        raise AgentprovError("cli.usage.plugin_name", name=name,
                             why="a source name is 2 to 40 lower-case letters and digits, "
                                 "starting with a letter")
    if name in TAKEN:
        raise AgentprovError("cli.usage.plugin_name", name=name,
                             why="agentprov's own sources hold that name")
    out = out or Path(f"agentprov-{name}")
    if out.exists():
        raise AgentprovError("cli.usage.plugin_out_exists", name=name, out=out)
    files = render(name, distribution)
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    click.echo(f"plugin {name}: {len(files)} files written to {out}\n"
               f"  the source {name}, its backend project and worker package "
               f"{name}-worker, its mapper {name}.capture\n"
               f"  next: pip install -e {out}; agentprov backends build {name}; "
               f"AGENTPROV_CONTRACT_SOURCE={name} pytest --pyargs "
               "agentprov_core.testing.contract")
