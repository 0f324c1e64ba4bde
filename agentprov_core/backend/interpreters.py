"""Finding the Python 3.12 that backend environments are built with. Never downloads one."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from agentprov_core.errors import AgentprovError

WANT = (3, 12)


def _version(path: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    major, _, minor = out.stdout.strip().partition(".")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def candidates() -> list[str]:
    found = []
    on_path = shutil.which("python3.12")
    if on_path:
        found.append(on_path)
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            roots.insert(0, subprocess.run([pyenv, "root"], capture_output=True, text=True,
                                           timeout=20).stdout.strip())
    for root in filter(None, roots):
        found += sorted(str(p) for p in Path(root).glob("versions/3.12*/bin/python3.12"))
    found += [p for p in ("/usr/bin/python3.12", "/usr/local/bin/python3.12") if Path(p).exists()]
    return list(dict.fromkeys(found))


def find_python312() -> str:
    """``$AGENTPROV_PYTHON``, else python3.12 on PATH (if it really runs), else pyenv's."""
    env = os.environ.get("AGENTPROV_PYTHON")
    if env:
        if _version(env) != WANT:
            raise AgentprovError("cli.environment.python", detail=f"AGENTPROV_PYTHON={env} is "
                                 "not a working Python 3.12")
        return env
    tried = candidates()
    for path in tried:
        if _version(path) == WANT:
            return path
    raise AgentprovError("cli.environment.python",
                         detail="tried " + (", ".join(tried) if tried else "PATH and pyenv"))
