"""Imported once by a campaign worker's forkserver, so that every forked cell starts warm.

T0 names the campaign's source, benchmark version and suites in the worker's environment
(:data:`WARM_VARIABLE`, JSON; without a source named, the environment's only one). This module imports that source's
:attr:`~agentprov_backend.source.WorkerSource.preload` modules (the benchmark's heavy
imports) and calls its :meth:`~agentprov_backend.source.WorkerSource.warm`; the cells the
forkserver forks afterwards inherit all of it. A failure leaves the cells cold, nothing
else: the cell imports what it needs itself.
"""

import importlib
import json
import os
import sys
import time

from agentprov_backend import host, timing

#: ``{"source": S, "benchmark_version": V, "suites": [...]}``, set by T0 for a campaign's
#: worker (never for the check worker), which then starts its forkserver at once
WARM_VARIABLE = "AGENTPROV_WORKER_WARM"


def _asked() -> dict:
    try:
        asked = json.loads(os.environ.get(WARM_VARIABLE) or "{}")
    except ValueError:
        return {}
    return asked if isinstance(asked, dict) else {}


def _only_source() -> str:
    """The environment's one registered source, when T0 names none."""
    names = list(host.entry_points())
    return names[0] if len(names) == 1 else ""


def warm() -> None:
    asked = _asked()
    t = time.time()
    try:
        src = host.source(str(asked.get("source") or _only_source()))
        for name in src.preload:
            importlib.import_module(name)
        timing.emit("forkserver.preload", t)
        t = time.time()
        src.warm(asked)
    except Exception as exc:  # noqa: BLE001 - cold cells run the same, only slower
        print(f"agentprov worker: the forkserver's warm-up failed ({type(exc).__name__}: "
              f"{exc}); cells start cold", file=sys.stderr)
    timing.emit("forkserver.warm", t)


warm()
