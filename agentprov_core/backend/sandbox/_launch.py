# Runs inside the sandbox as ``python -I -S -c <this> CONFIG_JSON ARGV...`` (stdlib only).
# CONFIG_JSON is {"routes": [[port, unix_socket_path], ...]}: for each route, listen on
# 127.0.0.1:port in the sandbox's own network namespace and relay every connection to the
# Unix socket (bind-mounted by T0: a bridge to a host loopback port, or the egress proxy).
# The relay is a forked child; this process then becomes ARGV (the worker). The sandbox's
# PID namespace ends the relay when the worker exits.
import contextlib
import json
import os
import socket
import sys
import threading


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                s.shutdown(how)


def _join(a, b):
    t = threading.Thread(target=_pump, args=(b, a), daemon=True)
    t.start()
    _pump(a, b)
    t.join()
    a.close()
    b.close()


def _serve(listener, path):
    while True:
        conn, _ = listener.accept()
        # a relay forwards each read as it comes: with Nagle's algorithm a second write
        # waits for the peer's delayed ACK (up to 40 ms on Linux)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        threading.Thread(target=_join, args=(conn, up), daemon=True).start()


def main():
    cfg = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    listeners = []
    for port, path in cfg["routes"]:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", int(port)))
        s.listen(128)
        listeners.append((s, path))
    if listeners and os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # never hold the worker's protocol pipe open
        for s, path in listeners:
            threading.Thread(target=_serve, args=(s, path), daemon=True).start()
        threading.Event().wait()
    for s, _ in listeners:
        s.close()
    os.execv(argv[0], argv)


main()
