"""Helpers shared by the subcommands."""

from __future__ import annotations

from typing import Any

import click

format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]),
                             default="text", show_default=True, help="Output format.")


def echo_json(obj: Any) -> None:
    """Pretty JSON, sorted keys, one-space indent (msgspec's encoder: the standard library's
    falls back to pure Python whenever it indents). Floats never reach these documents."""
    import msgspec

    click.echo(msgspec.json.format(msgspec.json.encode(obj, order="sorted"), indent=1).decode())


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    out = []
    for r in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(r, widths, strict=False)] + [r[-1]]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
