"""The per-model quality counts of a run, read from capture logs (``live.quality``).

Per requested model: kept calls (the final wire attempt of each model call), wire
attempts, retries (attempts after a call's first), abnormal finishes (A6: provider-aware;
``stop`` and ``tool_calls`` are normal for OpenAI-style replies), the served models seen,
wire errors, and the drift the canary watches (:mod:`agentprov_core.live.canary`): kept replies
that named no served model (``served_absent``), that named another model than the request
(``served_other``), and whose text looked like a tool call made in text
(``text_tool_calls``, A4)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from agentprov_core.live.replies import NORMAL_FINISH, reply_message, text_tool_call, tool_names
from agentprov_core.live.sse import reply_body

COUNTS = ("calls", "wire_attempts", "retries", "abnormal_finishes", "wire_errors",
          "served_absent", "served_other", "text_tool_calls")
#: counted only when the adaptive start gate ran (:mod:`agentprov_core.run.gate`): how often
#: a reply to this model made it lower the cells in flight; absent otherwise, so a run
#: without the gate records what it always did
GATE_COUNTS = ("gate_backoffs",)


def empty() -> dict[str, Any]:
    """A model's counts before any call."""
    return dict.fromkeys(COUNTS, 0) | {"served_models": {}}


def from_records(records: list[dict[str, Any]], wire: str = "openai") -> dict[str, dict[str, Any]]:

    by_attempt: dict[str, dict[str, Any]] = {}
    final_of_call: dict[str, str] = {}
    for r in records:
        kind = r.get("kind")
        if kind == "wire_request":
            body = r.get("body") if isinstance(r.get("body"), dict) else {}
            by_attempt[r["attempt_id"]] = {"model": body.get("model", "?"),
                                           "retry": r.get("first_attempt_id") != r["attempt_id"],
                                           "tools": body.get("tools")}
            final_of_call[r.get("call_id") or r["attempt_id"]] = r["attempt_id"]
        elif kind in ("wire_response", "wire_error") and r.get("attempt_id") in by_attempt:
            a = by_attempt[r["attempt_id"]]
            a["kind"] = kind
            body = reply_body(r.get("body"))  # an Anthropic event stream: its message
            body = body if isinstance(body, dict) else {}
            a["status"] = r.get("status")
            a["served"] = body.get("model")
            a["content"], a["structured"], a["finish"] = reply_message(body, wire)
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: dict.fromkeys(COUNTS, 0) | {"served_models": Counter()})
    kept = set(final_of_call.values())
    for aid, a in by_attempt.items():
        q = out[a["model"]]
        q["wire_attempts"] += 1
        q["retries"] += int(a["retry"])
        if a.get("kind") == "wire_error":
            q["wire_errors"] += 1
        if aid in kept:
            q["calls"] += 1
            if a.get("served"):
                q["served_models"][a["served"]] += 1
            if a.get("kind") == "wire_response" and a.get("status") == 200:
                if a.get("finish") not in NORMAL_FINISH.get(wire, NORMAL_FINISH["openai"]):
                    q["abnormal_finishes"] += 1
                if not isinstance(a.get("served"), str) or not a["served"]:
                    q["served_absent"] += 1
                elif a["served"] != a["model"]:
                    q["served_other"] += 1
                if not a.get("structured") and text_tool_call(
                        a.get("content"), tool_names({"tools": a.get("tools")})):
                    q["text_tool_calls"] += 1
    return {m: dict(q, served_models=dict(q["served_models"])) for m, q in out.items()}


def merge(total: dict[str, dict[str, Any]], part: dict[str, dict[str, Any]]) -> None:
    for model, q in part.items():
        t = total.setdefault(model, empty())
        for k in COUNTS:
            t[k] = t.get(k, 0) + q.get(k, 0)
        for k in GATE_COUNTS:
            if k in q:
                t[k] = t.get(k, 0) + q[k]
        for served, n in q["served_models"].items():
            t["served_models"][served] = t["served_models"].get(served, 0) + n


def lines(quality: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for model, q in sorted(quality.items()):
        served = ", ".join(f"{s} x{n}" for s, n in sorted(q["served_models"].items())) or "none"
        out.append(f"  quality  {model}: {q['calls']} call(s), {q['retries']} retr"
                   f"{'y' if q['retries'] == 1 else 'ies'}, {q['abnormal_finishes']} abnormal "
                   f"finish(es), {q['wire_errors']} wire error(s); served {served}"
                   + (f"; {q['served_absent']} reply(ies) without a served model"
                      if q.get("served_absent") else "")
                   + (f"; {q['text_tool_calls']} text-encoded tool call(s)"
                      if q.get("text_tool_calls") else "")
                   + (f"; the start gate backed off {q['gate_backoffs']} time(s)"
                      if "gate_backoffs" in q else ""))
    return out
