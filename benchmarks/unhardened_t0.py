"""agentprov's CLI with parts of the bwrap profile's hardening turned off, for
``bench_containment.py --cell`` only (never a way to run agentprov): ``python
unhardened_t0.py MODE ARGS...``, where MODE is

* ``no-filter``: no seccomp filter, no ``/proc`` masks, no ``--disable-userns`` (the cells
  are still confined by Landlock);
* ``bare``: as ``no-filter``, but with a 2-rule seccomp program in place of none, whose only
  effect is that Landlock is unavailable (``landlock_create_ruleset`` fails with ENOSYS), so
  the cells run unconfined, and with the cells open to each other as ``cells-open`` has
  them: the sandbox as it was before the hardening, plus a filter of four instructions;
* ``cells-open``: the profile as built, but the worker library inside the sandbox is a copy
  of the environment's own (bound read-only over it) without what keeps one cell from
  another: the standard library's forkserver in place of the cell server, no signal and
  abstract socket scoping in the cells' ruleset, no metadata filter.

The profile digest is unchanged (the run accepts the environment's passed probe): only
the realised argv differs; the environment on disk is not touched.
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


#: (module, text, replaced by): the cell-to-cell hardening taken out of a worker library
CELLS_OPEN = (
    ("worker.py", "    proc = _cells().start(req)\n",
     "    import multiprocessing\n    from agentprov_backend import landlock\n"
     "    ctx = multiprocessing.get_context('forkserver')\n"
     "    ctx.set_forkserver_preload(['agentprov_backend.landlock', "
     "'agentprov_backend.forkserver'])\n"
     "    proc = ctx.Process(target=landlock.cell_main, args=(req,), daemon=True)\n"
     "    proc.start()\n"),
    ("worker.py", "    _cells()\n",
     "    import multiprocessing\n    from multiprocessing import forkserver\n"
     "    ctx = multiprocessing.get_context('forkserver')\n"
     "    ctx.set_forkserver_preload(['agentprov_backend.landlock', "
     "'agentprov_backend.forkserver'])\n    forkserver.ensure_running()\n"),
    ("landlock.py", "scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0",
     "scoped = 0"),
    ("landlock.py", "metadata = cellfilter.load()", "metadata = None"),
)
_open_copies: dict[str, str] = {}


def cells_open_library(env_dir: Path) -> tuple[str, str]:
    """(the copy, where it is bound): the environment's worker library without the
    cell-to-cell hardening, compiled by the environment's Python."""
    import shutil
    import subprocess
    import tempfile

    lib = next(Path(env_dir).glob("lib/python3*/site-packages/agentprov_backend"))
    if str(lib) not in _open_copies:
        copy = Path(tempfile.mkdtemp(prefix="agentprov-cells-open-")) / "agentprov_backend"
        shutil.copytree(lib, copy, ignore=shutil.ignore_patterns("__pycache__"))
        for module, old, new in CELLS_OPEN:
            f = copy / module
            text = f.read_text()
            if old not in text:
                raise SystemExit(f"unhardened_t0: {module} has no {old.strip()!r}")
            f.write_text(text.replace(old, new, 1))
        subprocess.run([str(Path(env_dir) / "bin" / "python"), "-m", "compileall", "-q",
                        str(copy)], check=True)
        for p in [copy.parent, *copy.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o555 if p.is_dir() else p.stat().st_mode | 0o444)
        _open_copies[str(lib)] = str(copy)
    return _open_copies[str(lib)], str(lib)


def weakened(mode: str):
    real = profile.realise

    def realise(argv, **kw):
        out = real(argv, **kw)
        if mode in ("cells-open", "bare"):
            env_dir = str(Path(os.path.abspath(kw["env_dir"])))
            at = out.index(env_dir, out.index("--ro-bind")) + 2  # after --ro-bind ENV ENV
            copy, lib = cells_open_library(Path(env_dir))
            out[at:at] = ["--ro-bind", copy, lib]
            if mode == "cells-open":
                return out
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
    if mode not in ("no-filter", "bare", "cells-open"):
        raise SystemExit(f"unknown mode {mode!r}")
    profile.realise = weakened(mode)
    from agentprov_core.cli.main import main

    main()
