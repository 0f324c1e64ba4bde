"""The per-model quality counts of a run, read from capture logs (``live.quality``).

Per requested model: kept calls (the final wire attempt of each model call), wire
attempts, retries (attempts after a call's first), abnormal finishes (A6: provider-aware;
``stop`` and ``tool_calls`` are normal for OpenAI-style replies), the served models seen,
and wire errors. The canary's checks read the same counts (the real-endpoint issue)."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

NORMAL_FINISH = {"openai": {"stop", "tool_calls"},
                 "anthropic": {"end_turn", "tool_use", "stop_sequence", "stop"}}


def from_records(records: list[dict[str, Any]], wire: str = "openai") -> dict[str, dict[str, Any]]:
    by_attempt: dict[str, dict[str, Any]] = {}
    final_of_call: dict[str, str] = {}
    for r in records:
        kind = r.get("kind")
        if kind == "wire_request":
            body = r.get("body") if isinstance(r.get("body"), dict) else {}
            by_attempt[r["attempt_id"]] = {"model": body.get("model", "?"),
                                           "retry": r.get("first_attempt_id") != r["attempt_id"]}
            final_of_call[r.get("call_id") or r["attempt_id"]] = r["attempt_id"]
        elif kind in ("wire_response", "wire_error") and r.get("attempt_id") in by_attempt:
            a = by_attempt[r["attempt_id"]]
            a["kind"] = kind
            body = r.get("body") if isinstance(r.get("body"), dict) else {}
            a["status"] = r.get("status")
            a["served"] = body.get("model")
            choices = body.get("choices") or [{}]
            a["finish"] = (choices[0] or {}).get("finish_reason") if choices else None
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "calls": 0, "wire_attempts": 0, "retries": 0, "abnormal_finishes": 0,
        "wire_errors": 0, "served_models": Counter()})
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
            if a.get("kind") == "wire_response" and a.get("status") == 200 and \
                    a.get("finish") not in NORMAL_FINISH.get(wire, NORMAL_FINISH["openai"]):
                q["abnormal_finishes"] += 1
    return {m: dict(q, served_models=dict(q["served_models"])) for m, q in out.items()}


def merge(total: dict[str, dict[str, Any]], part: dict[str, dict[str, Any]]) -> None:
    for model, q in part.items():
        t = total.setdefault(model, {"calls": 0, "wire_attempts": 0, "retries": 0,
                                     "abnormal_finishes": 0, "wire_errors": 0,
                                     "served_models": {}})
        for k in ("calls", "wire_attempts", "retries", "abnormal_finishes", "wire_errors"):
            t[k] += q[k]
        for served, n in q["served_models"].items():
            t["served_models"][served] = t["served_models"].get(served, 0) + n


def lines(quality: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for model, q in sorted(quality.items()):
        served = ", ".join(f"{s} x{n}" for s, n in sorted(q["served_models"].items())) or "none"
        out.append(f"  quality  {model}: {q['calls']} call(s), {q['retries']} retr"
                   f"{'y' if q['retries'] == 1 else 'ies'}, {q['abnormal_finishes']} abnormal "
                   f"finish(es), {q['wire_errors']} wire error(s); served {served}")
    return out
