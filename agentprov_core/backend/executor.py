"""Executors: where the cells of a campaign run.

The campaign (:mod:`agentprov_core.run.campaign`) hands each attempt to an executor as the
worker's ``run-cell`` request (``agentprov-worker/0.1``, docs/protocol.md) and gets back
what the worker returned; the worker has staged the session (capture log, native log) in
the request's ``staging`` directory, and T0 ingests it with the rules it always applies
(chain check, redaction scan, hostile-input checks). An executor only runs and returns:
evidence, caps, the canary, stops and resume stay with T0.

Executors come through the ``agentprov_executors`` hook as :class:`ExecutorMeta`; the core
registers ``local`` (:class:`LocalExecutor`, one worker subprocess on this machine, the
default). ``agentprov run --executor NAME`` chooses one. An executor that runs cells on
other hosts (``ray``, the ``agentprov-ray`` distribution) checks them before the working
corpus is opened (:attr:`ExecutorMeta.check`, with a :class:`Target`) and never carries the
endpoint's key: :attr:`Launch.key_variable` names the variable each host reads from its
own environment.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

if TYPE_CHECKING:  # pragma: no cover
    from concurrent.futures import Future

    from agentprov_core.backend.containment import Allowed, Recorded

#: the executor a run uses unless ``--executor`` names another
DEFAULT = "local"
#: the error an executor's future raises when the host of its cell was lost (see
#: :class:`Executor`): the unit is attempted again in the same invocation
NODE_LOST = "cli.environment.node_lost"
#: executors a distribution of agentprov's offers, by name: ``--executor NAME`` without it
#: installed is refused naming what to install
DISTRIBUTIONS = {"ray": "agentprov-ray"}


class ExecutorMeta(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An executor as a plugin registers it: its ``name`` (``--executor NAME``), a
    one-line ``summary``, and ``start``, a ``module:function`` string (imported only when a
    run uses it) called as ``start(launch) -> Executor`` with a :class:`Launch`."""

    name: str
    start: str
    summary: str = ""
    #: ``module:function`` called as ``check(target)`` with a :class:`Target` before the
    #: working corpus is opened: it raises ``AgentprovError`` (nothing written) when the
    #: cells cannot run where it would run them (a cluster unreachable, every host refused)
    check: str = ""


@dataclass(frozen=True)
class Target:
    """What an executor's ``check`` is given: the plan's environment, the resolved
    containment, the name of the endpoint key's variable (never its value), the run's
    options (``--jobs``, an executor's own such as ``--ray-address``) and the egress the
    cells need."""

    environment_id: str
    containment: Recorded | None = None
    key_variable: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the ``host:port`` pairs the cells reach through T0's egress proxy (empty when every
    #: endpoint is on loopback, or scripted): an executor whose hosts cannot reach that
    #: proxy refuses them
    egress: tuple[str, ...] = ()


# a dataclass, not a msgspec struct: its repr must leave out the key (field(repr=False))
@dataclass(frozen=True)
class Launch:
    """What starting the campaign's worker needs, decided by T0 (:mod:`agentprov_core.run.live`):
    the built environment, the staging root the sessions are staged under, the variables the
    worker gets beyond its scrubbed environment (the endpoint's key among them: never
    written, never shown), the resolved containment and where the contained worker may
    connect. An executor that runs a cell elsewhere must give it the same."""

    environment_id: str
    env_dir: Path
    staging_root: Path
    extra_env: dict[str, str] = field(default_factory=dict, repr=False)
    containment: Recorded | None = None
    allowed: Allowed | None = None
    #: the variable of ``extra_env`` that holds the endpoint's key: an executor that runs
    #: a cell on another host leaves its value behind and has that host read its own
    key_variable: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)


class Executor(Protocol):
    """A started executor, for one invocation. Its futures resolve to the worker's result
    of a ``run-cell`` request (a dict: hostile input, which T0 checks), or raise
    :class:`agentprov_core.errors.AgentprovError` when the cell could not be run to an
    answer (T0 then seals its capture ``aborted``). An executor that runs cells on several
    hosts raises ``cli.environment.node_lost`` (:data:`NODE_LOST`) when the host of a cell
    was lost with it in flight and the cell can no longer run there (ended, never to be
    carried back): T0 then attempts its unit again in the same invocation, on what the
    executor has left, within ``--max-attempts`` (:mod:`agentprov_core.run.campaign`)."""

    def submit(self, request: dict[str, Any]) -> Future:
        """Start the cell of this ``run-cell`` request; raise ``AgentprovError`` if it
        cannot be started (nothing then ran in its staging directory)."""

    def wait_any(self, futures: Collection[Future], timeout: float) -> set[Future]:
        """Those of ``futures`` that have finished, waiting up to ``timeout`` seconds for
        the first."""

    def result(self, future: Future, timeout: float | None = None) -> dict[str, Any]:
        """The worker's result of a submitted cell."""

    def failure(self) -> str | None:
        """Why it can run no further cell (``the worker of ENV exited (code N)``), or
        None while it can."""

    def capacity(self) -> int:
        """Optional: the cells it can hold in flight now (fewer than ``--jobs`` once a
        host is lost); T0 launches no more than that."""

    def cancel(self) -> None:
        """End every cell in flight at once (an interrupt; a failure of T0). T0 then takes
        each future that is done with :meth:`result`: a cell that ended before it, whole,
        or what an ended cell had staged (the session landed in its staging)."""

    def close(self) -> None:
        """Stop, after the last cell; release what it holds."""

    def record(self) -> dict[str, Any] | None:
        """Optional: what the manifest's producer block records of where the cells ran
        (for each host: its address, environment id, containment and cells run), or None."""


def executors() -> dict[str, ExecutorMeta]:
    """Every registered executor by name, in registration order (the first one wins)."""
    from agentprov_core.plugins import manager

    found: dict[str, ExecutorMeta] = {}
    for impl in manager().hook.agentprov_executors.get_hookimpls():
        for meta in impl.function() or ():
            found.setdefault(meta.name, meta)
    return found


def check(name: str, target: Target) -> None:
    """The executor ``name``'s check before anything is written (:attr:`ExecutorMeta.check`)."""
    ref = executors()[name].check
    if ref:
        module, _, attr = ref.partition(":")
        getattr(importlib.import_module(module), attr)(target)


def start(name: str, launch: Launch) -> Executor:
    """Start the executor named ``name`` (an installed one: ``--executor`` is checked at
    usage)."""
    module, _, attr = executors()[name].start.partition(":")
    return getattr(importlib.import_module(module), attr)(launch)


class LocalExecutor:
    """The default: one worker subprocess on this machine
    (:class:`agentprov_core.backend.workerclient.Worker`), cells in flight together."""

    def __init__(self, launch: Launch) -> None:
        from agentprov_core.backend.workerclient import Worker

        self.environment_id = launch.environment_id
        self.worker = Worker(launch.environment_id, launch.env_dir, launch.staging_root,
                             network=True, extra_env=launch.extra_env,
                             containment=launch.containment, allowed=launch.allowed)

    def submit(self, request: dict[str, Any]) -> Future:
        return self.worker.submit("run-cell", **request)

    def wait_any(self, futures: Collection[Future], timeout: float) -> set[Future]:
        from concurrent.futures import FIRST_COMPLETED, wait  # a listing loads no pool

        return wait(list(futures), timeout=timeout, return_when=FIRST_COMPLETED)[0]

    def result(self, future: Future, timeout: float | None = None) -> dict[str, Any]:
        return self.worker.result(future, timeout=timeout)

    def failure(self) -> str | None:
        code = self.worker.proc.poll()
        if code is None:
            return None
        return f"the worker of {self.environment_id} exited (code {code})"

    def cancel(self) -> None:
        self.worker.kill()

    def close(self) -> None:
        self.worker.close()

    def record(self) -> dict[str, Any] | None:
        return None
