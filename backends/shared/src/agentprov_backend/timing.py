"""The worker's side of T0's debug timer (``agentprov_core.base.timing``), off by default.

T0 sets ``AGENTPROV_DEBUG_TIMING`` in a worker's environment only when its own timer is on;
the worker, its forkserver and its cells then append one JSON line per span to that file
(in the worker's temporary directory), which T0 collects when it closes the worker. Names,
ids and times only."""

from __future__ import annotations

import json
import os
import time

_path = os.environ.get("AGENTPROV_DEBUG_TIMING") or None


def emit(name: str, t0: float, t1: float | None = None, **detail: object) -> None:
    if _path is None:
        return
    line = json.dumps({"span": name, "t0": t0, "t1": time.time() if t1 is None else t1,
                       "pid": os.getpid(), **detail}, default=str)
    with open(_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
