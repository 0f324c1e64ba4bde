"""Building a backend from its pinned upstream commit (``BackendProject.upstream``).

The project's ``uv.lock`` installs the benchmark from a path source inside the project
(``BackendProject.upstream_dir``), which the checkout never holds. A build copies the
project, and every path source its lock names, into a build directory beside the new
environment (``$AGENTPROV_HOME/envs/.<id>.src-*``), keeping their relative places, and fills ``upstream_dir`` there with the
pinned commit's files (``git archive`` of ``BackendProject.upstream_paths`` from the fetch
cache: nothing is checked out, and no user's tree is written). ``uv sync --locked`` then runs
on that copy, so uv itself checks that the extracted ``pyproject.toml`` declares what the
lock records; the build directory is removed once uv has installed the environment.

The environment records the pin (repository, commit, tree, and the licence the backend
states) in ``agentprov/upstream.json``,
a guarded file the worker reads into every capture header, and in the marker.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from agentprov_core.backend import fetchcache
from agentprov_core.backendproject import BackendProject

#: the file in the environment that records the pin (guarded; read by the worker)
RECORD = "agentprov/upstream.json"
#: what the build copies of a path source (the rest of a directory is not the package's)
_SKIP = ("__pycache__", ".venv", ".git", "build", "dist")


@dataclass(frozen=True)
class Upstream:
    pin: fetchcache.Pin
    paths: tuple[str, ...]
    directory: str
    licence: str | None = None

    @property
    def repository(self) -> str:
        return self.pin.upstream


def of(project: BackendProject) -> Upstream | None:
    """The upstream a project builds from, or ``None`` (its lock names everything)."""
    if project.upstream is None or project.pinned_commit is None:
        return None
    return Upstream(fetchcache.Pin(project.name, project.upstream, project.pinned_commit,
                                   project.tree), tuple(project.upstream_paths),
                    project.upstream_dir, project.licence)


def _path_sources(project: Path) -> list[Path]:
    """The directories of the path sources the project's lock names (resolved), the
    upstream's own excepted (it is not in the checkout)."""
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    out = []
    for pkg in lock.get("package", []):
        src = pkg.get("source") or {}
        rel = src.get("directory") or src.get("editable")
        if rel is not None:
            d = (project / rel).resolve()
            if d.is_dir() and d != project.resolve():
                out.append(d)
    return out


def stage(project: Path, up: Upstream, repo: Path, commit: str, into: Path) -> Path:
    """Copy ``project`` and its path sources below ``into`` (their relative layout kept),
    extract the commit into the copy's ``upstream_dir``; return the copy's directory."""
    project = project.resolve()
    dirs = [project, *(d for d in _path_sources(project)
                       if d != (project / up.directory).resolve())]
    root = Path(os.path.commonpath([str(d) for d in dirs]))
    ignore = shutil.ignore_patterns(*_SKIP, up.directory)
    for d in dirs:
        shutil.copytree(d, into / d.relative_to(root), ignore=ignore, dirs_exist_ok=True)
    copy = into / project.relative_to(root)
    fetchcache.archive(repo, commit, copy / up.directory, list(up.paths) or None)
    return copy


def record(up: Upstream, commit: str, repo: Path, source_repo: str | None) -> dict:
    """What the environment records of its upstream (marker and ``agentprov/upstream.json``)."""
    return {"repository": up.repository, "commit": commit,
            "tree": fetchcache.tree_of(repo, commit), "paths": list(up.paths),
            "licence": up.licence, "fetched_from": source_repo or up.repository}


def write_record(env: Path, rec: dict) -> None:
    doc = {k: rec[k] for k in ("repository", "commit", "tree", "paths", "licence")}
    (env / RECORD).write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n",
                              encoding="utf-8")


def dry_run_lines(up: Upstream, source_repo: str | None, offline: bool) -> list[str]:
    """What a build would fetch and extract (the dry run fetches nothing)."""
    repo = fetchcache.repo_path(up.pin.name)
    have = (fetchcache.resolve(repo, up.pin.commit) if (repo / "HEAD").is_file() else None)
    if source_repo is not None:
        fetch = f"would fetch commit {up.pin.commit} from {source_repo} (--source-repo)"
    elif have is not None:
        fetch = f"commit {have} is in the fetch cache"
    elif not offline:
        fetch = f"would fetch commit {up.pin.commit} from {up.repository} (--allow-network)"
    else:
        fetch = (f"commit {up.pin.commit} is not in the fetch cache: the build refuses "
                 "(give --source-repo URL, or --allow-network)")
    tree = f"; its tree must be {up.pin.tree}" if up.pin.tree else ""
    return [f"  upstream: {up.repository} at {up.pin.commit}{tree}",
            f"  fetch cache {repo}: {fetch}",
            f"  then: git archive {' '.join(up.paths) or '(the whole tree)'} into "
            f"{up.directory}/ of a copy of the project beside the new environment "
            "(nothing checked out; removed after uv sync)"]
