"""A local multi-node Ray cluster for tests and benchmarks (``ray.cluster_utils.Cluster``):
each node a raylet of its own on this machine, with few CPUs and a small object store, its
session directories under one short temporary directory (``RAY_TMPDIR``), its agents' ports
given up front (a raylet that waits on their port files can time out on a loaded 2-core
machine). Every node inherits this process's environment when it starts: its
``AGENTPROV_HOME`` and the endpoint key's variable are the node's own."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port",
               "runtime_env_agent_port")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_ports() -> dict[str, int]:
    return {name: free_port() for name in AGENT_PORTS}


@dataclass
class LocalCluster:
    cluster: Any
    temp: Path
    workers: list[Any]
    node_args: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_node(self) -> Any:
        """One more node, started as the others were (after one was removed)."""
        node = self.cluster.add_node(**self.node_args, **agent_ports())
        self.cluster.wait_for_nodes()
        self.workers.append(node)
        return node


def _started(fn, temp: Path, tries: int = 3):
    for n in range(tries):
        try:
            return fn()
        except Exception:  # a node's start timed out on a loaded machine: start it again,
            _end_under(temp)  # after ending what the failed start left running
            if n == tries - 1:
                raise
    return None


def _end_under(temp: Path) -> None:
    """End the processes a failed node start left running: those whose command line names
    this cluster's own temporary directory (its session's logs and sockets)."""
    import signal

    mark = str(temp).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if mark in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue


@contextlib.contextmanager
def local_cluster(nodes: int = 1, cpus: int = 1, env: dict[str, str] | None = None,
                  dashboard: bool = False) -> Iterator[LocalCluster]:
    """A head and ``nodes - 1`` more nodes, stopped on exit; ``env`` is set in this
    process's environment while they start (and kept until exit)."""
    from ray.cluster_utils import Cluster

    temp = Path(tempfile.mkdtemp(prefix="r"))  # short: Ray's socket paths
    (temp / "ray").mkdir()
    # a raylet waits this long for its agents' port files (30 s by default), which a
    # loaded 2-core machine can exceed
    changes = {"RAY_TMPDIR": str(temp), "RAY_raylet_start_wait_time_s": "120"} | (env or {})
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    args = dict(num_cpus=cpus, object_store_memory=80 << 20)
    c = None
    try:
        c = _started(lambda: Cluster(initialize_head=True, connect=False, head_node_args=dict(
            args, include_dashboard=dashboard, dashboard_port=free_port(), **agent_ports())),
            temp)
        workers = [_started(lambda: c.add_node(**args, **agent_ports()), temp)
                   for _ in range(nodes - 1)]
        c.wait_for_nodes()
        yield LocalCluster(c, temp, workers, args)
    finally:
        if c is not None:
            c.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(temp, ignore_errors=True)
