"""The worker's own fork loop: one process that imports the benchmark once and forks a
process per cell, on request from the worker alone.

The worker starts it (``python -P -m agentprov_backend.cellserver FD``) with one end of a
socket pair as fd ``FD``; the worker keeps the other end. That pair is its only channel:
it has no name in the file system and no abstract address, so nothing can connect to it,
and a forked cell closes its copy before its code runs (nor can it take one from its
parent: Landlock denies a confined process ``ptrace`` access, ``/proc/PID/fd`` and
``pidfd_getfd``, to any process outside its own domain). We chose this over the standard
library's forkserver, whose listener is a path in the TMPDIR every cell shares: it
authenticates no client (Python 3.12), and any cell that connected got an unconfined
process running a pickle of its choosing.

The messages are JSON lines, never pickles: ``{"op": "cell", "token": T, "req": R}`` forks
a cell that runs :func:`agentprov_backend.landlock.cell_main` on ``R`` (answered
``{"token": T, "pid": P}``, and ``{"token": T, "exitcode": N}`` when it has ended,
negative for a signal); ``{"op": "signal", "token": T, "sig": S}`` signals that cell while
it has not been reaped. When the worker's end closes, the server kills the cells still
running and exits.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import traceback
from typing import Any

#: the modules the server imports before its first fork: the cells' confinement, and the
#: warm-up (:mod:`agentprov_backend.forkserver`) that imports the campaign's benchmark
PRELOAD = ("agentprov_backend.landlock", "agentprov_backend.cellfilter",
           "agentprov_backend.metabroker", "agentprov_backend.forkserver")


# ------------------------------------------------------------------------- the server side
def _child(own: list[int], req: dict[str, Any], broker: int) -> None:
    """In the forked cell: drop every descriptor of the server (but its own end of the
    metadata broker, :mod:`agentprov_backend.metabroker`), then run the cell."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in own:
        with contextlib.suppress(OSError):
            os.close(fd)
    if sys.platform.startswith("linux"):
        _dumpable(True)  # the cell, as any process: its own descendants may inspect it
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    code = 0
    try:
        from agentprov_backend import landlock

        landlock.cell_main(req, broker)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the cell's failure, told on stderr
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


def serve(sock: socket.socket) -> None:
    from agentprov_backend import landlock, metabroker

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the pipe
    signal.set_wakeup_fd(wake_w)
    children: dict[int, Any] = {}  # pid -> token, until reaped
    by_token: dict[Any, int] = {}
    brokers: dict[socket.socket, list[str]] = {}  # a cell's broker end -> its own roots

    def send(msg: dict[str, Any]) -> None:
        sock.sendall(json.dumps(msg).encode() + b"\n")

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            token = children.pop(pid, None)
            by_token.pop(token, None)
            send({"token": token, "exitcode": os.waitstatus_to_exitcode(status)})

    buf = b""
    while True:
        ready, _, _ = select.select([sock, wake_r, *brokers], [], [])
        for b in [r for r in ready if r in brokers]:
            if not metabroker.answer(b, brokers[b]):
                del brokers[b]
                b.close()
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
            reap()
        if sock not in ready:
            continue
        data = sock.recv(1 << 16)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("op") == "cell":
                mine, theirs = socket.socketpair()
                pid = os.fork()
                if pid == 0:
                    _child([sock.fileno(), wake_r, wake_w, mine.fileno(),
                            *(b.fileno() for b in brokers)], msg["req"], theirs.detach())
                theirs.close()
                mine.setblocking(False)  # a cell that stops reading never stalls the server
                brokers[mine] = [p for p in landlock.cell_writable(msg["req"]["staging"])
                                 if p not in landlock.DEVICES]
                children[pid] = msg["token"]
                by_token[msg["token"]] = pid
                send({"token": msg["token"], "pid": pid})
            elif msg.get("op") == "signal" and msg.get("token") in by_token:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(by_token[msg["token"]], int(msg["sig"]))
        reap()
    for pid in children:  # the worker is gone: so are its cells
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _dumpable(on: bool) -> None:
    """``PR_SET_DUMPABLE``: a process that is not dumpable cannot be traced, nor its
    descriptors taken (``pidfd_getfd``), by another of its user without ``CAP_SYS_PTRACE``."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(4, int(on), 0, 0, 0)


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    if sys.platform.startswith("linux"):
        _dumpable(False)  # its socket pair stays its own, even beside Landlock's rule
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    serve(sock)
    return 0


# ------------------------------------------------------------------------- the worker side
class Cell:
    """One forked cell, as the worker sees it (the subset of ``multiprocessing.Process`` it
    uses: :meth:`join`, :meth:`is_alive`, :meth:`terminate`, :meth:`kill`, ``exitcode``)."""

    def __init__(self, server: Server, token: int) -> None:
        self._server, self._token = server, token
        self._ended = threading.Event()
        self.pid: int | None = None
        self.exitcode: int | None = None

    def join(self, timeout: float | None = None) -> None:
        self._ended.wait(timeout)

    def is_alive(self) -> bool:
        return not self._ended.is_set()

    def terminate(self) -> None:
        self._server.signal(self._token, signal.SIGTERM)

    def kill(self) -> None:
        self._server.signal(self._token, signal.SIGKILL)

    def _end(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        self._ended.set()


class Server:
    """The worker's handle on its cell server: starts it, asks it for cells, and follows
    them (a reader thread dispatches the server's answers)."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()  # both close-on-exec; theirs is passed
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "agentprov_backend.cellserver", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self._sock = mine
        self._lock = threading.Lock()
        self._cells: dict[int, Cell] = {}
        self._tokens = itertools.count(1)
        threading.Thread(target=self._read, daemon=True, name="agentprov-cellserver").start()

    def start(self, req: dict[str, Any]) -> Cell:
        with self._lock:
            cell = Cell(self, next(self._tokens))
            self._cells[cell._token] = cell
            self._send({"op": "cell", "token": cell._token, "req": req})
        return cell

    def signal(self, token: int, sig: int) -> None:
        with self._lock:
            self._send({"op": "signal", "token": token, "sig": int(sig)})

    def _send(self, msg: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the server is gone: the reader ends every cell
            self._sock.sendall(json.dumps(msg).encode() + b"\n")

    def _read(self) -> None:
        with self._sock.makefile("rb") as f:
            for line in f:
                msg = json.loads(line)
                cell = self._cells.get(msg.get("token"))
                if cell is None:
                    continue
                if "pid" in msg:
                    cell.pid = msg["pid"]
                if "exitcode" in msg:
                    self._cells.pop(msg["token"], None)
                    cell._end(msg["exitcode"])
        for cell in list(self._cells.values()):  # the server died: its cells with it
            cell._end(None)
        self._cells.clear()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
