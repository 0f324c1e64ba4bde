"""Steps 5 and 6 of R-16 against the installed benchmark: the worker's hello checked against
the environment's marker, the plan re-expanded from the catalogue the worker serves (the
authority on what the installed benchmark holds), and that plan's cells checked by the
worker. A dry run stops after it; a run starts its campaign with the plan it returns."""

from __future__ import annotations

from agentprov_core.backend import session
from agentprov_core.errors import AgentprovError
from agentprov_core.run.prepare import Prepared, with_worker_catalogue


def dry_run(prepared: Prepared) -> Prepared:
    """The prepared run with its plan from the worker's catalogue (unchanged when the worker
    does not serve the source); ``cli.usage.worker_plan`` (exit 2) when the worker refuses
    a cell of it."""
    meta = prepared.source.meta
    with session.plan_check(meta, prepared.plan.environment_id) as check:
        if check.serves:
            prepared = with_worker_catalogue(prepared, check.catalogue())
            plan = prepared.plan
            problems = check.plan_problems(plan.benchmark_version, plan.cells,
                                           session.inspect_request(prepared.doc))
            if problems:
                more = len(problems) - 3
                raise AgentprovError("cli.usage.worker_plan",
                                     detail="; ".join(problems[:3])
                                     + (f" (+{more} more)" if more > 0 else ""))
    return prepared
