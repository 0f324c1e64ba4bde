#!/usr/bin/env python3
"""Regenerate (or check) the agentdojo plugin's committed catalogue snapshot.

    python3 scripts/snapshot_catalogue.py [--env DIR] [--check]

Builds the agentdojo backend environment from its committed lock (``uv sync --locked
--no-dev --link-mode copy``) into a cache directory, runs
``python -m agentprov_backend.catalogue agentdojo`` in it, and writes the document to
``plugins/agentprov-agentdojo/src/agentprov_agentdojo/catalogue.snapshot.json``. With
``--check`` it compares instead of writing and exits 1 with a summary of the differences.

Runs under the project's Python (3.11 or later), standard library only. The backend's
Python 3.12 is found, never downloaded: ``$AGENTPROV_PYTHON``, then ``python3.12`` on PATH
if it really runs, then ``$(pyenv root)/versions/3.12*/bin/python3.12``.

Exit codes: 0 written or identical, 1 differs (--check), 2 usage, 3 environment (no
Python 3.12, no uv, the build or the catalogue failed).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ROOT / "backends" / "agentdojo"
SNAPSHOT = (
    ROOT
    / "plugins"
    / "agentprov-agentdojo"
    / "src"
    / "agentprov_agentdojo"
    / "catalogue.snapshot.json"
)
SOURCE = "agentdojo"
# UV_* variables kept for uv; every other UV_* is dropped so that the build follows the lock.
UV_KEEP = {"UV_CACHE_DIR", "UV_OFFLINE", "UV_NATIVE_TLS"}
DIFF_LINES = 60


class EnvironmentProblem(Exception):
    pass


def log(message: str) -> None:
    print(f"snapshot_catalogue: {message}", file=sys.stderr)


def python_version(candidate: str) -> str | None:
    """``3.12`` if the interpreter really runs, else None (pyenv shims may not)."""
    try:
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def pyenv_root() -> Path:
    pyenv = shutil.which("pyenv")
    if pyenv:
        try:
            done = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
            if done.returncode == 0 and done.stdout.strip():
                return Path(done.stdout.strip())
        except (OSError, subprocess.TimeoutExpired):
            pass
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")


def find_python312() -> str:
    explicit = os.environ.get("AGENTPROV_PYTHON")
    if explicit:
        if python_version(explicit) != "3.12":
            raise EnvironmentProblem(f"AGENTPROV_PYTHON={explicit} is not a working Python 3.12")
        return explicit
    on_path = shutil.which("python3.12")
    if on_path and python_version(on_path) == "3.12":
        return on_path

    def version_key(path: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", path.parent.parent.name))

    candidates = sorted(
        (pyenv_root() / "versions").glob("3.12*/bin/python3.12"), key=version_key, reverse=True
    )
    for candidate in candidates:
        if python_version(str(candidate)) == "3.12":
            return str(candidate)
    raise EnvironmentProblem(
        "no working Python 3.12: set AGENTPROV_PYTHON, or install one (pyenv install 3.12); uv never downloads one here"
    )


def default_env_dir() -> Path:
    home = os.environ.get("AGENTPROV_HOME") or str(Path.home() / ".agentprov")
    return Path(home) / "envs" / f"snapshot-{SOURCE}"


def env_python(env_dir: Path) -> Path:
    for rel in ("bin/python", "Scripts/python.exe"):
        if (env_dir / rel).exists():
            return env_dir / rel
    raise EnvironmentProblem(f"{env_dir} has no Python after the build")


def build_env(env_dir: Path, interpreter: str) -> None:
    uv = shutil.which("uv")
    if not uv:
        raise EnvironmentProblem("uv is not on PATH (pip install uv)")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in UV_KEEP}
    environ.pop("VIRTUAL_ENV", None)
    environ["UV_PROJECT_ENVIRONMENT"] = str(env_dir)
    environ["UV_PYTHON_DOWNLOADS"] = "never"
    argv = [
        uv,
        "sync",
        "--locked",
        "--no-dev",
        "--link-mode",
        "copy",
        "--project",
        str(PROJECT),
        "--python",
        interpreter,
    ]
    log(f"UV_PROJECT_ENVIRONMENT={env_dir} {' '.join(argv[1:])}")
    done = subprocess.run(
        argv, env=environ, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise EnvironmentProblem(f"uv sync failed (exit {done.returncode}):\n{done.stderr.strip()}")


def run_catalogue(env_dir: Path) -> bytes:
    environ = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    with tempfile.TemporaryDirectory(prefix="agentprov-catalogue-") as scratch:
        done = subprocess.run(
            [str(env_python(env_dir)), "-m", "agentprov_backend.catalogue", SOURCE],
            env=environ,
            cwd=scratch,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
    if done.returncode != 0:
        raise EnvironmentProblem(
            f"the catalogue failed (exit {done.returncode}):\n{done.stderr.decode('utf-8', 'replace').strip()}"
        )
    try:
        json.loads(done.stdout)
    except ValueError as exc:
        raise EnvironmentProblem(f"the catalogue printed no JSON document: {exc}") from exc
    return done.stdout


def summarise(old: bytes, new: bytes) -> str:
    lines = []
    try:
        a, b = json.loads(old), json.loads(new)
        keys = sorted(set(a) | set(b))
        changed = [k for k in keys if a.get(k) != b.get(k)]
        lines.append(
            f"top-level keys that differ: {', '.join(changed) or 'none (formatting only)'}"
        )
    except ValueError:
        lines.append("the committed snapshot is not valid JSON")
    diff = list(
        difflib.unified_diff(
            old.decode("utf-8", "replace").splitlines(),
            new.decode("utf-8", "replace").splitlines(),
            "committed",
            "generated",
            lineterm="",
            n=1,
        )
    )
    lines.extend(diff[:DIFF_LINES])
    if len(diff) > DIFF_LINES:
        lines.append(f"... {len(diff) - DIFF_LINES} more diff lines")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env",
        type=Path,
        default=None,
        help="environment directory (default $AGENTPROV_HOME/envs/snapshot-agentdojo)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed snapshot instead of writing it",
    )
    args = parser.parse_args(argv)
    env_dir = (args.env or default_env_dir()).expanduser().resolve()
    try:
        interpreter = find_python312()
        log(f"python {interpreter}")
        started = time.monotonic()
        build_env(env_dir, interpreter)
        built = time.monotonic()
        log(f"environment {env_dir} synced in {built - started:.1f}s")
        document = run_catalogue(env_dir)
        log(f"catalogue generated in {time.monotonic() - built:.1f}s")
    except EnvironmentProblem as exc:
        log(str(exc))
        return 3

    rel = SNAPSHOT.relative_to(ROOT)
    if args.check:
        if not SNAPSHOT.exists():
            log(f"{rel} does not exist; run without --check to write it")
            return 1
        committed = SNAPSHOT.read_bytes()
        if committed == document:
            log(f"{rel} is up to date")
            return 0
        log(f"{rel} differs from the generated catalogue:\n{summarise(committed, document)}")
        return 1

    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    if SNAPSHOT.exists() and SNAPSHOT.read_bytes() == document:
        log(f"{rel} unchanged")
        return 0
    tmp = SNAPSHOT.with_name(SNAPSHOT.name + ".tmp")
    tmp.write_bytes(document)
    os.replace(tmp, SNAPSHOT)
    log(f"wrote {rel} ({len(document)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
