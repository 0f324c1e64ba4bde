"""What runs on each node: one actor pinned to it (:class:`Node`), which reports the node's
facts, starts the node's own worker of the plan's environment under the node's own
containment, runs the cells T0 sends it and carries each staged session back.

The endpoint's key never travels: :meth:`Node.start` is given the name of its variable and
reads the value from the node's own environment (the one ``ray start`` ran in), straight
into the worker's. A reaper process holds a pipe from the actor: when the actor ends in
any way (T0 killed, the node's actor killed), the pipe closes and the reaper ends the
worker's process group, so no cell of a dead driver runs on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from agentprov_core.api import (
    AgentprovError,
    Worker,
    carry_session,
    environment_dir,
    node_facts,
)

#: the reaper: waits for its stdin to close, then ends the worker's process group
REAPER = ("import os, signal, sys\nsys.stdin.buffer.read()\n"
          "try:\n    os.killpg(int(sys.argv[1]), signal.SIGKILL)\nexcept OSError:\n    pass\n")
#: a cell's answer waited for this long past its own timeout
GRACE_S = 60


class Node:
    """The actor of one node (created with ``max_restarts=0``: a lost node's cells are
    T0's to re-attempt, never Ray's)."""

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.root: Path | None = None
        self.reaper: subprocess.Popen | None = None

    def facts(self, environment_id: str, containment: Any,
              key_variable: str | None) -> dict[str, Any]:
        import ray

        return node_facts(environment_id, containment, key_variable) | {
            "address": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id()}

    def start(self, environment_id: str, extra_env: dict[str, str],
              key_variable: str | None, containment: Any, allowed: Any) -> None:
        env = dict(extra_env)
        if key_variable:
            value = os.environ.get(key_variable)
            if not value:
                raise AgentprovError("cli.environment.worker", env_id=environment_id,
                                     detail=f"{key_variable} is not set on this node")
            env[key_variable] = value
        self.root = Path(tempfile.mkdtemp(prefix="agentprov-ray-"))
        self.worker = Worker(environment_id, environment_dir(environment_id), self.root,
                             network=True, extra_env=env, containment=containment,
                             allowed=allowed)
        self.reaper = subprocess.Popen([sys.executable, "-c", REAPER, str(self.worker.proc.pid)],
                                       stdin=subprocess.PIPE, start_new_session=True)

    def run_cell(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one ``run-cell`` request in a staging directory of this node; the session
        carried back (:func:`agentprov_core.api.carry_session`) and the worker's failure
        (``error``), if it failed to answer."""
        staging = self.root / request["session_id"]
        staging.mkdir()
        error = None
        try:
            fut = self.worker.submit("run-cell", **dict(request, staging=str(staging)))
            result = self.worker.result(fut, timeout=request["timeout_s"] + GRACE_S)
        except AgentprovError as exc:
            result, error = {}, exc.message
        try:
            return carry_session(staging, result if isinstance(result, dict) else {}) | {
                "error": error}
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def kill_worker(self) -> None:
        """End the worker and the cells it runs at once (an interrupt)."""
        if self.worker is not None:
            self.worker.kill()

    def close(self) -> None:
        if self.reaper is not None:
            self.reaper.kill()
            self.reaper.wait()
        if self.worker is not None:
            self.worker.close()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
