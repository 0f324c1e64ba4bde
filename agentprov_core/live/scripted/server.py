"""The scripted endpoint: a loopback OpenAI-style Chat Completions server that replays a
:class:`~agentprov_core.live.scripted.script.Script`.

A worker reaches it exactly as it would reach a real endpoint: the benchmark's own SDK client
(``openai.OpenAI(base_url=...)``) over the recording transport, so a scripted run exercises
the real path. Routes, under ``/s/<session>/v1``:

``POST .../chat/completions``  the n-th request of a session (from 0) is answered with reply n
``GET  .../models``            a listing with the one model id ``scripted``

Every session replays the script from its first reply, so a cell's replies do not depend on
what else runs concurrently. A script by role (``roles``) answers each call from the
replies of its role, told apart by the request's ``model`` (``models``: the agent's model
id, ``scripted``, and each judge's ``--judge ROLE=MODEL``), so a reply one role did not use
can never answer another's call. A session that asks for more replies than the script (or
its role) holds gets HTTP 400 (an OpenAI-style error, which the SDK does not retry);
:meth:`ScriptedEndpoint.unused` says what a session left over. Request bodies are never
logged. Responses are deterministic: ``created`` is 0, ids are ``chatcmpl-scripted-<n>`` and
``call_<n>_<k>``, and no Date header is sent.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import select
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from msgspec import UNSET

from agentprov_core.live.scripted.script import AGENT, RateLimit, Reply, Script

MODEL_ID = "scripted"
MAX_BODY = 64 * 1024 * 1024
SESSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_ROUTE = re.compile(r"^/s/([^/]+)/v1/(chat/completions|models)$")


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def estimate_tokens(size: int) -> int:
    """The default token count of ``size`` bytes: one token per 4 bytes, at least 1."""
    return max(1, math.ceil(size / 4))


def default_usage(request: dict[str, Any], message: dict[str, Any]) -> dict[str, int]:
    """Usage when the reply gives none: prompt tokens from the request's canonical JSON
    (sorted keys, no spaces, UTF-8), completion tokens from the reply's content and each
    tool call's name and arguments string; both at one token per 4 bytes (at least 1)."""
    prompt = estimate_tokens(len(_canonical(request)))
    size = len((message.get("content") or "").encode())
    for call in message.get("tool_calls", ()):
        size += len(call["function"]["name"].encode())
        size += len(call["function"]["arguments"].encode())
    completion = estimate_tokens(size)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def completion_body(reply: Reply, n: int | str, request: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions response of reply ``n`` to ``request``."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": None if reply.content is UNSET else reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{k}" if c.id is UNSET else c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments_json()}}
            for k, c in enumerate(reply.tool_calls)]
    model = request.get("model")
    served = (reply.served_model if reply.served_model is not UNSET
              else model if isinstance(model, str) and model else MODEL_ID)
    body: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{n}", "object": "chat.completion", "created": 0,
        "model": served,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish,
                     "logprobs": None}],
    }
    if served is None:  # served_model: null, a reply without a served model (A12)
        del body["model"]
    if reply.usage is UNSET:
        body["usage"] = default_usage(request, message)
    elif reply.usage is not None:
        u = reply.usage
        total = (u.prompt_tokens + u.completion_tokens if u.total_tokens is UNSET
                 else u.total_tokens)
        body["usage"] = {"prompt_tokens": u.prompt_tokens,
                         "completion_tokens": u.completion_tokens, "total_tokens": total}
    return body


def error_body(message: str, type_: str = "invalid_request_error",
               code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, addr: tuple[str, int], endpoint: ScriptedEndpoint) -> None:
        self.endpoint = endpoint
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn, a reverse lookup that can stall
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def process_request(self, request, client_address) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        # a client that went away mid-answer (timeouts, hang, close): nothing to report, and
        # nothing of a request is ever printed
        self.endpoint._note_error()

    def drop_connections(self) -> None:
        with self._open_lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "agentprov-scripted/0.1"
    sys_version = ""
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # never log requests (their bodies hold prompts; their paths session ids)

    # --- routing
    def _route(self) -> tuple[str, str] | None:
        m = _ROUTE.match(self.path.split("?", 1)[0])
        if m is None or not SESSION.match(m[1]):
            return None
        return m[1], m[2]

    def do_GET(self) -> None:
        route = self._route()
        if self._drain() is None:
            return
        if route is None or route[1] != "models":
            return self._not_found()
        self._send_json(200, {"object": "list", "data": [
            {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "agentprov"}]})

    def do_POST(self) -> None:
        route = self._route()
        body = self._drain()
        if body is None:
            return
        if route is None or route[1] != "chat/completions":
            return self._not_found()
        self.server.endpoint._answer(self, route[0], body)

    # --- I/O
    def _drain(self) -> bytes | None:
        """Read the request body; answer 411/413 (and return None) when it cannot be read."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._send_json(411, error_body("scripted transport: send a Content-Length body"))
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True
            self._send_json(413, error_body("scripted transport: request body too large"))
            return None
        return self.rfile.read(length) if length else b""

    def _not_found(self) -> None:
        self._send_json(404, error_body(
            "scripted transport: no such route; it serves POST /s/<session>/v1/chat/completions "
            "and GET /s/<session>/v1/models", code="not_found"))

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode(), "application/json",
                   headers)

    def _send(self, status: int, data: bytes, ctype: str,
              headers: dict[str, str] | None = None) -> None:
        # no Date header: the same request gets the same bytes
        self.send_response_only(status)
        self.send_header("Server", self.server_version)
        extra = {k.lower(): (k, v) for k, v in (headers or {}).items()}
        if "content-type" not in extra:
            self.send_header("Content-Type", ctype)
        for k, v in extra.values():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def peer_closed(self) -> bool:
        """Whether the client closed the connection (it sends nothing while it waits)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


class _Bucket:
    """The script's ``rate_limit`` as a token bucket shared by every session."""

    def __init__(self, limit: RateLimit) -> None:
        self.limit = limit
        self.rate = limit.per_minute / 60.0
        self.capacity = float(limit.per_minute if limit.burst is UNSET else limit.burst)
        self.tokens = self.capacity if limit.per_minute else 0.0
        self.at = time.monotonic()
        self.refused = 0
        self.lock = threading.Lock()

    def refuse(self) -> tuple[int, dict[str, str]] | None:
        """None when a token was taken; else the status and headers of the refusal."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return None
            self.refused += 1
            wait = math.ceil((1.0 - self.tokens) / self.rate) if self.rate else 60
        after = str(wait) if self.limit.retry_after is UNSET else self.limit.retry_after
        return self.limit.status, {"Retry-After": after,
                                   "x-ratelimit-limit-requests": str(self.limit.per_minute),
                                   "x-ratelimit-remaining-requests": "0"}


class ScriptedEndpoint:
    """Serve ``script`` on loopback: ``start()`` / ``stop()`` or ``with``."""

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0,
                 models: dict[str, str] | None = None) -> None:
        """:param models: for a script by role, each role's model id (the request's
            ``model`` that names the role)."""
        if not host.startswith("127.") and host != "localhost":
            raise ValueError(f"the scripted endpoint listens on loopback only, not {host!r}")
        self.script = script
        self._roles = {m: r for r, m in (models or {}).items()} if script.roles else {}
        self._used: dict[tuple[str, str | None], int] = {}
        self.host = "127.0.0.1" if host == "localhost" else host
        self._port = port
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._errors = 0
        self._stopping = threading.Event()
        limit = script.rate_limit
        self._bucket = None if limit is None else _Bucket(limit)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle
    def start(self) -> ScriptedEndpoint:
        if self._server is not None:
            raise RuntimeError("the scripted endpoint is already started")
        self._stopping.clear()
        self._server = _Server((self.host, self._port), self)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="agentprov-scripted-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # releases hung and delayed answers
        server.shutdown()
        server.drop_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- addresses and accounting
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the scripted endpoint is not started")
        return self._server.server_address[1]

    def base_url(self, session_id: str) -> str:
        if not SESSION.match(session_id):
            raise ValueError(f"session id {session_id!r}: use letters, digits, '.', '_', '-' "
                             "(at most 128)")
        return f"http://{self.host}:{self.port}/s/{session_id}/v1"

    def requests(self, session_id: str) -> int:
        """Chat Completions requests received for the session (each took a reply number)."""
        with self._lock:
            return self._counts.get(session_id, 0)

    def sessions(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    @property
    def errors(self) -> int:
        """Connections that failed while being answered (clients that went away)."""
        return self._errors

    def _note_error(self) -> None:
        with self._lock:
            self._errors += 1

    def unused(self, session_id: str) -> dict[str, int]:
        """The replies the session left over, by role (``replies`` for a script that is not
        by role), only those with some left."""
        with self._lock:
            roles = list(self.script.roles) if self.script.roles else [None]
            left = {r or "replies": len(self.script.replies_of(r))
                    - self._used.get((session_id, r), 0) for r in roles}
        return {r: n for r, n in left.items() if n > 0}

    def _take(self, session_id: str, role: str | None) -> int:
        with self._lock:
            self._counts[session_id] = self._counts.get(session_id, 0) + 1
            n = self._used.get((session_id, role), 0)
            self._used[(session_id, role)] = n + 1
            return n

    # --- answers
    def _answer(self, h: _Handler, session_id: str, raw: bytes) -> None:
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            request = None
        role = self._roles.get(request.get("model")) if isinstance(request, dict) else None
        if self._bucket is not None and (refused := self._bucket.refuse()) is not None:
            status, headers = refused  # a rate limit takes no reply: the retry gets it
            return h._send_json(status, error_body(
                "scripted transport: rate limit reached", type_="rate_limit_exceeded"
                if status == 429 else "server_error", code="rate_limit_exceeded"), headers)
        n = self._take(session_id, role)
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return h._send_json(400, error_body(
                "scripted transport: the request body must be a JSON object with messages"))
        if request.get("stream"):
            return h._send_json(400, error_body(
                "scripted transport: streaming is not supported (send stream false)",
                code="unsupported_parameter"))
        if self.script.roles and role is None:
            return h._send_json(400, error_body(
                f"scripted transport: the script is by role, and no role's model is "
                f"{str(request.get('model'))[:200]!r} (roles: "
                f"{', '.join(f'{r} {m!r}' for m, r in sorted(self._roles.items()))})"))
        replies = self.script.replies_of(role)
        if n >= len(replies):
            whose = f" of role {role}" if role is not None else ""
            return h._send_json(400, error_body(
                f"scripted transport: the script has no reply {n}{whose} "
                f"(it holds {len(replies)})"))
        reply = replies[n]
        # the ids of a judge's replies name its role: chatcmpl-scripted-refusal_judge-0
        number: int | str = n if role in (None, AGENT) else f"{role}-{n}"
        delay = self.script.delay(reply)
        if delay and self._stopping.wait(delay):
            h.close_connection = True
            return None
        if reply.kind == "hang":
            while not self._stopping.wait(0.05):
                if h.peer_closed():
                    break
            h.close_connection = True
            return None
        if reply.kind == "close":
            h.close_connection = True
            return None
        if reply.kind == "http_error":
            err = reply.http_error
            body = err.body
            if body is UNSET:
                body = error_body(f"scripted transport: HTTP {err.status} (reply {number})",
                                  type_="server_error" if err.status >= 500
                                  else "invalid_request_error")
            if isinstance(body, str):
                return h._send(err.status, body.encode(), "text/plain; charset=utf-8",
                               err.headers)
            return h._send_json(err.status, body, err.headers)
        return h._send_json(200, completion_body(reply, number, request))
