"""What every mapper of live evidence reads of the capture log the same way: the chain
checked, the header and end record, and the header parts an AER takes from them (the
agent as configured, the producer, the session's end time), with the register codes of a
damaged log or a session that did not complete.

A mapper adds what its own evidence holds (AgentDojo's native log, an Inspect ``.eval``
log); these parts stay one rule for all of them, so two mappers cannot record the same
capture differently.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from agentprov_core.evidence import aer as A
from agentprov_core.evidence.aer import NOT_RECORDED
from agentprov_core.mapping import LiveEvidence

#: the register codes that make an execution ``failed`` whatever else it holds
FAILING = frozenset({"map.capture_damaged", "map.capture_error", "map.staging_refused"})


@dataclass
class CaptureView:
    """A capture log as a mapper reads it."""

    raw: list[dict[str, Any]] = field(default_factory=list)
    head: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def header(self) -> dict[str, Any]:
        return self.raw[0] if self.raw and self.raw[0].get("kind") == "header" else {}

    @property
    def end(self) -> dict[str, Any] | None:
        return self.raw[-1] if self.raw and self.raw[-1].get("kind") == "end" else None

    @property
    def session(self) -> Any:
        """The session's end status, or ``"not recorded"``."""
        return self.end.get("status", NOT_RECORDED) if self.end else NOT_RECORDED

    def part(self, name: str) -> dict[str, Any]:
        """A table of the header (``agent``, ``cell``, ``backend``…), ``{}`` when absent."""
        value = self.header.get(name)
        return value if isinstance(value, dict) else {}

    def issues(self) -> list[A.Issue]:
        """``map.capture_damaged`` (the chain's problems) and ``map.capture_error`` (a
        session that did not complete), in that order."""
        out = []
        if self.problems:
            out.append(A.Issue(code="map.capture_damaged", detail="; ".join(self.problems[:3])))
        if self.session not in ("complete", "incomplete"):
            end = self.end
            why = f"the session ended {self.session}" if end else \
                "the capture log has no end record"
            reason = (end or {}).get("reason")
            out.append(A.Issue(code="map.capture_error",
                               detail=f"{why}: {reason}" if reason else why))
        return out

    def reason(self) -> str | None:
        """The outcome's reason: the end record's, else the chain's first problem."""
        end = self.end
        return end.get("reason") if end else (self.problems[0] if self.problems else None)


def read(ev: LiveEvidence) -> CaptureView:
    """The capture of ``ev`` with its chain checked (``agentprov_capture.check``, verify's
    check) and its head compared with the ledger's."""
    import agentprov_capture

    if ev.capture is None:
        return CaptureView(problems=["the capture log is missing from the raw store"])
    chain = agentprov_capture.check(ev.capture, require_end=False)
    view = CaptureView(chain.records, chain.head_sha256, list(chain.problems))
    if ev.attempt.capture_head_sha256 not in (None, view.head):
        view.problems.append("its head digest differs from the ledger's")
    return view


def status(issues: list[A.Issue], failing: frozenset[str] = FAILING) -> str:
    """``failed`` when an issue is one of ``failing``, ``ok_with_issues`` when there is any
    other, else ``ok``."""
    codes = {i.code for i in issues}
    return "failed" if codes & failing else "ok_with_issues" if issues else "ok"


def ended_at(started: Any, end: dict[str, Any] | None) -> Any:
    """``started_at`` plus the end record's ``t`` (the session's monotonic clock)."""
    if not isinstance(started, str) or not end or not isinstance(end.get("t"), (int, float)):
        return NOT_RECORDED
    try:
        t0 = dt.datetime.strptime(started, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return NOT_RECORDED
    return (t0 + dt.timedelta(seconds=end["t"])).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def agent(view: CaptureView, *, model: Any = NOT_RECORDED, element: Any = NOT_RECORDED,
          display_name: str | None = None) -> A.Agent:
    """The agent as the header configures it; ``model``, ``element`` and ``display_name``
    stand in for what the header lacks."""
    a = view.part("agent")
    return A.Agent(model=a.get("model", model),
                   display_name=a.get("display_name") if display_name is None
                   else display_name,
                   endpoint_kind=a.get("endpoint_kind", NOT_RECORDED),
                   endpoint=a.get("base_url", NOT_RECORDED),
                   element=a.get("element", element),
                   parameters=dict(a.get("parameters") or {}))


def producer(ev: LiveEvidence, view: CaptureView, name: str, version: str) -> A.Producer:
    """The producer: this agentprov, the mapper, the manifest's containment and preset."""
    from agentprov_core import __version__

    m = ev.manifest or {}
    p = m.get("producer") if isinstance(m.get("producer"), dict) else {}
    return A.Producer(version=__version__, mapper=name, mapper_version=version,
                      sandbox=p.get("sandbox") if isinstance(p.get("sandbox"), dict) else None,
                      test_only=bool(m.get("test_only") or view.header.get("test_only")),
                      preset=p.get("preset"))


def wire_attempt(req: dict[str, Any], out: dict[str, Any] | None, index: int = 0
                 ) -> A.WireAttempt:
    """A wire attempt of the AER from its capture records: the ``wire_request`` and the
    ``wire_response`` or ``wire_error`` that answered it (``None``: none did); ``index``
    stands in for a request that records no ``attempt_index``."""
    out = out or {}
    err = out.get("kind") == "wire_error"
    return A.WireAttempt(
        attempt_id=str(req.get("attempt_id")),
        attempt_index=req["attempt_index"] if isinstance(req.get("attempt_index"), int)
        else index,
        request_sha256=req.get("body_sha256", NOT_RECORDED),
        response_sha256=out.get("body_sha256", NOT_RECORDED) if out and not err
        else NOT_RECORDED,
        http_status=out.get("status") if isinstance(out.get("status"), int) else None,
        error_type=out.get("error_type") if err else None,
        elapsed_ms=out.get("elapsed_ms") if isinstance(out.get("elapsed_ms"), int) else None,
        capture_seq=[req["seq"]] + ([out["seq"]] if out else []))
