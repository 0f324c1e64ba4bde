"""Where ``verify``'s tasks run: a pool of two threads, and for a large corpus two
processes as well (parsing capture logs holds the GIL), with a bounded number of tasks in
flight, so that memory does not grow with the corpus. Results come back in the order the
tasks were given, whichever process ran them; a process that ends before it answers
(killed, out of memory) is an error of the whole check (``verify.environment.worker_lost``),
never a task skipped.
"""

from __future__ import annotations

import gc
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from agentprov_core.audit.corpusfiles import hash_item
from agentprov_core.errors import AgentprovError

WORKERS = 2
WINDOW = 128  # tasks in flight: bounds memory whatever the corpus size
BATCH = 32  # tasks per process call (fewer calls: less pickling and waking per task)
PROCESS_THRESHOLD = 256 * 1024  # a ledger larger than this (about 300 attempts): processes


def run_batch(fn: Callable[[str, Any], Any], base: str, items: list[Any]) -> list[Any]:
    return [fn(base, it) for it in items]


def use_processes(root: Path) -> bool:
    """Two processes for a large corpus (parsing capture logs holds the GIL, so threads
    would run it one at a time); threads alone for a small one, which a process pool's
    start would only slow down. ``AGENTPROV_VERIFY_PROCESSES=1`` or ``0`` decides."""
    forced = os.environ.get("AGENTPROV_VERIFY_PROCESSES")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        return (root / "ledger.jsonl").stat().st_size > PROCESS_THRESHOLD
    except OSError:
        return False


class Runner:
    """Run tasks ``fn(base, item)`` and yield ``(item, result)`` in order, with a bounded
    number in flight: memory does not grow with the corpus."""

    def __init__(self, processes: bool) -> None:
        self.threads = ThreadPoolExecutor(WORKERS, thread_name_prefix="verify")
        self.procs = None
        if processes:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            ctx = (multiprocessing.get_context("fork") if sys.platform.startswith("linux")
                   else None)
            # gc.freeze: what the worker inherited (every module imported) is never
            # traversed again by its collections
            self.procs = ProcessPoolExecutor(WORKERS, mp_context=ctx, initializer=gc.freeze)
            # start the workers now, before any thread of this process exists (fork)
            self.procs.submit(run_batch, hash_item, "", []).result()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.threads.shutdown(cancel_futures=True)
        if self.procs is not None:
            self.procs.shutdown(cancel_futures=True)

    def map(self, fn: Callable[[str, Any], Any], base: str, items: Iterable[Any],
            heavy: bool = True) -> Iterator[tuple[Any, Any]]:
        if self.procs is None or not heavy:
            pending: deque[tuple[Any, Future]] = deque()
            for item in items:
                pending.append((item, self.threads.submit(fn, base, item)))
                if len(pending) >= WINDOW:
                    it, fut = pending.popleft()
                    yield it, fut.result()
            while pending:
                it, fut = pending.popleft()
                yield it, fut.result()
            return
        batches: deque[tuple[list[Any], Future]] = deque()
        batch: list[Any] = []

        def drain(limit: int) -> Iterator[tuple[Any, Any]]:
            while len(batches) > limit:
                got, fut = batches.popleft()
                try:
                    done = fut.result()
                except BrokenProcessPool as exc:
                    raise AgentprovError("verify.environment.worker_lost",
                                         corpus=base.rstrip(os.sep) or base,
                                         what=str(exc) or type(exc).__name__) from None
                yield from zip(got, done, strict=True)

        for item in items:
            batch.append(item)
            if len(batch) >= BATCH:
                batches.append((batch, self.procs.submit(run_batch, fn, base, batch)))
                batch = []
                yield from drain(WINDOW // BATCH * WORKERS)
        if batch:
            batches.append((batch, self.procs.submit(run_batch, fn, base, batch)))
        yield from drain(0)
