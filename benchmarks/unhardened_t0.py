"""agentprov's CLI with parts of the bwrap profile's hardening turned off, for
``bench_containment.py --cell`` only (never a way to run agentprov): ``python
unhardened_t0.py MODE ARGS...``, where MODE is

* ``no-filter``: no seccomp filter, no ``/proc`` masks, no ``--disable-userns`` (the cells
  are still confined by Landlock);
* ``bare``: as ``no-filter``, but with a 2-rule seccomp program in place of none, whose only
  effect is that Landlock is unavailable (``landlock_create_ruleset`` fails with ENOSYS), so
  the cells run unconfined: the sandbox as it was before the hardening, plus a filter of
  four instructions.

The profile digest is unchanged (the run accepts the environment's passed probe): only
the realised argv differs.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentprov_core.backend.sandbox import profile, seccomp  # noqa: E402


def landlock_off_fd() -> int:
    prog = (seccomp.Insn(seccomp.BPF_LD_W_ABS, 0, 0, seccomp.OFF_NR),
            seccomp.Insn(seccomp.BPF_JEQ_K, 0, 1, 444),  # landlock_create_ruleset
            seccomp.Insn(seccomp.BPF_RET_K, 0, 0, seccomp.errno_ret(errno.ENOSYS)),
            seccomp.Insn(seccomp.BPF_RET_K, 0, 0, seccomp.SECCOMP_RET_ALLOW))
    r, w = os.pipe()
    os.write(w, seccomp.encode(prog, "little"))
    os.close(w)
    return r


def weakened(mode: str):
    real = profile.realise

    def realise(argv, **kw):
        out = real(argv, **kw)
        at = out.index("--seccomp")
        os.close(int(out[at + 1]))
        if mode == "bare":
            out[at + 1] = str(landlock_off_fd())
        else:
            del out[at:at + 2]
        out = [a for a in out if a != "--disable-userns"]
        start, end = out.index("/proc") + 1, out.index("--dev")  # after --proc /proc
        return out[:start] + out[end:]

    return realise


if __name__ == "__main__":
    mode = sys.argv.pop(1)
    if mode not in ("no-filter", "bare"):
        raise SystemExit(f"unknown mode {mode!r}")
    profile.realise = weakened(mode)
    from agentprov_core.cli.main import main

    main()
