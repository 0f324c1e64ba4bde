"""Where a backend's uv project is: found through the ``agentprov_backends`` hook.

Every backend project is contributed by a distribution (``BackendProject``): as package
data inside one of its packages (found with :mod:`importlib.resources`, so a normal install
builds it), or, for the built-in plugins, as a directory of the checkout's ``backends/``
(``$AGENTPROV_BACKENDS`` stands in for that directory while developing). Build, dry run,
offline check, the environment id, the marker and the lock check all find the project here,
and each refusal names the distribution that contributed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.plugins import BackendEntry


@dataclass(frozen=True)
class Located:
    """One contributed backend project and where its files are on this machine."""

    entry: BackendEntry
    #: the project's directory, or ``None`` when it cannot be known here (:attr:`why`)
    directory: Path | None
    why: str | None = None

    @property
    def name(self) -> str:
        return self.entry.project.name

    @property
    def origin(self) -> str:
        """The contributing distribution, as refusals name it."""
        return self.entry.plugin.origin

    @property
    def where(self) -> str:
        """The directory as messages show it: checkout-relative when inside the checkout."""
        if self.directory is not None:
            return paths.display(self.directory)
        p = self.entry.project
        return f"{p.package}/{p.path}" if p.package else f"backends/{p.path}"

    @property
    def present(self) -> bool:
        return self.directory is not None and self.directory.is_dir()


def _directory(entry: BackendEntry) -> tuple[Path | None, str | None]:
    project = entry.project
    if project.package is None:
        base = paths.backends_dir()
        if base is None:
            return None, ("agentprov runs from an installed wheel, which holds no backends/ "
                          "directory; set AGENTPROV_BACKENDS to a checkout's backends/")
        return base / project.path, None
    try:
        root = _package_files(project.package)
    except (ImportError, TypeError, ValueError) as exc:
        return None, f"its package {project.package!r} cannot be imported ({exc})"
    found = root.joinpath(*Path(project.path).parts)
    if not isinstance(found, Path):
        return None, f"its package {project.package!r} is not installed as files on disk"
    return found, None


def _package_files(package: str) -> Any:
    """``importlib.resources.files(package)``: for a package imported from files on disk,
    the directory of its ``__init__`` (what that function's file reader answers) without
    loading :mod:`importlib.resources` and its zip support (start-up time of ``info``);
    any other package through that function itself."""
    import importlib
    from importlib.machinery import SourceFileLoader, SourcelessFileLoader

    loader = getattr(getattr(importlib.import_module(package), "__spec__", None), "loader", None)
    if isinstance(loader, SourceFileLoader | SourcelessFileLoader) and \
            Path(loader.path).stem == "__init__":
        return Path(loader.path).parent
    from importlib import resources

    return resources.files(package)


def entries(backend: str) -> list[BackendEntry]:
    from agentprov_core.plugins import manager

    return manager().backends().get(backend, [])


def _conflict(backend: str, found: list[BackendEntry]) -> AgentprovError:
    names = ", ".join(Located(e, None).origin for e in found)
    return AgentprovError("cli.environment.backend_conflict", backend=backend,
                          distributions=names)


def locate(backend: str | None) -> Located | None:
    """The one project contributed for ``backend`` (``None``: none is), or exit 3 when more
    than one distribution contributes it."""
    found = entries(backend) if backend else []
    if not found:
        return None
    if len(found) > 1:
        raise _conflict(backend, found)
    directory, why = _directory(found[0])
    return Located(found[0], directory, why)


def require(backend: str | None) -> Located:
    """The project of ``backend`` with its files at hand, or the refusal (exit 3) naming the
    distribution: none contributed, more than one, or its directory missing."""
    loc = locate(backend)
    if loc is None:
        raise AgentprovError("cli.environment.no_backend_project", backend=backend,
                             why="no installed distribution contributes a backend project of "
                                 "that name (the agentprov_backends hook)")
    if not loc.present:
        raise missing(loc)
    return loc


def missing(loc: Located) -> AgentprovError:
    what = loc.why or (f"{loc.where} is not a directory" if not loc.present
                       else f"{loc.where}/pyproject.toml is absent")
    return AgentprovError("cli.environment.backend_project_missing", backend=loc.name,
                          origin=loc.origin, path=loc.where, why=what,
                          distribution=loc.entry.plugin.distribution or loc.entry.plugin.name)


def lock_mismatch(loc: Located, what: str) -> AgentprovError:
    assert loc.directory is not None
    return AgentprovError("cli.environment.lock_mismatch",
                          lock=paths.display(loc.directory / "uv.lock"), project=loc.where,
                          backend=loc.name, origin=loc.origin, what=what)


def lock_problem(loc: Located, seen: set[Path] | None = None) -> str | None:
    """What is wrong with a present project's lock, or ``None``: it does not record what
    ``pyproject.toml`` declares (:mod:`agentprov_core.backend.lockcheck`), it locks the
    worker host's own libraries (which the build installs from the running agentprov), or
    it does not install the worker package the project names. ``plugins`` reports it and
    ``backends build`` refuses it (``cli.environment.lock_mismatch``). ``seen`` is filled
    with the directories whose ``pyproject.toml`` the check compared."""
    import tomllib

    from packaging.utils import canonicalize_name

    from agentprov_core.backend import hostlibs, lockcheck

    assert loc.directory is not None
    try:
        lock = lockcheck.read_lock((loc.directory / "uv.lock").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        return f"its uv.lock cannot be read ({type(exc).__name__}: {exc}): lock it again"
    if diffs := lockcheck.differences(loc.directory, lock, seen):
        return "; ".join(diffs[:5]) + (f" (+{len(diffs) - 5} more)" if len(diffs) > 5 else "")
    if host := hostlibs.locked(lock):
        return (f"it locks {', '.join(host)}, the worker host's own libraries, which agentprov "
                "backends build installs from the running agentprov: remove them from the "
                "project's dependencies and its [tool.uv.sources], and lock it again")
    worker = loc.entry.project.worker
    if worker and canonicalize_name(worker) not in {
            canonicalize_name(p.get("name", "")) for p in lock.get("package", [])}:
        return (f"it does not install the worker package {worker} that the project names "
                "(BackendProject.worker): add it to the project's dependencies, with a path "
                "source for a worker package beside it, and lock it again")
    return None


def survey() -> list[dict[str, Any]]:
    """Every contributed backend project with its state, for ``agentprov plugins`` and
    ``agentprov info``: ``ok``, ``unlocked`` (a project slot with no ``uv.lock``),
    ``missing`` (its directory, or the ``pyproject.toml`` beside a lock, is not there), ``lock mismatch``
    (:func:`lock_problem`) or ``conflict`` (more
    than one distribution contributes the name)."""
    from agentprov_core.backend import lockcache
    from agentprov_core.plugins import manager

    rows = []
    for name, found in sorted(manager().backends().items()):
        for entry in found:
            directory, why = _directory(entry)
            loc = Located(entry, directory, why)
            p, rec = entry.project, entry.plugin
            status, problem = "ok", None
            if len(found) > 1:
                status, problem = "conflict", _conflict(name, found).message
            elif not loc.present:
                status, problem = "missing", missing(loc).message
            elif not (loc.directory / "uv.lock").is_file():
                status = "unlocked"
                problem = f"{loc.where}/uv.lock is absent: the project cannot be built"
            elif not (loc.directory / "pyproject.toml").is_file():
                status, problem = "missing", missing(loc).message
            elif what := lockcache.lock_problem(loc, lock_problem):
                status, problem = "lock mismatch", lock_mismatch(loc, what).message
            rows.append({"name": name, "plugin": rec.name, "distribution": rec.distribution,
                         "version": rec.version, "package": p.package, "path": p.path,
                         "project": loc.where,
                         "pinned": f"commit {p.pinned_commit}" if p.pinned_commit else "uv.lock",
                         "worker": p.worker, "status": status, "problem": problem})
    return rows
