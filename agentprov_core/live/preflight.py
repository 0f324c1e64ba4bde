"""The preflight probe (R-18): before the first cell of a real run, T0 checks that the
endpoint answers, that the stock message roles reach the model (A9), that tool calls come
back structured (A4) and that the configured parameters are transmitted (A3).

Each probe call is one ``run-cell`` request carrying ``preflight`` to the run's own worker
(same environment, containment, egress proxy and key): the worker's child builds the
request with AgentDojo's stock ``OpenAILLM`` element over the recording transport (the
system message in its stock role, one tool, the configured parameters as the element sends
them) and makes exactly one wire attempt (``agentprov_dojo.cells.run_probe``). An Inspect
source's worker makes the call through Inspect's own model, built as its cells build the
agent's, with no sampling parameter (the task fixes them, D-742), also one wire attempt
(``agentprov_inspect.probe.run_probe``); the caller then judges with no configured
parameter, so A3 checks nothing there. T0 judges the recorded exchange here:

* **confirmed**: a structured call of ``report_probe`` whose ``code`` is the one only the
  system message held (A9 and A4 evidenced), and every configured parameter in the
  request (A3);
* **unconfirmed**: any other answer (text, another code, a server error or rate limit):
  another call, up to :data:`CALLS` (R-18.3);
* **refused** (``cli.refused.preflight``, exit 4): a parameter not transmitted (A3, unless
  ``--temperature-policy as-benchmark``), the code in text with no structured call (A4,
  unless ``--allow-text-tool-calls``), a request the endpoint rejects (HTTP 400/422: the
  stock roles or parameters), or no evidence after three calls (R-18.6);
* **unreachable** (``cli.environment.preflight``, exit 3): a connection that never got an
  answer, a key or model the endpoint does not accept (HTTP 401, 403, 404), or three
  server errors in a row (R-18.7).

Every call is charged to the caps (R-18.4) by the caller. In a campaign the probe's
capture logs are kept in the corpus under ``preflight/`` (``preflight/ledger.jsonl``, one
line per call, and the log itself as ``preflight/sha256/<sha256>``), so that their billed
calls count in later invocations too; ``--preflight-only`` keeps nothing.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from agentprov_core.errors import AgentprovError
from agentprov_core.live.canary import Settings, missing_params
from agentprov_core.live.replies import reply_message, text_tool_call
from agentprov_core.live.sse import reply_body

CALLS = 3
FUNCTION = "report_probe"
USER = "Run the connectivity check now."


def instruction(code: str) -> str:
    return (f"This is a connectivity check by agentprov, not a task. Call the function "
            f"{FUNCTION} exactly once, with the argument code set to \"{code}\". "
            f"Do not answer in text.")


@dataclass
class Verdict:
    verdict: str                      # confirmed | unconfirmed | refused | unreachable
    why: str = ""
    notes: list[str] = field(default_factory=list)
    status: int | None = None


def judge(records: list[dict[str, Any]], code: str, s: Settings,
          error: str | None = None) -> Verdict:
    """The verdict of one probe call from its capture records (``error``: what the worker's
    child reported, when it failed)."""
    req = next((r for r in records if r.get("kind") == "wire_request"), None)
    resp = next((r for r in records if r.get("kind") == "wire_response"), None)
    err = next((r for r in records if r.get("kind") == "wire_error"), None)
    if req is None:
        return Verdict("unreachable", "the probe sent no request (the worker's child failed "
                                      f"before the wire: {(error or 'no reason given')[:300]})")
    body = req.get("body") if isinstance(req.get("body"), dict) else {}
    notes: list[str] = []
    missing = missing_params(body, s)
    if missing:
        what = ", ".join(f"{m}={s.params[m]}" for m in missing)
        if not s.as_benchmark:
            return Verdict("refused", f"A3: the configured {what} was not transmitted by the "
                                      "stock element")
        notes.append(f"A3: {what} not transmitted (accepted: --temperature-policy as-benchmark)")
    if resp is None:
        why = (f"{err.get('error_type', 'an error')}: {err.get('error_message', '')}"
               if err else "no response was recorded")
        return Verdict("unreachable", f"no answer: {why[:300]}")
    status = resp.get("status")
    rbody = resp.get("body")
    if status != 200:
        message = ""
        if isinstance(rbody, dict) and isinstance(rbody.get("error"), dict):
            message = str(rbody["error"].get("message") or "")[:300]
        elif isinstance(rbody, str):
            message = rbody[:300]
        if status in (400, 422):
            return Verdict("refused", f"the endpoint rejected the stock request (HTTP {status}"
                                      f"{': ' + message if message else ''}); A9 (roles) or "
                                      "A3 (parameters)", status=status)
        if status in (401, 403, 404):
            return Verdict("unreachable", f"HTTP {status}{': ' + message if message else ''} "
                                          "(the key, the model id or the base URL)",
                           status=status)
        return Verdict("unconfirmed", f"HTTP {status}", notes, status=status)
    rbody = reply_body(rbody)  # an Anthropic event stream: the message it assembles into
    content, structured, _finish = reply_message(rbody, s.wire)
    calls: list[tuple[Any, Any]] = []  # (function name, arguments)
    if isinstance(rbody, dict) and s.wire == "anthropic":
        calls = [(b.get("name"), b.get("input")) for b in rbody.get("content") or []
                 if isinstance(b, dict) and b.get("type") == "tool_use"]
    elif isinstance(rbody, dict):
        msg = ((rbody.get("choices") or [{}])[0] or {}).get("message") or {}
        for c in msg.get("tool_calls") or []:
            fn = (c or {}).get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (ValueError, TypeError):
                args = {}
            calls.append((fn.get("name"), args))
    for name, args in calls:
        if name == FUNCTION and isinstance(args, dict) and args.get("code") == code:
            return Verdict("confirmed", "a structured report_probe call with the code of the "
                                        "system message", notes, status=200)
    if not structured and isinstance(content, str) and (
            code in content or text_tool_call(content, [FUNCTION])):
        if not s.allow_text_tool_calls:
            return Verdict("refused", "A4: the reply made the tool call in text, not as a "
                                      "structured tool call (pass --allow-text-tool-calls to "
                                      "accept it, recorded)", status=200)
        if code in content:
            notes.append("A4: a text-encoded tool call (accepted: --allow-text-tool-calls)")
            return Verdict("confirmed", "the code of the system message, in a text-encoded "
                                        "tool call", notes, status=200)
    return Verdict("unconfirmed", "the reply did not evidence the instruction of the system "
                                  "message", notes, status=200)


class Probe:
    """Run the probe through ``call(n, code, instruction) -> (records, error)`` (which
    makes one probe call and returns its capture records and the child's error, if any;
    the caller charges and keeps them), up to three calls."""

    def __init__(self, endpoint: str, url: str, settings: Settings) -> None:
        self.endpoint, self.url, self.settings = endpoint, url, settings
        self.calls: list[dict[str, Any]] = []

    def run(self, call) -> Verdict:
        last: Verdict | None = None
        for n in range(1, CALLS + 1):
            code = secrets.token_hex(6)
            records, error = call(n, code, instruction(code))
            v = judge(records, code, self.settings, error)
            self.calls.append({"call": n, "verdict": v.verdict, "why": v.why,
                               "status": v.status, "notes": v.notes})
            if v.verdict == "confirmed":
                return v
            if v.verdict == "refused":
                raise AgentprovError("cli.refused.preflight", endpoint=self.endpoint,
                                     url=self.url, why=v.why)
            if v.verdict == "unreachable":
                raise AgentprovError("cli.environment.preflight", endpoint=self.endpoint,
                                     url=self.url, why=v.why)
            last = v
        if last is not None and all(c["status"] not in (None, 200) for c in self.calls):
            raise AgentprovError("cli.environment.preflight", endpoint=self.endpoint,
                                 url=self.url, why=f"{CALLS} calls, no answer but errors "
                                                   f"({last.why})")
        raise AgentprovError("cli.refused.preflight", endpoint=self.endpoint, url=self.url,
                             why=f"no evidence after {CALLS} calls that the system message's "
                                 f"instruction reached the model (A9; last: "
                                 f"{last.why if last else 'none'})")

    def record(self, verdict: Verdict | None) -> dict[str, Any]:
        return {"verdict": verdict.verdict if verdict else None, "calls": list(self.calls),
                "notes": list(verdict.notes) if verdict else []}
