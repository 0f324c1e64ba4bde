"""The seccomp filter of the ``bwrap`` profile, generated as a classic BPF program.

bubblewrap loads it (``--seccomp FD``) in the sandboxed process before it runs the
launcher, so the worker and everything it starts run under it. One program serves both
architectures the profile supports (x86_64 and aarch64): it branches on the ``arch`` field
of ``struct seccomp_data``, so its bytes, and the profile digest that covers them, are the
same on every machine.

What it does, for a native system call (everything else is allowed):

- ``socket`` and ``socketpair``: only the families the worker needs (AF_UNIX, AF_INET,
  AF_INET6, AF_NETLINK); any other (AF_VSOCK, a channel to the hypervisor; AF_PACKET;
  Bluetooth, ...) fails with ``EAFNOSUPPORT``;
- ``io_uring_setup``, ``io_uring_enter``, ``io_uring_register`` fail with ``ENOSYS``
  (io_uring creates sockets without the ``socket`` call);
- any system call of another ABI fails with ``ENOSYS``: the i386 ABI on x86_64 (its
  ``socketcall`` multiplexes socket creation), the x32 ABI (the system call number with bit
  ``0x40000000`` set, same ``arch`` value), and AArch32 on aarch64.

A program is a sequence of ``struct sock_filter`` (8 bytes each: ``u16 code``, ``u8 jt``,
``u8 jf``, ``u32 k``, native byte order), as ``seccomp_export_bpf`` writes it and as
bubblewrap reads it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import sys
from collections.abc import Sequence
from functools import cache
from typing import NamedTuple

# classic BPF opcodes
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = u32 at offset k of seccomp_data
BPF_JEQ_K = 0x15     # BPF_JMP | BPF_JEQ | BPF_K
BPF_JSET_K = 0x45    # BPF_JMP | BPF_JSET | BPF_K
BPF_RET_K = 0x06     # BPF_RET | BPF_K

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000

#: offsets in struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
#: args[0]'s low 32 bits (little endian: at 16), which is all the kernel reads of an int.
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
ALLOWED_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)


class Arch(NamedTuple):
    name: str
    audit: int
    socket: int
    socketpair: int
    io_uring: tuple[int, ...]
    x32_bit: bool


ARCHES = (
    Arch("x86_64", AUDIT_ARCH_X86_64, socket=41, socketpair=53, io_uring=(425, 426, 427),
         x32_bit=True),
    Arch("aarch64", AUDIT_ARCH_AARCH64, socket=198, socketpair=199, io_uring=(425, 426, 427),
         x32_bit=False),
)


class Insn(NamedTuple):
    code: int
    jt: int
    jf: int
    k: int


def errno_ret(code: int) -> int:
    return SECCOMP_RET_ERRNO | (code & 0xFFFF)


def _build() -> list[Insn]:
    """Assemble the program with symbolic labels, then resolve the relative jumps."""
    prog: list[tuple] = []  # (code, jt_label|int, jf_label|int, k) or ("label", name)

    def label(name: str) -> None:
        prog.append(("label", name))

    def op(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k))

    op(BPF_LD_W_ABS, OFF_ARCH)
    for a in ARCHES:
        op(BPF_JEQ_K, a.audit, jt=a.name)
    op(BPF_RET_K, errno_ret(errno.ENOSYS))  # another ABI: i386, AArch32, anything else
    for a in ARCHES:
        label(a.name)
        op(BPF_LD_W_ABS, OFF_NR)
        if a.x32_bit:
            op(BPF_JSET_K, X32_SYSCALL_BIT, jt="enosys")
        op(BPF_JEQ_K, a.socket, jt="family")
        op(BPF_JEQ_K, a.socketpair, jt="family")
        for nr in a.io_uring:
            op(BPF_JEQ_K, nr, jt="enosys")
        op(BPF_RET_K, SECCOMP_RET_ALLOW)
    label("family")
    op(BPF_LD_W_ABS, OFF_ARG0)
    for fam in ALLOWED_FAMILIES:
        op(BPF_JEQ_K, fam, jt="allow")
    op(BPF_RET_K, errno_ret(errno.EAFNOSUPPORT))
    label("allow")
    op(BPF_RET_K, SECCOMP_RET_ALLOW)
    label("enosys")
    op(BPF_RET_K, errno_ret(errno.ENOSYS))

    where: dict[str, int] = {}
    n = 0
    for item in prog:
        if item[0] == "label":
            where[item[1]] = n
        else:
            n += 1
    out: list[Insn] = []
    for item in prog:
        if item[0] == "label":
            continue
        code, jt, jf, k = item
        at = len(out)

        def rel(target: object, at: int = at) -> int:
            if isinstance(target, int):
                return target
            off = where[str(target)] - at - 1
            if not 0 <= off <= 255:
                raise ValueError(f"jump to {target} out of range ({off})")
            return off

        out.append(Insn(code, rel(jt), rel(jf), k))
    return out


@cache
def program() -> tuple[Insn, ...]:
    return tuple(_build())


def encode(prog: Sequence[Insn], byteorder: str = sys.byteorder) -> bytes:
    fmt = ("<" if byteorder == "little" else ">") + "HBBI"
    return b"".join(struct.pack(fmt, *i) for i in prog)


@cache
def filter_bytes() -> bytes:
    """The program as bubblewrap reads it. Both supported architectures are little endian;
    the digest is of these bytes."""
    return encode(program(), "little")


def filter_sha256() -> str:
    return hashlib.sha256(filter_bytes()).hexdigest()


def describe() -> dict[str, object]:
    """What the profile records of the filter (its digest covers this and the bytes)."""
    return {"format": "classic BPF, struct sock_filter, little endian",
            "arches": [a.name for a in ARCHES],
            "socket_families_allowed": ["AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"],
            "other_families": "EAFNOSUPPORT",
            "denied_enosys": ["io_uring_setup", "io_uring_enter", "io_uring_register",
                              "other ABIs (i386, x32, AArch32)"],
            "instructions": len(program()),
            "sha256": filter_sha256()}


def open_fd() -> int:
    """A fresh file descriptor holding the program at offset 0, for ``--seccomp FD``
    (close-on-exec: only a child that is passed it, ``pass_fds``, inherits it). One fd per
    sandbox: bubblewrap reads it to its end."""
    data = filter_bytes()
    try:
        fd = os.memfd_create("agentprov-seccomp", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        r, w = os.pipe()  # the program is far below a pipe's capacity
        os.write(w, data)
        os.close(w)
        return r
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


# ----------------------------------------------------------------------------- interpreter
def run(prog: Sequence[Insn], nr: int, arch: int, args: Sequence[int] = ()) -> int:
    """Run ``prog`` on one ``seccomp_data`` the way the kernel does (the subset of classic
    BPF this generator emits); the return value is the filter's action. Used by the tests
    to check the program for both architectures on any machine."""
    args = list(args) + [0] * (6 - len(args))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(a & (2**64 - 1) for a in args))
    a, pc = 0, 0
    while True:
        if pc >= len(prog):
            raise ValueError("the program runs past its end")
        i = prog[pc]
        pc += 1
        if i.code == BPF_LD_W_ABS:
            a = struct.unpack_from("<I", data, i.k)[0]
        elif i.code == BPF_JEQ_K:
            pc += i.jt if a == i.k else i.jf
        elif i.code == BPF_JSET_K:
            pc += i.jt if a & i.k else i.jf
        elif i.code == BPF_RET_K:
            return i.k
        else:
            raise ValueError(f"opcode {i.code:#x} is not one this generator emits")
