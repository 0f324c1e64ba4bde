"""A cell's own metadata changes, made for it by the cell server beneath its own directories.

A cell may not make a metadata system call itself (:mod:`agentprov_backend.cellfilter`
refuses them all: a filter cannot tell whose file a path names). Yet benchmarks change the
mode and times of their own files (Inspect restores a log's mode when it rewrites it,
``shutil.copy2`` copies times). So each cell gets one end of a socket pair to its cell
server, and its Python's ``os.chmod``, ``os.fchmod``, ``os.utime``, ``os.chown``,
``os.fchown``, ``os.lchown``, ``os.setxattr`` and ``os.removexattr`` (and with them
``shutil``, ``pathlib``, ``tarfile``) ask the server instead (:func:`install`).

The server (:func:`answer`) makes the change only on a file beneath the cell's own session
directory, home or TMPDIR: a path is opened from that root with ``openat2``
(``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``: no ``..``, absolute symlink or
``/proc`` link leads out; a hard link to another session's file cannot be made under
Landlock), a descriptor the cell sends must name a file there, and the change is made on
the descriptor the server itself opened (``/proc/self/fd/N``), so a path swapped after the
check changes nothing else. Anything else is refused ``EPERM``, as the filter refuses the
system call. What a cell's Python does not route here (a C library's own ``fchmod``) meets
the filter.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import socket
import struct
import threading
from typing import Any

SYS_OPENAT2 = 437  # the same on x86_64 and aarch64
RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH = 0x02, 0x08
OPS = ("chmod", "utime", "chown", "setxattr", "removexattr")


# --------------------------------------------------------------------- the server's side
def _openat2(dirfd: int, rel: str, flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    how = struct.pack("=QQQ", flags, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = libc.syscall(SYS_OPENAT2, ctypes.c_int(dirfd), os.fsencode(rel), how,
                      ctypes.c_size_t(len(how)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return int(fd)


def _beneath(path: str, roots: list[str]) -> tuple[str, str] | None:
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root, path[len(root):].lstrip("/") or "."
    return None


def _open_target(msg: dict[str, Any], fds: list[int], roots: list[str]) -> int:
    """An ``O_PATH`` descriptor of the file the request names, beneath ``roots``."""
    if msg.get("fd"):
        if not fds:
            raise OSError(errno.EBADF, "no descriptor")
        where = os.readlink(f"/proc/self/fd/{fds[0]}")
        if not where.startswith("/") or _beneath(where, roots) is None:
            raise OSError(errno.EPERM, "not the cell's own file")
        return os.open(f"/proc/self/fd/{fds[0]}", os.O_PATH | os.O_CLOEXEC)
    path = str(msg.get("path") or "")
    found = _beneath(path, roots) if path.startswith("/") else None
    if found is None:
        raise OSError(errno.EPERM, "not beneath the cell's own directories")
    root, rel = found  # rel as given: the kernel resolves its "..", never above root
    rootfd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        flags = os.O_PATH | os.O_CLOEXEC | (0 if msg.get("follow", True) else os.O_NOFOLLOW)
        return _openat2(rootfd, rel, flags)
    finally:
        os.close(rootfd)


def _apply(msg: dict[str, Any], fd: int) -> None:
    at = f"/proc/self/fd/{fd}"
    op = msg.get("op")
    if op == "chmod":
        os.chmod(at, int(msg["mode"]))
    elif op == "utime":
        ns = msg.get("ns")
        os.utime(at, ns=(int(ns[0]), int(ns[1])) if ns else None)
    elif op == "chown":
        os.chown(at, int(msg["uid"]), int(msg["gid"]))
    elif op == "setxattr":
        os.setxattr(at, str(msg["name"]), bytes.fromhex(str(msg["value"])), int(msg["flags"]))
    elif op == "removexattr":
        os.removexattr(at, str(msg["name"]))
    else:
        raise OSError(errno.EINVAL, f"unknown operation {op!r}")


def answer(sock: socket.socket, roots: list[str]) -> bool:
    """Answer one request of a cell on ``sock``; ``False`` once the cell has closed it."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 1)
    except OSError:
        return False
    if not data:
        return False
    code = 0
    try:
        msg = json.loads(data)
        target = _open_target(msg, fds, roots)
        try:
            _apply(msg, target)
        finally:
            os.close(target)
    except OSError as exc:
        code = errno.EPERM if exc.errno in (errno.EXDEV, errno.ELOOP, None) else exc.errno
    except (ValueError, KeyError, TypeError):
        code = errno.EINVAL
    finally:
        for fd in fds:
            os.close(fd)
    with contextlib.suppress(OSError):
        sock.sendall(json.dumps({"errno": code}).encode())
    return True


# ----------------------------------------------------------------------- the cell's side
def install(fd: int) -> None:
    """Route this process's Python metadata calls through the socket ``fd``."""
    sock = socket.socket(fileno=fd)
    lock = threading.Lock()

    def ask(op: str, target: Any, follow: bool = True, dir_fd: int | None = None,
            **args: Any) -> None:
        msg: dict[str, Any] = {"op": op, "follow": follow, **args}
        fds: list[int] = []
        if isinstance(target, int):
            msg["fd"], fds = True, [target]
        else:
            path = os.fsdecode(target)
            if dir_fd is not None and not path.startswith("/"):
                path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
            msg["path"] = os.path.join(os.getcwd(), path)
        with lock:
            socket.send_fds(sock, [json.dumps(msg).encode()], fds)
            code = json.loads(sock.recv(4096) or b'{"errno": 5}')["errno"]
        if code:
            raise OSError(code, os.strerror(code), None if isinstance(target, int) else target)

    def chmod(path, mode, *, dir_fd=None, follow_symlinks=True):
        ask("chmod", path, follow_symlinks, dir_fd, mode=mode)

    def utime(path, times=None, *, ns=None, dir_fd=None, follow_symlinks=True):
        if times is not None and ns is not None:
            raise ValueError("utime: you may specify either 'times' or 'ns' but not both")
        if times is not None:
            ns = tuple(int(t * 1_000_000_000) for t in times)
        ask("utime", path, follow_symlinks, dir_fd, ns=list(ns) if ns is not None else None)

    def chown(path, uid, gid, *, dir_fd=None, follow_symlinks=True):
        ask("chown", path, follow_symlinks, dir_fd, uid=uid, gid=gid)

    def setxattr(path, attribute, value, flags=0, *, follow_symlinks=True):
        ask("setxattr", path, follow_symlinks, name=os.fsdecode(attribute),
            value=bytes(value).hex(), flags=flags)

    def removexattr(path, attribute, *, follow_symlinks=True):
        ask("removexattr", path, follow_symlinks, name=os.fsdecode(attribute))

    os.chmod, os.utime, os.chown = chmod, utime, chown  # type: ignore[assignment]
    os.setxattr, os.removexattr = setxattr, removexattr  # type: ignore[assignment]
    os.fchmod = lambda fd, mode: ask("chmod", fd, mode=mode)  # type: ignore[assignment]
    os.fchown = lambda fd, uid, gid: ask("chown", fd, uid=uid, gid=gid)  # type: ignore[assignment]
    os.lchown = lambda path, uid, gid: chown(path, uid, gid, follow_symlinks=False)  # type: ignore[assignment]
