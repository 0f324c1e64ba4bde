"""One session, one staging directory: the Landlock ruleset each forked cell runs under.

All the cells of a campaign share one worker and one staging root
(``<corpus>.partial/staging/``); each has its own session directory in it. Before a cell
runs, its process restricts itself (Landlock, an unprivileged Linux security module, with
``PR_SET_NO_NEW_PRIVS``) so that it may create, change, rename or remove files only beneath

- its own session directory (``req["staging"]``),
- its private home (``$HOME``) and TMPDIR (``$TMPDIR``),
- and write to the character devices a program expects (``/dev/null``, ``/dev/zero``,
  ``/dev/full``, ``/dev/tty``, ``/dev/random``, ``/dev/urandom``).

It cannot touch another session's capture log before T0 ingests it, nor plant a file in
the staging root. Reading is not restricted here (the sandbox's mount namespace decides
what exists). Files opened before the restriction (the worker's stderr, inherited as fds 1
and 2) stay writable: Landlock checks the opening of a file, not its use.

Where the kernel has Landlock ABI 6 or later, the ruleset also scopes signals and abstract
Unix sockets: the cell can signal, and connect to an abstract socket of, only itself and
what it starts, never a sibling cell, the cell server or the worker. A confined process
can never ``ptrace`` one outside its domain (any ABI), which also keeps it from a
sibling's or its parent's ``/proc/PID/fd`` and ``pidfd_getfd``. The metadata of files
(mode, owner, times, extended attributes), which no Landlock right covers, is kept by a
seccomp filter the cell loads next (:mod:`agentprov_backend.cellfilter`).

The kernel interface (``landlock_create_ruleset`` 444, ``landlock_add_rule`` 445,
``landlock_restrict_self`` 446, the same numbers on x86_64 and aarch64) is called with
ctypes, on Linux only; the handled rights are those of the ABI version the kernel reports. Where the
kernel has no Landlock, :func:`restrict` raises :class:`Unavailable` and the cell runs
unrestricted (the containment probe records staging isolation as not available, and
``--containment bwrap`` is then refused).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from typing import Any

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# LANDLOCK_ACCESS_FS_*
WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13     # ABI 2: link or rename across directories
TRUNCATE = 1 << 14  # ABI 3

# LANDLOCK_SCOPE_* (ABI 6): what a domain may not reach outside itself
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
SCOPES = {"abstract_unix_socket": SCOPE_ABSTRACT_UNIX_SOCKET, "signal": SCOPE_SIGNAL}

FILE_RIGHTS = WRITE_FILE | TRUNCATE  # the rights that apply to a file (not a directory)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/random", "/dev/urandom")


class Unavailable(Exception):
    """This kernel has no Landlock (or it is disabled)."""


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The Landlock ABI version of this kernel; 0 when it has none (and off Linux, where
    these system call numbers mean something else)."""
    if not sys.platform.startswith("linux"):
        return 0
    r = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(r) if r > 0 else 0


def handled(abi: int) -> int:
    """The write rights a ruleset of ABI ``abi`` handles (denied unless a rule allows)."""
    rights = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG
              | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def restrict(writable: list[str]) -> dict[str, Any]:
    """Restrict this process (and what it starts) to write only beneath ``writable``
    (directories; files get the file rights). A path that does not exist is skipped.
    Returns what was applied; raises :class:`Unavailable` without Landlock."""
    abi = abi_version()
    if abi < 1:
        raise Unavailable("this kernel has no Landlock (Linux 5.13 or later, with "
                          "landlock in the lsm= list)")
    libc = _libc()
    rights = handled(abi)
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4; none
    # handled here: the sandbox's network namespace decides), scoped (ABI 6)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("=QQQ", rights, 0, scoped) if abi >= 6 else struct.pack("=Q", rights)
    fd = libc.syscall(SYS_CREATE_RULESET, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise _fail("landlock_create_ruleset")
    applied = []
    try:
        for path in writable:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = os.path.isdir(path)
                allowed = rights if is_dir else rights & FILE_RIGHTS
                # struct landlock_path_beneath_attr (packed): u64 allowed_access, s32 parent_fd
                rule = struct.pack("=Qi", allowed, pfd)
                if libc.syscall(SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH),
                                rule, ctypes.c_uint32(0)) != 0:
                    raise _fail(f"landlock_add_rule {path}")
                applied.append(path)
            finally:
                os.close(pfd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(fd)
    return {"abi": abi, "handled": rights, "writable": applied,
            "scoped": [name for name, bit in SCOPES.items() if scoped & bit]}


def cell_writable(session_dir: str) -> list[str]:
    """What a cell may write: its session directory, its home and TMPDIR, the devices."""
    out = [os.path.abspath(session_dir)]
    out += [os.environ[v] for v in ("HOME", "TMPDIR") if os.environ.get(v)]
    return out + list(DEVICES)


def confine_cell(session_dir: str) -> dict[str, Any] | None:
    """Restrict the calling cell process to :func:`cell_writable`, and scope its signals
    and abstract Unix sockets to itself and its descendants (ABI 6); ``None`` where the
    kernel has no Landlock (the cell then runs unrestricted, as the probe records)."""
    try:
        return restrict(cell_writable(session_dir))
    except Unavailable:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EOPNOTSUPP):
            return None
        raise


def cell_main(req: dict[str, Any], broker: int | None = None) -> None:
    """The forked cell's entry point: confine it to its own session (:func:`confine_cell`,
    then :func:`agentprov_backend.cellfilter.load`; its Python's metadata calls go to the
    cell server through ``broker``, :mod:`agentprov_backend.metabroker`), then let the source's
    worker package run it (:meth:`agentprov_backend.source.WorkerSource.run_cell`); the
    result it returns is written to ``result.json`` unless it staged one itself."""
    import json
    import time

    from agentprov_backend import cellfilter, host, timing

    t = time.time()
    confined = confine_cell(req["staging"])
    metadata = cellfilter.load()
    if broker is not None:  # its own files' metadata, changed by the cell server
        from agentprov_backend import metabroker

        metabroker.install(broker)
    if confined is not None:
        confined["metadata"] = metadata
    os.chdir(req["staging"])
    try:
        if req.get("probe"):  # the containment probe's cells (agentprov_backend.cellprobe)
            from agentprov_backend import cellprobe

            result = cellprobe.run(req, confined)
        else:
            result = host.source(req.get("source") or "").run_cell(req)
        out = os.path.join(req["staging"], "result.json")
        if not os.path.lexists(out):
            with open(out, "x", encoding="utf-8") as f:
                json.dump(result, f, sort_keys=True)
    finally:
        timing.emit("cell.child", t, session=req["session_id"])
