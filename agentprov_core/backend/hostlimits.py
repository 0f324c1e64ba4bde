"""The host's maximum ``--jobs``: how many cells this machine may run at once.

A cell is a forked worker process that spends most of its time waiting for the model (a
scripted, local or API endpoint), so the bound is not the number of CPUs: it is eight cells
per CPU, at most one per 256 MiB of the memory available when the run starts (a forked cell
shares the forkserver's pages and adds its own heap), and never more than 64. Eight, from
the measured cost of a cell in flight (``benchmarks/bench_percell.py``): about 0.12 s of
CPU for a three-call AgentDojo cell, all processes counted, so eight cells per CPU keep a
CPU busy only while a cell lasts under about 1 s (model calls under about 300 ms, a local
server's regime, which ``--tune-jobs`` measures); and about 11 MiB of private memory a
cell. Above it, ``--jobs`` is refused (``cli.usage.jobs_above_host``, exit 2), never
clamped (R-15.15). A local model server's own best concurrency is what ``--tune-jobs``
measures; this is only the host's ceiling. Decision recorded in docs/decisions.md ("The
host's maximum --jobs").
"""

from __future__ import annotations

import os

PER_CPU = 8
MIB_PER_CELL = 256
CEILING = 64


def available_memory_mib() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else the physical memory, else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    gb = physical_memory_gb()
    return None if gb is None else int(gb * 1e9) // (1 << 20)


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def max_jobs() -> int:
    bound = PER_CPU * cpus()
    mem = available_memory_mib()
    if mem is not None:
        bound = min(bound, max(1, mem // MIB_PER_CELL))
    return max(1, min(bound, CEILING))


def physical_memory_gb() -> float | None:
    """The host's physical memory in GB (10^9 bytes): what a local model server shares
    between its weights and its KV caches (a compute preset's plan reads it)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        return None
