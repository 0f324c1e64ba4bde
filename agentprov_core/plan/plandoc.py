"""The plan document (format ``agentprov-run-plan/0.1``): what to run, before expansion.

The cell options of ``agentprov run`` and a ``--plan PLAN.toml`` file both become one
:class:`PlanDoc`; everything after that (expansion, refusals, digests) sees only the
document, which is why a plan file and the equivalent flags give the same plan digest.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

PLAN_FORMAT = "agentprov-run-plan/0.1"
#: The most repeats of a plan (a plan of more would never finish, and would hang expanding)
MAX_REPEATS = 1000
Repeats = Annotated[int, msgspec.Meta(ge=1, le=MAX_REPEATS)]

Benign = Literal["include", "exclude", "only"]


class InspectPlan(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``[inspect]`` table: one Inspect task, its samples, limits and judges."""

    task: str | None = None
    samples: str | None = None
    split: str | None = None
    epochs: int = 1
    cell_size: int | None = None
    max_connections: int = 4
    judges: dict[str, str] = {}
    params: dict[str, str | int | bool] = {}
    limits: dict[str, int] = {}


class PlanDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The ``[plan]`` table (plus ``[inspect]`` for an Inspect source)."""

    format: str = PLAN_FORMAT
    backend: str
    benchmark_version: str | None = None
    suites: list[str] | None = None
    user_tasks: str = "all"
    injection_tasks: str = "all"
    attacks: list[str] = []
    benign: Benign = "include"
    repeats: Repeats = 1
    defence: str = "none"
    autodojo_cache: str | None = None
    autodojo_variant: int | None = None
    inspect: InspectPlan | None = None


# The keys a plan file may hold, per table (unknown keys are refused).
PLAN_KEYS = tuple(f for f in PlanDoc.__struct_fields__ if f != "inspect")
INSPECT_KEYS = tuple(InspectPlan.__struct_fields__)

# The `run` options that select cells: refused together with --plan.
CELL_OPTIONS = {
    "suite": "--suite", "benchmark_version": "--benchmark-version",
    "user_tasks": "--user-tasks", "injection_tasks": "--injection-tasks",
    "attack": "--attack", "benign": "--benign", "repeats": "--repeats", "defence": "--defence",
    "autodojo_cache": "--autodojo-cache", "autodojo_variant": "--autodojo-variant",
    "task": "--task", "samples": "--samples", "epochs": "--epochs", "cell_size": "--cell-size",
    "max_connections": "--max-connections", "judge": "--judge", "task_param": "--task-param",
    "message_limit": "--message-limit", "token_limit": "--token-limit",
    "time_limit": "--time-limit", "split": "--split",
}
