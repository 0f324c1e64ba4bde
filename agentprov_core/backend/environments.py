"""Backend environments as T0 sees them before starting anything: ids and markers.

An environment id is ``<backend>-<8 hex>``: the first 8 hex of the pinned commit for a
git-pinned backend, else of the sha256 of the backend project's ``uv.lock`` (R-5).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from agentprov_core.backend import projects
from agentprov_core.backend.marker import MARKER
from agentprov_core.base import paths
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta


def pinned_commit(meta: SourceMeta) -> str | None:
    """The commit a git-pinned backend is named by: its project's pin (or the test-only
    commit its ``pin_override`` names, :func:`agentprov_core.backend.upstream.pinned`), else
    the source's."""
    from agentprov_core.backend import upstream

    loc = projects.locate(meta.backend)
    if loc is not None and loc.entry.project.pinned_commit:
        return upstream.pinned(loc.entry.project)[0]
    return meta.pinned_commit


def environment_id(meta: SourceMeta) -> str:
    prefix = meta.environment_prefix or meta.backend or meta.name
    commit = pinned_commit(meta)
    if commit:
        return f"{prefix}-{commit[:8]}"
    loc = projects.require(meta.backend)
    lock = loc.directory / "uv.lock"
    if not lock.is_file():
        raise AgentprovError("cli.environment.no_backend_project", backend=meta.backend,
                             why=f"{loc.where}/uv.lock is absent (the project {loc.origin} "
                                 "contributes is not locked)")
    return f"{prefix}-{file_sha256(lock)[:8]}"


def environment_dir(env_id: str) -> Path:
    return paths.home() / "envs" / env_id


#: the identity digest of an environment that is not built yet (an estimate plans
#: before a build: :func:`planned_identity`)
NOT_BUILT = "not built"


def planned_identity(meta: SourceMeta) -> tuple[str, dict]:
    """The environment id and identity a plan records, as :func:`backend_identity` gives
    them for a built environment; for one not built yet (``agentprov estimate`` before
    ``backends build``), the id the lock gives and the identity :data:`NOT_BUILT`."""
    env_id = environment_id(meta)  # from the lock or the pinned commit: exit 3 without
    if not (environment_dir(env_id) / MARKER).is_file():
        return env_id, {"environment_id": env_id, "identity_sha256": NOT_BUILT}
    return backend_identity(meta)


def require_built(meta: SourceMeta) -> str:
    """The environment id, or exit 3 telling the user to build it (R-16.2)."""
    env_id = environment_id(meta)
    if not (environment_dir(env_id) / MARKER).is_file():
        raise not_built(meta.backend, env_id)
    return env_id


def not_built(backend: str | None, env_id: str) -> AgentprovError:
    """Why the environment ``env_id`` of ``backend`` is not there, with the fix that can
    work: a project whose lock does not match it cannot be built
    (``cli.environment.lock_mismatch``); else ``cli.environment.backend_missing`` naming
    the build command that can succeed here (``--source-repo`` for an upstream that is not
    public and not in the fetch cache)."""
    from agentprov_core.backend import upstream

    loc = projects.locate(backend)
    if loc is not None and loc.present and (what := projects.lock_problem(loc)):
        return projects.lock_mismatch(loc, what)
    build = upstream.build_command(loc.entry.project) if loc is not None else \
        f"agentprov backends build {backend}"
    return AgentprovError("cli.environment.backend_missing", env_id=env_id, backend=backend,
                          build=build)


def read_marker(meta: SourceMeta, env_id: str):
    """The environment's marker, checked against the backend and the repository's lock and
    defence registry (exit 3 naming what differs)."""
    from agentprov_core.backend import marker as markermod
    from agentprov_core.base import paths

    env_dir = environment_dir(env_id)
    where = markermod.path(env_dir)
    try:
        m = markermod.read(env_dir)
    except FileNotFoundError:
        raise not_built(meta.backend, env_id) from None
    except ValueError as exc:
        raise AgentprovError("cli.environment.marker", marker=where, what=str(exc),
                             backend=meta.backend) from None
    if m.backend != meta.backend or m.environment_id != env_id:
        raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                             what=f"is of backend {m.backend} ({m.environment_id}), not "
                                  f"{meta.backend} ({env_id})")
    loc = projects.locate(meta.backend)
    if loc is not None and loc.directory is not None and (loc.directory / "uv.lock").is_file():
        lock = file_sha256(loc.directory / "uv.lock")
        if lock != m.lock_sha256:
            raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                                 what=f"records lock_sha256 {m.lock_sha256[:8]}, but "
                                      f"{loc.where}/uv.lock ({loc.origin}) is {lock[:8]}")
    stale = registry_changes(env_dir, m)
    if stale:
        raise AgentprovError("cli.environment.marker", marker=where, backend=meta.backend,
                             what=f"records a defence registry that differs from "
                                  f"{paths.display(paths.defence_registry())} in what the "
                                  f"worker runs ({', '.join(stale[:6])}"
                                  f"{', …' if len(stale) > 6 else ''})")
    return m


def registry_changes(env_dir: Path, m) -> list[str]:
    """What the defence registry changed since the environment ``env_dir`` installed its
    copy, in what a worker runs (:func:`~agentprov_core.registries.defences.run_changes`:
    a defence's ``summary`` or ``enabled`` is no change). The registry is read checked
    (exit 2 naming file, line, field and fix). An environment whose installed copy is
    missing or is not the one its marker hashed is compared by the file's sha256."""
    from agentprov_core.backend.identity import site_packages
    from agentprov_core.registries import defences as defmod

    reg = paths.defence_registry()
    if m.defence_registry_sha256 is None or not reg.is_file():
        return []
    _, now = defmod.read_file(reg)
    try:
        built = (site_packages(env_dir) / "agentprov_backend" / "defences.toml").read_bytes()
    except OSError:
        built = b""
    if hashlib.sha256(built).hexdigest() != m.defence_registry_sha256:
        return [] if file_sha256(reg) == m.defence_registry_sha256 else \
            ["its sha256: the environment's own copy is missing or changed, so the field "
             "cannot be named"]
    return defmod.run_changes(built.decode("utf-8"), now)


def backend_identity(meta: SourceMeta) -> tuple[str, dict]:
    """Step 2's environment check: the environment id and the identity the configuration
    digest hashes (the marker's identity digest), or exit 3."""
    env_id = require_built(meta)
    m = read_marker(meta, env_id)
    return env_id, {"environment_id": env_id, "identity_sha256": m.identity_sha256}


def worker_sources_differ(hello: dict) -> list[str]:
    """The host libraries (``agentprov-backend``, ``agentprov-capture``) whose sources, as the
    worker that answered ``hello`` runs them, differ from the copy this agentprov installs
    (:mod:`agentprov_core.backend.hostlibs`)."""
    from agentprov_core.backend import hostlibs

    ours = hostlibs.digests()
    return [lib.distribution for lib in hostlibs.LIBRARIES
            if lib.hello_key in ours and hello.get(lib.hello_key) != ours[lib.hello_key]]


def path_sources(project: Path) -> dict[str, dict[str, str]]:
    """Every path dependency the project's ``uv.lock`` names (its worker package and the
    libraries beside it), by distribution: its ``directory`` relative to the project and
    the digest of its sources. The environment id follows ``uv.lock``, which does not
    change when those sources do; the marker records this at build time so that an
    environment built from other worker code is found stale (:func:`stale_path_sources`)."""
    import tomllib

    from agentprov_capture.sources import sources_sha256

    try:
        lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    out = {}
    for pkg in lock.get("package", []):
        src = pkg.get("source") or {}
        rel = src.get("directory") or src.get("path") or src.get("editable")
        if rel is None or "virtual" in src:
            continue
        if (project / rel).is_dir():
            out[pkg["name"]] = {"directory": rel,
                                "sources_sha256": sources_sha256(project / rel)}
    return dict(sorted(out.items()))


def stale_path_sources(m, project: Path | None) -> list[str]:
    """The path dependencies whose sources changed since the environment was built. The
    marker names their directories (the lock it was built from is the project's: the
    marker check refuses any other), so no lock is parsed here."""
    from agentprov_capture.sources import sources_sha256

    if project is None or m.path_sources is None:
        return []
    return [name for name, rec in sorted(m.path_sources.items())
            if not (project / rec["directory"]).is_dir()
            or sources_sha256(project / rec["directory"]) != rec["sources_sha256"]]


def check_worker_sources(hello: dict, env_id: str, backend: str, m=None) -> None:
    """The worker code in the environment must be the code this agentprov builds from: the
    host libraries it installs and the project's path dependencies (its worker package).
    The environment id follows ``uv.lock``, which does not change when their sources do
    (``cli.environment.stale_worker``, exit 3)."""
    stale = worker_sources_differ(hello)
    if m is not None:
        loc = projects.locate(backend)
        stale += stale_path_sources(m, loc.directory if loc is not None else None)
    if stale:
        raise AgentprovError("cli.environment.stale_worker", env_id=env_id, backend=backend,
                             what="the sources of " + ", ".join(stale) + " changed")
