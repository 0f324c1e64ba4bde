"""The egress proxy (D-664, R-20): real TLS end to end through real CONNECT tunnels.

A loopback TLS server with a certificate from a test certificate authority (trustme) stands
in for ``openrouter.ai:443``; the proxy's resolver dials it under that name, and a real
httpx client (``proxy=`` the egress proxy, ``verify=`` the test CA) talks to it. A wiretap
between the proxy and the server keeps every byte the proxy sent upstream: the request's
plaintext marker is never among them, nor in the proxy's log or record.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpcore
import httpx
import pytest
import trustme

from agentprov_core.errors import AgentprovError
from agentprov_core.live import egress, egressplan

API = "openrouter.ai"
MARKER = b"PLAINTEXT-MARKER-7f3a9c-never-on-the-wire"


# ----------------------------------------------------------------------------- servers
class Echo(BaseHTTPRequestHandler):
    """Answers every method with what it saw: method, path, headers, body size; echoes the
    body back for POST."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    seen: list[dict] = []

    def _answer(self) -> None:
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while size := int(self.rfile.readline().split(b";")[0], 16):
                body += self.rfile.read(size + 2)[:-2]
            while self.rfile.readline() not in (b"\r\n", b""):
                pass  # trailers
        else:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
        self.seen.append({"method": self.command, "path": self.path,
                          "headers": dict(self.headers.items()), "body": body})
        out = body if self.command == "POST" else json.dumps(
            {"method": self.command, "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    do_GET = do_POST = do_HEAD = do_OPTIONS = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


def serve(server: ThreadingHTTPServer) -> ThreadingHTTPServer:
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


class TLSServer(ThreadingHTTPServer):
    """The handshake runs in the request's thread, not in the accept loop."""

    def __init__(self, ctx: ssl.SSLContext) -> None:
        self.ctx = ctx
        super().__init__(("127.0.0.1", 0), type("H", (Echo,), {"seen": []}))

    def finish_request(self, request, client_address):  # noqa: ANN001
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(request, client_address)
        finally:
            request.close()  # the wrapped socket: socketserver closes only the plain one


class Wiretap:
    """A TCP relay that keeps every byte it carries (what the proxy sent upstream)."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target, self.up, self.down = target, bytearray(), bytearray()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(c, u, self.up), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, self.down), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, keep: bytearray) -> None:
        try:
            while data := src.recv(65536):
                keep += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def client_ctx(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return ctx


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[TLSServer]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(API, "api.anthropic.com").configure_cert(ctx)
    srv = serve(TLSServer(ctx))
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def tap(tls_server: TLSServer) -> Wiretap:
    return Wiretap(tls_server.server_address[:2])


@pytest.fixture
def lan_server() -> Iterator[ThreadingHTTPServer]:
    srv = serve(ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Echo,), {"seen": []})))
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="ape-", dir="/tmp"))  # AF_UNIX paths are short
    yield d
    shutil.rmtree(d, ignore_errors=True)


def raw(proxy: egress.EgressProxy, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the proxy closes it."""
    with socket.create_connection(proxy.address, timeout=wait) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1])


# ----------------------------------------------------------------------------- tunnels
@pytest.mark.req("R-20.2", "R-20.7")
def test_tls_through_the_tunnel_is_end_to_end(tls_server, tap, client_ctx, caplog):
    caplog.set_level(logging.DEBUG, logger="agentprov.egress")
    body = MARKER * 1000
    with egress.EgressProxy(allowed=[(API, 443)],
                            resolver={API: ("127.0.0.1", tap.port)}) as proxy:
        with httpx.Client(proxy=proxy.url, verify=client_ctx, trust_env=False) as client:
            r1 = client.post(f"https://{API}/v1/chat/completions", content=body)
            r2 = client.get(f"https://{API}/v1/models")
        rec = proxy.record()
    assert r1.status_code == 200 and r1.content == body  # the server saw the plaintext
    assert r2.json() == {"method": "GET", "path": "/v1/models"}
    seen = tls_server.RequestHandlerClass.seen
    assert seen[0]["headers"]["Host"] == API and MARKER in seen[0]["body"]
    # the proxy only carried ciphertext: the wiretap behind it never saw the marker
    assert tap.up and tap.down
    assert MARKER not in bytes(tap.up) and MARKER not in bytes(tap.down)
    assert b"/v1/chat/completions" not in bytes(tap.up)
    t = rec["tunnels"][f"{API}:443"]
    assert t["opened"] == 1  # keep-alive: both requests in one tunnel
    assert t["bytes_up"] == len(tap.up) and t["bytes_up"] > len(body)
    assert t["bytes_down"] == len(tap.down) and t["bytes_down"] > len(body)
    text = json.dumps(rec) + caplog.text
    assert MARKER.decode() not in text and "chat/completions" not in text
    assert rec["refusals"] == [] and rec["allowed"] == [f"{API}:443"]


@pytest.mark.req("R-20.2", "R-20.3")
def test_connect_to_another_target_is_403(tls_server, client_ctx):
    port = tls_server.server_address[1]
    with egress.EgressProxy(allowed=[(API, 443)],
                            resolver={API: ("127.0.0.1", port)}) as proxy:
        for target in (b"evil.example:443", b"openrouter.ai:8443", b"127.0.0.1:%d" % port,
                       b"api.anthropic.com:443", b"OPENROUTER.AI.:443"):
            reply = raw(proxy, b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target))
            assert status(reply) == 403, target
            assert b"Connection: close" in reply
        with httpx.Client(proxy=proxy.url, verify=client_ctx, trust_env=False) as client:
            with pytest.raises(httpx.ProxyError):
                client.get("https://api.anthropic.com/v1/messages")
            assert client.get(f"https://{API}/ok").status_code == 200  # still serving
        rec = proxy.record()
    (refusal,) = rec["refusals"]
    assert refusal == {"kind": "target", "status": 403, "count": 6,
                       "targets": sorted(["evil.example:443", "openrouter.ai:8443",
                                          f"127.0.0.1:{port}", "api.anthropic.com:443",
                                          "openrouter.ai.:443"])}
    assert rec["tunnels"][f"{API}:443"]["opened"] == 1


@pytest.mark.req("R-20.3")
def test_other_methods_to_the_tls_endpoint_are_405(tls_server):
    with egress.EgressProxy(allowed=[(API, 443)],
                            resolver={API: tls_server.server_address[:2]}) as proxy:
        for line in (b"GET https://openrouter.ai/v1/models HTTP/1.1",
                     b"POST https://openrouter.ai:443/v1/chat/completions HTTP/1.1",
                     b"GET http://openrouter.ai:443/ HTTP/1.1"):
            reply = raw(proxy, line + b"\r\nHost: openrouter.ai\r\nContent-Length: 4\r\n\r\n"
                        + b"BODY")
            assert status(reply) == 405, line
            assert b"\r\nAllow: CONNECT\r\n" in reply
        with httpx.Client(proxy=proxy.url, trust_env=False) as client:
            assert client.get("http://openrouter.ai:443/v1/models").status_code == 405
        rec = proxy.record()
    assert rec["refusals"] == [{"kind": "method", "status": 405, "count": 4,
                                "targets": ["openrouter.ai:443"],
                                "methods": {"GET": 3, "POST": 1}}]
    assert rec["tunnels"][f"{API}:443"]["opened"] == 0


@pytest.mark.req("R-20.3")
def test_malformed_requests_are_400_and_the_proxy_survives(tls_server, client_ctx):
    with egress.EgressProxy(allowed=[(API, 443)], resolver={API: tls_server.server_address[:2]},
                            max_header_bytes=4096) as proxy:
        for bad in (b"garbage\r\n\r\n", b"CONNECT openrouter.ai HTTP/1.1\r\n\r\n",
                    b"CONNECT openrouter.ai:99999 HTTP/1.1\r\n\r\n",
                    b"GET / HTTP/1.1\r\nHost: openrouter.ai\r\n\r\n",
                    b"GET http://x/ HTTP/2.0\r\n\r\n", b"GET http://x/ HTTP/1.1\r\nno colon\r\n\r\n",
                    b"\xff\xfe CONNECT\r\n\r\n", b"CONNECT a:1 HTTP/1.1\r\n"):
            reply = raw(proxy, bad) if bad.endswith(b"\r\n\r\n") else _half_close(proxy, bad)
            assert status(reply) == 400, bad
        big = b"CONNECT openrouter.ai:443 HTTP/1.1\r\nX-Pad: " + b"a" * 5000 + b"\r\n\r\n"
        assert status(raw(proxy, big)) == 431
        with httpx.Client(proxy=proxy.url, verify=client_ctx, trust_env=False) as client:
            assert client.get(f"https://{API}/still").status_code == 200
        rec = proxy.record()
    kinds = {r["kind"]: r for r in rec["refusals"]}
    assert kinds["malformed"] == {"kind": "malformed", "status": 400, "count": 8}
    assert kinds["header_too_large"]["count"] == 1 and "targets" not in kinds["malformed"]
    assert rec["internal_errors"] == 0


def _half_close(proxy: egress.EgressProxy, data: bytes) -> bytes:
    with socket.create_connection(proxy.address, timeout=5) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_header_timeout_idle_timeout_and_connection_limit(tls_server):
    with egress.EgressProxy(allowed=[(API, 443)], resolver={API: tls_server.server_address[:2]},
                            header_timeout=0.3, idle_timeout=0.3, max_connections=2) as proxy:
        assert status(raw(proxy, b"")) == 408  # nothing sent: timed out
        # a tunnel nobody uses is cut after the idle timeout
        with socket.create_connection(proxy.address, timeout=5) as s:
            s.sendall(b"CONNECT openrouter.ai:443 HTTP/1.1\r\n\r\n")
            t0 = time.monotonic()
            assert s.recv(100).startswith(b"HTTP/1.1 200 ")
            assert s.recv(100) == b""  # closed by the proxy
            assert time.monotonic() - t0 < 3
        # two idle connections fill the limit; a third is refused with 503
        a = socket.create_connection(proxy.address)
        b = socket.create_connection(proxy.address)
        deadline = time.monotonic() + 3
        while proxy.record()["connections_peak"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert status(raw(proxy, b"CONNECT openrouter.ai:443 HTTP/1.1\r\n\r\n")) == 503
        a.close()
        b.close()
        rec = proxy.record()
    kinds = {r["kind"]: r["count"] for r in rec["refusals"]}
    assert kinds["header_timeout"] >= 1 and kinds["limit"] == 1
    assert rec["tunnels"][f"{API}:443"]["closed_idle"] == 1


def test_an_unreachable_upstream_is_502_and_counted(tls_server):
    dead = socket.create_server(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()

    def resolver(host: str, port_: int) -> tuple[str, int]:
        if host == "api.anthropic.com":
            raise RuntimeError("a resolver that fails")
        return "127.0.0.1", port

    with egress.EgressProxy(allowed=[(API, 443), ("api.anthropic.com", 443)],
                            resolver=resolver) as proxy:
        assert status(raw(proxy, b"CONNECT openrouter.ai:443 HTTP/1.1\r\n\r\n")) == 502
        assert raw(proxy, b"CONNECT api.anthropic.com:443 HTTP/1.1\r\n\r\n") == b""
        assert status(raw(proxy, b"CONNECT x.example:443 HTTP/1.1\r\n\r\n")) == 403
        rec = proxy.record()
    assert rec["tunnels"][f"{API}:443"]["failed"] == 1
    assert rec["internal_errors"] == 1  # the failing resolver: counted, the proxy lives on


@pytest.mark.req("R-20.7")
def test_stopping_with_a_tunnel_open(tls_server, client_ctx):
    proxy = egress.EgressProxy(allowed=[(API, 443)],
                               resolver={API: tls_server.server_address[:2]}).start()
    s = socket.create_connection(proxy.address, timeout=5)
    s.sendall(b"CONNECT openrouter.ai:443 HTTP/1.1\r\n\r\n")
    assert s.recv(100).startswith(b"HTTP/1.1 200 ")
    tls = client_ctx.wrap_socket(s, server_hostname=API)  # a live TLS session, kept open
    tls.sendall(b"GET /open HTTP/1.1\r\nHost: openrouter.ai\r\n\r\n")
    assert tls.recv(100).startswith(b"HTTP/1.1 200")
    t0 = time.monotonic()
    proxy.stop()
    assert time.monotonic() - t0 < 3
    assert not proxy._thread.is_alive()
    # the client sees its tunnel end: what was in flight drains, then EOF (or a reset),
    # long before its own 5 s timeout
    t0 = time.monotonic()
    with contextlib.suppress(ssl.SSLError, OSError):
        while tls.recv(65536):
            pass
    assert time.monotonic() - t0 < 3
    tls.close()
    rec = proxy.record()
    t = rec["tunnels"][f"{API}:443"]
    assert t["opened"] == 1 and t["closed_at_stop"] == 1 and t["bytes_down"] > 0
    with pytest.raises(OSError):
        socket.create_connection(proxy.address, timeout=1)
    proxy.stop()  # idempotent


# ----------------------------------------------------------------------------- LAN forward
@pytest.mark.req("R-20.6")
def test_lan_forward_mode(lan_server):
    lan = ("192.168.1.20", 8000)
    with egress.EgressProxy(forward=lan,
                            resolver={"192.168.1.20": lan_server.server_address[:2]}) as proxy:
        with httpx.Client(proxy=proxy.url, trust_env=False) as client:
            r = client.post("http://192.168.1.20:8000/v1/chat/completions?x=1",
                            content=b'{"m": 1}', headers={"Authorization": "Bearer lan"})
            assert r.status_code == 200 and r.content == b'{"m": 1}'
            assert r.headers["connection"] == "close"
            assert client.get("http://192.168.1.20:8000/v1/models").json() == {
                "method": "GET", "path": "/v1/models"}
            assert client.head("http://192.168.1.20:8000/v1/models").status_code == 200
            assert client.options("http://192.168.1.20:8000/v1/models").status_code == 200
            d = client.delete("http://192.168.1.20:8000/v1/models")
            assert d.status_code == 405 and d.headers["allow"] == "GET, POST, HEAD, OPTIONS"
            assert client.get("http://192.168.1.21:8000/v1/models").status_code == 403
            assert client.get("http://192.168.1.20:8001/v1/models").status_code == 403
            # chunked request bodies are forwarded as they came
            chunks = client.post("http://192.168.1.20:8000/v1/x", content=iter([b"ab", b"cd"]))
            assert chunks.status_code == 200
        # CONNECT to the LAN address: only the forward methods reach it
        assert status(raw(proxy, b"CONNECT 192.168.1.20:8000 HTTP/1.1\r\n\r\n")) == 405
        # one request per connection: a pipelined second request is never forwarded
        two = (b"GET http://192.168.1.20:8000/one HTTP/1.1\r\nHost: 192.168.1.20:8000\r\n\r\n"
               b"GET http://192.168.1.20:8000/two HTTP/1.1\r\nHost: 192.168.1.20:8000\r\n\r\n")
        reply = raw(proxy, two)
        assert reply.count(b"HTTP/1.1 200") == 1
        rec = proxy.record()
    seen = lan_server.RequestHandlerClass.seen
    first = seen[0]
    assert first["path"] == "/v1/chat/completions?x=1"  # origin form
    assert first["headers"]["Host"] == "192.168.1.20:8000"
    assert first["headers"]["Connection"] == "close"
    assert first["headers"]["Authorization"] == "Bearer lan"  # end-to-end headers kept
    assert not any(k.lower().startswith("proxy-") for k in first["headers"])
    assert [s["path"] for s in seen].count("/two") == 0 and seen[-1]["path"] == "/one"
    chunked = next(s for s in seen if s["path"] == "/v1/x")
    assert chunked["headers"].get("Transfer-Encoding") == "chunked"
    assert chunked["body"] == b"abcd"
    f = rec["forwards"]["192.168.1.20:8000"]
    assert f["methods"] == {"GET": 2, "HEAD": 1, "OPTIONS": 1, "POST": 2}
    assert f["requests"] == 6 and f["bytes_up"] > 0 and f["bytes_down"] > 0
    assert rec["forward"] == "192.168.1.20:8000" and rec["allowed"] == []
    kinds = {r["kind"]: r for r in rec["refusals"]}
    assert kinds["method"]["methods"] == {"CONNECT": 1, "DELETE": 1}
    assert kinds["target"]["targets"] == ["192.168.1.20:8001", "192.168.1.21:8000"]
    assert "Bearer" not in json.dumps(rec)


def test_forward_address_must_be_a_literal_private_address():
    for bad in (("lan.local", 80), ("8.8.8.8", 80), ("127.0.0.1", 8000)):
        with pytest.raises(ValueError):
            egress.EgressProxy(forward=bad)


# ----------------------------------------------------------------------------- Unix socket
class UnixBackend(httpcore.SyncBackend):
    """Every TCP connection the client makes goes to the proxy's Unix socket instead: what
    a worker in a sandbox without a network does."""

    def __init__(self, path: str) -> None:
        self.path = path

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # noqa: ANN001
        return self.connect_unix_socket(self.path, timeout=timeout)


@pytest.mark.req("R-20.2", "R-20.3")
def test_the_unix_socket_listener_behaves_alike(tls_server, client_ctx, sock_dir):
    path = sock_dir / "egress.sock"
    with egress.EgressProxy(allowed=[(API, 443)], unix_path=path,
                            resolver={API: tls_server.server_address[:2]}) as proxy:
        assert path.is_socket() and (path.stat().st_mode & 0o777) == 0o600
        with httpcore.HTTPProxy(proxy_url="http://egress.invalid:1", ssl_context=client_ctx,
                                network_backend=UnixBackend(str(path))) as pool:
            r = pool.request("POST", f"https://{API}/v1/chat/completions", content=MARKER)
            assert r.status == 200 and r.content == MARKER
            with pytest.raises(httpcore.ProxyError):
                pool.request("GET", "https://api.anthropic.com/v1/messages")
            r = pool.request("GET", "http://openrouter.ai:443/v1/models")
            assert r.status == 405
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(path))
            s.sendall(b"nonsense\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 400 ")
        rec = proxy.record()
    assert not path.exists()  # removed at stop
    assert rec["unix_socket"] is True
    assert rec["tunnels"][f"{API}:443"]["opened"] == 1
    assert {r["kind"]: r["count"] for r in rec["refusals"]} == {
        "malformed": 1, "method": 1, "target": 1}


def test_start_failure_is_an_environment_error(sock_dir):
    path = sock_dir / "missing-dir" / "egress.sock"
    with pytest.raises(AgentprovError) as exc:
        egress.EgressProxy(allowed=[(API, 443)], unix_path=path).start()
    assert exc.value.code == "run.environment.egress" and exc.value.exit_code == 3


# ----------------------------------------------------------------------------- the plan
@pytest.mark.req("R-20.4", "R-20.5")
def test_the_plan_of_a_run():
    assert egressplan.plan(["http://127.0.0.1:8080/v1"]) is None  # loopback: reached directly
    assert egressplan.plan(["http://localhost:11434/v1", None]) is None
    p = egressplan.plan(["https://openrouter.ai/api/v1"])
    assert p == egressplan.EgressPlan(allowed=(("openrouter.ai", 443),))
    # judges of an Inspect plan share the agent's endpoint: still one pair
    assert egressplan.plan(["https://openrouter.ai/api/v1", "https://OpenRouter.ai/api/v1"]) == p
    p2 = egressplan.plan(["https://api.anthropic.com", "https://guard.example:8443/v1"])
    assert p2.allowed == (("api.anthropic.com", 443), ("guard.example", 8443))
    lan = egressplan.plan(["http://192.168.1.20:8000/v1", "http://127.0.0.1:9/v1"])
    assert lan == egressplan.EgressPlan(forward=("192.168.1.20", 8000))
    proxy = lan.proxy()
    assert proxy.forward == ("192.168.1.20", 8000) and proxy.allowed == ()


def test_the_plan_refuses_what_the_proxy_cannot_serve():
    for urls in (["http://api.example.com/v1"], ["http://8.8.8.8/v1"],
                 ["https://user:pw@openrouter.ai/v1"], ["ftp://openrouter.ai/"],
                 ["http://192.168.1.20:8000", "http://10.0.0.5:8000"]):
        with pytest.raises(AgentprovError) as exc:
            egressplan.plan(urls)
        assert exc.value.code == "cli.refused.egress_target" and exc.value.exit_code == 4
        assert "pw" not in exc.value.message


@pytest.mark.req("R-20.7", "R-20.8")
def test_the_record_of_a_clean_api_run(tls_server, lan_server, client_ctx, monkeypatch):
    with egress.EgressProxy(allowed=[(API, 443)],
                            resolver={API: tls_server.server_address[:2]}) as proxy:
        env = proxy.proxy_env()
        assert env["HTTPS_PROXY"] == proxy.url == f"http://127.0.0.1:{proxy.address[1]}"
        for k in [k for k in os.environ if k.lower().endswith("_proxy")]:
            monkeypatch.delenv(k)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        for _ in range(3):  # a new connection each time: three tunnels
            with httpx.Client(verify=client_ctx) as c:  # the proxy from the environment
                assert c.get(f"https://{API}/v1/models").status_code == 200
        # a loopback endpoint of the same run is reached directly, never through the proxy
        with httpx.Client() as c:
            port = lan_server.server_address[1]
            assert c.get(f"http://127.0.0.1:{port}/direct").status_code == 200
    rec = proxy.record()
    t = rec["tunnels"].pop(f"{API}:443")
    assert t["opened"] == 3 and t["failed"] == 0 and t["bytes_up"] > 0 and t["bytes_down"] > 0
    assert rec == {"format": "agentprov-egress/0.1", "allowed": [f"{API}:443"],
                   "forward": None, "forward_methods": [], "unix_socket": False,
                   "tunnels": {}, "forwards": {}, "refusals": [],
                   "connections_peak": rec["connections_peak"], "internal_errors": 0}
    json.dumps(rec)  # plain JSON for the manifest
