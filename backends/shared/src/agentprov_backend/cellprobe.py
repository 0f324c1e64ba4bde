"""What one cell tries against another: the cell body of the containment probe's cell checks
(and of ``tests/test_cell_to_cell.py``), run by the real worker, its cell server and the
cells' confinement in place of a benchmark's cell.

A ``run-cell`` request with ``"probe": true`` runs :func:`run` instead of the source's cell.
Two cells take part, at once: the **victim** writes its capture log, marks itself ready and
waits until the attacker is done, then reports its log's metadata from before and after;
the **attacker** waits for the victim, makes each attack its request names, reports what
each attempt met, and marks itself done. The verdicts are T0's, which also looks from
outside: a planted file, a changed capture log, a dead sibling or worker.

- ``forkserver``: every Unix socket name the cell can see (the standard library's
  forkserver listener in the TMPDIR the cells share, each name in ``/proc/net/unix``) is
  sent that forkserver's request (four descriptors by
  ``multiprocessing.reduction.sendfds``, a pickle whose ``__reduce__`` plants a file in
  the victim's session and the staging root) and a cell server's request for a cell
  confined to the staging root that plants them; so is each descriptor it can take from
  its parent (``pidfd_getfd``); and it opens its parent's ``/proc/PID/fd``.
- ``metadata``: ``chmod``, ``utime``, ``chown`` and ``setxattr`` of the victim's capture
  log by path, ``fchmod`` and ``futimens`` through a read-only descriptor, ``chmod``
  through a symlink and a ``..`` in its own session, raw ``chmod``, ``utimensat`` and
  ``fchmod`` system calls; and of its own file, which must work.
- ``signal``: ``SIGKILL`` to every sibling cell, the cell server (its parent) and the
  worker; and to a child of its own, which must work.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import json
import os
import pickle
import signal
import socket
import time
from typing import Any

ATTACKS = ("forkserver", "metadata", "signal")


def _wait_for(path: str, seconds: float = 60) -> None:
    end = time.time() + seconds
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.05)


def _err(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def _stat(path: str) -> list[Any]:
    st = os.stat(path)
    return [st.st_mode, st.st_atime_ns, st.st_mtime_ns, st.st_uid, st.st_gid,
            sorted(os.listxattr(path))]


def run(req: dict[str, Any], confined: dict[str, Any] | None) -> dict[str, Any]:
    """Play the request's role; ``confined`` is what confined this cell
    (:func:`agentprov_backend.landlock.confine_cell`), reported by the attacker."""
    cell, own = req["cell"], req["staging"]
    if cell["role"] == "planter":  # what a request that reached a cell server would run
        for p in cell["plant"]:
            with open(p, "w") as f:
                f.write("planted through the cell server")
        return {"status": "complete"}
    if cell["role"] == "victim":
        cap = os.path.join(own, "capture.jsonl")
        if not os.path.exists(cap):  # the probe plants it, of a mode and times it knows
            with open(cap, "w") as f:
                f.write('{"kind": "header", "session_id": "probe-victim"}\n')
        before = _stat(cap)
        open(os.path.join(own, "ready"), "w").close()
        _wait_for(cell["attacker_done"])
        return {"status": "complete", "before": before, "after": _stat(cap)}
    _wait_for(cell["victim_ready"])
    seen = {name: globals()["_" + name](req, cell) for name in cell["attacks"]
            if name in ATTACKS}
    open(cell["attacker_done"], "w").close()
    return {"status": "complete", "seen": seen, "confined": confined}


class _Payload:
    """Unpickled, it runs code: the standard library's forkserver unpickles what it is sent
    in the child it forks, before that child is confined."""

    def __init__(self, paths: list[str]) -> None:
        self.code = "".join(f"open({p!r}, 'w').write('forkserver payload')\n" for p in paths)

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (self.code,))


def _unix_names() -> list[str]:
    names = set(glob.glob(os.path.join(os.environ.get("TMPDIR", "/tmp"), "pymp-*", "listener-*")))
    try:
        with open("/proc/net/unix") as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if len(parts) >= 8:
                    names.add(parts[7])
    except OSError:
        pass
    return sorted(n for n in names if n)


def _cell_request(req: dict[str, Any], cell: dict[str, Any]) -> bytes:
    """A cell server's request for a cell confined to the staging root, that plants."""
    return json.dumps({"op": "cell", "token": 999, "req": {
        "session_id": "planted", "staging": os.path.dirname(req["staging"]), "probe": True,
        "source": req.get("source", ""),
        "cell": {"role": "planter", "plant": cell["plant"]}}}).encode() + b"\n"


def _forkserver(req: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    from multiprocessing import reduction

    seen: dict[str, Any] = {}
    for name in _unix_names():
        addr = "\0" + name[1:] if name.startswith("@") else name
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect(addr)
                r, w = os.pipe()
                os.write(w, pickle.dumps(_Payload(cell["plant"])))
                extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(2)]
                reduction.sendfds(s, [r, w, *extra])
                s.sendall(_cell_request(req, cell))
                with contextlib.suppress(OSError):
                    s.recv(64)
                for fd in (r, w, *extra):
                    os.close(fd)
            seen[name] = "sent"
        except OSError as exc:
            seen[name] = _err(exc)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    taken = []
    pidfd = libc.syscall(434, os.getppid(), 0)  # pidfd_open
    if pidfd < 0:
        seen["pidfd_open"] = errno.errorcode.get(ctypes.get_errno(), "?")
    for target in range(3, 32) if pidfd >= 0 else ():
        fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
        if fd < 0:
            seen.setdefault("pidfd_getfd", errno.errorcode.get(ctypes.get_errno(), "?"))
            continue
        taken.append(target)
        try:
            with socket.socket(fileno=fd) as s:
                s.settimeout(2)
                s.sendall(_cell_request(req, cell))
        except OSError:
            pass
    seen["parent descriptors taken"] = taken
    opened = []
    for target in range(3, 32):
        try:
            os.close(os.open(f"/proc/{os.getppid()}/fd/{target}", os.O_RDWR))
            opened.append(target)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                seen.setdefault("/proc/PPID/fd", _err(exc))
    seen["parent /proc fds opened"] = opened
    time.sleep(0.5)  # a forked payload would have run by now
    return seen


def _metadata(req: dict[str, Any], cell: dict[str, Any]) -> dict[str, str]:
    """Change the victim's capture log's metadata every way there is: by path, through a
    descriptor, a symlink and a ``..`` in its own session (all through the cell server's
    broker, as its Python's ``os`` functions go), and by raw system calls (which meet the
    filter); then change its own file's mode and times, which must work."""
    cap = os.path.join(cell["victim"], "capture.jsonl")
    own = os.path.join(req["staging"], "own.txt")
    seen: dict[str, str] = {}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
            seen[name] = "done"
        except OSError as exc:
            seen[name] = _err(exc)

    def through_fd(fn: Any) -> None:
        fd = os.open(cap, os.O_RDONLY)
        try:
            fn(fd)
        finally:
            os.close(fd)

    libc = ctypes.CDLL(None, use_errno=True)

    def raw(fn: Any) -> None:
        if fn() != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    link = os.path.join(req["staging"], "to-the-sibling")
    os.symlink(cap, link)
    climb = os.path.join(req["staging"], os.pardir, os.path.basename(cell["victim"]),
                         "capture.jsonl")
    attempt("chmod 000", lambda: os.chmod(cap, 0))
    attempt("utime to 1970", lambda: os.utime(cap, (0, 0)))
    attempt("utime to now", lambda: os.utime(cap))
    attempt("chown to its own owner", lambda: os.chown(cap, os.getuid(), os.getgid()))
    attempt("setxattr", lambda: os.setxattr(cap, "user.agentprov", b"x"))
    attempt("fchmod through a read-only descriptor", lambda: through_fd(lambda fd: os.fchmod(fd, 0)))
    attempt("futimens through a read-only descriptor",
            lambda: through_fd(lambda fd: os.utime(fd, (0, 0))))
    attempt("chmod through a symlink in its own session", lambda: os.chmod(link, 0))
    attempt("chmod through .. from its own session", lambda: os.chmod(climb, 0))
    attempt("raw chmod", lambda: raw(lambda: libc.chmod(os.fsencode(cap), 0)))
    attempt("raw utimensat", lambda: raw(lambda: libc.utimensat(-100, os.fsencode(cap), None, 0)))
    attempt("raw fchmod", lambda: through_fd(lambda fd: raw(lambda: libc.fchmod(fd, 0))))
    with open(own, "w") as f:
        f.write("its own")
    attempt("its own file: chmod 640", lambda: os.chmod(own, 0o640))
    attempt("its own file: utime", lambda: os.utime(own, (1, 1)))
    return seen


def _parents() -> dict[int, int]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def _signal(req: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    parents = _parents()
    me, parent = os.getpid(), os.getppid()
    siblings = [p for p, pp in parents.items() if pp == parent and p != me]
    targets = [("a sibling cell", p) for p in siblings] + [("the cell server", parent)]
    if parents.get(parent):
        targets.append(("the worker", parents[parent]))
    for name, pid in targets:
        try:
            os.kill(pid, signal.SIGKILL)
            seen[f"{name} ({pid})"] = "done"
        except OSError as exc:
            seen[f"{name} ({pid})"] = _err(exc)
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    try:
        os.kill(child, signal.SIGKILL)
        seen["its own child"] = "done"
    except OSError as exc:
        seen["its own child"] = _err(exc)
    os.waitpid(child, 0)
    seen["siblings found"] = len(siblings)
    return seen
