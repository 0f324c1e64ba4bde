"""The seccomp filter each forked cell loads on top of its Landlock ruleset: no cell changes
the metadata of a file.

Landlock has no right that covers a file's mode, owner, times or extended attributes, and
all the cells of a worker run as one user, the owner of every session's files: without
this filter a cell could ``chmod 000`` a sibling's capture log (T0 could then no longer
read it) or reset its times. A seccomp filter sees system call numbers and arguments,
never the path a pointer names, so it cannot tell a sibling's file from the cell's own:
it refuses them all (``EPERM``), by path and by descriptor alike (a descriptor is one
``open`` away for any file the cell can read). These are refused:

``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``; ``chown``, ``fchown``, ``lchown``,
``fchownat``; ``utime``, ``utimes``, ``futimesat``, ``utimensat``; ``setxattr``,
``lsetxattr``, ``fsetxattr``, ``setxattrat``, ``removexattr``, ``lremovexattr``,
``fremovexattr``, ``removexattrat``.

So a cell cannot change the metadata of its own files either (``shutil.copy2`` in a cell
fails where it would copy the times); creating a file with a mode (``open``, ``mkdir``)
is unaffected. The program is classic BPF for x86_64 and aarch64 (the same numbers as the
``bwrap`` profile's filter branches on); on another architecture no filter is loaded and
:func:`load` says so.
"""

from __future__ import annotations

import ctypes
import errno
import struct
import sys

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
OFF_NR, OFF_ARCH = 0, 4

#: system call numbers by ``AUDIT_ARCH_*`` (x86_64 first, then aarch64's generic table)
DENIED = {
    0xC000003E: {"chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94,
                 "utime": 132, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
                 "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199,
                 "utimes": 235, "fchownat": 260, "futimesat": 261, "fchmodat": 268,
                 "utimensat": 280, "fchmodat2": 452, "setxattrat": 463, "removexattrat": 466},
    0xC00000B7: {"setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14,
                 "lremovexattr": 15, "fremovexattr": 16, "fchmod": 52, "fchmodat": 53,
                 "fchownat": 54, "fchown": 55, "utimensat": 88, "fchmodat2": 452,
                 "setxattrat": 463, "removexattrat": 466},
}
MACHINES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def program(arch: int) -> list[tuple[int, int, int, int]]:
    """The filter for ``arch`` as ``(code, jt, jf, k)``: another architecture's system call
    (a foreign ABI) is left to the sandbox's own filter; a denied number is ``EPERM``."""
    numbers = sorted(DENIED[arch].values())
    deny = len(numbers) + 1  # the EPERM return, counted from the first comparison
    prog = [(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
            (BPF_JEQ_K, 1, 0, arch),
            (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
            (BPF_LD_W_ABS, 0, 0, OFF_NR)]
    prog += [(BPF_JEQ_K, deny - i - 1, 0, nr) for i, nr in enumerate(numbers)]
    prog += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
             (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    return prog


def load() -> str:
    """Load the filter into the calling process (and what it starts); returns what applied
    (``"metadata calls refused"``) or why nothing did."""
    import os

    arch = MACHINES.get(os.uname().machine)
    if not sys.platform.startswith("linux") or arch is None:
        return f"not available (no filter for {sys.platform} {os.uname().machine})"
    code = b"".join(struct.pack("=HBBI", *i) for i in program(arch))
    buf = ctypes.create_string_buffer(code, len(code))
    # struct sock_fprog: unsigned short len; struct sock_filter *filter (padded to 8)
    fprog = struct.pack("=HxxxxxxQ", len(code) // 8, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(
            PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.c_char_p(fprog), 0, 0) != 0:
        return f"not available ({errno.errorcode.get(ctypes.get_errno(), 'error')})"
    return "metadata calls refused"
