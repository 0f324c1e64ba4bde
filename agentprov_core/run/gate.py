"""The adaptive start gate: when the campaign starts its next cell, from what the endpoint
answers (docs/running.md, "The adaptive start gate").

One gate per campaign, in T0, between the campaign loop and the executor: it decides when a
cell starts, never what a cell sends (the element's own retries are the benchmark's, and
stay). The number of cells it lets be in flight (the *window*) starts at :data:`START`
(``--jobs`` if fewer) and moves on the wire replies T0 reads
(:mod:`agentprov_core.live.ratelimit`): a cell that ends with no rate signal adds one
(a slow start: the window doubles each round of clean cells) until the first rate signal,
``1/window`` after it (additive increase); a rate signal (HTTP 429 or 503, a connection
reset) halves it (multiplicative decrease), at most once per window (only a signal from a
cell started after the last decrease lowers it again); it never exceeds ``--jobs`` nor drops
below one. A cell in flight cannot be held back, so the first cells are few: a limit met by
``--jobs`` cells at once would have them all spend their retries together. A ``Retry-After`` (or ``retry-after-ms``, or an
exhausted ``x-ratelimit-remaining-requests``) pauses new starts for that long, bounded by
:data:`MAX_PAUSE_S` and the cell timeout. When the endpoint has answered nothing but rate
signals for the cell timeout, the gate closes: no further cell starts, the cells in flight
end and are sealed as they end, and the run stops (``rate_limited``,
``run.environment.rate_limited``, exit 3).

T0 reads the replies twice over: as the worker writes them into a cell's staging capture
log (:class:`Tail`, read-only, bounded, a regular file only: what a worker stages is
hostile, and here it can only steer when the next cell starts) and, for every executor, in
the capture log T0 ingests when the cell ends; each wire attempt counts once.

The gate is on by default against an API endpoint; off against a local server and on the
scripted transport unless ``--adaptive-jobs on``; ``--adaptive-jobs off`` disables it. It
is recorded as ``live.gate`` (:meth:`Gate.record`): its policy, the window and the cells in
flight over time, each decrease and its cause, the clamped headers. It is no part of the
configuration digest: it changes when cells start, not what they are.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.live import ratelimit

if TYPE_CHECKING:
    from agentprov_core.run.attempt import Flight
    from agentprov_core.run.prepare import Prepared

#: why the gate is off by default on the scripted transport (nothing is then recorded)
SCRIPTED = "the scripted transport"
#: the window at the start (``--jobs`` when that is fewer)
START = 4
#: the longest pause one reply can ask for: a longer ``Retry-After`` is clamped to it
MAX_PAUSE_S = 300.0
#: the trace's points (t, in flight, window) kept; beyond, every other one is dropped
MAX_TRACE = 2000
#: the decreases and clamped headers kept in the record (their counts stay exact)
MAX_EVENTS = 500
#: the bytes of a staging capture log read per poll; a line longer than this is left for
#: the ingest at the cell's end
TAIL_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class Policy:
    """What the gate does, recorded as ``live.gate.policy``."""

    mode: str  # on | off
    why: str
    start: int = 1
    ceiling: int = 1
    floor: int = 1
    decrease: float = 0.5
    max_pause_s: float = MAX_PAUSE_S
    stall_s: float = 1800.0

    def record(self) -> dict[str, Any]:
        if self.mode == "off":
            return {"mode": "off", "why": self.why}
        return {"mode": "on", "why": self.why, "start": self.start, "ceiling": self.ceiling,
                "floor": self.floor,
                "increase": "1 per cell ended without a rate signal until the first signal "
                            "(slow start), 1/window after it",
                "decrease": self.decrease, "max_pause_s": self.max_pause_s,
                "stall_s": self.stall_s,
                "signals": ["http 429", "http 503", "connection reset"],
                "pauses": ["retry-after-ms", "retry-after",
                           "x-ratelimit-remaining-requests 0 + x-ratelimit-reset-requests"]}


def policy_of(prepared: Prepared, jobs: int) -> Policy:
    """The run's policy: ``--adaptive-jobs`` when given, else on for an API endpoint and off
    for a local server and the scripted transport."""
    o = prepared.request.options
    asked = o.adaptive_jobs
    if asked == "off":
        return Policy("off", "--adaptive-jobs off")
    if asked == "on":
        why = "--adaptive-jobs on"
    elif prepared.request.scripted:
        return Policy("off", SCRIPTED)
    elif prepared.endpoint_class != "api":
        return Policy("off", "a local server (--adaptive-jobs on to use it)")
    else:
        why = "an API endpoint (the default)"
    stall = float(o.cell_timeout or 1800)
    return Policy("on", why, start=min(START, jobs), ceiling=jobs,
                  max_pause_s=min(MAX_PAUSE_S, stall), stall_s=stall)


@dataclass
class _Session:
    started: float
    signalled: bool = False
    seen: set[str] = field(default_factory=set)
    models: dict[str, str] = field(default_factory=dict)


class Gate:
    """The window, the pause and what the gate saw; ``clock`` is monotonic seconds,
    ``wall`` the epoch (an HTTP-date ``Retry-After`` is measured from it)."""

    def __init__(self, policy: Policy, clock=time.monotonic, wall=time.time) -> None:
        self.policy = policy
        self.clock, self.wall = clock, wall
        self.t0 = clock()
        self.window = float(policy.start)
        self.pause_until = self.t0
        self.paused_s = 0.0
        self.last_decrease = float("-inf")
        self.slow = True  # the slow start, until the first decrease
        self.sessions: dict[str, _Session] = {}
        self.trace: list[list[float]] = []
        self.decreases: list[dict[str, Any]] = []
        self.n_decreases = 0
        self.clamped: list[dict[str, Any]] = []
        self.n_clamped = 0
        self.signals: Counter = Counter()
        self.by_model: Counter = Counter()
        self.blocked_since: float | None = None  # the first rate signal since a served reply
        self.closed: str | None = None
        self._last_point: tuple[int, float] | None = None

    # --- the campaign's questions
    def allows(self, in_flight: int) -> bool:
        """Whether a cell may start now, with ``in_flight`` cells in flight."""
        self._check_stall()
        return (self.closed is None and self.clock() >= self.pause_until
                and in_flight < max(self.policy.floor, int(self.window)))

    def wait_s(self) -> float:
        """Seconds until the pause ends (0 when none)."""
        return max(0.0, self.pause_until - self.clock())

    def note(self, in_flight: int) -> None:
        """A point of the trace when the cells in flight or the window changed."""
        point = (in_flight, round(self.window, 2))
        if point == self._last_point:
            return
        self._last_point = point
        self.trace.append([round(self.clock() - self.t0, 2), *point])
        if len(self.trace) > MAX_TRACE:
            self.trace = self.trace[::2]

    # --- what the cells tell it
    def started(self, session_id: str) -> None:
        self.sessions[session_id] = _Session(self.clock())

    def observe(self, session_id: str, record: dict[str, Any]) -> None:
        """One capture record of a session in flight or just ended; each wire attempt is
        read once."""
        s = self.sessions.get(session_id)
        if s is None or not isinstance(record, dict):
            return
        aid = record.get("attempt_id")
        if not isinstance(aid, str):
            return
        if record.get("kind") == "wire_request":
            body = record.get("body")
            model = body.get("model") if isinstance(body, dict) else None
            s.models[aid] = model if isinstance(model, str) else "?"
            return
        if aid in s.seen:
            return
        sig = ratelimit.read(record, self.wall(), self.policy.max_pause_s)
        if sig is None:
            return
        s.seen.add(aid)
        now = self.clock()
        if sig.clamped is not None:
            self.n_clamped += 1
            if len(self.clamped) < MAX_EVENTS:
                self.clamped.append({"t_s": round(now - self.t0, 2), "session": session_id,
                                     "header": sig.header, "value": sig.value,
                                     "why": sig.clamped, "pause_s": sig.pause_s})
        if sig.pause_s:
            until = now + sig.pause_s
            self.paused_s += max(0.0, until - max(now, self.pause_until))
            self.pause_until = max(self.pause_until, until)
        if sig.ok:
            self.blocked_since = None
        if sig.cause is None:
            return
        self.signals[sig.cause] += 1
        s.signalled = True
        if self.blocked_since is None:
            self.blocked_since = now
        if s.started >= self.last_decrease:  # a signal of the window as it is now
            before = self.window
            self.window = max(float(self.policy.floor), self.window * self.policy.decrease)
            self.last_decrease = now
            self.slow = False
            self.n_decreases += 1
            self.by_model[s.models.get(aid, "?")] += 1
            if len(self.decreases) < MAX_EVENTS:
                self.decreases.append({
                    "t_s": round(now - self.t0, 2), "from": round(before, 2),
                    "to": round(self.window, 2), "cause": sig.cause, "session": session_id,
                    "attempt_id": aid, "pause_s": sig.pause_s})

    def ended(self, session_id: str, records: list[dict[str, Any]] | None) -> None:
        """A cell ended: its records read (those the tail missed), then the window grows, if
        the cell met no rate signal and started after the last decrease, by one in the slow
        start and by ``1/window`` after it."""
        for r in records or ():
            self.observe(session_id, r)
        s = self.sessions.pop(session_id, None)
        if s is not None and not s.signalled and s.started >= self.last_decrease:
            step = 1.0 if self.slow else 1.0 / self.window
            self.window = min(float(self.policy.ceiling), self.window + step)

    def _check_stall(self) -> None:
        if self.closed is None and self.blocked_since is not None \
                and self.clock() - self.blocked_since >= self.policy.stall_s:
            self.closed = (f"the endpoint answered nothing but rate limits for "
                           f"{self.policy.stall_s:g} s (the cell timeout)")

    def record(self) -> dict[str, Any]:
        """``live.gate``: the policy, the trace and what moved the window."""
        return {"policy": self.policy.record(), "trace_fields": ["t_s", "in_flight", "window"],
                "trace": self.trace, "decreases": self.decreases,
                "decreases_total": self.n_decreases, "signals": dict(sorted(self.signals.items())),
                "paused_s": round(self.paused_s, 2), "clamped": self.clamped,
                "clamped_total": self.n_clamped, "window_end": round(self.window, 2),
                "closed": self.closed}

    def backoffs(self) -> dict[str, int]:
        """The decreases by the model whose reply caused them (``live.quality``)."""
        return dict(self.by_model)

    def summary_line(self) -> str:
        sig = ", ".join(f"{c} x{n}" for c, n in sorted(self.signals.items())) or "none"
        low = min((p[2] for p in self.trace), default=self.window)
        return (f"  gate     backed off {self.n_decreases} time(s) (rate signals: {sig}); "
                f"paused {self.paused_s:.1f}s; window {low:g} to {self.policy.ceiling} "
                f"(--jobs {self.policy.ceiling}), {self.window:.2f} at the end"
                + (f"; {self.n_clamped} absurd header value(s) bounded" if self.n_clamped
                   else ""))


class Tail:
    """The staging capture logs of the cells in flight, read as the worker appends to them:
    a regular file only (opened without following a link, never blocking), at most
    :data:`TAIL_CHUNK` bytes per poll, whole lines only; a line that is not JSON is skipped
    (the ingest judges the log)."""

    def __init__(self) -> None:
        self.pos: dict[str, tuple[int, bytes]] = {}

    def poll(self, gate: Gate, flights: list[Flight]) -> None:
        live = set()
        for fl in flights:
            live.add(fl.session_id)
            for rec in self._new(fl.session_id, fl.staging / "capture.jsonl"):
                gate.observe(fl.session_id, rec)
        for sid in set(self.pos) - live:
            del self.pos[sid]

    def _new(self, sid: str, path: Path) -> list[dict[str, Any]]:
        offset, partial = self.pos.get(sid, (0, b""))
        if offset < 0:
            return []
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return []
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.pos[sid] = (-1, b"")
                return []
            data = os.pread(fd, TAIL_CHUNK, offset)
        except OSError:
            return []
        finally:
            os.close(fd)
        buf = partial + data
        lines = buf.split(b"\n")
        rest = lines.pop()
        if len(rest) > TAIL_CHUNK:  # a line too long to follow: left to the ingest
            self.pos[sid] = (-1, b"")
        else:
            self.pos[sid] = (offset + len(data), rest)
        out = []
        for line in lines:
            if b'"kind":"wire_' not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out
