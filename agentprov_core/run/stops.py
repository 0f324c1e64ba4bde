"""Why a campaign stops before its due units are done, and the exit code it ends with.

A config stop (a cell's setup refused the configuration), a worker stop (the worker ended),
a canary stop, a cap stop (``cap_reached``, ``cap_bound_exceeded``), a rate-limit stop
(``rate_limited``: the adaptive start gate closed, :mod:`agentprov_core.run.gate`; exit 3,
``run.environment.rate_limited``), a drain
(``--control-file``), ``--limit``, and an interrupt (SIGINT, SIGTERM, SIGHUP: in-flight
sessions are sealed ``aborted`` and ledgered, exit 130; a second signal exits at once).
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from agentprov_core.run.summary import Tally

#: stops that leave the corpus partial (R-21.31) and exit 1
EARLY_STOPS = ("config", "worker", "canary", "cap_reached", "cap_bound_exceeded",
               "rate_limited")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(Exception):
    pass


class CapStop(Exception):
    """A cap stops the campaign before the next call (``stop``: ``cap_reached``)."""

    def __init__(self, stop: str, why: str) -> None:
        super().__init__(why)
        self.stop, self.why = stop, why


class Signals:
    """The campaign's handler of SIGINT, SIGTERM and SIGHUP.

    The first signal raises :class:`Interrupted` in T0's main thread, except while
    ``critical`` is set (between a launch and its tracking, between a finished cell and its
    ledger entry, while the last mappings drain): then it is ``pending`` and the loop raises
    right after (:meth:`raise_pending`). A second signal exits 130 at once; the in-flight
    sessions stay in staging, unledgered."""

    def __init__(self) -> None:
        self.received = 0
        self.critical = False
        self.pending = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        self._previous = {s: signal.signal(s, self._on_signal) for s in SIGNALS}

    def _on_signal(self, signum, _frame) -> None:
        self.received += 1
        if self.received > 1:
            click.echo("agentprov run: second signal: exiting now; in-flight sessions stay in "
                       "staging, unledgered", err=True)
            os._exit(130)
        if self.critical:
            self.pending = True
            return
        raise Interrupted

    def raise_pending(self) -> None:
        if self.pending:
            raise Interrupted

    def restore(self) -> None:
        """The handlers from before :meth:`install`, unless a signal came: after an
        interrupt this handler stays, so that another signal, even while the summary is
        written, exits 130 at once."""
        if not self.received:
            for s, h in self._previous.items():
                signal.signal(s, h)


def drain_requested(path: str | None) -> bool:
    """``--control-file`` (``path``) holds ``drain``: start no further cell, finish those in
    flight."""
    if not path:
        return False
    from agentprov_core.base import inputfile

    try:  # a regular file of a few bytes: a FIFO or a device would stall the campaign
        return inputfile.read_bytes(path, limit=4096).strip() == b"drain"
    except inputfile.Unreadable:
        return False


def exit_code(stop: str | None, tally: Tally) -> int:
    """130 after an interrupt; 3 after a rate-limit stop; 1 after another early stop or
    with any attempt that is not conclusive or whose mapping failed; else 0 (complete, or a
    drain or ``--limit`` with every attempt conclusive: decisions 3, 4)."""
    if stop == "interrupt":
        return 130
    if stop == "rate_limited":
        return 3
    if stop in EARLY_STOPS or tally.failed or tally.quarantined or \
            tally.inconclusive or tally.inconsistent or tally.map_failed:
        return 1
    return 0
