"""A debug timer of a run's phases, off by default.

With ``AGENTPROV_DEBUG_TIMING=FILE`` in T0's environment, T0 appends one JSON line per
timed span to FILE: ``{"span": NAME, "t0": START, "t1": END, "pid": PID, ...}``, times in
seconds since the epoch (``time.time()``, one clock for every process of the machine); a
span timed as a context manager (:func:`span`) adds ``cpu``, the CPU seconds its thread
spent in it (``time.thread_time()``).
The workers T0 starts get the variable too, pointing at a file in their own temporary
directory (inside their sandbox), and T0 appends that file's lines to FILE when the worker
is closed; the worker's forkserver and its cells write there as well
(``agentprov_backend.timing``). ``benchmarks/bench_realpath.py`` reads FILE to split a
run's wall time into its phases.

Nothing else reads it, nothing of it enters a corpus, and without the variable a span is
one global lookup and a shared no-op context manager. The lines hold names, ids and
durations only: never a key, a prompt or a reply.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

VARIABLE = "AGENTPROV_DEBUG_TIMING"
#: the worker's own file, in the temporary directory T0 gives it
WORKER_FILE = "agentprov-timing.jsonl"

_path: str | None = os.environ.get(VARIABLE) or None
_NULL = contextlib.nullcontext()


def enabled() -> bool:
    return _path is not None


def emit(name: str, t0: float, t1: float | None = None, **detail: Any) -> None:
    """One span, from ``t0`` to ``t1`` (default: now)."""
    if _path is None:
        return
    line = json.dumps({"span": name, "t0": t0, "t1": time.time() if t1 is None else t1,
                       "pid": os.getpid(), **detail}, default=str)
    with open(_path, "a", encoding="utf-8") as f:  # O_APPEND: whole lines, any process
        f.write(line + "\n")


class _Span:
    __slots__ = ("cpu0", "detail", "name", "t0")

    def __init__(self, name: str, detail: dict[str, Any]) -> None:
        self.name, self.detail = name, detail

    def __enter__(self) -> _Span:
        self.t0 = time.time()
        self.cpu0 = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        emit(self.name, self.t0, time.time(), cpu=time.thread_time() - self.cpu0,
             **self.detail)


def span(name: str, **detail: Any):
    """A context manager that emits the span ``name`` when it exits."""
    return _NULL if _path is None else _Span(name, detail)


def worker_env(tmp: Path) -> dict[str, str]:
    """The variable for a worker whose temporary directory is ``tmp`` (empty when off)."""
    return {} if _path is None else {VARIABLE: str(tmp / WORKER_FILE)}


def absorb(tmp: Path) -> None:
    """Append a closed worker's timing lines to T0's file."""
    if _path is None:
        return
    src = tmp / WORKER_FILE
    with contextlib.suppress(OSError):
        data = src.read_text(encoding="utf-8")
        with open(_path, "a", encoding="utf-8") as f:
            f.write(data)
