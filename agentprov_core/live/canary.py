"""The canary (R-21.1 … R-21.11): the quality conditions T0 checks on the first
``--canary N`` units of a plan (10 by default, 0 disables; units in plan order, decision 18).

After each watched attempt is ledgered, its capture records are read for:

A3   a configured parameter (temperature, reasoning effort, top_p, seed, max_tokens) that a
     request of the agent's model did not carry (not a condition under
     ``--temperature-policy as-benchmark``, which accepted it; recorded). A defence's own
     calls (``model_call_start`` with an ``actor``, such as the tool filter's, which sends
     its own temperature 0.0) carry the defence's parameters, not the agent's: A3 does not
     read them; A4, A6 and A12 do
A4   a reply whose text looks like a tool call, with no structured tool call
     (``--allow-text-tool-calls`` accepts it; recorded)
A6   abnormal finish reasons in more than 20 % of the kept calls watched so far (a kept call
     is a call's final wire attempt); provider-aware: ``stop`` and ``tool_calls`` are normal
     on the OpenAI wire, ``end_turn``, ``tool_use``, ``stop_sequence`` and ``stop`` on the
     Anthropic wire
A11  the attempt errored, aborted or was left unsealed
A12  a reply's served model is absent, or differs from the requested model and is not
     accepted with ``--accept-served-model ID``
A14  the local model changed since the plan (checked before each cell by
     :func:`agentprov_core.live.local.identity.reobserve`, when the plan carries a local
     identity)

If a condition appears and units remain, the campaign stops (exit 1, :data:`STOP_LINE`);
if every unit already ran, it is only a notice. A9 is the preflight probe's
(:mod:`agentprov_core.live.preflight`). A13, the benchmark-validity flag, is no condition:
for each watched attacked unit that completed, the canary says whether the injection's
text reached a model request (:mod:`agentprov_core.live.payload`), and one that did not is
a notice (the run goes on: the benchmark, not the configuration, decided it). Scripted runs are checked too: the scripted transport
can reply with a served model that differs (``served_model``), none at all
(``served_model: null``), a finish reason of ``length`` or a text-encoded tool call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from agentprov_core.live import payload
from agentprov_core.live.replies import NORMAL_FINISH, reply_message, text_tool_call, tool_names
from agentprov_core.live.sse import reply_body

STOP_LINE = ("the canary found a misconfiguration; the campaign stopped after the canary "
             "cells (re-run the same command to resume once the cause is fixed or accepted)")
DEFAULT_CANARY = 10
A6_THRESHOLD = 0.20
#: configured parameters and the request field that carries each
PARAM_FIELDS = {"temperature": "temperature", "reasoning_effort": "reasoning_effort",
                "top_p": "top_p", "seed": "seed", "max_tokens": "max_tokens"}

@dataclass
class Finding:
    check: str
    what: str
    unit: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "what": self.what, "unit": self.unit}

    def line(self) -> str:
        return f"{self.check}: {self.what}" + (f" ({self.unit})" if self.unit else "")


@dataclass
class Settings:
    """What the canary compares against, from the run's options and configuration."""

    wire: str = "openai"
    params: dict[str, Any] = field(default_factory=dict)
    as_benchmark: bool = False
    accepted_served: tuple[str, ...] = ()
    allow_text_tool_calls: bool = False

    @classmethod
    def from_run(cls, params: dict[str, Any], wire: str, *, temperature_policy: str | None,
                 accepted_served: tuple[str, ...], allow_text_tool_calls: bool) -> Settings:
        return cls(wire=wire, params={k: v for k, v in (params or {}).items()
                                      if k in PARAM_FIELDS and v != "harness-default"},
                   as_benchmark=temperature_policy == "as-benchmark",
                   accepted_served=tuple(accepted_served),
                   allow_text_tool_calls=allow_text_tool_calls)

    def record(self) -> dict[str, Any]:
        return {"accepted_served_models": list(self.accepted_served),
                "allow_text_tool_calls": self.allow_text_tool_calls,
                "temperature_policy": "as-benchmark" if self.as_benchmark else None}


def _same(configured: Any, sent: Any) -> bool:
    if isinstance(configured, str) and not isinstance(sent, str):
        try:
            return Decimal(configured) == Decimal(str(sent))
        except (InvalidOperation, ValueError):
            return False
    return configured == sent


def missing_params(body: Any, s: Settings) -> list[str]:
    """A3 for one request body: the configured parameters it does not carry (as configured)."""
    if not isinstance(body, dict):
        return []
    return [k for k, v in s.params.items()
            if PARAM_FIELDS[k] not in body or not _same(v, body[PARAM_FIELDS[k]])]


@dataclass
class Kept:
    """The kept calls of one attempt, as the canary reads them."""

    requests: dict[str, dict[str, Any]] = field(default_factory=dict)  # attempt id -> body
    final: dict[str, str] = field(default_factory=dict)                # call id -> attempt id
    responses: dict[str, dict[str, Any]] = field(default_factory=dict)  # attempt id -> record
    by_actor: set[str] = field(default_factory=set)  # call ids of a defence's own calls


def _kept(records: list[dict[str, Any]]) -> Kept:
    k = Kept()
    for r in records:
        kind = r.get("kind")
        if kind == "wire_request":
            k.requests[r["attempt_id"]] = r.get("body") if isinstance(r.get("body"), dict) else {}
            k.final[r.get("call_id") or r["attempt_id"]] = r["attempt_id"]
        elif kind == "wire_response":
            k.responses[r.get("attempt_id")] = r
        elif kind == "model_call_start" and isinstance(r.get("actor"), str):
            k.by_actor.add(r.get("call_id"))
    return k


def check_records(records: list[dict[str, Any]], s: Settings, unit: str | None = None
                  ) -> tuple[list[Finding], dict[str, int]]:
    """A3, A4 and A12 of one attempt's capture, and its kept-call counts for A6
    (``{"kept": n, "abnormal": m, "text_tool_calls": t, ...}``)."""
    k = _kept(records)
    found: list[Finding] = []
    counts = {"kept": 0, "abnormal": 0, "text_tool_calls": 0, "served_absent": 0,
              "served_other": 0, "params_missing": 0}
    seen: set[tuple[str, str]] = set()

    def once(check: str, what: str) -> None:
        if (check, what) not in seen:
            seen.add((check, what))
            found.append(Finding(check, what, unit))

    normal = NORMAL_FINISH.get(s.wire, NORMAL_FINISH["openai"])
    for cid, aid in k.final.items():
        req = k.requests.get(aid, {})
        missing = missing_params(req, s) if cid not in k.by_actor else []
        if missing:
            counts["params_missing"] += 1
            if not s.as_benchmark:
                once("A3", "configured " + ", ".join(
                    f"{m}={s.params[m]}" for m in missing) + " not transmitted in a request")
        resp = k.responses.get(aid)
        if resp is None or resp.get("status") != 200:
            continue
        counts["kept"] += 1
        body = reply_body(resp.get("body"))  # an Anthropic event stream: its message
        content, structured, finish = reply_message(body, s.wire)
        if finish not in normal:
            counts["abnormal"] += 1
        if not structured and text_tool_call(content, tool_names(req)):
            counts["text_tool_calls"] += 1
            if not s.allow_text_tool_calls:
                once("A4", "a reply's text looks like a tool call it did not make "
                           "structurally (pass --allow-text-tool-calls to accept it)")
        requested = req.get("model")
        served = body.get("model") if isinstance(body, dict) else None
        if not isinstance(served, str) or not served:
            counts["served_absent"] += 1
            once("A12", f"a reply to {requested!r} names no served model")
        elif served != requested:
            counts["served_other"] += 1
            if served not in s.accepted_served:
                once("A12", f"served model {served!r} differs from the requested {requested!r} "
                            f"(pass --accept-served-model {served} to accept it)")
    return found, counts


def check_status(status: str, unit: str | None = None) -> list[Finding]:
    """A11 of one ledgered attempt."""
    if status in ("errored", "aborted"):
        return [Finding("A11", f"an attempt ended {status}", unit)]
    if status not in ("complete", "incomplete", "quarantined"):
        return [Finding("A11", f"an attempt was left unsealed ({status})", unit)]
    return []


class Canary:
    """The canary of one invocation: which units it watches, and what it found."""

    def __init__(self, n: int | None, watched_units: list[str], s: Settings) -> None:
        self.n = DEFAULT_CANARY if n is None else n
        self.watch = set(watched_units[: self.n]) if self.n > 0 else set()
        self.settings = s
        self.findings: list[Finding] = []
        self.kept = 0
        self.abnormal = 0
        self.cells = 0
        self._a6 = False
        self.payload: dict[str, int] = {}  # A13: watched attacked units by payload state
        self.notices: list[Finding] = []  # A13's: never a stop

    def watches(self, unit: str) -> bool:
        return unit in self.watch

    def observe(self, unit: str, status: str, records: list[dict[str, Any]] | None
                ) -> list[Finding]:
        """Check one ledgered attempt of a watched unit; returns the new findings."""
        if not self.watches(unit):
            return []
        self.cells += 1
        new = check_status(status, unit)
        if records:
            found, counts = check_records(records, self.settings, unit)
            new += found
            self.kept += counts["kept"]
            self.abnormal += counts["abnormal"]
        if not self._a6 and self.kept and self.abnormal / self.kept > A6_THRESHOLD:
            self._a6 = True
            new.append(Finding("A6", f"{self.abnormal} of {self.kept} kept call(s) "
                                     f"({100 * self.abnormal / self.kept:.0f} %) ended with an "
                                     "abnormal finish reason (more than 20 %)", unit))
        self.findings += new
        return new

    def observe_payload(self, unit: str, records: list[dict[str, Any]], native: Any
                        ) -> Finding | None:
        """A13 of a watched attacked unit's completed attempt: whether one of the injection
        texts of its native log's document (``native``) reached a request of its capture
        ``records``; a notice when none did."""
        if not self.watches(unit):
            return None
        state = payload.reached(payload.injections(native), payload.request_bodies(records))
        self.payload[state] = self.payload.get(state, 0) + 1
        if state == payload.REACHED:
            return None
        f = Finding("A13", "the injection's text reached no model request (the agent never "
                    "read it: its attack success says nothing of the model)"
                    if state == payload.NOT_REACHED else
                    "whether the injection reached the model is not determined (no "
                    "injection text in the native log)", unit)
        self.notices.append(f)
        return f

    def local_model_changed(self, unit: str, changed: list[str]) -> Finding:
        f = Finding("A14", "the local model changed since the plan: " + ", ".join(changed),
                    unit)
        self.findings.append(f)
        return f

    def record(self) -> dict[str, Any]:
        return {"canary": self.n, "watched_units": len(self.watch), "checked_attempts": self.cells,
                "kept_calls": self.kept, "abnormal_finishes": self.abnormal,
                "findings": [f.as_json() for f in self.findings],
                "payload": {k: self.payload[k] for k in payload.STATES if k in self.payload},
                "notices": [f.as_json() for f in self.notices], **self.settings.record()}


def dumps(findings: list[Finding]) -> str:
    return json.dumps([f.as_json() for f in findings])
