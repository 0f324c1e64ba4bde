"""Test-only overrides and faults of a campaign, read from the environment, honoured only
when set, and recorded in the manifest (``live.test_overrides``). Never set them for a real
run.

``AGENTPROV_TEST_EGRESS_RESOLVE=HOST:PORT=IP:PORT[,...]`` makes the egress proxy dial IP:PORT
for an allowed HOST:PORT (the allowlist still matches the name asked for), and
``AGENTPROV_TEST_CA_FILE=PEM`` makes the worker trust that CA (``SSL_CERT_FILE``), so that a
loopback TLS stand-in can play a registered API host. ``AGENTPROV_TEST_KILL_T0=ledger:N``
makes T0 kill itself (SIGKILL) right after this invocation's Nth ledger line, before that
attempt's execution is written: the fault that a re-run's first step finishes
(:func:`agentprov_core.run.mappings.finish_unmapped`). ``AGENTPROV_TEST_NATIVE_LOG=remove|truncate``
asks the worker to remove the benchmark's native log, or cut it to its first half, once the
cell has run and before its end is judged (the session then ends ``incomplete``; the capture
header declares ``test_fault@1``). ``AGENTPROV_TEST_HOSTILE=KIND[:TARGET]`` asks the first
cell this invocation launches to stage hostile input once it has ended (a symlink, a hard
link, a FIFO, a socket or a sparse file of several GB in its staging, or a native log path
outside it; TARGET a host file; ``agentprov_dojo.cells.HOSTILE_FAULTS``), which T0 refuses
(``map.staging_refused``; the capture header declares ``test_fault@1``).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

from agentprov_core.errors import AgentprovError

TEST_RESOLVE = "AGENTPROV_TEST_EGRESS_RESOLVE"
TEST_CA = "AGENTPROV_TEST_CA_FILE"
TEST_KILL = "AGENTPROV_TEST_KILL_T0"
TEST_NATIVE_LOG = "AGENTPROV_TEST_NATIVE_LOG"
TEST_HOSTILE = "AGENTPROV_TEST_HOSTILE"
#: the worker's cells.HOSTILE_FAULTS (T0 never imports the worker library)
HOSTILE_FAULTS = ("capture_symlink_host", "capture_symlink_ledger", "native_symlink_host",
                  "native_dotdot", "native_absolute", "native_nul", "native_long_name",
                  "fifo", "socket", "hardlink", "huge_sparse", "symlink_other_session")


def test_overrides() -> tuple[dict[str, tuple[str, int]] | None, str | None, list[str]]:
    """The test-only resolver and CA file (see the module docstring), and what to record."""
    resolver: dict[str, tuple[str, int]] | None = None
    notes: list[str] = []
    raw = os.environ.get(TEST_RESOLVE)
    if raw:
        resolver = {}
        for item in raw.split(","):
            name, _, target = item.strip().partition("=")
            host, _, _port = name.rpartition(":")
            ip, _, tport = target.rpartition(":")
            if not host or not ip or not tport.isdigit():
                raise AgentprovError("cli.usage.option_value", option=TEST_RESOLVE, value=item,
                                     what="HOST:PORT=IP:PORT (a test-only override)")
            resolver[host.lower()] = (ip, int(tport))
        notes.append(f"{TEST_RESOLVE}: {', '.join(sorted(resolver))} resolved to loopback "
                     "(a test stand-in)")
    ca = os.environ.get(TEST_CA) or None
    if ca:
        notes.append(f"{TEST_CA}: the worker trusted a test CA")
    return resolver, ca, notes


def native_log_fault() -> str | None:
    """``AGENTPROV_TEST_NATIVE_LOG`` (see the module docstring), checked."""
    raw = os.environ.get(TEST_NATIVE_LOG)
    if not raw:
        return None
    if raw not in ("remove", "truncate"):
        raise AgentprovError("cli.usage.option_value", option=TEST_NATIVE_LOG, value=raw,
                             what="remove or truncate (a test-only fault)")
    return raw


def hostile_fault() -> dict[str, str] | None:
    """``AGENTPROV_TEST_HOSTILE`` (see the module docstring), checked."""
    raw = os.environ.get(TEST_HOSTILE)
    if not raw:
        return None
    kind, _, target = raw.partition(":")
    if kind not in HOSTILE_FAULTS:
        raise AgentprovError("cli.usage.option_value", option=TEST_HOSTILE, value=raw,
                             what=" | ".join(HOSTILE_FAULTS) + ", then :TARGET "
                                  "(a test-only fault)")
    return {"hostile": kind, "target": target}


def kill_override() -> tuple[str, int] | None:
    """``AGENTPROV_TEST_KILL_T0=POINT:N`` (see the module docstring), checked."""
    raw = os.environ.get(TEST_KILL)
    if not raw:
        return None
    point, _, n = raw.partition(":")
    if point != "ledger" or not n.isdigit() or int(n) < 1:
        raise AgentprovError("cli.usage.option_value", option=TEST_KILL, value=raw,
                             what="ledger:N with N >= 1 (a test-only fault)")
    return point, int(n)


_KILL_COUNTS: Counter = Counter()


def test_kill(point: str) -> None:
    """T0 kills itself (SIGKILL) at the Nth time it passes ``point``, when
    ``AGENTPROV_TEST_KILL_T0`` asks for it."""
    kill = kill_override()
    if kill is None or kill[0] != point:
        return
    _KILL_COUNTS[point] += 1
    if _KILL_COUNTS[point] == kill[1]:
        os.kill(os.getpid(), signal.SIGKILL)


def fault_notes() -> set[str]:
    """What the manifest records (``live.test_overrides``) of the test faults set for this
    invocation; each variable is checked (exit 2) before any worker starts."""
    faults = set()
    if kill_override() is not None:
        faults.add(f"{TEST_KILL}: T0 killed itself after a ledger line (a test fault)")
    if (native := native_log_fault()) is not None:
        faults.add(f"{TEST_NATIVE_LOG}: the worker was asked to {native} "
                   "the native log of every cell (a test fault)")
    if (hostile := hostile_fault()) is not None:
        faults.add(f"{TEST_HOSTILE}: the worker was asked to stage hostile input "
                   f"({hostile['hostile']}) in the first cell of an invocation "
                   "(a test fault)")
    return faults
