"""A run with a compute preset (``--preset NAME``, ``--m5ultra``; D-822, D-823).

A preset plans a local run's concurrency from the host and the model's facts: the compute
row of the model's active parameters (else the preset's last row) gives ``--jobs``, the
start stagger and the request timeout; the model's memory then bounds the jobs: the weights
plus one KV cache a trace must fit in the share of the host's memory the preset gives the
server (``memory_fraction``), so a plan of more traces than fit is reduced to what fits, and
a model that cannot hold one trace is refused (``run.unsupported.preset_memory``, exit 5).
An explicit ``--jobs`` or ``--start-stagger`` wins over the preset's, and says so.

The refusals, in the order of checks: step 1 (usage, exit 2) an unknown preset, both
``--preset`` and ``--m5ultra``, a preset with ``--llm-script`` or a non-local endpoint, and
an explicit ``--llm-element native`` (the stock element ignores the request timeout);
step 2 (exit 5) an uncalibrated preset, or one calibrated for another host, outside
``--dry-run`` and ``--tune-jobs``. A preset run defaults to ``--llm-element gateway_compat``
and sends the request timeout with every model call in ``agent.params.timeout_s`` (part of
the configuration digest). Without a preset nothing here changes a run.
"""

from __future__ import annotations

import math
from collections.abc import Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentprov_core.errors import AgentprovError
from agentprov_core.registries.presets import ComputeRow, Preset

if TYPE_CHECKING:
    from agentprov_core.run.options import RunOptions


def chosen_name(options: RunOptions) -> str | None:
    """The preset a run's flags name (``--preset NAME`` or ``--m5ultra``), or None."""
    name, m5 = options.preset, options.m5ultra
    if name is not None and m5:
        raise AgentprovError("cli.usage.exclusive", first="--preset", second="--m5ultra")
    if name is not None and not name.strip():
        raise AgentprovError("cli.usage.option_value", option="--preset", value=repr(name),
                             what="is empty: name a preset (agentprov info lists them), or "
                                  "drop --preset")
    return "m5ultra" if m5 else name


def check_usage(options: RunOptions, given: Set[str], scripted: bool,
                endpoint: Any) -> Preset | None:
    """Step 1: the preset loaded and its usage refusals (exit 2). None without a preset.
    (A preset run's element defaults to ``gateway_compat``: the caller settles it.)"""
    from agentprov_core.registries import presets

    name = chosen_name(options)
    if name is None:
        return None
    flag = "--m5ultra" if options.m5ultra else "--preset"
    preset = presets.load(name)
    if scripted:
        raise AgentprovError("cli.usage.exclusive", first=flag, second="--llm-script")
    if endpoint is not None and not endpoint.local:
        raise AgentprovError("cli.usage.local_only_option", option=flag, endpoint=endpoint.name)
    if options.llm_element == "native" and "llm_element" in given:
        raise AgentprovError("cli.usage.preset_native_element", preset=name)
    return preset


def host_problem(preset: Preset) -> str | None:
    """Why this host is not the one ``preset`` was calibrated for (its ``[host]``: platform,
    machine, least memory and CPUs), or None."""
    import platform
    import sys

    from agentprov_core.backend.hostlimits import cpus, physical_memory_gb

    h = preset.host
    here = f"{sys.platform}/{platform.machine()}"
    if sys.platform != h.platform or platform.machine() != h.machine:
        return f"it was calibrated on {h.platform}/{h.machine}, this host is {here}"
    mem = physical_memory_gb()
    if mem is not None and mem < h.min_memory_gb:
        return f"it needs {h.min_memory_gb:g} GB of memory, this host has {mem:.1f} GB"
    if cpus() < h.min_cpus:
        return f"it needs {h.min_cpus} CPUs, this host has {cpus()}"
    return None


def check_gate(preset: Preset | None, options: RunOptions, source: str) -> None:
    """Step 2: outside ``--dry-run`` and ``--tune-jobs``, only a calibrated preset of this
    host runs (exit 5)."""
    if preset is None or options.dry_run or options.tune_jobs:
        return
    if not preset.calibrated:
        raise AgentprovError("run.unsupported.preset_uncalibrated", preset=preset.name,
                             source=source)
    why = host_problem(preset)
    if why is not None:
        raise AgentprovError("run.unsupported.preset_host", preset=preset.name, why=why,
                             source=source)


@dataclass(frozen=True)
class PresetPlan:
    """What a preset plans for one model on this host."""

    preset: Preset
    row: ComputeRow
    jobs: int
    start_stagger_s: float
    request_timeout_s: int
    #: the traces the model's memory holds at once (None: a fact is unknown)
    memory_holds: int | None
    notes: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """What the manifest keeps of it (``producer.preset_plan``)."""
        p = self.preset
        return {"name": p.name, "version": p.version, "date": p.date,
                "calibrated": p.calibrated, "report": p.report,
                "row": {"max_active_params_b": _text(self.row.max_active_params_b),
                        "status": self.row.status},
                "jobs": self.jobs, "start_stagger_s": _text(self.start_stagger_s),
                "request_timeout_s": self.request_timeout_s}

    def lines(self) -> list[str]:
        """The dry run's lines."""
        p, r = self.preset, self.row
        secs = (f", {r.seconds_per_cell_p50:g} s/cell p50, {r.seconds_per_cell_p90:g} s p90"
                if r.seconds_per_cell_p50 is not None and r.seconds_per_cell_p90 is not None
                else "")
        cal = "calibrated" if p.calibrated else "NOT calibrated (dry run and --tune-jobs only)"
        out = [f"  preset {p.name} v{p.version} ({p.date}, {cal}; report {p.report or 'none'})",
               f"    row {r.bound_text()} ({r.status}): jobs {r.jobs}, start stagger "
               f"{r.start_stagger_s:g} s, request timeout {r.request_timeout_s} s{secs}",
               f"    plan: --jobs {self.jobs}, --start-stagger {self.start_stagger_s:g}, "
               f"agent.params.timeout_s {self.request_timeout_s}"]
        out += [f"    {n}" for n in self.notes]
        return out


def _text(v: float | None) -> str | None:
    """A number as canonical JSON keeps it (no floats): its shortest text."""
    return None if v is None else f"{v:g}"


def memory_holds(preset: Preset | None, size_gb: float | None,
                 kv_gb: float | None) -> tuple[int | None, str]:
    """How many traces at once the model's memory holds on this host (weights plus one KV
    cache a trace, in the preset's share of the memory; the whole memory without a preset),
    and how that was reckoned. None when the size or the KV cache is unknown."""
    from agentprov_core.backend.hostlimits import physical_memory_gb

    mem = physical_memory_gb()
    if mem is None or size_gb is None or kv_gb is None:
        return None, "the model's memory was not checked (its size or KV cache per trace " \
                     "is unknown: --model-size-gb, --kv-gb-per-trace)"
    share = preset.memory_fraction if preset is not None else 1.0
    room = mem * share
    n = math.floor((room - size_gb) / kv_gb) if room > size_gb else 0
    return max(0, n), (f"{mem:.1f} GB x {share:g} = {room:.1f} GB holds the weights "
                       f"({size_gb:g} GB) and {max(0, n)} trace(s) of {kv_gb:g} GB")


def plan(preset: Preset, facts: dict[str, Any], options: RunOptions,
         given: Set[str], source: str = "") -> PresetPlan:
    """The preset's plan for a model of ``facts`` (:mod:`agentprov_core.live.local.facts`)
    and the run's options: ``jobs`` and ``start_stagger`` unless given, and the request
    timeout (``agent.params.timeout_s``; the caller applies the plan to the run). A model
    whose memory cannot hold one trace is refused (exit 5), except in a sweep, which skips
    the arms it cannot hold (:mod:`agentprov_core.run.tunejobs`)."""
    from agentprov_core.backend.hostlimits import max_jobs

    def value(name: str) -> Any:
        f = facts.get(name)
        return getattr(f, "value", None)

    active = value("active_params_b")
    row = preset.row_for(active)
    notes = [f"row chosen by active_params_b={active:g}" if active is not None
             else "active parameters unknown: the preset's last row"]
    holds, how = memory_holds(preset, value("size_gb"), value("kv_gb_per_trace"))
    notes.append(how)
    jobs = row.jobs
    if holds is not None and holds < 1 and not options.tune_jobs:
        raise AgentprovError("run.unsupported.preset_memory", preset=preset.name,
                             why=f"the model's memory cannot hold one trace: {how}",
                             source=source)
    if holds is not None and 1 <= holds < jobs:
        notes.append(f"jobs reduced from {jobs} to {holds}: the memory holds {holds} trace(s)")
        jobs = holds
    if jobs > max_jobs():
        notes.append(f"jobs reduced from {jobs} to this host's maximum of {max_jobs()}")
        jobs = max_jobs()
    stagger = row.start_stagger_s
    if "jobs" in given:
        notes.append(f"--jobs {options.jobs} given: it wins over the preset's {jobs}")
        jobs = options.jobs
    if "start_stagger" in given:
        notes.append(f"--start-stagger {options.start_stagger:g} given: it wins over "
                     f"the preset's {stagger:g}")
        stagger = options.start_stagger
    return PresetPlan(preset, row, int(jobs), float(stagger), row.request_timeout_s, holds,
                      tuple(notes))
