"""The compute presets (D-822, D-823): ``registry/presets/<name>.toml``, read over by
``$AGENTPROV_HOME/registry/presets/<name>.toml`` (a maintainer's own, or a test's).

A preset says how a local model server on a given kind of host runs best: for models up to
a bound of active parameters (a compute row), how many cells at once (``jobs``), the seconds
between cell starts (``start_stagger_s``), the request timeout sent with every model call
(``request_timeout_s``) and, when it was measured, the seconds a cell took at p50 and p90.
Each row says whether it was ``measured`` by the sweep report the preset names or is
``provisional`` (set by hand, capped at a measured value). Only a preset marked
``calibrated = true`` runs live (:mod:`agentprov_core.run.presetrun`); it must name the
committed report it was built from and hold at least one measured row.

The schema is the frozen structs below; a file that does not match is exit 2 naming the
file, the line, the field and the fix (:mod:`agentprov_core.registries.fields`).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from agentprov_core.base import paths, tomlfile
from agentprov_core.errors import AgentprovError
from agentprov_core.registries import fields

PRESET_FORMAT = "agentprov-preset/0.1"
STATUSES = ("measured", "provisional")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class HostRequirements(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The host a preset was calibrated for: ``sys.platform`` (``darwin``, ``linux``),
    ``platform.machine()`` (``arm64``, ``x86_64``), and the least memory and CPUs."""

    platform: str
    machine: str
    min_memory_gb: float = 0.0
    min_cpus: int = 1
    description: str = ""


class ModelDefaults(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The model facts a preset assumes when the flag, the setting and the folder say
    nothing (:func:`agentprov_core.live.local.facts.resolve`)."""

    size_gb: float | None = None
    active_params_b: float | None = None
    context_tokens: int | None = None
    kv_gb_per_trace: float | None = None


class ComputeRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Models up to ``max_active_params_b`` (None: any size) run with these."""

    max_active_params_b: float | None = None
    jobs: int
    start_stagger_s: float
    request_timeout_s: int
    seconds_per_cell_p50: float | None = None
    seconds_per_cell_p90: float | None = None
    status: str

    def bound_text(self) -> str:
        b = self.max_active_params_b
        return "any size" if b is None else f"<= {b:g} B active"


class Preset(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str
    name: str
    version: int
    date: str
    calibrated: bool
    report: str | None = None
    description: str = ""
    #: the share of the host's memory the model server may use (weights and KV caches)
    memory_fraction: float = 0.75
    host: HostRequirements
    model_defaults: ModelDefaults = msgspec.field(default_factory=ModelDefaults)
    compute: list[ComputeRow]

    def row_for(self, active_params_b: float | None) -> ComputeRow:
        """The compute row of a model of ``active_params_b`` (the first whose bound holds
        it), else the last row (a model of unknown size, or above every bound)."""
        if active_params_b is not None:
            for row in self.compute:
                if row.max_active_params_b is None or active_params_b <= row.max_active_params_b:
                    return row
        return self.compute[-1]


def presets_dir() -> Path:
    return paths.registry_dir() / "presets"


def overlay_dir() -> Path:
    return paths.overlay_dir() / "presets"


def _files() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for d in (presets_dir(), overlay_dir()):  # the overlay's file of a name wins
        if d.is_dir():
            for p in sorted(d.glob("*.toml")):
                out[p.stem] = p
    return out


def names() -> list[str]:
    return sorted(_files())


def read_file(path: Path) -> Preset:
    """One preset file, checked (exit 2 naming the file, line, field and fix)."""
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != PRESET_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{PRESET_FORMAT}"')
    known = fields.keys_of(Preset)
    fields.check_top(path, text, data, known, "a preset")
    for table, kind in (("host", HostRequirements), ("model_defaults", ModelDefaults)):
        if table in data:
            fields.check_keys(path, text, table, data[table], fields.keys_of(kind),
                              f"a preset's [{table}]")
    rows = data.get("compute")
    if not isinstance(rows, list) or not rows:
        raise fields.refuse(path, text, "compute", None, "is missing or empty",
                            "add at least one [[compute]] row")
    for row in rows:
        fields.check_keys(path, text, "compute", row, fields.keys_of(ComputeRow),
                          "a compute row")
    try:
        preset = msgspec.convert(data, type=Preset)
    except msgspec.ValidationError as exc:
        raise AgentprovError("cli.usage.registry_field", location=str(path), field="preset",
                             what=f"is invalid ({exc})",
                             fix="give each field the type docs/local-models.md describes"
                             ) from None
    problem = _problem(preset, path)
    if problem:
        raise AgentprovError("cli.usage.registry_field", location=str(path),
                             field=problem[0], what=problem[1], fix=problem[2])
    return preset


def _problem(p: Preset, path: Path) -> tuple[str, str, str] | None:
    if p.name != path.stem or not _NAME.match(p.name):
        return ("name", f"is {p.name!r}", f"name the preset as its file: {path.stem!r}")
    if not _DATE.match(p.date):
        return ("date", f"is {p.date!r}", "give the date as YYYY-MM-DD")
    if not 0 < p.memory_fraction <= 1:
        return ("memory_fraction", f"is {p.memory_fraction}", "a share above 0, at most 1")
    bounds = [r.max_active_params_b for r in p.compute]
    if any(b is None for b in bounds[:-1]):
        return ("compute", "has a row without a bound before the last",
                "only the last row may omit max_active_params_b")
    given = [b for b in bounds if b is not None]
    if given != sorted(given) or len(set(given)) != len(given):
        return ("compute", "bounds are not increasing", "order the rows by their bound")
    for i, r in enumerate(p.compute):
        where = f"compute[{i}]"
        if r.status not in STATUSES:
            return (f"{where}.status", f"is {r.status!r}", "use measured or provisional")
        if r.jobs < 1 or r.request_timeout_s < 1 or r.start_stagger_s < 0:
            return (where, "has jobs or request_timeout_s below 1, or a negative stagger",
                    "give jobs >= 1, request_timeout_s >= 1, start_stagger_s >= 0")
        if r.status == "measured" and (r.seconds_per_cell_p50 is None
                                       or r.seconds_per_cell_p90 is None):
            return (where, "is measured without seconds_per_cell_p50 and _p90",
                    "give the report's seconds per cell, or mark it provisional")
    if p.calibrated:
        if not p.report:
            return ("report", "is missing for a calibrated preset",
                    "name the committed sweep report it was built from")
        if not any(r.status == "measured" for r in p.compute):
            return ("compute", "has no measured row in a calibrated preset",
                    "measure a row with --tune-jobs, or set calibrated = false")
    return None


def load(name: str) -> Preset:
    """The preset ``name``; an unknown name is exit 2 listing the presets."""
    files = _files()
    if name not in files:
        raise AgentprovError("cli.usage.unknown_preset", name=name,
                             known=", ".join(sorted(files)) or "none")
    return read_file(files[name])
