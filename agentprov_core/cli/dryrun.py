"""Printing a dry run: the plan lines (R-8.3 … R-8.5) and the dry plan document (R-8.16)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from agentprov_core.cli.common import echo_json

if TYPE_CHECKING:
    from agentprov_core.run.prepare import Prepared


def print_dry_run(prepared: Prepared, started: float) -> int:
    from agentprov_core.run import dryrun
    from agentprov_core.run.prepare import plan_lines
    from agentprov_core.run.units import read_progress

    checked = dryrun.dry_run(prepared)
    if checked is not prepared:  # the worker's catalogue re-made the plan: count again
        checked = read_progress(checked)
    prepared = checked
    plan = prepared.plan
    as_json = prepared.request.options.plan_json
    click.echo(f"agentprov: finished in {time.monotonic() - started:.1f}s (exit 0)", err=True)
    lines = plan_lines(plan)
    if prepared.model_facts is not None:  # a local model: each fact and its source
        from agentprov_core.live.local.facts import summary

        lines.append(summary(prepared.model_facts))
    if prepared.preset is not None:  # the preset, its row and its plan
        lines += prepared.preset.lines()
    if (prepared.containment or {}).get("not_enforced"):  # what this kernel cannot enforce
        from agentprov_core.run.consent import containment_line

        lines.append(containment_line(prepared.containment))
    click.echo("\n".join(lines), err=bool(as_json))
    if as_json:
        echo_json(plan.dry_plan())
    return 0
