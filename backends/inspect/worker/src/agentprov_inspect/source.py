"""The worker side of an Inspect task source: its catalogue and its plan check.

A worker package subclasses :class:`InspectWorkerSource`, names its dataset and implements
:meth:`InspectWorkerSource.tasks` (the catalogue's ``tasks``, read from the installed code
with :mod:`agentprov_inspect.taskcode`) and :meth:`InspectWorkerSource.sample_ids` (a
split's sample ids in dataset order, read from the dataset in the environment). The plan
check refuses, by id, every sample a cell names that the chosen task and split lack.

A cell is one Inspect ``eval()`` of its samples (:mod:`agentprov_inspect.cells`); the
worker package says how its task is built (:meth:`InspectWorkerSource.build_task`) and which
dataset files it reads (:meth:`InspectWorkerSource.stage_dataset`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentprov_backend.catalogue import FORMAT
from agentprov_backend.source import WorkerSource

from agentprov_inspect.taskcode import Param


def parameter(p: Param, *, choices: list[str] | None = None, minimum: int | None = None,
              maximum: int | None = None) -> dict[str, Any]:
    """A catalogue ``TaskParameter`` from a parameter read from the code; ``choices``,
    ``minimum`` and ``maximum`` state the source's policy where it narrows the code's."""
    if p.type not in ("str", "bool", "int"):
        raise ValueError(f"parameter {p.name!r} has no offered type (str, bool, int)")
    default = p.default if p.has_default else None
    if isinstance(default, float):
        raise ValueError(f"parameter {p.name!r} has a float default")
    return {"name": p.name, "type": p.type, "choices": choices if choices is not None else p.choices,
            "minimum": minimum, "maximum": maximum, "default": default}


def fixed_value(value: Any) -> str | int:
    """A fixed setting as the catalogue reports it: floats as their decimal text
    (catalogues and headers carry no floats)."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return str(value)
    return value


class InspectWorkerSource(WorkerSource):
    """An Inspect task source: subclass it, set ``name``, ``backend``, ``dataset`` and
    ``packages``, and implement :meth:`tasks` and :meth:`sample_ids`."""

    #: the backend's name, as the catalogue records it
    backend: str = ""
    #: the distributions whose versions the catalogue's provenance records
    packages: tuple[str, ...] = ()
    #: Inspect and the SDK, imported once in the campaign's forkserver (about 1.6 s a
    #: cell otherwise); the task's own package is not: inspect_evals reads its cache
    #: directory when imported, and each cell points it at its own copy first
    preload = ("inspect_ai", "inspect_ai.model", "openai")

    def tasks(self) -> list[dict[str, Any]]:
        """The catalogue's tasks (``agentprov_core.catalogue.InspectTask``), with each
        split's sample count from the dataset in the environment."""
        raise NotImplementedError

    def sample_ids(self, task: str, split: str) -> list[str]:
        """The sample ids of ``task``'s ``split``, in dataset order."""
        raise NotImplementedError

    def provenance_note(self) -> str:
        return "read from the installed task code and the dataset in the environment"

    def catalogue(self) -> dict[str, Any]:
        from agentprov_backend.catalogue import package_versions

        return {
            "format": FORMAT, "source": self.name, "backend": self.backend,
            "provenance": {"kind": "worker", "generator": f"{type(self).__module__}",
                           "packages": package_versions(self.packages),
                           "note": self.provenance_note()},
            "benchmark_versions": [], "default_benchmark_version": None,
            "suites": [], "attacks": [], "defences": [], "tasks": self.tasks(),
        }

    def check_plan(self, request: dict[str, Any], catalogue: dict[str, Any]) -> list[str]:
        """Every sample a cell names must exist in the plan's task and split: an id by id,
        an index within the split's size.

        :param request: the ``plan`` request; ``inspect`` holds the plan's ``task`` and
            ``split``, ``cells`` the cells with their ``samples``.
        :param catalogue: this source's catalogue.
        """
        insp = request.get("inspect") or {}
        tasks = {t["name"]: t for t in catalogue.get("tasks", [])}
        task = tasks.get(insp.get("task"))
        if task is None:
            return [f"no task {insp.get('task')!r} (tasks: {', '.join(tasks)})"]
        split = insp.get("split") or task["default_split"]
        if split not in {s["name"] for s in task["splits"]}:
            return [f"{task['name']} has no split {split!r}"]
        ids = self.sample_ids(task["name"], split)
        known = set(ids)
        problems = []
        for cell in request.get("cells", []):
            for sample in cell.get("samples") or []:
                if "id" in sample and str(sample["id"]) not in known:
                    problems.append(f"{cell.get('cell_key')}: no sample {sample['id']!r} in "
                                    f"{task['name']} split {split}")
                elif "index" in sample and not 0 <= int(sample["index"]) < len(ids):
                    problems.append(f"{cell.get('cell_key')}: sample index {sample['index']} "
                                    f"is outside {task['name']} split {split} ({len(ids)})")
        return problems

    def stage_dataset(self, inspect: dict[str, Any], cache: Path) -> None:
        """Copy the dataset files the plan's task and split read into ``cache`` (the
        task's cache directory, inside the cell's staging directory), laid out as below
        the environment's copy.

        :param inspect: the request's ``inspect`` (``task``, ``split``, ``params``, …).
        :param cache: the directory to copy into.
        """
        raise NotImplementedError

    def build_task(self, inspect: dict[str, Any], judges: dict[str, Any]) -> Any:
        """The Inspect ``Task`` of the plan: its task function called with the plan's
        parameters and the judges.

        :param inspect: the request's ``inspect``.
        :param judges: an Inspect ``Model`` per judge role, over the recording transport.
        """
        raise NotImplementedError

    def run_cell(self, request: dict[str, Any]) -> dict[str, Any]:
        """One ``inspect_ai.eval()`` of the cell's samples (:func:`agentprov_inspect.cells.run_cell`).

        :param request: the ``run-cell`` request; besides the common fields, ``inspect``
            (the plan's ``task``, ``split``, ``epochs``, ``limits``, ``judges``, ``params``,
            ``max_connections``) and ``cell.samples`` (``{"id": …}`` or ``{"index": …}``).
        """
        from agentprov_inspect import cells

        return cells.run_cell(self, request)
