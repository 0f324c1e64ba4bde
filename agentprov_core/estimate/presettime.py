"""Time for a local model (D-826): a calibrated preset's measured seconds per cell.

When the preset (``--preset``/``--m5ultra``, else the setting ``compute.preset``, else
``m5ultra``) is calibrated for this host and the endpoint is a local server, the estimate
takes the run's time from the preset's rows that hold seconds per cell, chosen by the
model's active parameters (the flag, the setting
``local_models.<endpoint>.<model id>.active_params_b`` or the model's folder), else the last
such row. When that last row has a bound, a model above it, or of unknown size, keeps the
priors' time. Calls and tokens still come from the priors or the user's corpora. The run's
time is the due units at the row's seconds per cell, divided by the row's jobs (or
``--jobs`` when given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from agentprov_core.registries.presets import ComputeRow, Preset

if TYPE_CHECKING:
    from agentprov_core.run.options import RunOptions
    from agentprov_core.run.prepare import Prepared


@dataclass(frozen=True)
class PresetTime:
    preset: Preset
    row: ComputeRow
    active_params_b: float | None

    @property
    def label(self) -> str:
        return f"preset {self.preset.name} v{self.preset.version}, {self.row.bound_text()}"

    def warning(self, jobs: int) -> str:
        return (f"the time is the {self.label} row's ({self.row.seconds_per_cell_p50:g} s a "
                f"cell at p50, {self.row.seconds_per_cell_p90:g} s at p90, measured at "
                f"{self.row.jobs} jobs; D-826), at --jobs {jobs}; calls and tokens come from "
                "the cell statistics")


def preset_name(options: RunOptions) -> str:
    from agentprov_core import settings
    from agentprov_core.run.presetrun import chosen_name

    return chosen_name(options) or settings.get(settings.Key(("compute", "preset"))) or "m5ultra"


def choose(prepared: Prepared) -> tuple[PresetTime | None, str | None]:
    """The preset's row for this plan's time, or None with why the priors' time is kept
    (None, None: not a local endpoint, or the preset is not calibrated for this host)."""
    from agentprov_core.live.local import facts as factsmod
    from agentprov_core.registries import presets
    from agentprov_core.run.presetrun import host_problem

    ep = prepared.endpoint
    if ep is None or not ep.local:
        return None, None
    o = prepared.request.options
    preset = presets.load(preset_name(o))
    if not preset.calibrated or host_problem(preset) is not None:
        return None, None
    rows = [r for r in preset.compute if r.seconds_per_cell_p50 is not None
            and r.seconds_per_cell_p90 is not None]
    if not rows:
        return None, None
    model_id = o.model_id
    fact = factsmod.resolve(o.fact_flags(), ep.name, model_id)["active_params_b"]
    active = fact.value
    row = msgspec.structs.replace(preset, compute=rows).row_for(active)
    bound = row.max_active_params_b
    if bound is not None and (active is None or active > bound):  # above the last row
        size = f"{active:g} B active" if active is not None else "of unknown size"
        return None, (f"the preset {preset.name}'s time rows end at {row.bound_text()} and "
                      f"this model is {size}: the priors' time is kept (D-826)")
    return PresetTime(preset, row, active), None

