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

An upstream that is not public (``BackendProject.upstream`` is ``""``, with
``BackendProject.unpublished`` saying why) has no URL ``--allow-network`` could fetch from:
without the commit in the fetch cache, only ``--source-repo`` provides it, and the build,
its dry run included, refuses before anything else (:func:`require_reachable`). Tests
build such a backend from a fixture repository, whose commit ``BackendProject.pin_override``
names (:func:`pinned`): the environment is named from that commit and records the variable
as ``test_override``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from agentprov_core.backend import fetchcache
from agentprov_core.backendproject import BackendProject
from agentprov_core.errors import AgentprovError

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
    #: why the upstream has no URL (``BackendProject.unpublished``), or ``None``: it has one
    unpublished: str | None = None
    #: the variable whose test-only commit replaced the pinned one, or ``None``
    test_override: str | None = None

    @property
    def repository(self) -> str:
        """Its URL; for an upstream that is not public, the fetch cache's name for it."""
        return self.pin.upstream or self.pin.name


def override(commit: str | None, variable: str | None) -> tuple[str | None, bool]:
    """``commit``, or the value of the test-only ``variable`` when it is set (and whether
    it was)."""
    value = os.environ.get(variable, "").strip().lower() if variable else ""
    return (value, True) if value else (commit, False)


def pinned(project: BackendProject) -> tuple[str | None, str | None]:
    """The commit ``project`` is pinned to, and the test-only variable that replaced it
    (``None``: the pin itself). An override must be a full commit id (exit 2)."""
    commit, overridden = override(project.pinned_commit, project.pin_override)
    if not overridden:
        return commit, None
    if not re.fullmatch(r"[0-9a-f]{40}", commit or ""):
        raise AgentprovError("cli.usage.option_value", option=project.pin_override,
                             value=commit or "", what="the full 40-hex id of a fixture "
                             "repository's commit (a test-only override)")
    return commit, project.pin_override


def of(project: BackendProject) -> Upstream | None:
    """The upstream a project builds from, or ``None`` (its lock names everything)."""
    if project.upstream is None or project.pinned_commit is None:
        return None
    commit, over = pinned(project)
    assert commit is not None
    return Upstream(fetchcache.Pin(project.name, project.upstream, commit,
                                   None if over else project.tree),
                    tuple(project.upstream_paths), project.upstream_dir, project.licence,
                    project.unpublished if not project.upstream else None, over)


def not_public(why: str) -> str:
    """What ``cli.environment.source_not_cached`` adds for an upstream with no URL: no
    ``--allow-network`` could fetch it."""
    return (f"; only --source-repo can provide it: this build knows no URL of its upstream "
            f"({why}), so --allow-network cannot fetch it")


def fetch_from(url: str) -> str:
    """What ``cli.environment.source_not_cached`` adds for a public upstream."""
    return f", or --allow-network to fetch it from {url}"


def build_command(project: BackendProject) -> str:
    """The ``agentprov backends build`` that can build ``project`` here: with
    ``--source-repo URL`` when its upstream is not public and not in the fetch cache."""
    up = of(project)
    command = f"agentprov backends build {project.name}"
    if up is None or up.pin.upstream:
        return command
    repo = fetchcache.repo_path(up.pin.name)
    if (repo / "HEAD").is_file() and fetchcache.resolve(repo, up.pin.commit) is not None:
        return command
    return (f"{command} --source-repo URL (a mirror, a path or a bundle holding its pinned "
            f"commit {up.pin.commit}: {up.unpublished or 'its upstream is not public'})")


def require_reachable(up: Upstream, source_repo: str | None) -> None:
    """An upstream that is not public must be in the fetch cache, or given with
    ``--source-repo``: else ``cli.environment.source_not_cached`` (exit 3), on a dry run
    too (there is nothing a build could do), with nothing fetched or written."""
    if up.pin.upstream or source_repo is not None:
        return
    repo = fetchcache.repo_path(up.pin.name)
    if (repo / "HEAD").is_file() and fetchcache.resolve(repo, up.pin.commit) is not None:
        return
    raise AgentprovError("cli.environment.source_not_cached", name=up.pin.name,
                         commit=up.pin.commit, path=repo,
                         how=not_public(up.unpublished or "it is not public"))


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


def undeclared_by_lock(copy: Path, up: Upstream) -> str | None:
    """What the extracted commit's ``pyproject.toml`` declares that the lock does not record,
    by distribution name (added or dropped dependencies), or ``None``.

    ``uv sync --locked`` finds every difference, but only by resolving: offline, with a
    dependency it has never cached, it fails as unsatisfiable instead of saying that the lock
    is out of date. Names need no resolution, so this check comes first; a change of a
    version or a marker alone is still uv's to find."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        lock = tomllib.loads((copy / "uv.lock").read_text(encoding="utf-8"))
        project = tomllib.loads((copy / up.directory / "pyproject.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # uv says what is wrong with either file
    pkg = next((p for p in lock.get("package", [])
                if (p.get("source") or {}).get("directory") == up.directory), None)
    deps = (project.get("project") or {}).get("dependencies")
    if pkg is None or not isinstance(deps, list):
        return None
    locked = {canonicalize_name(str(r.get("name", "")))
              for r in (pkg.get("metadata") or {}).get("requires-dist", [])
              if isinstance(r, dict) and "extra" not in str(r.get("marker", ""))}
    try:
        declared = {canonicalize_name(Requirement(str(d)).name) for d in deps}
    except InvalidRequirement:
        return None
    added, dropped = sorted(declared - locked), sorted(locked - declared)
    if not (added or dropped):
        return None
    said = []
    if added:
        said.append("it declares " + ", ".join(added) + " (not in the lock)")
    if dropped:
        said.append("it no longer declares " + ", ".join(dropped))
    return "The lockfile needs to be updated: " + "; ".join(said)


def record(up: Upstream, commit: str, repo: Path, source_repo: str | None) -> dict:
    """What the environment records of its upstream (marker and ``agentprov/upstream.json``)."""
    rec = {"repository": up.repository, "commit": commit,
           "tree": fetchcache.tree_of(repo, commit), "paths": list(up.paths),
           "licence": up.licence, "fetched_from": source_repo or up.repository}
    if up.test_override is not None:  # a fixture's commit, never the pinned one
        rec["test_override"] = up.test_override
    return rec


def write_record(env: Path, rec: dict) -> None:
    doc = {k: rec[k] for k in ("repository", "commit", "tree", "paths", "licence",
                               "test_override") if k in rec}
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
    elif not offline and up.pin.upstream:
        fetch = f"would fetch commit {up.pin.commit} from {up.repository} (--allow-network)"
    else:
        fetch = (f"commit {up.pin.commit} is not in the fetch cache: the build refuses "
                 "(give --source-repo URL, or --allow-network)")
    tree = f"; its tree must be {up.pin.tree}" if up.pin.tree else ""
    where = f"{up.repository} ({up.unpublished})" if up.unpublished else up.repository
    over = (f" (the test-only override {up.test_override}, not the pinned commit)"
            if up.test_override else "")
    return [f"  upstream: {where} at {up.pin.commit}{over}{tree}",
            f"  fetch cache {repo}: {fetch}",
            f"  then: git archive {' '.join(up.paths) or '(the whole tree)'} into "
            f"{up.directory}/ of a copy of the project beside the new environment "
            "(nothing checked out; removed after uv sync)"]
