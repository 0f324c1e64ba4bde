"""Shared fixtures: the real CLI in a subprocess, a private AGENTPROV_HOME, and proof that
a refusal wrote nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def error(self) -> dict:
        """The JSON error object (the CLI ran with --error-format json)."""
        return json.loads(self.err.strip().splitlines()[-1])


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (for 'nothing was written' proofs)."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def corpora(tmp_path: Path) -> Path:
    c = tmp_path / "corpora"
    c.mkdir()
    return c


@pytest.fixture
def script(tmp_path: Path) -> Path:
    s = tmp_path / "script.json"
    s.write_text("[]")
    return s


@pytest.fixture
def registry_copy(tmp_path: Path) -> Path:
    """A private copy of registry/ (links resolved), used through AGENTPROV_REGISTRY."""
    d = tmp_path / "registry"
    d.mkdir()
    for f in (ROOT / "registry").iterdir():
        shutil.copyfile(f.resolve(), d / f.name)
    return d


@pytest.fixture
def cli(home: Path):
    """Run ``agentprov ARGS`` as a subprocess with a private home; JSON errors by default."""

    def run(*args: str, env: dict[str, str] | None = None, json_errors: bool = True,
            stdin: str | None = None, cwd: Path | None = None) -> Result:
        e = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPROV_")}
        e["AGENTPROV_HOME"] = str(home)
        if json_errors:
            e["AGENTPROV_ERROR_FORMAT"] = "json"
        e.update(env or {})
        p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                           capture_output=True, text=True, env=e, input=stdin,
                           cwd=cwd or ROOT, timeout=120)
        return Result(p.returncode, p.stdout, p.stderr)

    return run


def make_marker(home: Path, env_id: str) -> Path:
    """A minimal environment marker, so that planning tests get past the environment
    check without building a backend (the marker's contents are checked by
    `backends build --offline-check`, not by the existence check under test here)."""
    d = home / "envs" / env_id
    d.mkdir(parents=True)
    m = d / "AGENTPROV_ENV.json"
    m.write_text(json.dumps({"environment_id": env_id}))
    return m
