"""Step 1 of a run: the plan document its cell options give, or its ``--plan`` file.

Options of the other kind of source are refused (an Inspect task's with a suites source,
and the other way round), and so are cell options beside ``--plan`` (exit 2).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.errors import AgentprovError
from agentprov_core.plan import planfile
from agentprov_core.plan.plandoc import CELL_OPTIONS, InspectPlan, PlanDoc
from agentprov_core.run.runrequest import RunRequest
from agentprov_core.source import Source

INSPECT_FLAGS = ("task", "samples", "split", "epochs", "cell_size", "max_connections", "judge",
                 "task_param", "message_limit", "token_limit", "time_limit")
SUITE_FLAGS = ("suite", "benchmark_version", "user_tasks", "injection_tasks", "attack",
               "benign", "autodojo_cache", "autodojo_variant")


def _split_list(values: tuple[str, ...] | list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def _pairs(values, option: str, scalar: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw in values or ():
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise AgentprovError("cli.usage.option_value", option=option, value=raw,
                                 what="expected KEY=VALUE")
        parsed: Any = value
        if scalar:
            try:
                parsed = tomllib.loads(f"v = {value}")["v"]
            except (ValueError, RecursionError):  # not TOML (or too deep, or too long)
                parsed = value
            if isinstance(parsed, float):
                raise AgentprovError("cli.usage.option_value", option=option, value=raw,
                                     what="floats are not accepted; give a string or an integer")
            if not isinstance(parsed, (str, int, bool)):
                parsed = value
        out[key.strip()] = parsed
    return out


def plan_document(req: RunRequest, src: Source) -> PlanDoc:
    o = req.options
    kind = src.meta.kind
    if o.plan:
        clash = [CELL_OPTIONS[k] for k in CELL_OPTIONS if k in req.given]
        if clash:
            raise AgentprovError("cli.usage.plan_with_cell_options", options=", ".join(clash))
        path = Path(o.plan)
        doc = planfile.load(path)
        if doc.backend != src.meta.name:
            raise AgentprovError("cli.usage.plan_backend", location=str(path),
                                 plan_backend=doc.backend, source=src.meta.name)
        return doc
    foreign = INSPECT_FLAGS if kind == "suites" else SUITE_FLAGS
    for name in foreign:
        if name in req.given:
            why = ("it plans suites and tasks, not an Inspect task" if kind == "suites"
                   else "it runs an Inspect task (--task, --samples)")
            raise AgentprovError("cli.usage.option_for_other_kind", option=CELL_OPTIONS[name],
                                 source=src.meta.name, why=why)
    fields: dict[str, Any] = {"backend": src.meta.name, "repeats": o.repeats or 1,
                              "defence": o.defence or "none"}
    if kind == "suites":
        fields |= {
            "benchmark_version": o.benchmark_version,
            "suites": _split_list(o.suite) or None,
            "user_tasks": o.user_tasks or "all",
            "injection_tasks": o.injection_tasks or "all",
            "attacks": _split_list(o.attack),
            "benign": o.benign or "include",
            "autodojo_cache": o.autodojo_cache,
            "autodojo_variant": o.autodojo_variant,
        }
    else:
        limits = {k: v for k, v in (("message_limit", o.message_limit),
                                    ("token_limit", o.token_limit),
                                    ("time_limit", o.time_limit)) if v is not None}
        fields["inspect"] = InspectPlan(
            task=o.task, samples=o.samples, split=o.split,
            epochs=o.epochs or 1, cell_size=o.cell_size,
            max_connections=o.max_connections or 4,
            judges=_pairs(o.judge, "--judge", scalar=False),
            params=_pairs(o.task_param, "--task-param", scalar=True), limits=limits)
    return msgspec.convert(fields, type=PlanDoc, from_attributes=True)
