# Runs inside the sandbox as ``python -I -c <this> CONFIG_JSON`` (stdlib only): tries each
# thing the probe names and prints one JSON object on stdout, what it saw. The verdicts are
# T0's, which also checks each one from outside the sandbox.
import contextlib
import ctypes
import errno
import hashlib
import importlib
import json
import os
import platform
import socket
import subprocess
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


def namespace_routes():
    """What leads out of this network namespace: each interface but ``lo`` (/proc/net/dev),
    each IPv4 route (/proc/net/route: the main table; loopback's routes are in the local
    table) and each IPv6 route on another device than ``lo`` (/proc/net/ipv6_route)."""
    out = []
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name = line.split(":", 1)[0].strip()
            if name and name != "lo":
                out.append(f"interface {name}")
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols:
                out.append(f"ipv4 route {cols[1]} via {cols[0]}")
    with open("/proc/net/ipv6_route") as f:
        for line in f:
            cols = line.split()
            if len(cols) >= 10 and cols[9] != "lo":
                out.append(f"ipv6 route {cols[0]}/{int(cols[1], 16)} via {cols[9]}")
    return out


def connect_elsewhere():
    """Nothing is sent off the machine, even by a broken profile: the only connection tried
    is to a host loopback port T0 listens on and did not route (inside, 127.0.0.1 is the
    namespace's own); a way out is judged from the namespace's interfaces and routes."""
    reached = []
    for port in cfg["forbidden_ports"]:
        try:
            connect(port, cfg["token"] + "-forbidden", timeout=2.0)
            reached.append(f"127.0.0.1:{port}")
        except OSError:
            pass
    reached += namespace_routes()
    if reached:
        return "reached " + ", ".join(reached)
    raise ConnectionRefusedError("no connection to the forbidden loopback port; no interface "
                                 "but lo and no route in the namespace")


def write_kernel_settings():
    """Open each kernel setting for writing, and close it at once: nothing is written."""
    opened, refused = [], []
    for p in cfg["kernel_settings"]:
        if not os.path.exists(p):
            continue
        try:
            fd = os.open(p, os.O_WRONLY)
        except OSError as exc:
            refused.append(f"{p}: {errno.errorcode.get(exc.errno, exc.errno)}")
            continue
        os.close(fd)
        opened.append(p)
    if opened:
        return "opened for writing: " + ", ".join(opened)
    raise PermissionError("; ".join(refused))


def seccomp_status():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Seccomp:"):
                return line.split()[1]
    return "absent"


FOREIGN_FAMILIES = (("AF_VSOCK", 40, socket.SOCK_STREAM), ("AF_PACKET", 17, socket.SOCK_RAW),
                    ("AF_BLUETOOTH", 31, socket.SOCK_STREAM), ("AF_ALG", 38, socket.SOCK_SEQPACKET))


def open_foreign_sockets():
    made, refused = [], []
    for name, fam, kind in FOREIGN_FAMILIES:
        try:
            socket.socket(fam, kind).close()
            made.append(name)
        except OSError as exc:
            refused.append(f"{name}: {errno.errorcode.get(exc.errno, exc.errno)}")
    if made:
        return "created " + ", ".join(made)
    raise PermissionError("; ".join(refused))


def use_io_uring_or_foreign_abi():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    worked, refused = [], []
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    fd = libc.syscall(425, ctypes.c_uint(1), params)
    if fd >= 0:
        os.close(fd)
        worked.append("io_uring_setup")
    else:
        refused.append(f"io_uring_setup: {errno.errorcode.get(ctypes.get_errno())}")
    if platform.machine() == "x86_64":  # getpid through the x32 ABI
        if libc.syscall(ctypes.c_long(0x40000000 | 39)) >= 0:
            worked.append("x32 getpid")
        else:
            refused.append(f"x32 getpid: {errno.errorcode.get(ctypes.get_errno())}")
    if worked:
        return "worked: " + ", ".join(worked)
    raise PermissionError("; ".join(refused))


def create_user_namespace():
    """unshare(CLONE_NEWUSER) in a forked child (this process keeps its namespace)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.unshare(0x10000000) == 0 else min(ctypes.get_errno(), 255) or 1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return "created a user namespace"
    raise PermissionError(f"unshare(CLONE_NEWUSER): {errno.errorcode.get(code, code)}")


def import_from_staging():
    """Start the worker exactly as T0 does, in staging, where a planted
    ``agentprov_backend/worker.py`` would write a file if it were imported."""
    r = subprocess.run(cfg["worker_argv"], cwd=cfg["staging_root"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=120)
    if os.path.exists(cfg["planted_ran"]):
        return "the planted module ran"
    raise ImportError(f"the worker (exit {r.returncode}) imported its own package, not the "
                      "one planted in its working directory")


def write_other_session():
    """In a forked child confined as the worker confines a cell (the environment's
    ``agentprov_backend.landlock``): write its own session, then try the sibling session's
    capture log, a new file and a removal there, and a file and a directory in the root."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        res = {}
        try:
            from agentprov_backend import landlock

            res["landlock"] = landlock.confine_cell(cfg["own_session"])
        except BaseException as exc:  # noqa: BLE001 - reported
            res["landlock"] = f"{type(exc).__name__}: {exc}"
        sib, root = cfg["sibling_session"], cfg["staging_root"]
        tries = (("own", lambda: _put(os.path.join(cfg["own_session"], "probe-own.txt"), "w")),
                 ("sibling capture", lambda: _put(os.path.join(sib, "capture.jsonl"), "a")),
                 ("sibling new file", lambda: _put(os.path.join(sib, "planted.txt"), "w")),
                 ("sibling removal", lambda: os.unlink(os.path.join(sib, "capture.jsonl"))),
                 ("root file", lambda: _put(os.path.join(root, "planted.txt"), "w")),
                 ("root directory", lambda: os.mkdir(os.path.join(root, "planted-dir"))))
        for name, fn in tries:
            try:
                fn()
                res[name] = "done"
            except OSError as exc:
                res[name] = errno.errorcode.get(exc.errno, str(exc.errno))
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        res = json.loads(f.read() or "{}")
    os.waitpid(pid, 0)
    ll = res.get("landlock")
    out["_landlock"] = ({"abi": ll.get("abi")} if isinstance(ll, dict) else
                        "this kernel has no Landlock" if ll is None else str(ll))
    done = [k for k, v in res.items() if v == "done" and k != "own"]
    if done:
        return f"wrote {', '.join(done)} (landlock: {res.get('landlock') or 'not applied'})"
    raise PermissionError(f"own session: {res.get('own')}; "
                          + "; ".join(f"{k}: {v}" for k, v in res.items()
                                      if k not in ("own", "landlock")))


def two_cells(attacks):
    """Start the worker exactly as T0 does, in a staging root of its own (``cfg["cells"]``
    names one for each round of ``attacks``), and run two cells at once through it, its cell
    server and the cells' confinement (``agentprov_backend.cellprobe``: a victim, and an
    attacker that makes ``attacks``); then ask the worker for its hello. Returns the
    replies by role."""
    c = cfg["cells"][attacks[0]]
    cell = {"victim": c["victim"], "victim_ready": os.path.join(c["victim"], "ready"),
            "attacker_done": os.path.join(c["attacker"], "done"), "plant": c["plant"]}
    lines = [{"id": 1, "type": "run-cell", "session_id": "probe-victim", "staging": c["victim"],
              "probe": True, "timeout_s": 120, "cell": dict(cell, role="victim")},
             {"id": 2, "type": "run-cell", "session_id": "probe-attacker",
              "staging": c["attacker"], "probe": True, "timeout_s": 120,
              "cell": dict(cell, role="attacker", attacks=attacks)}]
    w = subprocess.Popen(cfg["worker_argv"], cwd=c["root"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    got = {}
    try:
        w.stdin.write("".join(json.dumps(x) + "\n" for x in lines))
        w.stdin.flush()
        while len(got) < 2:
            line = w.stdout.readline()
            if not line:
                break
            reply = json.loads(line)
            got[reply.get("id")] = reply
        w.stdin.write(json.dumps({"id": 3, "type": "hello"}) + "\n")
        w.stdin.write(json.dumps({"id": 4, "type": "shutdown"}) + "\n")
        w.stdin.flush()
        hello = w.stdout.readline()
        got[3] = json.loads(hello) if hello else None
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            w.stdin.close()
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()

    def result(i):
        r = got.get(i)
        return r.get("result") if isinstance(r, dict) and r.get("ok") else r

    return {"victim": result(1), "attacker": result(2), "hello": result(3)}


def cells_attack(name):
    """One of the three cell checks, from what :func:`two_cells` saw: succeeds (the attack
    got through) or raises saying what refused it."""
    r = out["_cells"][name]
    att, vic = r.get("attacker") or {}, r.get("victim") or {}
    seen = (att.get("seen") or {}).get(name)
    if seen is None:
        return f"the attacking cell reported nothing ({str(att)[:200]})"
    if name == "forkserver":
        planted = [p for p in cfg["cells"][name]["plant"] if os.path.exists(p)]
        if planted or seen.get("parent descriptors taken") or seen.get("parent /proc fds opened"):
            return f"planted {planted}; {seen}"
        raise PermissionError("no listener took the payload, no descriptor of the parent: "
                              + json.dumps(seen))
    if name == "metadata":
        done = [k for k, v in seen.items() if v == "done" and not k.startswith("its own")]
        if done or vic.get("before") != vic.get("after"):
            return f"changed the sibling's capture log: {', '.join(done) or 'its metadata moved'}"
        own = {k: v for k, v in seen.items() if k.startswith("its own")}
        if set(own.values()) != {"done"}:
            return f"could not change its own file's metadata: {own}"
        raise PermissionError(json.dumps(seen))
    if seen.get("its own child") != "done":
        return f"could not signal its own child: {seen.get('its own child')}"
    hit = [k for k, v in seen.items() if v == "done" and k != "its own child"]
    if hit or vic.get("status") != "complete" or not r.get("hello"):
        return (f"signalled {', '.join(hit) or 'nothing'}; the sibling "
                f"{vic.get('status', 'gave no result')}; the worker "
                f"{'answered' if r.get('hello') else 'did not answer'} after")
    raise PermissionError(json.dumps(seen))


def _put(path, mode):
    with open(path, mode) as f:
        f.write(cfg["token"])


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
attempt("write_kernel_settings", write_kernel_settings)
attempt("open_foreign_sockets", open_foreign_sockets)
attempt("use_io_uring_or_foreign_abi", use_io_uring_or_foreign_abi)
attempt("create_user_namespace", create_user_namespace)
attempt("import_from_staging", import_from_staging)
attempt("write_other_session", write_other_session)
first = two_cells(["forkserver", "metadata"])
out["_cells"] = {"forkserver": first, "metadata": first,
                 "signal": two_cells(["signal"])}  # which may end its worker
attempt("reach_the_forkserver", lambda: cells_attack("forkserver"))
attempt("change_sibling_metadata", lambda: cells_attack("metadata"))
attempt("signal_sibling_or_worker", lambda: cells_attack("signal"))
out["_seccomp"] = seccomp_status()
attempt("import_backend", import_modules)
attempt("write_staging", lambda: write(cfg["staging_file"], cfg["token"]))
attempt("write_private_home", lambda: write(cfg["home_file"], cfg["token"]))
attempt("connect_allowed", lambda: "; ".join(connect(p, cfg["token"]) for p in cfg["allowed_ports"]))
attempt("read_python_install", read_python)
out["_elapsed_ms"] = int((time.monotonic() - t0) * 1000)
sys.stdout.write(json.dumps(out) + "\n")
