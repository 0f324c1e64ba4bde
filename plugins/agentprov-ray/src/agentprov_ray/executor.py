"""The ``ray`` executor: T0 (the ``agentprov run`` process, Ray's driver) runs a campaign's
cells on the nodes of a Ray cluster and stays the one decider.

:func:`check`, before the working corpus is opened, connects to the cluster
(``--ray-address``, else ``RAY_ADDRESS``; exit 3 when it cannot), places one actor on each
alive node (:class:`agentprov_ray.node.Node`, ``max_restarts=0``) and compares each node's
facts with T0's (:func:`agentprov_core.api.node_differences`): a node that differs is
refused naming its address and the difference, and the run stops there (exit 3) unless
``--skip-refused-nodes``. ``--jobs`` is the cells in flight across the nodes, each node at
most its own host maximum.

:class:`RayExecutor` then dispatches each ``run-cell`` request T0 has already reserved its
caps for to the node with the most free slots, as one actor call that Ray never retries
(``max_task_retries=0``: a silent retry could spend twice). The node returns the staged
session as bytes (size-bounded); it is written into T0's own staging directory
(:func:`agentprov_core.api.land_session`) and T0 ingests it exactly as a local worker's
staging. A node lost with cells in flight fails those cells with ``NODE_LOST`` naming the
node (:meth:`RayExecutor._lost`); T0 ledgers them and attempts their units again on the
other nodes in the same invocation, within ``--max-attempts``.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Collection
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.api import AgentprovError, Launch, Target, land_session, node_differences

#: the actor's threads: the host maximum's ceiling (64) and its control calls
CONCURRENCY = 68
#: how long a node may take to answer its facts, or to start its worker
ANSWER_S = 120
#: how long an interrupt waits for the cells in flight to be carried back, in all
CANCEL_S = 30
#: the result's field of what was refused of a session's staging (read by T0's ingest)
CARRIED_REFUSED = "staging_refused"
#: the endpoint's traffic through T0's egress proxy: a node cannot reach it
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")


@dataclass
class NodeRef:
    """A node T0 runs cells on: its actor, its facts, its slots and what it ran."""

    actor: Any
    facts: dict[str, Any]
    slots: int
    in_flight: int = 0
    cells: int = 0
    lost: str | None = None

    @property
    def address(self) -> str:
        return f"{self.facts.get('address')} ({str(self.facts.get('node_id'))[:8]})"


@dataclass
class Cluster:
    """The connected cluster: the accepted nodes, the refused ones and their reasons."""

    address: str
    nodes: list[NodeRef] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    connected_here: bool = False


#: the cluster :func:`check` connected to, which :class:`RayExecutor` takes over
_checked: dict[tuple, Cluster] = {}


def _key(target: Target) -> tuple:
    return (target.environment_id, target.key_variable, _address(target.options))


def _address(options: Any) -> str | None:
    return options.get("ray_address") or os.environ.get("RAY_ADDRESS") or None


def check(target: Target) -> None:
    """Connect and check every node before anything is written (see the module); an
    endpoint reached through T0's egress proxy refused first (:func:`egress_refused`)."""
    if target.egress:
        raise egress_refused(", ".join(target.egress))
    _checked[_key(target)] = connect(target)


def egress_refused(targets: str) -> AgentprovError:
    """An API endpoint on a cluster: its cells would reach it through T0's egress proxy,
    whose socket and port are on the driver's host; a node's cell cannot reach them, and
    it may reach the endpoint through nothing else (docs/cluster.md)."""
    return AgentprovError("cli.refused.cluster_egress", executor="ray", targets=targets,
                          supported="a model server on its own node (a loopback endpoint, at "
                                    "the same address on every node) or, on nodes of the "
                                    "driver's host, the scripted endpoint")


def connect(target: Target) -> Cluster:
    import ray

    address = _address(target.options)
    cluster = Cluster(address or "(none)")
    if not ray.is_initialized():
        if address is None:
            raise AgentprovError("cli.environment.cluster", address="(none)",
                                 what="no cluster is named: give --ray-address ADDR or set "
                                      "RAY_ADDRESS")
        if (why := _unreachable(address)) is not None:
            raise AgentprovError("cli.environment.cluster", address=address,
                                 what=f"it cannot be reached ({why})")
        try:
            ray.init(address=address, namespace="agentprov", log_to_driver=False,
                     logging_level="ERROR", configure_logging=True)
        except Exception as exc:  # noqa: BLE001 - whatever Ray raises, the cluster is not there
            raise AgentprovError("cli.environment.cluster", address=address,
                                 what=f"it cannot be reached ({_first_line(exc)})") from None
        cluster.connected_here = True
    try:
        _place(cluster, target)
    except BaseException:
        _release(cluster)
        raise
    # what Ray's import and connection left in T0 lives as long as T0: kept out of the
    # garbage collector's passes, which would otherwise walk it again and again while the
    # cells run (the driver's CPU a cell)
    gc.freeze()
    return cluster


def _unreachable(address: str) -> str | None:
    """Why the head's ``host:port`` refuses a connection within a few seconds (Ray itself
    retries for a minute), or None (also for an address of another form, which Ray reads)."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return None
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _place(cluster: Cluster, target: Target) -> None:
    """One actor on each alive node, its facts compared with T0's; refusals decided."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from agentprov_core.api import node_facts
    from agentprov_ray.node import Node

    actor_cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0,
                           max_concurrency=CONCURRENCY)(Node)
    expected = node_facts(target.environment_id, target.containment, None)
    expected["key"] = f"{target.key_variable} set" if target.key_variable else None
    alive = [n for n in ray.nodes() if n.get("Alive")]
    if not alive:
        raise AgentprovError("cli.environment.cluster", address=cluster.address,
                             what="it has no alive node")
    actors = [actor_cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote() for n in alive]
    refs = [a.facts.remote(target.environment_id, target.containment, target.key_variable)
            for a in actors]
    for n, actor, ref in zip(alive, actors, refs, strict=True):
        try:
            facts = ray.get(ref, timeout=ANSWER_S)
        except Exception as exc:  # noqa: BLE001 - a node that cannot answer is refused
            facts, diffs = {"address": n.get("NodeManagerAddress"), "node_id": n["NodeID"]}, [
                f"it did not answer ({_first_line(exc)})"]
        else:
            diffs = node_differences(expected, facts)
        node = NodeRef(actor, facts, slots=int(facts.get("max_jobs") or 1))
        if diffs:
            cluster.refused.append({"address": node.address, "differences": diffs})
            ray.kill(actor)
        else:
            cluster.nodes.append(node)
    skip = bool(target.options.get("skip_refused_nodes"))
    if cluster.refused and (not skip or not cluster.nodes):
        raise AgentprovError(
            "cli.environment.node_refused", count=len(cluster.refused),
            nodes="; ".join(f"{r['address']}: " + ", ".join(r["differences"])
                            for r in cluster.refused)
            + ("" if cluster.nodes else " (every node of the cluster)"))
    jobs = target.options.get("jobs") or 1
    total = sum(n.slots for n in cluster.nodes)
    if jobs > total:
        raise AgentprovError("cli.usage.option_value", option="--jobs", value=str(jobs),
                             what=f"is above the cluster's maximum of {total} cells in flight "
                                  "(each node at most its host's: " + ", ".join(
                                      f"{n.address} {n.slots}" for n in cluster.nodes) + ")")


def _release(cluster: Cluster) -> None:
    import ray

    for n in cluster.nodes:
        with contextlib.suppress(Exception):  # an actor already gone
            ray.kill(n.actor)
    if cluster.connected_here:
        ray.shutdown()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


class RayExecutor:
    """A started ``ray`` executor (see the module)."""

    def __init__(self, launch: Launch) -> None:
        import ray

        target = Target(launch.environment_id, launch.containment, launch.key_variable,
                        launch.options)
        self.cluster = _checked.pop(_key(target), None) or connect(target)
        self.environment_id = launch.environment_id
        self.flights: dict[Future, tuple[NodeRef, Any, Path]] = {}
        extra = {k: v for k, v in launch.extra_env.items() if k != launch.key_variable}
        try:
            if proxy := next((extra[k] for k in PROXY_VARIABLES if k in extra), None):
                raise egress_refused(proxy)  # started without check (--preflight-only)
            starts = [n.actor.start.remote(launch.environment_id, extra, launch.key_variable,
                                           launch.containment, launch.allowed)
                      for n in self.cluster.nodes]
            for node, ref in zip(self.cluster.nodes, starts, strict=True):
                try:
                    ray.get(ref, timeout=ANSWER_S)
                except Exception as exc:  # noqa: BLE001
                    raise AgentprovError("cli.environment.cluster", address=node.address,
                                         what="its worker did not start "
                                              f"({_first_line(exc)})") from None
        except BaseException:
            _release(self.cluster)
            raise

    def submit(self, request: dict[str, Any]) -> Future:
        free = [n for n in self.cluster.nodes if n.lost is None and n.in_flight < n.slots]
        if not free:
            raise AgentprovError("cli.environment.worker", env_id=self.environment_id,
                                 detail="no node of the cluster has a free slot")
        node = min(free, key=lambda n: (n.in_flight / n.slots, n.in_flight))
        ref = node.actor.run_cell.remote(request)
        fut = ref.future()
        node.in_flight += 1
        self.flights[fut] = (node, ref, Path(request["staging"]))
        return fut

    def wait_any(self, futures: Collection[Future], timeout: float) -> set[Future]:
        return wait(list(futures), timeout=timeout, return_when=FIRST_COMPLETED)[0]

    def result(self, future: Future, timeout: float | None = None) -> dict[str, Any]:
        node, _, staging = self.flights.pop(future)
        node.in_flight -= 1
        node.cells += 1
        try:
            payload = future.result(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the node or its actor was lost
            raise self._lost(node, exc) from None
        return self._landed(node, payload, staging)

    def _lost(self, node: NodeRef, exc: BaseException) -> AgentprovError:
        """The error of a cell whose actor call failed. The node's actor gone or out of
        reach (its node removed, its raylet or the actor's process killed): the node is
        lost, its actor killed for good (no cell of it runs on, none comes back) and the
        cell fails with ``NODE_LOST`` naming the node, which T0 attempts again elsewhere.
        An exception raised by the actor's own code: the worker's failure, as locally."""
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayTaskError

        from agentprov_core.api import NODE_LOST

        if isinstance(exc, RayTaskError) and not isinstance(
                exc, ActorDiedError | ActorUnavailableError):
            return AgentprovError("cli.environment.worker", env_id=self.environment_id,
                                  detail=f"on node {node.address}: {_first_line(exc)}")
        if node.lost is None:
            node.lost = type(exc).__name__
            with contextlib.suppress(Exception):  # already gone with its node
                ray.kill(node.actor, no_restart=True)
        return AgentprovError(NODE_LOST, node=node.address,
                              detail=f"{type(exc).__name__}: {_first_line(exc)}")

    def _landed(self, node: NodeRef, payload: Any, staging: Path) -> dict[str, Any]:
        """The node's carried session written into T0's staging; the worker's result with
        what was refused of it on the node and here."""
        if not isinstance(payload, dict):
            payload = {}
        refused = land_session(staging, payload.get("files"))
        result = payload.get("result")
        result = dict(result) if isinstance(result, dict) else {}
        carried = result.get(CARRIED_REFUSED)
        result[CARRIED_REFUSED] = (carried if isinstance(carried, list) else []) + refused
        error = payload.get("error")
        if error is not None:
            raise AgentprovError("cli.environment.worker", env_id=self.environment_id,
                                 detail=f"on node {node.address}: {str(error)[:2000]}")
        return result

    def failure(self) -> str | None:
        if self.cluster.nodes and all(n.lost for n in self.cluster.nodes):
            return "every node of the cluster was lost"
        return None

    def capacity(self) -> int:
        """The cells the nodes not lost can hold in flight (each at most its host's)."""
        return sum(n.slots for n in self.cluster.nodes if n.lost is None)

    def cancel(self) -> None:
        """Each node's worker ended at once; then each cell in flight waited for (at most
        :data:`CANCEL_S` in all) until its node has answered, with what the cell had staged
        when its worker ended, or with its result when it had ended first. Nothing is taken
        here: T0 takes each answered cell with :meth:`result` (its session landed in T0's
        staging, a finished one exactly as any finished cell) and seals the others
        ``aborted``."""
        for n in self.cluster.nodes:
            if n.lost is None:
                n.actor.kill_worker.remote()
        wait(list(self.flights), timeout=CANCEL_S)

    def close(self) -> None:
        import ray

        closing = [n.actor.close.remote() for n in self.cluster.nodes if n.lost is None]
        with contextlib.suppress(Exception):  # a node lost meanwhile: its actor is gone
            ray.get(closing, timeout=ANSWER_S)
        _release(self.cluster)

    def record(self) -> dict[str, Any]:
        return {"nodes": [{"address": n.facts.get("address"), "node_id": n.facts.get("node_id"),
                           "environment_id": n.facts.get("environment_id"),
                           "containment": n.facts.get("containment"), "cells": n.cells,
                           **({"lost": n.lost} if n.lost else {})}
                          for n in self.cluster.nodes],
                **({"refused_nodes": self.cluster.refused} if self.cluster.refused else {})}
