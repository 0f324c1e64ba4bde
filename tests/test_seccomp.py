"""The seccomp program of the bwrap profile: its encoding, and what it decides for each
architecture, run through the module's classic-BPF interpreter (so aarch64 is checked on
any machine) and, for the native architecture, loaded into a real process by the kernel.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import struct
import sys

import pytest

from agentprov_core.backend.sandbox import seccomp as sc

ALLOW = sc.SECCOMP_RET_ALLOW
EAFNOSUPPORT = sc.errno_ret(errno.EAFNOSUPPORT)
ENOSYS = sc.errno_ret(errno.ENOSYS)
ARCH = {a.name: a for a in sc.ARCHES}
AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG = 40, 17, 31, 38


def decide(arch: str, nr: int, *args: int) -> int:
    return sc.run(sc.program(), nr, ARCH[arch].audit, args)


def test_the_program_is_struct_sock_filter_8_bytes_an_instruction():
    data = sc.filter_bytes()
    assert len(data) == 8 * len(sc.program()) and len(sc.program()) < 64
    for i, insn in enumerate(sc.program()):
        assert struct.unpack_from("<HBBI", data, 8 * i) == tuple(insn)
    assert sc.encode(sc.program(), "big") != data  # the byte order is the writer's choice
    assert sc.filter_sha256() == sc.describe()["sha256"]


@pytest.mark.req("R-4.11")
@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_socket_and_socketpair_keep_only_the_families_the_worker_needs(arch):
    a = ARCH[arch]
    for nr in (a.socket, a.socketpair):
        for fam in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, sc.AF_NETLINK):
            assert decide(arch, nr, fam, socket.SOCK_STREAM) == ALLOW
        for fam in (AF_VSOCK, AF_PACKET, AF_BLUETOOTH, AF_ALG, 0, 45, 255):
            assert decide(arch, nr, fam, socket.SOCK_STREAM) == EAFNOSUPPORT, (arch, nr, fam)
    # the kernel reads the family as an int: the upper half of the register is not looked at
    assert decide(arch, a.socket, (1 << 32) | AF_VSOCK) == EAFNOSUPPORT
    assert decide(arch, a.socket, (1 << 32) | socket.AF_INET) == ALLOW


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_io_uring_is_denied_and_other_calls_pass(arch):
    for nr in ARCH[arch].io_uring:
        assert decide(arch, nr) == ENOSYS
    # read, write, openat, connect, clone: allowed whatever their arguments
    others = {"x86_64": (0, 1, 257, 42, 56), "aarch64": (63, 64, 56, 203, 220)}[arch]
    for nr in others:
        assert decide(arch, nr, AF_VSOCK) == ALLOW


def test_foreign_abis_are_denied():
    assert sc.run(sc.program(), 102, 0x40000003, (1, 0)) == ENOSYS     # i386 socketcall
    assert sc.run(sc.program(), 359, 0x40000003, (AF_VSOCK,)) == ENOSYS  # i386 socket
    assert sc.run(sc.program(), 281, 0x40000028, (AF_VSOCK,)) == ENOSYS  # AArch32 socket
    assert decide("x86_64", sc.X32_SYSCALL_BIT | 41, AF_VSOCK) == ENOSYS  # x32 socket
    assert decide("x86_64", sc.X32_SYSCALL_BIT | 39) == ENOSYS           # x32 getpid
    # aarch64 has no x32: the bit is just a number no table holds, and the kernel answers
    assert decide("aarch64", sc.X32_SYSCALL_BIT | 198) == ALLOW


def test_every_jump_stays_inside_the_program():
    prog = sc.program()
    for i, insn in enumerate(prog):
        if insn.code in (sc.BPF_JEQ_K, sc.BPF_JSET_K):
            assert i + 1 + max(insn.jt, insn.jf) < len(prog)
    assert prog[-1].code == sc.BPF_RET_K


def test_open_fd_holds_the_program_from_its_start():
    fd = sc.open_fd()
    try:
        assert os.get_inheritable(fd) is False
        assert os.read(fd, 4096) == sc.filter_bytes()
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.machine() not in ARCH,
                    reason="the kernel loads the program on Linux x86_64 or aarch64 only")
def test_the_kernel_enforces_it_in_a_real_process():
    """The program loaded with prctl(PR_SET_SECCOMP) in a forked child, as bubblewrap loads
    it: the kernel accepts it, and answers as the interpreter says."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(r)
        libc = ctypes.CDLL(None, use_errno=True)
        data = sc.filter_bytes()
        buf = ctypes.create_string_buffer(data, len(data))

        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        prog = Prog(len(data) // 8, ctypes.addressof(buf))
        out = []
        out.append(libc.prctl(38, 1, 0, 0, 0))  # PR_SET_NO_NEW_PRIVS
        out.append(libc.prctl(22, 2, ctypes.byref(prog), 0, 0))  # PR_SET_SECCOMP, FILTER
        for fam, kind in ((AF_VSOCK, socket.SOCK_STREAM), (AF_PACKET, socket.SOCK_RAW),
                          (socket.AF_INET, socket.SOCK_STREAM), (socket.AF_UNIX, socket.SOCK_STREAM)):
            try:
                socket.socket(fam, kind).close()
                out.append(0)
            except OSError as exc:
                out.append(exc.errno)
        libc.syscall.restype = ctypes.c_long
        out.append(0 if libc.syscall(425, 1, ctypes.create_string_buffer(120)) >= 0
                   else ctypes.get_errno())
        os.write(w, repr(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = eval(f.read())  # noqa: S307 - our own child's list of ints
    os.waitpid(pid, 0)
    assert got == [0, 0, errno.EAFNOSUPPORT, errno.EAFNOSUPPORT, 0, 0, errno.ENOSYS]


def test_a_realised_argv_names_its_filter_fd_and_only_bwraps_own_options_count(tmp_path):
    from agentprov_core.backend.sandbox import profile

    argv = profile.realise(["python", "--seccomp", "7"], env_dir=tmp_path, staging=tmp_path,
                           home=tmp_path, tmp=tmp_path, routes={}, bwrap="bwrap")
    fds = profile.pass_fds(argv)
    try:
        assert len(fds) == 1 and argv[argv.index("--seccomp") + 1] == str(fds[0])
        assert os.read(fds[0], 4096) == sc.filter_bytes()
    finally:
        profile.close_fds(argv)
    with pytest.raises(OSError):
        os.fstat(fds[0])
