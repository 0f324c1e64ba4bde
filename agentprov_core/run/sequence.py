"""What a run passes through after its plan, as ``agentprov run`` and each arm of the sweep
(``--tune-jobs``) pass through it, each step once:

1. :func:`checked`: the corpus refusals (exit 4, :func:`agentprov_core.run.checks.check_corpus`)
   and what the corpus already holds (:func:`agentprov_core.run.units.read_progress`);
   ``--preflight-only`` writes no corpus and skips both. A dry run stops after this
   (:mod:`agentprov_core.cli.dryrun`).
2. :func:`consented`: step 7 for a real model (:mod:`agentprov_core.run.consent`), after a
   local model's facts and the display-name hint (R-13.2) are printed.
3. :func:`agentprov_core.run.campaign.start`: the preflight probe, the worker's check of
   the plan, then the campaign.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from agentprov_core.run.prepare import Prepared


def checked(prepared: Prepared) -> Prepared:
    """The corpus refusals, then the plan with what its corpus already holds."""
    from agentprov_core.base import timing
    from agentprov_core.run import checks, units

    if prepared.request.options.preflight_only:  # the probe alone writes no corpus
        return prepared
    with timing.span("corpus.checks"):
        checks.check_corpus(prepared)
        return units.read_progress(prepared)


def consented(prepared: Prepared) -> dict[str, Any] | None:
    """Consent for a real-model run (``cli.refused.consent``, exit 4), or None for the
    scripted transport, which needs none."""
    if prepared.model_facts is not None:  # a local model's facts, each with its source
        from agentprov_core.live.local.facts import summary

        click.echo(summary(prepared.model_facts).strip(), err=True)
    if prepared.request.scripted:
        return None
    from agentprov_core.run import consent
    from agentprov_core.run.live import bound_of

    if hint := consent.display_name_hint(prepared):  # before consent
        click.echo(hint, err=True)
    return consent.decide(prepared, bound=bound_of(prepared, prepared.params))
