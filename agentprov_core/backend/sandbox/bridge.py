"""T0's side of a route into the sandbox: a Unix socket that relays each connection to a
port on the host's loopback interface. The sandbox has its own network namespace (no
route to the host), so a loopback endpoint is reached only through such a socket,
bind-mounted into the sandbox and relayed there from ``127.0.0.1:PORT``."""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
from pathlib import Path


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                s.shutdown(how)


def _join(a: socket.socket, b: socket.socket) -> None:
    t = threading.Thread(target=_pump, args=(b, a), daemon=True)
    t.start()
    _pump(a, b)
    t.join()
    a.close()
    b.close()


class Bridge:
    """Unix sockets in a private directory (mode 0700), one per host loopback port."""

    def __init__(self, ports: tuple[int, ...]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="agentprov-b-"))
        self.sockets: dict[int, str] = {}
        self._listeners: list[socket.socket] = []
        self._closed = False
        for port in ports:
            path = str(self.dir / f"{port}.sock")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(128)
            self._listeners.append(s)
            self.sockets[port] = path
            threading.Thread(target=self._serve, args=(s, port), daemon=True).start()

    def _serve(self, listener: socket.socket, port: int) -> None:
        while not self._closed:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=10)
                up.settimeout(None)
                # a relay forwards each read as it comes: with Nagle's algorithm a second
                # write (a request's body after its headers) waits for the server's delayed
                # ACK, up to 40 ms a request on Linux
                up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_join, args=(conn, up), daemon=True).start()

    def close(self) -> None:
        self._closed = True
        for s in self._listeners:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
