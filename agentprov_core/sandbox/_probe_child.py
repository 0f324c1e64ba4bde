# Runs inside the sandbox as ``python -I -c <this> CONFIG_JSON`` (stdlib only): tries each
# thing the probe names and prints one JSON object on stdout, what it saw. The verdicts are
# T0's, which also checks each one from outside the sandbox.
import hashlib
import importlib
import json
import os
import socket
import sys
import time

cfg = json.loads(sys.argv[1])
out = {}


def attempt(name, fn):
    try:
        out[name] = {"ok": True, "detail": fn()}
    except BaseException as exc:  # noqa: BLE001 - an import may raise anything
        out[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}


def read_all(paths):
    """Read every path; succeed if any of them yielded a byte (a masked file reads empty)."""
    seen = []
    for p in paths:
        try:
            with open(p, "rb") as f:
                data = f.read()
        except OSError as exc:
            seen.append(f"{p}: {type(exc).__name__}({exc.errno})")
            continue
        if data:
            return f"read {p} ({len(data)} bytes)"
        seen.append(f"{p}: read 0 bytes (masked)")
    raise PermissionError("; ".join(seen))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return f"wrote {path}"


def connect(port, token, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with s:
        s.sendall(token.encode() + b"\n")
        # wait until the far side has read it and closed: a relay in this sandbox ends with
        # it, and must not end before it has passed the token on
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(4096):
                pass
        except OSError:
            pass
        return f"connected 127.0.0.1:{port} and sent the token"


def connect_elsewhere():
    reached = []
    for port in cfg["forbidden_ports"]:
        try:
            connect(port, cfg["token"] + "-forbidden", timeout=2.0)
            reached.append(f"127.0.0.1:{port}")
        except OSError:
            pass
    for host, port in cfg["external"]:
        try:
            socket.create_connection((host, port), timeout=2.0).close()
            reached.append(f"{host}:{port}")
        except OSError:
            pass
        try:  # UDP too: a datagram to a DNS resolver
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.sendto(b"x", (host, 53))
            u.close()
            reached.append(f"udp {host}:53")
        except OSError:
            pass
    if reached:
        return "reached " + ", ".join(reached)
    raise ConnectionRefusedError("no connection: forbidden loopback ports and external hosts")


def import_modules():
    for m in cfg["modules"]:
        importlib.import_module(m)
    return "imported " + ", ".join(cfg["modules"])


def read_python():
    with open(cfg["python_file"], "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_outside():
    done = []
    for p in cfg["write_targets"]:
        try:
            with open(p, "a") as f:
                f.write(cfg["token"])
            done.append(p)
        except OSError:
            pass
    if done:
        return "wrote " + ", ".join(done)
    raise PermissionError("every write outside staging failed")


t0 = time.monotonic()
attempt("read_repository", lambda: read_all(cfg["repository"]))
attempt("read_ssh_key", lambda: read_all(cfg["ssh"]))
attempt("read_aws_and_credential_dirs", lambda: read_all(cfg["credentials"]))
attempt("read_dotenv", lambda: read_all(cfg["dotenv"]))
attempt("write_outside_staging", write_outside)
attempt("connect_elsewhere", connect_elsewhere)
attempt("import_backend", import_modules)
attempt("write_staging", lambda: write(cfg["staging_file"], cfg["token"]))
attempt("write_private_home", lambda: write(cfg["home_file"], cfg["token"]))
attempt("connect_allowed", lambda: "; ".join(connect(p, cfg["token"]) for p in cfg["allowed_ports"]))
attempt("read_python_install", read_python)
out["_elapsed_ms"] = int((time.monotonic() - t0) * 1000)
sys.stdout.write(json.dumps(out) + "\n")
