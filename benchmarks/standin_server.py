"""A local OpenAI-style server on loopback, for ``bench_realpath.py``: it answers like a model
that follows instructions, with a fixed latency added to every chat completion, and plays
one local server kind's fingerprint routes so that ``agentprov run --endpoint KIND`` accepts
it.

    python benchmarks/standin_server.py --kind llamacpp --latency 0.2 --weights FILE

It prints its port on the first line of stdout, serves until stdin closes, then prints
one JSON line of what it answered (requests per route, chat completions by what they were)
and exits.

The replies, stateless (a conversation's own messages decide), are the three of
``examples/scripts/live-demo.json`` in order: with no tool result yet, a ``read_file`` call;
after one tool result, ``get_most_recent_transactions``; after two, the final text. So
every cell of the 16 benign banking ones makes exactly three calls, whoever drives it. The
preflight probe (a system message asking for ``report_probe`` with a code) gets that call
with the code.

With ``--policy FILE`` (the agreement check, ``benchmarks/agreement_dojo.py``) the replies
come from a policy instead, a function of the request alone (never of arrival order): the
text of the conversation's first user message picks a list of replies from
``policy["prompts"]`` (``policy["default"]`` when none matches), and the number of tool
messages in the conversation picks the reply (the last one once past the end). Once a tool
message holds a goal of ``policy["injections"]``, the replies after it are that goal's list,
counted from it: a model that follows the injection. A reply is an
``agentprov-llm-script/0.1`` message reply: ``content`` and/or ``tool_calls`` (``name``,
``arguments``), ids ``call_<n>_<k>``. With ``--log FILE`` every request is appended to FILE
as one JSON line: ``method``, ``path`` and, for a POST, ``body`` (the JSON the client sent).

Kinds (the fingerprints of ``agentprov_core/live/local/kinds.py``):

* ``llamacpp``: ``/v1/models`` entries ``owned_by: "llamacpp"``; ``GET /props`` with
  ``default_generation_settings``, ``total_slots``, ``model_path`` (``--weights``: a file on
  this machine, hashed once into the digest cache) and ``build_info``;
* ``vllm``: ``/v1/models`` entries ``owned_by: "vllm"`` with ``root`` (a repo id not in the
  Hugging Face cache: no weight file), ``GET /version``;
* ``openai_compat``: ``/v1/models`` alone (a generic OpenAI-style server).
"""

from __future__ import annotations

import argparse
import json
import re
import socketserver
import sys
import threading
import time
from collections import Counter
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
MODEL = "m"


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else " ".join(
        p.get("text", "") for p in c or [] if isinstance(p, dict))


class StandIn:
    def __init__(self, kind: str, latency: float, weights: str | None,
                 split: bool = False, policy: dict[str, Any] | None = None,
                 log: Path | None = None) -> None:
        self.kind, self.latency, self.weights, self.split = kind, latency, weights, split
        self.replies = [{k: v for k, v in r.items() if k != "note"}
                        for r in json.loads(DEMO.read_text(encoding="utf-8"))]
        self.policy, self.log = policy, log
        self.counts: Counter = Counter()
        self.lock = threading.Lock()

    def record(self, method: str, path: str, body: Any = None) -> None:
        if self.log is None:
            return
        line = {"method": method, "path": path} | ({"body": body} if method == "POST" else {})
        with self.lock, open(self.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, sort_keys=True) + "\n")

    def policy_reply(self, msgs: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        """(what, the reply) the policy gives this conversation (see the module's doc)."""
        first = next((_text(m) for m in msgs if m.get("role") == "user"), "")
        prompts = self.policy.get("prompts") or {}
        replies = prompts.get(first) or self.policy.get("default") or [{"content": "Done."}]
        tools = [_text(m) for m in msgs if m.get("role") == "tool"]
        n = len(tools)
        for i, text in enumerate(tools):  # the first tool result that carries a known goal
            goal = next((g for g in self.policy.get("injections") or {} if g in text), None)
            if goal is not None:
                followed = self.policy["injections"][goal]
                return (f"policy injection call {n - i}",
                        followed[min(n - i - 1, len(followed) - 1)])
        return (f"policy {'cell' if first in prompts else 'default'} call {n + 1}",
                replies[min(n, len(replies) - 1)])

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1

    def listing(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": MODEL, "object": "model", "created": int(time.time())}
        if self.kind == "llamacpp":
            entry |= {"owned_by": "llamacpp", "meta": {"n_params": 270_000_000}}
        elif self.kind == "vllm":
            entry |= {"owned_by": "vllm", "root": "bench/not-in-the-hf-cache", "parent": None,
                      "max_model_len": 32768}
        else:
            entry |= {"owned_by": "organization_owner"}
        return {"object": "list", "data": [entry]}

    def get(self, path: str) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, self.listing()
        if self.kind == "llamacpp" and path == "/props":
            return 200, {"default_generation_settings": {"n_ctx": 4096,
                                                         "params": {"temperature": 0.8}},
                         "total_slots": 1, "model_alias": MODEL, "model_path": self.weights,
                         "modalities": {"vision": False}, "chat_template": "{{x}}",
                         "build_info": "b6000-bench"}
        if self.kind == "llamacpp" and path == "/health":
            return 200, {"status": "ok"}
        if self.kind == "vllm" and path == "/version":
            return 200, {"version": "0.10.1"}
        return 404, {"error": {"message": "no such route"}}

    def chat(self, req: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        msgs = req.get("messages") or []
        system = " ".join(_text(m) for m in msgs if m.get("role") in ("system", "developer"))
        probe = re.search(r'code set to "([0-9a-f]+)"', system)
        if probe:
            what = "probe"
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_p", "type": "function", "function": {
                    "name": "report_probe", "arguments": json.dumps({"code": probe[1]})}}]}
        else:
            n = sum(1 for m in msgs if m.get("role") == "tool")
            if self.policy is not None:
                what, reply = self.policy_reply(msgs)
            else:
                what = f"cell call {n + 1}"
                reply = self.replies[min(n, len(self.replies) - 1)]
            if reply.get("tool_calls"):
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"call_{n}_{k}", "type": "function", "function": {
                        "name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for k, c in enumerate(reply["tool_calls"])]}
            else:
                message = {"role": "assistant", "content": reply["content"]}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return what, {"id": "chatcmpl-bench", "object": "chat.completion", "created": 0,
                      "model": req.get("model") or MODEL,
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                      "usage": {"prompt_tokens": 1000, "completion_tokens": 20,
                                "total_tokens": 1020}}


def serve(s: StandIn) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as the servers it stands in for (uvicorn, llama.cpp's) set: with
        # Nagle's algorithm a body written after its headers (--split) would wait for the
        # client's delayed ACK (40 ms a request on Linux)
        disable_nagle_algorithm = True

        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                    "\r\n").encode()
            if s.split:  # as h11-based servers (uvicorn) write: the head, then the body
                self.wfile.write(head)
                self.wfile.write(data)
            else:
                self.wfile.write(head + data)

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            s.count(f"GET {path}")
            s.record("GET", path)
            self._send(*s.get(path))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            if path != "/v1/chat/completions":
                s.count(f"POST {path}")
                return self._send(404, {"error": {"message": "no such route"}})
            request = json.loads(body)
            s.record("POST", path, request)
            what, reply = s.chat(request)
            s.count(what)
            if s.latency:
                time.sleep(s.latency)
            self._send(200, reply)

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def server_bind(self) -> None:  # HTTPServer's getfqdn is a reverse lookup
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = self.server_address[:2]

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", default="llamacpp", choices=["llamacpp", "vllm", "openai_compat"])
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added per chat call")
    ap.add_argument("--weights", help="llamacpp: the model_path /props names")
    ap.add_argument("--split", action="store_true",
                    help="write each answer's head and body separately")
    ap.add_argument("--policy", type=Path,
                    help="replies from this policy file, a function of the request")
    ap.add_argument("--log", type=Path, help="append every request to this file (JSON lines)")
    args = ap.parse_args(argv)
    policy = json.loads(args.policy.read_text(encoding="utf-8")) if args.policy else None
    s = StandIn(args.kind, args.latency, args.weights, args.split, policy, args.log)
    httpd = serve(s)
    print(httpd.server_address[1], flush=True)
    sys.stdin.read()
    httpd.shutdown()
    print(json.dumps(dict(s.counts), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
