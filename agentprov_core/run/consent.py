"""Step 7 of the order of checks: consent to a real-model run (R-15.1 … R-15.3, R-16.7).

A real model needs consent, decided after the plan (a dry run never gets here):

* ``--i-consent-to-api-costs`` consents to billed calls, and also satisfies a local run;
* ``--i-consent-to-local-run`` consents for a local server only; on an endpoint of class
  ``api`` (an API, or a LAN server) it is refused, never read as consent to bill;
* without a flag, a terminal (stdin and stderr both a TTY) is asked ``Continue? [y/N]``
  after a summary that names the endpoint, the model, the caps and the bound on calls;
  only ``y`` or ``yes`` consents. Without a terminal: ``cli.refused.consent`` (exit 4).

A scripted run needs no consent. Nothing here reads a key, contacts a server or writes.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

from agentprov_core.errors import AgentprovError
from agentprov_core.live.endpoints import shown

if TYPE_CHECKING:
    from agentprov_core.live.caps import Bound
    from agentprov_core.run.prepare import Prepared

#: The preflight probe's calls, before the first cell (R-18): named in the consent text.
PREFLIGHT_CALLS = 3


def is_terminal(stdin: IO[str], stderr: IO[str]) -> bool:
    try:
        return stdin.isatty() and stderr.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream is not a terminal
        return False


def summary(prepared: Prepared, bound: Bound | None = None) -> list[str]:
    """What the prompt shows before ``Continue? [y/N]``: what would run, and its bounds
    (``bound``: the caps' bound of the plan, named when a rule other than the AgentDojo
    constant gives its cells')."""
    o = prepared.request.options
    r = prepared.resolved
    cls = prepared.endpoint_class
    lines = [f"agentprov run {prepared.source.meta.name}: a real-model run, endpoint {r.name} "
             f"(class {cls}) at {shown(r.base_url)}, model {o.model_id or '(from the server)'}"]
    if o.preflight_only:
        lines.append(f"  up to {PREFLIGHT_CALLS} preflight probe call(s), and no cell")
    else:
        due = prepared.plan.attempts_due
        lines.append(f"  up to {PREFLIGHT_CALLS} preflight probe call(s), then up to {due} "
                     f"cell attempt(s) ({prepared.plan.units} unit(s), --max-attempts "
                     f"{prepared.plan.max_attempts})")
    if cls == "api":
        caps = []
        if o.max_calls is not None:
            caps.append(f"at most {o.max_calls} billed call(s)")
        if o.max_cost_usd is not None:
            caps.append(f"a spend upper bound of ${o.max_cost_usd:.2f} at "
                        f"${o.price_in}/${o.price_out} per million tokens in/out")
        lines.append("  caps: " + ("; ".join(caps) if caps else "none (--preflight-only)")
                     + "; prompts and replies leave this machine")
        if caps:
            lines += bound_lines(prepared, bound)
    else:
        lines.append("  a local server on loopback: no provider bills these calls")
    if prepared.containment:
        lines.append("  " + containment_line(prepared.containment))
    return lines


def containment_line(recorded: dict[str, Any]) -> str:
    """What ``producer.sandbox`` records, in words: the containment, who declared it, and
    the probe's checks this machine's kernel cannot enforce (docs/containment.md)."""
    unenforced = recorded.get("not_enforced") or ()
    return (f"containment: {recorded['kind']} (declared by {recorded['declared_by']})"
            + (f"; not enforced on this kernel: {', '.join(unenforced)}" if unenforced else ""))


def bound_lines(prepared: Prepared, bound: Bound | None) -> list[str]:
    """The cell bound the caps reserve, when a rule other than the AgentDojo constant gives
    it (an Inspect plan's D-740 bound, R-25.27), with its figures and its price."""
    o = prepared.request.options
    r = bound.rule if bound is not None else None
    if r is None or bound.cell_calls is None:
        return []
    line = (f"  cell bound (D-740): at most {bound.cell_calls} billed call(s) per cell = "
            f"{r['samples']} sample(s) x {r['epochs']} epoch(s) x (({r['message_limit']} - 1)"
            f" x (1 + {r['judge_calls_per_agent_call']}) + {r['judge_calls_per_sample']}) x "
            f"(1 + {r['retries_per_call']})")
    if o.price_in is not None and o.price_out is not None:
        line += f", about ${bound.cell_usd(o.caps):.3f}"
    return [line]


def display_name_hint(prepared: Prepared) -> str | None:
    """The hint a real-model run prints before consent (R-13.2) when its plan holds an
    attack that addresses the model by name (the catalogue's ``names_model``) and no
    ``--model-display-name`` is given: a model id that matches no stock name of the
    benchmark is refused by the first attacked cell's setup, which stops the run (R-13.3).
    A local server has a stock name (AgentDojo's ``Local model``): no hint."""
    plan = prepared.plan
    if not plan.named_attacks or plan.display_name or prepared.endpoint_class == "local":
        return None
    return (f"hint: {', '.join(plan.named_attacks)} address(es) the model by name, and no "
            f"--model-display-name is given: unless the model id "
            f"{prepared.request.options.model_id!r} matches a stock name of the "
            f"benchmark, the first attacked cell's setup refuses it and the run stops there; "
            f"give --model-display-name NAME (the name the attack should use)")


def decide(prepared: Prepared, *, stdin: IO[str] | None = None, stderr: IO[str] | None = None,
           bound: Bound | None = None) -> dict[str, Any]:
    """Consent for the prepared real-model run, or ``cli.refused.consent`` (exit 4).
    Returns what the corpus records: how consent was given and for which class."""
    stdin = sys.stdin if stdin is None else stdin
    stderr = sys.stderr if stderr is None else stderr
    o = prepared.request.options
    cls = prepared.endpoint_class
    if o.i_consent_to_api_costs:
        return {"given_by": "--i-consent-to-api-costs", "endpoint_class": cls}
    if o.i_consent_to_local_run:
        if cls == "local":
            return {"given_by": "--i-consent-to-local-run", "endpoint_class": cls}
        raise AgentprovError(
            "cli.refused.consent",
            why=f"to billed calls: --i-consent-to-local-run covers a local server only, and "
                f"{prepared.resolved.name} at {shown(prepared.resolved.base_url)} is class api; pass "
                "--i-consent-to-api-costs")
    flags = ("--i-consent-to-api-costs" if cls == "api"
             else "--i-consent-to-local-run or --i-consent-to-api-costs")
    if o.env_stdin or not is_terminal(stdin, stderr):
        raise AgentprovError(
            "cli.refused.consent",
            why=f"(no consent flag, and no terminal to ask on): pass {flags}")
    stderr.write("\n".join(summary(prepared, bound)) + "\nContinue? [y/N] ")
    stderr.flush()
    answer = stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        if not answer.endswith("\n"):
            stderr.write("\n")
        raise AgentprovError("cli.refused.consent",
                             why=f"(the answer was not yes; nothing was started): answer y, "
                                 f"or pass {flags}")
    return {"given_by": "prompt", "endpoint_class": cls}
