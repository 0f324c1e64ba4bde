"""An environment's identity recomputed by T0 from its files, importing nothing from it.

* every installed distribution: name, version (from METADATA) and the sha256 of its
  RECORD's own text (the same digest the worker's hello reports);
* every file RECORD lists with a hash is re-hashed and compared (any changed installed file
  fails the check);
* the guarded files: the environment's ``pyvenv.cfg``, the copies of the backend
  project's ``uv.lock`` and ``pyproject.toml`` made at build time, and the catalogues the
  worker computed from the installed package at build time (``agentprov/catalogue-*.json``)
  and, for a backend built from a pinned commit, its record (``agentprov/upstream.json``);
* the installed defence registry's sha256;
* the task files the backend project names (``BackendProject.task_files``, globs below
  ``site-packages``, ``__pycache__`` left out): each one's sha256, by its path in the
  environment (the files a bound such as D-740 is valid for);
* the bytecode compiled at build time (``.pyc`` files are not in RECORD): their count and
  one digest over every path and sha256, so a changed or added ``.pyc`` fails the check.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentprov_core.base.digests import digest, file_sha256

GUARDED = ("pyvenv.cfg", "agentprov/uv.lock", "agentprov/pyproject.toml")


def site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python3*/site-packages"))
    if not found:
        raise FileNotFoundError(f"{env} has no lib/python3*/site-packages")
    return found[0]


def _metadata(dist_info: Path) -> tuple[str, str]:
    name = version = ""
    with open(dist_info / "METADATA", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                break
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
    return name.lower().replace("_", "-"), version


@dataclass
class Identity:
    distributions: dict[str, dict[str, str]]
    files_verified: int
    guarded: dict[str, str]
    defence_registry_sha256: str | None
    compiled: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    task_files: dict[str, str] = field(default_factory=dict)

    def digest(self, lock_sha256: str, python: str,
               defence_assets: dict[str, str] | None = None,
               dataset: dict[str, Any] | None = None,
               upstream: dict[str, Any] | None = None) -> str:
        """What runs, independent of where it is installed: the lock, the interpreter's
        version, each distribution's version, the defence registry, the recorded
        catalogues, the task files and, when any are provisioned, each defence asset's
        pins digest and the dataset (its kind, revision and digest).
        (RECORD digests and pyvenv.cfg name the install location, through script shebangs
        and paths, so they are integrity checks, not identity.)"""
        doc = {
            "lock_sha256": lock_sha256, "python": python,
            "distributions": {n: d["version"] for n, d in self.distributions.items()},
            "defence_registry_sha256": self.defence_registry_sha256,
            "catalogues": {k: v for k, v in self.guarded.items() if "catalogue-" in k},
        }
        if defence_assets:
            doc["defence_assets"] = dict(sorted(defence_assets.items()))
        if self.task_files:
            doc["task_files"] = digest(self.task_files)
        if dataset is not None:
            doc["dataset"] = dataset
        if upstream is not None:  # the pinned commit the benchmark was built from
            doc["upstream"] = {k: upstream[k] for k in ("repository", "commit", "tree")}
        return digest(doc)


def _b64(h: bytes) -> str:
    return base64.urlsafe_b64encode(h).rstrip(b"=").decode()


def task_file_digests(env: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """The sha256 of every file the globs ``patterns`` match below ``site-packages``, by
    its path relative to the environment (``__pycache__`` left out)."""
    if not patterns:
        return {}
    sp = site_packages(env)
    out = {}
    for pattern in patterns:
        for p in sp.glob(pattern):
            if p.is_file() and "__pycache__" not in p.relative_to(sp).parts:
                out[p.relative_to(env).as_posix()] = file_sha256(p)
    return dict(sorted(out.items()))


def compute(env: Path, verify_files: bool = True,
            task_files: tuple[str, ...] = ()) -> Identity:
    sp = site_packages(env)
    dists: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    verified = 0
    for info in sorted(sp.glob("*.dist-info")):
        record = info / "RECORD"
        if not record.is_file():
            problems.append(f"{info.name} has no RECORD")
            continue
        text = record.read_text(encoding="utf-8")
        name, version = _metadata(info)
        dists[name] = {"version": version,
                       "record_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        if not verify_files:
            continue
        for line in text.splitlines():
            path, _, rest = line.partition(",")
            algo_hash = rest.partition(",")[0]
            if not algo_hash:
                continue
            algo, _, expected = algo_hash.partition("=")
            target = (sp / path).resolve() if ".." in path else sp / path
            try:
                actual = _b64(hashlib.new(algo, target.read_bytes()).digest())
            except FileNotFoundError:
                problems.append(f"{name}: {path} is missing")
                continue
            if actual != expected:
                problems.append(f"{name}: {path} differs from its RECORD hash")
            verified += 1
    guarded = {}
    recorded = sorted(str(p.relative_to(env)) for p in [*env.glob("agentprov/catalogue-*.json"),
                                                         *env.glob("agentprov/upstream.json")])
    for rel in (*GUARDED, *recorded):
        p = env / rel
        guarded[rel] = file_sha256(p) if p.is_file() else "missing"
    reg = sp / "agentprov_backend" / "defences.toml"
    h = hashlib.sha256()
    n = 0
    for pyc in sorted(sp.rglob("*.pyc")):
        h.update(f"{pyc.relative_to(sp)}\0{file_sha256(pyc)}\n".encode())
        n += 1
    return Identity(dict(sorted(dists.items())), verified, guarded,
                    file_sha256(reg) if reg.is_file() else None,
                    {"files": n, "sha256": h.hexdigest()}, problems,
                    task_file_digests(env, task_files))
