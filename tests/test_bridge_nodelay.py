"""T0's bridge into the sandbox relays each read as it comes; its connection to the host
port has Nagle's algorithm off (TCP_NODELAY), or a request's body, forwarded after its
headers, waits for the server's delayed ACK (about 40 ms a request on Linux)."""

from __future__ import annotations

import socket
import threading

from agentprov_core.backend.sandbox import bridge


def test_the_bridges_upstream_connection_has_nagle_off(monkeypatch):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    made: list[socket.socket] = []
    options: list[tuple[int, tuple]] = []
    real = socket.create_connection
    real_set = socket.socket.setsockopt

    def recording(*a, **k):
        s = real(*a, **k)
        made.append(s)
        return s

    def setsockopt(self, *args):
        options.append((id(self), args))
        return real_set(self, *args)

    monkeypatch.setattr(bridge.socket, "create_connection", recording)
    monkeypatch.setattr(socket.socket, "setsockopt", setsockopt)
    got: list[bytes] = []

    def echo_once() -> None:
        conn, _ = server.accept()
        got.append(conn.recv(100))
        conn.sendall(b"pong")
        conn.close()

    t = threading.Thread(target=echo_once, daemon=True)
    t.start()
    with bridge.Bridge((port,)) as b:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(b.sockets[port])
        client.sendall(b"ping")
        assert client.recv(100) == b"pong"
        client.close()
    t.join(5)
    server.close()
    assert got == [b"ping"] and len(made) == 1
    assert (id(made[0]), (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)) in options
