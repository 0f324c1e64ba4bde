"""A deterministic OpenAI-style server on loopback for AgentHarm through Inspect: it answers
the agent with tool calls and both judges with well-formed verdicts, each reply a function
of the request alone (never of arrival order), and logs every request body it answers.

It is a stand-in for a model (no model runs here), shared by the agreement check
(``benchmarks/agreement_inspect.py``) and the request-equality test
(``tests/test_agentharm_requests.py``), so that Inspect's own runner and agentprov can be
driven against one server and their request bodies compared.

What it answers, by what the request is:

* **the preflight probe** (a system message asking for ``report_probe`` with a code, sent
  by ``agentprov run`` before a real-endpoint campaign): that call with the code;
* **the agent** (a request that offers tools): the tool a forced ``tool_choice`` names;
  else the first offered tool, in name order (inspect_evals shuffles the order it offers
  them in), that the conversation has not called yet, with an argument for every
  parameter the schema declares (:func:`arguments`); once every offered tool was called,
  a final text, which is a refusal (:data:`REFUSAL`) for one user prompt in three (by the
  prompt's sha256), else a short report;
* **the refusal judge** (AgentHarm's refusal prompt, which asks for ``Answer: Yes`` or
  ``Answer: No``): ``Answer: Yes`` when the response it judges holds :data:`REFUSAL`,
  else ``Answer: No``, after a line of reasoning;
* **the semantic judge** (any other request): ``pass`` or ``fail``, by the sha256 of its
  prompt.

``GET /v1/models`` lists :data:`MODEL` and :data:`JUDGE` (so ``agentprov run --endpoint
openai_compat --base-url URL`` accepts the server). A path may carry a prefix before
``/v1/`` (``/<label>/v1/chat/completions``): the body is logged under that label, so the
sides of a comparison can share one server and still be told apart.
"""

from __future__ import annotations

import hashlib
import json
import re
import socketserver
import threading
from collections import defaultdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "m"
#: a second model the server lists, for judges on a model other than the agent's
JUDGE = "judge-m"
REFUSAL = "I'm sorry, but I can't help with that request."
#: AgentHarm's refusal prompt (inspect_evals.agentharm.scorer.DEFAULT_REFUSAL_PROMPT) ends
#: asking for this, and holds the judged response between these tags
REFUSAL_MARK = 'answer with "Answer: Yes" or "Answer: No"'
_RESPONSE = re.compile(r"<response>(.*)</response>", re.S)
_PROBE = re.compile(r'code set to "([0-9a-f]+)"')
#: what inspect_evals draws unseeded (``random.choices``) into a tool's result, on either
#: side: the post id of ``upload_file``'s and ``post_to_blog``'s URLs
RANDOM_IN_RESULTS = re.compile(r"(https://(?:superdrive|myblog)\.com/)[a-z0-9]{8}\b")


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else " ".join(
        p.get("text", "") for p in c or [] if isinstance(p, dict))


def masked(text: str) -> str:
    """``text`` with the ids of :data:`RANDOM_IN_RESULTS` masked."""
    return RANDOM_IN_RESULTS.sub(r"\1<unseeded>", text)


def _digest(text: str) -> int:
    """A number drawn from ``text``, blind to the ids inspect_evals draws unseeded."""
    return int.from_bytes(hashlib.sha256(masked(text).encode()).digest()[:4], "big")


def arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """An argument for every parameter ``tool``'s schema declares, by its type: a string
    naming the parameter, 1, true, a one-string list or an empty object."""
    props = ((tool["function"].get("parameters") or {}).get("properties") or {})
    by_type = {"integer": 1, "number": 1, "boolean": True, "object": {}}
    out: dict[str, Any] = {}
    for name, schema in sorted(props.items()):
        kind = schema.get("type", "string")
        if kind == "array":
            out[name] = [f"{name} of the note"]
        else:
            out[name] = by_type.get(kind, f"{name} of the note")
    return out


def answer(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(what the request is: ``probe``, ``agent``, ``refusal_judge`` or
    ``semantic_judge``; the assistant message that answers it)."""
    msgs = body.get("messages") or []
    system = " ".join(_text(m) for m in msgs if m.get("role") in ("system", "developer"))
    if probe := _PROBE.search(system):
        return "probe", _calls([("call_probe", "report_probe", {"code": probe[1]})])
    if body.get("tools"):
        return "agent", _agent(body, msgs)
    prompt = "\n".join(_text(m) for m in msgs)
    if REFUSAL_MARK in prompt:
        judged = _RESPONSE.search(prompt)
        refused = judged is not None and REFUSAL in judged[1]
        verdict = ("The response declines the task. Answer: Yes" if refused else
                   "The response carries the task out. Answer: No")
        return "refusal_judge", {"role": "assistant", "content": verdict}
    return "semantic_judge", {"role": "assistant",
                              "content": "pass" if _digest(prompt) % 2 == 0 else "fail"}


def _agent(body: dict[str, Any], msgs: list[dict[str, Any]]) -> dict[str, Any]:
    tools = sorted(body["tools"], key=lambda t: t["function"]["name"])
    called = {c["function"]["name"] for m in msgs if m.get("role") == "assistant"
              for c in m.get("tool_calls") or []}
    turn = sum(1 for m in msgs if m.get("role") == "assistant")
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        forced = choice.get("function", {}).get("name")
        todo = [t for t in tools if t["function"]["name"] == forced]
    elif choice == "none":
        todo = []
    else:
        todo = [t for t in tools if t["function"]["name"] not in called]
    if todo:
        tool = todo[0]
        return _calls([(f"call_{turn}_{tool['function']['name']}", tool["function"]["name"],
                        arguments(tool))])
    user = "\n".join(_text(m) for m in msgs if m.get("role") == "user")
    if _digest(user) % 3 == 0:
        return {"role": "assistant", "content": REFUSAL}
    return {"role": "assistant", "content": "Done: every step is carried out and shared."}


def _calls(calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls]}


def completion(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0,
            "model": body.get("model") or MODEL,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}


class StandIn(ThreadingHTTPServer):
    """The server, serving on a thread from construction; :meth:`take` returns (and
    clears) the bodies it answered under a label, in arrival order, each with its kind."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.log: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def server_bind(self) -> None:  # HTTPServer's getfqdn is a reverse lookup
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def base_url(self, label: str = "") -> str:
        return f"http://127.0.0.1:{self.server_port}" + (f"/{label}" if label else "") + "/v1"

    def take(self, label: str = "") -> list[tuple[str, dict[str, Any]]]:
        with self.lock:
            return self.log.pop(label, [])

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: StandIn

    def log_message(self, *a: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status, HTTPStatus(status).phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, str]:
        path = self.path.split("?", 1)[0]
        label, sep, rest = path.strip("/").partition("/v1/")
        if not sep:
            label, rest = "", path.strip("/").removeprefix("v1/")
        return label, rest

    def do_GET(self) -> None:
        _, rest = self._route()
        if rest == "models":
            return self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "standin"}
                for m in (MODEL, JUDGE)]})
        self._send(404, {"error": {"message": "no such route"}})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        label, rest = self._route()
        if rest != "chat/completions":
            return self._send(404, {"error": {"message": "no such route"}})
        body = json.loads(raw)
        kind, message = answer(body)
        with self.server.lock:
            self.server.log[label].append((kind, body))
        self._send(200, completion(body, message))


# --------------------------------------------------------------- comparing two runs' bodies
def normalised(body: dict[str, Any]) -> dict[str, Any]:
    """A request body as compared: ``tools`` as a set (inspect_evals shuffles the order
    it offers them in, unseeded, on either side), the unseeded post ids of
    :data:`RANDOM_IN_RESULTS` masked wherever the messages hold them, every other field as
    sent."""
    out = dict(body)
    if "tools" in out:
        out["tools"] = sorted(out["tools"], key=lambda t: json.dumps(t, sort_keys=True))
    if "messages" in out:
        out["messages"] = json.loads(masked(json.dumps(out["messages"])))
    return out


def _key(body: dict[str, Any]) -> str:
    return json.dumps(normalised(body), sort_keys=True)


def _conversation(body: dict[str, Any]) -> str:
    return json.dumps(normalised(body).get("messages"), sort_keys=True)


def _unmatched(bodies: list[tuple[str, dict[str, Any]]], extra: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for kind, body in bodies:
        if extra[_key(body)] > 0:
            extra[_key(body)] -= 1
            out.append((kind, body))
    return out


def differences(ours: list[tuple[str, dict[str, Any]]],
                theirs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """How two runs' request bodies (``(kind, body)`` in any order) differ, as multisets of
    normalised bodies; an empty list when every body has its identical twin. A body with
    no twin is paired, when it can be, with the other side's body of the same kind and
    messages, and the differing fields are named."""
    from collections import Counter

    a, b = Counter(_key(x) for _, x in ours), Counter(_key(x) for _, x in theirs)
    left, right = _unmatched(ours, a - b), _unmatched(theirs, b - a)
    problems = []
    for kind, x in left:
        twin = next((y for k, y in right if k == kind and _conversation(y) == _conversation(x)),
                    None)
        if twin is None:
            problems.append(f"{kind}: a request only agentprov sent ({len(x.get('messages') or [])}"
                            f" message(s)): {_key(x)[:300]}")
            continue
        right = [(k, y) for k, y in right if y is not twin]
        nx, ny = normalised(x), normalised(twin)
        fields = sorted(f for f in set(nx) | set(ny) if nx.get(f, "<absent>") != ny.get(f, "<absent>"))
        problems.append(f"{kind}: " + "; ".join(
            f"{f}: agentprov {json.dumps(nx.get(f, '<absent>'))[:120]}, "
            f"Inspect {json.dumps(ny.get(f, '<absent>'))[:120]}" for f in fields))
    for kind, y in right:
        problems.append(f"{kind}: a request only Inspect sent ({len(y.get('messages') or [])} "
                        f"message(s)): {_key(y)[:300]}")
    return problems
