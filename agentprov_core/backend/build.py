"""``agentprov backends build``: build, dry-run and offline-check backend environments.

A build runs ``uv sync --locked --no-config --no-dev --link-mode copy`` (``--offline``
unless ``--allow-network``) with the project's ``--exclude-newer`` and no-build list, into a
temporary directory beside the final one, with every ``UV_*`` variable dropped except the
cache location, and Python downloads forbidden. It then records T0's identity of the
environment, a hello from its worker and the probe result in the marker, and only then
renames the directory into place: a half-built environment never looks valid.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from agentprov_core import __version__
from agentprov_core.backend import (
    datasets,
    defassets,
    environments,
    hostlibs,
    marker,
    projects,
    upstream,
)
from agentprov_core.backend import identity as envidentity
from agentprov_core.backend.buildprobe import probe, probe_rerun
from agentprov_core.backend.envlock import hold
from agentprov_core.base import paths
from agentprov_core.base.digests import file_sha256
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta

KEEP_UV_VARS = ("UV_CACHE_DIR",)


@dataclass
class BuildPlan:
    meta: SourceMeta
    project: Path
    env_id: str
    env_dir: Path
    lock_sha256: str
    exclude_newer: str | None
    no_build: list[str]
    offline: bool
    #: ``--defence-assets``: the asset ids the environment is to hold (``None``: the ones
    #: it holds now), each resolved to where its files are read from
    asset_ids: list[str] | None = None
    assets: list[defassets.Resolved] = field(default_factory=list)
    #: the project's dependency groups those assets need (``uv sync --group``)
    groups: list[str] = field(default_factory=list)
    #: every asset file is at hand (fetched or refused) and the local trees' are cached
    assets_ready: bool = False
    #: the contributed project (its distribution, for refusals and the dry run)
    located: projects.Located | None = None
    pinned_commit: str | None = None
    #: ``--dataset DIR``: the copy read and checked (``None``: none given)
    dataset: datasets.Copy | None = None
    #: the pinned upstream commit the project installs the benchmark from (``None``: its
    #: lock names everything), ``--source-repo``, and the full commit once ensured
    upstream: upstream.Upstream | None = None
    source_repo: str | None = None
    commit: str | None = None

    @property
    def dataset_spec(self):
        return self.located.entry.project.dataset if self.located is not None else None

    @property
    def task_files(self) -> tuple[str, ...]:
        return self.located.entry.project.task_files if self.located is not None else ()

    def uv_args(self) -> list[str]:
        args = ["sync", "--locked", "--no-config", "--no-dev", "--link-mode", "copy",
                "--compile-bytecode"]
        for g in self.groups:
            args += ["--group", g]
        if self.offline:
            args.append("--offline")
        if self.exclude_newer:
            args += ["--exclude-newer", self.exclude_newer]
        for name in self.no_build:
            args += ["--no-build-package", name]
        return args


def backend_meta(name: str) -> SourceMeta:
    from agentprov_core.plugins import manager

    metas = {}
    for entry in manager().sources().values():
        m = entry.source.meta
        if m.backend:
            metas.setdefault(m.backend, m)
            metas.setdefault(m.name, m)
    if name not in metas:
        from agentprov_core.plugins import refuse_failed

        refuse_failed(name)  # a failed plugin's source or backend: its error, not unknown
        raise AgentprovError("cli.usage.unknown_backend", name=name,
                             known=", ".join(sorted({m.backend for m in metas.values()})))
    return metas[name]


def plan_build(name: str, allow_network: bool, defence_assets: str | None = None,
               defence_sources: tuple[str, ...] = (), dataset: str | None = None,
               source_repo: str | None = None) -> BuildPlan:
    meta = backend_meta(name)
    if (defence_assets is not None or defence_sources) and not meta.takes_defences:
        raise AgentprovError("build.unsupported.defence_assets", backend=meta.backend,
                             builders=", ".join(defence_builders()) or "no backend")
    env_id = environments.environment_id(meta)  # exit 3 when the project has no lock
    loc = projects.require(meta.backend)  # exit 3 naming the distribution
    project = loc.directory
    if not (project / "uv.lock").is_file():  # git-pinned, no project yet
        raise AgentprovError("cli.environment.no_backend_project", backend=meta.backend,
                             why=f"{loc.where}/uv.lock is absent")
    if not (project / "pyproject.toml").is_file():
        raise projects.missing(loc)
    pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    # uv finds a mismatch only by resolving, which offline needs a warm cache: compare the
    # two files first, so a stale lock is named on any machine (build, dry run and check)
    if what := projects.lock_problem(loc):
        raise projects.lock_mismatch(loc, what)
    # The no-build list: every package the lock takes from a registry is installed from a
    # wheel only; the backend's own path dependencies are the only builds.
    no_build = sorted(p["name"] for p in lock.get("package", [])
                      if "registry" in (p.get("source") or {}))
    bp = BuildPlan(meta, project, env_id, environments.environment_dir(env_id),
                   file_sha256(project / "uv.lock"),
                   pyproject.get("tool", {}).get("uv", {}).get("exclude-newer"),
                   no_build, offline=not allow_network, located=loc,
                   pinned_commit=environments.pinned_commit(meta),
                   upstream=upstream.of(loc.entry.project), source_repo=source_repo)
    if source_repo is not None and bp.upstream is None:
        raise AgentprovError("build.unsupported.source_repo", backend=meta.backend,
                             builders=", ".join(upstream_builders()) or "no backend")
    if defence_assets is not None or defence_sources:
        plan_assets(bp, defence_assets, defence_sources)
    if dataset is not None:
        if bp.dataset_spec is None:
            raise AgentprovError("build.unsupported.dataset", backend=meta.backend,
                                 takers=", ".join(dataset_builders()) or "no backend")
        bp.dataset = datasets.read(bp.dataset_spec, Path(dataset))  # reading only: exit 3
    return bp


def upstream_builders() -> list[str]:
    """The backends built from a pinned upstream commit (``--source-repo`` applies)."""
    from agentprov_core.plugins import manager

    return sorted(name for name, found in manager().backends().items()
                  if any(e.project.upstream is not None for e in found))


def ready_upstream(bp: BuildPlan) -> None:
    """Ensure the pinned commit in the fetch cache (``--source-repo``, else the upstream
    with ``--allow-network``), verified by id and tree, before anything is built: exit 3
    (``cli.environment.source_*``) otherwise, with no environment written."""
    if bp.upstream is None or bp.commit is not None:
        return
    from agentprov_core.backend import fetchcache

    bp.commit = fetchcache.ensure(bp.upstream.pin, source_repo=bp.source_repo,
                                  allow_network=not bp.offline)


def dataset_builders() -> list[str]:
    from agentprov_core.plugins import manager

    return sorted(name for name, found in manager().backends().items()
                  if any(e.project.dataset is not None for e in found))


def ready_dataset(bp: BuildPlan, m: marker.Marker | None) -> None:
    """A backend that takes a dataset is built with one: ``--dataset``, else the one the
    environment being replaced holds (checked against its marker); else exit 3 naming the
    option, before anything is written."""
    spec = bp.dataset_spec
    if spec is None or bp.dataset is not None:
        return
    if m is not None and m.dataset is not None:
        bp.dataset = datasets.from_environment(spec, bp.env_dir, m.dataset)
        return
    raise AgentprovError("cli.environment.no_dataset", backend=bp.meta.backend,
                         origin=spec.origin, revision=spec.revision[:8])


def defence_builders() -> list[str]:
    from agentprov_core.plugins import manager

    return sorted({e.source.meta.backend for e in manager().sources().values()
                   if e.source.meta.takes_defences and e.source.meta.backend})


def plan_assets(bp: BuildPlan, ids_option: str | None, sources: tuple[str, ...],
                ids: list[str] | None = None) -> None:
    """Resolve the defence assets of a build (reading only): unknown ids and bad
    ``--defence-source`` values are usage errors (2); an asset with no pins, or whose
    dependency group the lock lacks, exit 3; a file that differs from its pin exits 3
    naming it and both digests."""
    assets = defassets.load()
    registry = paths.display(paths.defence_registry())
    if ids is None:
        ids = defassets.parse_ids(ids_option, assets, registry)
    srcs = defassets.parse_sources(sources, ids, assets)
    if ids is None:
        return
    project = bp.located.where if bp.located is not None else paths.display(bp.project)
    pyproject = tomllib.loads((bp.project / "pyproject.toml").read_text(encoding="utf-8"))
    groups = defassets.lock_groups((bp.project / "uv.lock").read_text(encoding="utf-8"),
                                   (pyproject.get("project") or {}).get("name"))
    defassets.check_buildable(ids, assets, groups, project, registry)
    bp.asset_ids = ids
    bp.assets = defassets.resolve(ids, assets, srcs)
    bp.groups = sorted({assets[i].group for i in ids if assets[i].group})


def ready_assets(bp: BuildPlan) -> None:
    """Before anything is built: fetch the missing files (``--allow-network``) or refuse
    naming the first; then keep the files read from a local tree in the fetch cache."""
    if bp.assets_ready:
        return
    for r in bp.assets:
        if r.missing and not bp.offline:
            defassets.fetch_missing(r)
        if r.missing:
            defassets.refuse_missing(r, allow_network=not bp.offline)
    defassets.keep_in_cache(bp.assets)
    bp.assets_ready = True


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if not found:
            raise AgentprovError("cli.environment.uv", env_id="-",
                                 detail="uv is not installed (pip install uv)") from None
        return found


def uv_env(target: Path, python: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_") or k in KEEP_UV_VARS}
    env |= {"UV_PROJECT_ENVIRONMENT": str(target), "UV_PYTHON_DOWNLOADS": "never",
            "UV_PYTHON": python, "UV_NO_PROGRESS": "1"}
    return env


def dry_run_lines(bp: BuildPlan) -> list[str]:
    cut = bp.uv_args()
    if bp.no_build:
        first = cut.index("--no-build-package")
        cut = [*cut[:first], "--no-build-package", "…"]
    over = bp.upstream.test_override if bp.upstream is not None else None
    commit8 = (f"commit8 {bp.pinned_commit[:8]} ("
               + (f"the test-only override {over})" if over else "the pinned commit)")
               if bp.pinned_commit
               else f"commit8 {bp.lock_sha256[:8]} (from lock_sha256)")
    network = ("none (uv --offline: the build uses the uv cache only)" if bp.offline
               else "allowed (--allow-network: uv may download the locked wheels)")
    return [
        f"backend {bp.meta.backend}: environment {bp.env_dir}",
        f"  {commit8}; lock sha256 {bp.lock_sha256[:16]}…",
        "  would run: uv " + " ".join(cut),
        f"  UV_PROJECT_ENVIRONMENT={bp.env_dir}; every other UV_* variable is dropped except "
        + ", ".join(KEEP_UV_VARS) + " (and UV_PYTHON_DOWNLOADS=never)",
        f"  network: {network}",
        "  then: uv pip install the worker host's libraries, T0 identity, hello identity, "
        "sandbox-exec feasibility probe, marker AGENTPROV_ENV.json",
        *(([] if bp.asset_ids else ["  defence assets: none"])
          + defassets.plan_lines(bp.assets, _replace_note(bp)) if bp.asset_ids is not None
          else []),
        *(upstream.dry_run_lines(bp.upstream, bp.source_repo, bp.offline)
          if bp.upstream is not None else []),
        *([f"  project: {bp.located.where} (from {bp.located.origin}; "
            + (f"worker {bp.located.entry.project.worker})" if bp.located.entry.project.worker
               else "any worker package)")] if bp.located is not None else []),
        *([f"  pins: {pins} (the project's direct dependencies, as its uv.lock records "
           "them)"] if (pins := ", ".join(direct_pins(bp.project))) else []),
        "  host libraries: " + _host_line(),
        *(["  " + bp.dataset.summary()] if bp.dataset is not None else
          [f"  dataset: none given (--dataset DIR: a local copy of {bp.dataset_spec.origin} at "
           f"revision {bp.dataset_spec.revision[:8]}; never downloaded)"]
          if bp.dataset_spec is not None else []),
        *([f"  task files: {', '.join(bp.task_files)} (each file's sha256 in the marker)"]
          if bp.task_files else []),
    ]


def direct_pins(project: Path) -> list[str]:
    """``name version`` of each dependency the project itself declares that its ``uv.lock``
    takes from a package index (``inspect-ai 0.3.263``): what the environment runs, as the
    specification's table of environments names it. Path sources (the worker package, a
    pinned upstream) are named by the dry run's other lines."""
    import tomllib

    try:
        lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    packages = lock.get("package", [])
    root = next((p for p in packages if (p.get("source") or {}).get("virtual") == "."
                 or (p.get("source") or {}).get("editable") == "."), None)
    if root is None:
        return []
    wanted = {d.get("name") for d in root.get("dependencies", [])}
    return [f"{p['name']} {p.get('version', '?')}" for p in packages
            if p.get("name") in wanted and "registry" in (p.get("source") or {})]


def _host_line() -> str:
    found = hostlibs.locate()
    return "; ".join(f"{loc.library.distribution} from {loc.origin}" for loc in found) or (
        "none shipped with this agentprov")


def _replace_note(bp: BuildPlan) -> str | None:
    """What a build with ``--defence-assets`` does to an existing environment."""
    try:
        m = marker.read(bp.env_dir)
    except (OSError, ValueError):
        return None
    have = sorted(m.defence_assets or {})
    if defassets.matches_registry(m.defence_assets, bp.asset_ids or [], defassets.load()):
        return f"the environment already holds these defence assets ({', '.join(have) or 'none'})"
    return (f"the environment exists with defence assets {', '.join(have) or 'none'}: the "
            "build replaces it whole (a rebuild in a new directory, never an edit)")


def record_catalogues(bp: BuildPlan, env_dir: Path) -> tuple[dict, dict[str, dict]]:
    """Ask the new environment's worker for its hello and for the catalogue of every source
    it serves, computed from the installed package; record them in ``agentprov/``. Returns
    the hello and the catalogues by source."""
    import json

    from agentprov_core.backend.workerclient import Worker

    catalogues: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="agentprov-build-") as staging, \
            Worker(bp.env_id, env_dir, Path(staging), network=False) as w:
        hello = w.request("hello")
        for source in hello.get("sources", []):
            doc = catalogues[source] = w.request("catalogue", source=source)
            (env_dir / "agentprov" / f"catalogue-{source}.json").write_text(
                json.dumps(doc, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    hello.pop("prefix", None)
    return hello, catalogues


def build(bp: BuildPlan, python: str) -> tuple[str, marker.Marker]:
    """Build the environment; return (what happened, its marker).

    An environment that holds other defence assets than ``--defence-assets`` names is
    rebuilt whole, like a stale one; without the option a rebuild provisions the assets
    the old marker records, from the fetch cache."""
    try:
        held = marker.read(bp.env_dir).defence_assets
    except (OSError, ValueError):
        held = None
    if bp.asset_ids is not None and not defassets.matches_registry(held, bp.asset_ids,
                                                                   defassets.load()):
        ready_assets(bp)  # before the lock: a refusal here writes nothing at all
    if not bp.env_dir.exists():
        ready_dataset(bp, None)  # no dataset to build with: refused before anything is written
    if bp.source_repo is not None or not bp.env_dir.exists():
        ready_upstream(bp)  # the pinned commit not at hand: refused before anything is written
    with hold(bp.env_id):
        if bp.env_dir.exists():
            try:
                m = environments.read_marker(bp.meta, bp.env_id)
            except AgentprovError:
                m = None
            stale = m is not None and bool(
                environments.worker_sources_differ(m.hello)
                or environments.stale_path_sources(m, bp.project))
            if m is not None and bp.asset_ids is not None and not defassets.matches_registry(
                    m.defence_assets, bp.asset_ids, defassets.load()):
                stale = True  # other assets: a rebuild, never an edit
            if m is not None and bp.dataset is not None and (
                    (m.dataset or {}).get("sha256") != bp.dataset.sha256):
                stale = True  # another dataset: a rebuild, never an edit
            if m is not None and not stale:
                if not (why := probe_rerun(m)):
                    return "already built", m
                m = msgspec.structs.replace(m, probe=probe(bp.env_dir, m.hello))
                marker.write(bp.env_dir, m)
                return f"already built (containment probe re-run: {'; '.join(why)})", m
            if m is not None and bp.asset_ids is None and m.defence_assets:
                plan_assets(bp, None, (), ids=sorted(m.defence_assets))  # the rebuild keeps them
            ready_dataset(bp, m)  # the rebuild keeps the dataset it holds
        ready_dataset(bp, None)  # no dataset at all: refused before anything is written
        ready_assets(bp)
        ready_upstream(bp)
        bp.env_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{bp.env_id}.build-", dir=bp.env_dir.parent))
        try:
            m = _build_into(bp, python, tmp)
            if bp.env_dir.exists():  # an invalid or stale environment (other worker code): replace it whole
                old = bp.env_dir.with_name(f".{bp.env_id}.old-{os.getpid()}")
                bp.env_dir.rename(old)
                shutil.rmtree(old, ignore_errors=True)
            tmp.rename(bp.env_dir)
            return "built", m
        except OSError as exc:
            detail = ("no space left on the device" if exc.errno == errno.ENOSPC
                      else f"{type(exc).__name__}: {exc}")
            raise AgentprovError("cli.environment.build_io", env_id=bp.env_id, detail=detail,
                                 path=bp.env_dir) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def install_host(bp: BuildPlan, uv: str, python: str, tmp: Path) -> list[hostlibs.Located]:
    """Install the worker host's libraries that ship with this agentprov into the new
    environment (``uv pip install --no-deps``, offline unless ``--allow-network``): the
    project does not lock them (:mod:`agentprov_core.backend.hostlibs`)."""
    found = hostlibs.locate()
    if len(found) != len(hostlibs.LIBRARIES):
        have = {loc.library.distribution for loc in found}
        raise AgentprovError("cli.environment.uv", env_id=bp.env_id, detail=(
            "this agentprov ships no copy of " + ", ".join(sorted(hostlibs.NAMES - have))
            + " (a broken install: reinstall agentprov)"))
    args = [uv, "pip", "install", "--no-config", "--no-deps", "--reinstall", "--link-mode",
            "copy", "--compile-bytecode", "--python", str(tmp / "bin" / "python")]
    if bp.offline:
        args.append("--offline")
    if bp.exclude_newer:
        args += ["--exclude-newer", bp.exclude_newer]
    proc = subprocess.run([*args, *(str(loc.directory) for loc in found)],
                          env=uv_env(tmp, python), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise AgentprovError("cli.environment.uv", env_id=bp.env_id,
                             detail=f"installing the worker host's libraries: {tail}")
    return found


def check_served(bp: BuildPlan, hello: dict) -> None:
    """Every source of this backend must be served by the new environment's worker, by the
    worker package its project names (exit 3 naming the distribution): a project whose
    worker package is absent, fails to load or is another's is refused, and nothing is
    kept."""
    from packaging.utils import canonicalize_name

    from agentprov_core.plugins import manager

    served = hello.get("served") or {}
    want = bp.located.entry.project.worker if bp.located is not None else None
    origin = bp.located.origin if bp.located is not None else "the backend project"
    for entry in manager().sources().values():
        meta = entry.source.meta
        if meta.backend != bp.meta.backend:
            continue
        got = served.get(meta.name)
        why = None
        if got is None:
            why = ("no worker package in it registers the source (entry-point group "
                   f"agentprov.worker, name {meta.name})")
        elif got.get("error"):
            why = got["error"]
        elif want and got.get("distribution") != canonicalize_name(want):
            why = (f"the source is served by {got.get('distribution')}, not by the worker "
                   f"package {want} the project names")
        if why is not None:
            raise AgentprovError("cli.environment.worker_missing", env_id=bp.env_id,
                                 source=meta.name, backend=bp.meta.backend, origin=origin,
                                 why=why)


def _build_into(bp: BuildPlan, python: str, tmp: Path) -> marker.Marker:
    uv = uv_binary()
    project, up_rec, staging = bp.project, None, None
    try:
        if bp.upstream is not None:  # the project copied out of the checkout, the commit in it
            from agentprov_core.backend import fetchcache

            assert bp.commit is not None
            repo = fetchcache.repo_path(bp.upstream.pin.name)
            # beside the new environment (uv takes only an empty directory or a venv there)
            staging = Path(tempfile.mkdtemp(prefix=f".{bp.env_id}.src-", dir=tmp.parent))
            try:
                project = upstream.stage(bp.project, bp.upstream, repo, bp.commit, staging)
                up_rec = upstream.record(bp.upstream, bp.commit, repo, bp.source_repo)
            except fetchcache.GitFailed as exc:  # e.g. a link in the tree
                raise AgentprovError("cli.environment.source_fetch", name=bp.upstream.pin.name,
                                     commit=bp.commit, url=repo,
                                     why=f"extracting it: {exc}") from None
            differs = upstream.undeclared_by_lock(project, bp.upstream)
            if differs is not None:
                raise upstream_lock_mismatch(bp, "error: " + differs)
        # a relocatable venv: it is built here and renamed into place, so its console
        # scripts (``bin/inspect``, ``bin/pip``) find their Python by a relative path, not
        # by the build directory's, which is gone once the environment is in place
        proc = subprocess.run([uv, "venv", "--quiet", "--relocatable", "--no-config",
                               "--python", python, str(tmp)], env=uv_env(tmp, python),
                              capture_output=True, text=True)
        if proc.returncode == 0:
            proc = subprocess.run([uv, *bp.uv_args(), "--project", str(project)],
                                  env=uv_env(tmp, python), capture_output=True, text=True)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    if proc.returncode != 0:
        text = (proc.stderr or proc.stdout).strip()
        if "--locked" in text and ("needs to be updated" in text or "out of date" in text):
            if bp.upstream is not None:  # the project's own files were checked before: the
                # extracted commit's pyproject.toml declares what the lock does not record
                raise upstream_lock_mismatch(bp, text)
            raise projects.lock_mismatch(bp.located, "uv sync --locked refused it")
        if "No space left" in text:
            raise OSError(errno.ENOSPC, "No space left on device")
        tail = " | ".join(text.splitlines()[-4:])
        raise AgentprovError("cli.environment.uv", env_id=bp.env_id, detail=tail)
    host = install_host(bp, uv, python, tmp)
    (tmp / "agentprov").mkdir(exist_ok=True)
    shutil.copyfile(bp.project / "uv.lock", tmp / "agentprov" / "uv.lock")
    shutil.copyfile(bp.project / "pyproject.toml", tmp / "agentprov" / "pyproject.toml")
    if up_rec is not None:
        upstream.write_record(tmp, up_rec)  # before the catalogues: the worker reads it
    assets = defassets.provision(bp.assets, tmp) if bp.assets else None
    data = datasets.provision(bp.dataset, tmp) if bp.dataset is not None else None
    hello, catalogues = record_catalogues(bp, tmp)
    check_served(bp, hello)
    if bp.dataset is not None and (
            problems := datasets.catalogue_problems(bp.dataset.spec, bp.dataset, catalogues)):
        raise AgentprovError("cli.environment.dataset", path=paths.display(bp.dataset.directory),
                             what="; ".join(problems[:3]))
    ident = envidentity.compute(tmp, task_files=bp.task_files)
    if ident.problems:
        raise AgentprovError("cli.environment.uv", env_id=bp.env_id,
                             detail="the installed files do not match their RECORD: "
                                    + "; ".join(ident.problems[:3]))
    lacking = sorted({d for r in bp.assets for d in r.asset.distributions
                      if d not in ident.distributions})
    if lacking:
        raise AgentprovError("cli.environment.uv", env_id=bp.env_id,
                             detail=f"the defence assets need {', '.join(lacking)}, which the "
                                    f"groups {', '.join(bp.groups) or '(none)'} did not install")
    probed = probe(tmp, hello)  # after the identity: the probe writes nothing in the env
    uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.strip()
    m = marker.Marker(
        format=marker.FORMAT, environment_id=bp.env_id, backend=bp.meta.backend or "",
        project=bp.located.where if bp.located is not None else paths.display(bp.project),
        built_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        agentprov=__version__, python=hello.get("python", ""), uv=uv_version,
        lock_sha256=bp.lock_sha256, exclude_newer=bp.exclude_newer,
        pinned_commit=bp.commit or bp.pinned_commit, distributions=ident.distributions,
        files_verified=ident.files_verified, guarded=ident.guarded, compiled=ident.compiled,
        defence_registry_sha256=ident.defence_registry_sha256, hello=hello, probe=probed,
        identity_sha256=ident.digest(bp.lock_sha256, hello.get("python", ""),
                                     defassets.identity(assets), datasets.identity(data),
                                     upstream=up_rec),
        defence_assets=assets, host=hostlibs.record(host),
        path_sources=environments.path_sources(bp.project),
        task_files=ident.task_files or None, dataset=data, upstream=up_rec)
    marker.write(tmp, m)
    return m


def upstream_lock_mismatch(bp: BuildPlan, uv_text: str) -> AgentprovError:
    """``cli.environment.upstream_lock``: the commit's ``pyproject.toml`` declares other
    dependencies than the project's lock records (uv's first line says what)."""
    assert bp.upstream is not None and bp.located is not None
    lines = [ln.strip() for ln in uv_text.splitlines() if ln.strip()]
    said = next((ln for ln in lines if ln.startswith("error:")), lines[-1] if lines else "")
    # uv's advice (``uv lock`` in the build directory) would re-lock a copy that is removed
    said = said.removeprefix("error:").split(" To update the lockfile")[0].strip()
    return AgentprovError("cli.environment.upstream_lock",
                          lock=paths.display(bp.project / "uv.lock"),
                          name=bp.upstream.pin.name, commit=bp.commit or bp.upstream.pin.commit,
                          what=said, backend=bp.meta.backend,
                          project=bp.located.where, upstream_dir=bp.upstream.directory,
                          readme=f"{bp.located.where}/README.md")


def offline_check(bp: BuildPlan) -> marker.Marker:
    """Recompute the identity from the files, ask for a hello with the network blocked,
    and compare both with the marker. Raise exit 3 naming what differs."""

    def fail(what: str) -> AgentprovError:
        return AgentprovError("cli.environment.offline_check", env_id=bp.env_id, what=what)

    with hold(bp.env_id):
        if not bp.env_dir.is_dir():
            raise environments.not_built(bp.meta.backend, bp.env_id)
        m = environments.read_marker(bp.meta, bp.env_id)
        if m.lock_sha256 != bp.lock_sha256:
            raise fail(f"the marker's lock_sha256 differs from {bp.located.where}/uv.lock "
                       f"({bp.located.origin})")
        if bp.upstream is not None and not str((m.upstream or {}).get("commit", "")).startswith(
                bp.upstream.pin.commit):
            raise fail(f"the marker records upstream commit {(m.upstream or {}).get('commit')}, "
                       f"not the pinned {bp.upstream.pin.commit}")
        from agentprov_core.backend.workerclient import Worker

        # the worker starts while T0 hashes the files; its hello is read afterwards
        with tempfile.TemporaryDirectory(prefix="agentprov-hello-") as staging, \
                Worker(bp.env_id, bp.env_dir, Path(staging), network=False) as w:
            pending = w.submit("hello")
            ident = envidentity.compute(bp.env_dir, task_files=bp.task_files)
            if ident.problems:
                raise fail("; ".join(ident.problems[:5]) + (
                    f" (+{len(ident.problems) - 5} more)" if len(ident.problems) > 5 else ""))
            diffs = _diff_dists(m.distributions, ident.distributions, "RECORD")
            diffs += [f"guarded file {k} changed" for k in m.guarded
                      if ident.guarded.get(k) != m.guarded[k]]
            if m.compiled is not None and ident.compiled != m.compiled:
                diffs.append(f"compiled bytecode changed ({ident.compiled['files']} .pyc files, "
                             f"the marker recorded {m.compiled['files']})")
            diffs += [f"task file {k} {'is missing' if k not in ident.task_files else 'changed'}"
                      for k in sorted(m.task_files or {})
                      if ident.task_files.get(k) != (m.task_files or {})[k]]
            diffs += [f"task file {k} was not in the build"
                      for k in sorted(set(ident.task_files) - set(m.task_files or {}))]
            diffs += defassets.check_env(bp.env_dir, m.defence_assets)
            if bp.dataset_spec is not None:
                diffs += datasets.check_env(bp.env_dir, bp.dataset_spec, m.dataset)
            if diffs:
                raise fail("; ".join(diffs[:5]))
            hello = w.result(pending)
        hello.pop("prefix", None)
        hdiff = _diff_dists(m.hello.get("distributions", {}), hello.get("distributions", {}),
                            "hello")
        for key in ("python", "defence_registry_sha256", "agentprov_backend", "agentprov_capture"):
            if hello.get(key) != m.hello.get(key):
                hdiff.append(f"hello {key} {hello.get(key)!r} differs from the marker's "
                             f"{m.hello.get(key)!r}")
        if hdiff:
            raise fail("; ".join(hdiff[:5]))
        environments.check_worker_sources(hello, bp.env_id, bp.meta.backend, m)
        return m


def _diff_dists(want: dict, got: dict, what: str) -> list[str]:
    out = [f"{what}: {n} is missing" for n in sorted(set(want) - set(got))]
    out += [f"{what}: {n} was not in the build" for n in sorted(set(got) - set(want))]
    out += [f"{what}: {n} differs ({want[n].get('version')})" for n in sorted(set(want) & set(got))
            if want[n] != got[n]]
    return out
