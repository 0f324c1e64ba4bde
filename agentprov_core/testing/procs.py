"""Processes as Linux's ``/proc`` shows them, for fault tests and the kill-fault benchmark:
a process's descendants and command line, and the live members of a process group (T0's
worker leads its own group)."""

from __future__ import annotations

from pathlib import Path


def proc_cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for f in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(x) for x in f.read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def workers_of(pid: int) -> list[int]:
    """The ``agentprov_backend.worker`` processes among ``pid``'s descendants."""
    return [d for d in descendants(pid) if "agentprov_backend.worker" in proc_cmdline(d)]


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies excluded)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out
