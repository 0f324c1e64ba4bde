"""Cells, their expansion from a plan document, and the plan and configuration digests.

Expansion order (R-7.2): per suite, the benign cells, then per attack, per user task, per
injection task; a DoS attack takes one cell per user task, with the suite's first
injection task (R-7.3).

The plan digest hashes the expanded cells (with the defence), the agent configuration and
the backend configuration; the configuration digest hashes the agent configuration and the
backend's identity, not the cells or the defence (decision 9). Neither includes the corpus
or the campaign: the same plan is the same plan wherever it is stored.

Unit identity (docs/decisions.md, "Unit identity"): the content digest hashes what every cell
of a plan runs apart from which cells it selects (the configuration digest, the benchmark
version, the defence and the backend configuration), and a unit's digest adds its attack's
parameters: the display name, for an attack that addresses the model by name. A ledger entry
answers only for the unit of its own unit digest, so a plan that selects more cells or
repeats shares its units with the plan before it, and one that runs a shared cell
differently never does.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import msgspec

from agentprov_core.base.digests import digest
from agentprov_core.catalogue import Catalogue
from agentprov_core.errors import AgentprovError
from agentprov_core.plan import taskspec
from agentprov_core.plan.plandoc import PlanDoc

DIGEST_FORMAT = "agentprov-plan-digest/0.1"
CONFIG_FORMAT = "agentprov-config-digest/0.1"
CONTENT_FORMAT = "agentprov-content-digest/0.1"
UNIT_FORMAT = "agentprov-unit-digest/0.1"

CellKind = Literal["user_task", "attacked", "dos", "samples"]


class Cell(msgspec.Struct, frozen=True, kw_only=True):
    kind: CellKind
    suite: str | None = None
    user_task_id: str | None = None
    attack: str | None = None
    injection_task_id: str | None = None
    samples: tuple[Any, ...] | None = None
    key: str

    @staticmethod
    def suite_cell(kind: CellKind, suite: str, user: str, attack: str | None,
                   inj: str | None) -> Cell:
        key = f"{suite}/{user}/{attack or 'none'}/{inj or 'none'}"
        return Cell(kind=kind, suite=suite, user_task_id=user, attack=attack,
                    injection_task_id=inj, key=key)

    def row(self) -> dict[str, Any]:
        """The dry plan's row for this cell (names only, R-8.18)."""
        if self.kind == "samples":
            return {"cell_key": self.key, "kind": self.kind, "samples": list(self.samples or ())}
        return {"attack": self.attack, "cell_key": self.key,
                "injection_task_id": self.injection_task_id, "kind": self.kind,
                "suite": self.suite, "user_task_id": self.user_task_id}


def expand_suites(doc: PlanDoc, cat: Catalogue, backend: str) -> list[Cell]:
    version = doc.benchmark_version or cat.default_benchmark_version or ""
    if cat.benchmark_versions and version not in cat.benchmark_versions:
        raise AgentprovError("cli.usage.unknown_version", name=version, backend=backend,
                             known=", ".join(cat.benchmark_versions))
    available = cat.suites_of(version)
    names = [s.name for s in available]
    wanted = doc.suites if doc.suites else names
    for name in wanted:
        if name not in names:
            raise AgentprovError("cli.usage.unknown_suite", name=name, backend=backend,
                                 version=version, known=", ".join(names))
    attacks = []
    for name in doc.attacks:
        a = cat.attack(name)
        if a is None:
            raise AgentprovError("cli.usage.unknown_attack", name=name, backend=backend,
                                 known=", ".join(x.name for x in cat.attacks))
        attacks.append(a)
    if doc.benign == "only" and attacks:
        raise AgentprovError("cli.usage.exclusive", first="--benign only", second="--attack")
    cells: list[Cell] = []
    for name in wanted:
        suite = cat.suite(version, name)
        assert suite is not None
        users = taskspec.select(doc.user_tasks, suite.user_tasks, option="--user-tasks",
                                where=f"{name} ({version}):user tasks")
        injs: list[str] | None = None
        if doc.benign != "exclude":
            cells += [Cell.suite_cell("user_task", name, u, None, None) for u in users]
        if doc.benign == "only":
            continue
        for a in attacks:
            if a.dos:
                first = taskspec.sort_tasks(suite.injection_tasks)[:1]
                cells += [Cell.suite_cell("dos", name, u, a.name, first[0] if first else None)
                          for u in users]
                continue
            if injs is None:
                injs = taskspec.select(doc.injection_tasks, suite.injection_tasks,
                                       option="--injection-tasks",
                                       where=f"{name} ({version}):injection tasks")
            cells += [Cell.suite_cell("attacked", name, u, a.name, i) for u in users for i in injs]
    if not cells:
        why = ("--benign exclude and no --attack" if not attacks
               else "the selection is empty")
        raise AgentprovError("cli.usage.no_cells", why=why)
    return cells


class Plan(msgspec.Struct, kw_only=True):
    """An expanded, digested plan."""

    source: str
    backend: str
    environment_id: str
    benchmark_version: str | None
    corpus_id: str | None
    cells: list[Cell]
    repeats: int
    defence: str
    max_attempts: int
    settled: int
    plan_sha256: str
    config_digest: str
    attempts_used: int = 0  # attempts already made on units not yet settled (all invocations)
    settled_cells: dict[str, int] = {}
    #: what the content digest hashed (the manifest keeps it, to name what differs)
    content: dict[str, Any] = {}
    content_digest: str = ""
    #: the attacks of this plan that address the model by name (their units hold the
    #: display name), and the display name
    named_attacks: list[str] = []
    display_name: str | None = None

    def unit_digest(self, cell: Cell) -> str:
        """The digest that, with the unit key, identifies a unit of ``cell``."""
        named = cell.attack is not None and cell.attack in self.named_attacks
        return unit_digest(self.content_digest, self.display_name if named else None, named)

    @property
    def units(self) -> int:
        return len(self.cells) * self.repeats

    @property
    def attempts_due(self) -> int:
        return max(0, (self.units - self.settled) * self.max_attempts - self.attempts_used)

    def dry_plan(self) -> dict[str, Any]:
        """The ``agentprov-run-dry-plan/0.1`` document (R-8.17)."""
        return {
            "attempts_due": self.attempts_due, "backend": self.backend,
            "benchmark_version": self.benchmark_version,
            "cells": [dict(c.row(), settled=self.settled_cells.get(c.key, 0)) for c in self.cells],
            "config_digest": f"sha256:{self.config_digest}", "corpus_id": self.corpus_id,
            "format": "agentprov-run-dry-plan/0.1", "max_attempts": self.max_attempts,
            "plan_sha256": self.plan_sha256, "repeats": self.repeats,
            "settled": self.settled, "units": self.units,
        }


def plan_digest(source: str, backend: str, cells: list[Cell], doc: PlanDoc,
                agent: dict[str, Any], backend_config: dict[str, Any]) -> str:
    return digest({
        "format": DIGEST_FORMAT, "source": source, "backend": backend,
        "cells": [c.key for c in cells], "repeats": doc.repeats, "defence": doc.defence,
        "agent": agent, "backend_config": backend_config,
    })


def config_digest(agent: dict[str, Any], identity: dict[str, Any]) -> str:
    return digest({"format": CONFIG_FORMAT, "agent": agent, "backend_identity": identity})


def plan_content(source: str, backend: str, benchmark_version: str | None, defence: str,
                 backend_config: dict[str, Any], config: str) -> dict[str, Any]:
    """What every cell of a plan runs, apart from which cells and repeats it selects."""
    return {"source": source, "backend": backend, "benchmark_version": benchmark_version,
            "defence": defence, "backend_config": backend_config, "config_digest": config}


def content_digest(content: dict[str, Any]) -> str:
    return digest({"format": CONTENT_FORMAT, **content})


@functools.lru_cache(maxsize=256)
def unit_digest(content: str, display_name: str | None, named: bool) -> str:
    """A unit's digest: its plan's content digest and its attack's parameters (the display
    name, for an attack that addresses the model by name)."""
    params = {"model_display_name": display_name} if named else {}
    return digest({"format": UNIT_FORMAT, "content_digest": content, "attack_params": params})


def content_differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """What differs between two recorded contents, in words (for a refusal)."""
    names = {"source": "source", "backend": "backend", "benchmark_version": "benchmark version",
             "defence": "defence", "config_digest": "configuration digest"}
    out = [f"{names[k]} {have.get(k)} (this run: {want.get(k)})" for k in names
           if have.get(k) != want.get(k)]
    out += _differences("backend configuration",
                        {k: v for k, v in (have.get("backend_config") or {}).items()
                         if k != "benchmark_version"},
                        {k: v for k, v in (want.get("backend_config") or {}).items()
                         if k != "benchmark_version"})
    return out


def _differences(where: str, have: Any, want: Any) -> list[str]:
    if isinstance(have, dict) and isinstance(want, dict):
        return [d for k in sorted(set(have) | set(want))
                for d in _differences(f"{where} {k}", have.get(k), want.get(k))]
    return [] if have == want else [f"{where} {have!r} (this run: {want!r})"]
