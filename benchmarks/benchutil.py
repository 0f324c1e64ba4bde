"""What the benchmarks share: a clean environment for the measured processes and a clean
peak-RSS measurement.

Why peak RSS needs care: on Linux a process's ``ru_maxrss`` starts at the peak RSS of the
process that spawned it (``exec`` keeps the high-water mark of the address space it
replaces, and a ``vfork``-ed child's is its parent's), so a 9 MiB ``python -c pass``
spawned by a 30 MiB benchmark reports 30 MiB. The measured command is therefore run by a
small process that forks it: GNU ``time`` (which also reports the peak, ``%M``), else
``/bin/sh``, whose ``"$@"; exit $?`` forks rather than execs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

DROP = {"PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "PYTHONSTARTUP",
        "PYTHONPYCACHEPREFIX"}


def child_env(home: str) -> dict[str, str]:
    """The environment of every measured process: no AGENTPROV_* setting of the caller
    (all plugins load, the checkout's registry), a private home, and bytecode caching on
    (tox sets PYTHONDONTWRITEBYTECODE; without a cache every run would recompile click)."""
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith("AGENTPROV_") or k == "AGENTPROV_PYTHON") and k not in DROP}
    env["AGENTPROV_HOME"] = home
    return env


@cache
def gnu_time() -> str | None:
    """The path of GNU time, or None (BSD and macOS ``time`` take other options)."""
    for cand in (shutil.which("time"), "/usr/bin/time"):
        if cand and Path(cand).is_file():
            try:
                out = subprocess.run([cand, "--version"], capture_output=True, text=True,
                                     timeout=10)
            except (OSError, subprocess.SubprocessError):
                continue
            if "GNU" in out.stdout + out.stderr:
                return cand
    return None


def forked(argv: list[str], peak_file: Path | None = None) -> list[str]:
    """``argv`` run by a small process that forks it (see the module's docstring). With
    GNU time and ``peak_file``, the command's peak RSS (KiB) is written to ``peak_file``."""
    t = gnu_time()
    if t is not None:
        return [t, "-f", "%M", "-o", str(peak_file or os.devnull), *argv]
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *argv]


def read_peak_mib(peak_file: Path) -> float | None:
    """The peak RSS GNU time wrote (its last line, KiB), in MiB; None if there is none."""
    try:
        lines = peak_file.read_text().strip().splitlines()
    except OSError:
        return None
    return int(lines[-1]) / 1024 if lines and lines[-1].strip().isdigit() else None


def display(path: str | Path) -> str:
    """``path`` relative to the checkout when it lies inside it (stable across machines)."""
    root = Path(__file__).resolve().parent.parent
    p = Path(path).absolute()
    try:
        return str(p.relative_to(root))
    except ValueError:
        return str(path)


def load_avg() -> str:
    """The load average (1, 5, 15 min), or ``?`` where the system has none."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def write_between(doc: Path, begin: str, end: str, results: str) -> None:
    """Replace what lies between the markers ``begin`` and ``end`` of ``doc`` with
    ``results`` (a generated table of a page the rest of which is written by hand)."""
    text = doc.read_text(encoding="utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{doc}: the result markers are missing")
    before, rest = text.split(begin, 1)
    doc.write_text(f"{before}{begin}\n\n{results}\n{end}{rest.split(end, 1)[1]}",
                   encoding="utf-8")
