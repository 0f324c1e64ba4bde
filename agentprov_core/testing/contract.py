"""The contract every source plugin passes.

Run it over every installed source, or over one (``AGENTPROV_CONTRACT_SOURCE=NAME``, as tox
does per plugin package)::

    pytest -p no:cacheprovider --pyargs agentprov_core.testing.contract
    AGENTPROV_CONTRACT_SOURCE=mybench pytest -p no:cacheprovider --pyargs agentprov_core.testing.contract

(or give the file's path: ``pytest $(python -c 'import agentprov_core.testing.contract as m;
print(m.__file__)')``; pytest collects a file named on its command line whatever its name).

What is checked, per source:

* its metadata: a frozen :class:`~agentprov_core.source.SourceMeta` whose fields have their
  declared types (a wrong one is named by its path, ``$.label``), whose name is the
  entry-point name (a plugin whose entry point is named otherwise fails, with the fix,
  under the source's name and under the entry point's), with a label, a summary and a live
  status;
* for a source with a backend: its catalogue (a :class:`~agentprov_core.catalogue.Catalogue`
  whose fields have their declared types, format, names, provenance, unique task ids
  sortable by their number, unique attacks whose flags agree), and
  ``agentprov run NAME --catalogue`` prints it and writes nothing (R-7.11);
* for a suite source: the expansion order (R-7.2), one cell per user task for a DoS attack
  (R-7.3), every refused attack refused with exit 5 and nothing written, an attack's
  required options refused as usage (exit 2) when missing;
* for an Inspect source: a plan without limits is refused with exit 2 (R-25.18), and
  cells hold at most ``cell_size`` samples (R-25.4);
* for a source without a backend: ``--catalogue`` and a scripted dry run exit 5;
* the backend side, for a source with a backend (no environment needed): exactly one
  distribution contributes a backend project of that name (``agentprov_backends``), as a
  :class:`~agentprov_core.backendproject.BackendProject` whose fields have their types and
  whose ``path`` is a directory; the directory holds ``pyproject.toml`` and a ``uv.lock``
  that records what it declares (:mod:`agentprov_core.backend.lockcheck`) and does not
  lock the worker host's libraries (:mod:`agentprov_core.backend.hostlibs`); ``worker``,
  when set, is a distribution the lock installs. A slot (a directory with a ``slot.toml``
  and no project, :mod:`agentprov_core.backend.slots`) skips the file checks with its
  ``why``, and a git-pinned project that is not locked yet skips the lock's;
* the worker side, when the backend environment is built in ``$AGENTPROV_HOME`` (skipped,
  saying how to build it, when not): its worker, started as a run starts it (no keys, no
  network, its hello checked against the marker), serves the source, from the project's
  ``worker`` distribution when one is named (a worker package's load error is reported as
  the hello gives it); the catalogue it serves converts to a ``Catalogue`` (a bad field is
  named by its JSON path) of this source and equals the committed catalogue, provenance
  and defences aside (a difference is named by its first JSON path); it accepts a plan of
  each suite's first user task, and rejects a cell with an unknown user task naming that
  task; for a suite source, a scripted run of the first user task through it leaves a
  session the source's mapper maps without raising (an exception is named, with the
  session) (:mod:`agentprov_core.testing.contract_worker`).

Each failure names the source, the field and, for a backend project, the distribution that
contributed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from agentprov_core import catalogue as catmod
from agentprov_core.backend import projects
from agentprov_core.backendproject import BackendDataset, BackendProject
from agentprov_core.base import paths
from agentprov_core.catalogue import Attack, Catalogue, Suite
from agentprov_core.errors import AgentprovError
from agentprov_core.plan import taskspec
from agentprov_core.plan.plandoc import InspectPlan, PlanDoc
from agentprov_core.plugins import manager
from agentprov_core.source import INSPECT_LIMITS, LIVE_ORDER, RunContext, SourceMeta
from agentprov_core.testing import contract_select as sel
from agentprov_core.testing.contract_select import (
    INSPECT,
    INSTALLED,
    NO_BACKEND,
    SELECTED,
    SUITES,
    WITH_BACKEND,
)

# the worker side's checks, collected with this module's
from agentprov_core.testing.contract_worker import (  # noqa: F401
    test_mapper_maps_a_scripted_session,
    test_worker_serves_the_committed_catalogue,
    test_worker_serves_the_source,
)

PROVENANCE_KINDS = ("snapshot", "declared", "worker")
_req = sel.req
def _catalogue(name: str) -> Catalogue:
    """The source's catalogue, checked to be a well-typed Catalogue."""
    src = sel.source(name)
    try:
        cat = src.catalogue()
    except Exception as exc:
        pytest.fail(f"source {name!r}: catalogue() raised {type(exc).__name__}: {exc}",
                    pytrace=False)
    sel.revalidated(cat, Catalogue, f"source {name!r}: catalogue()")
    return cat


def _default_suite(cat: Catalogue) -> Suite:
    version = cat.default_benchmark_version or ""
    suites = cat.suites_of(version)
    assert suites, f"no suite at the default benchmark version {version!r}"
    return suites[0]


def _runnable(cat: Catalogue, dos: bool) -> list[Attack]:
    """Attacks a plan can take with no further option and no refusal."""
    return [a for a in cat.attacks if not a.refused and not a.needs and a.dos == dos]


def _row(cell) -> tuple[Any, ...]:
    return (cell.kind, cell.suite, cell.user_task_id, cell.attack, cell.injection_task_id)


def _need_values(attack: Attack, where: Path, injection_task: str) -> dict[str, Any]:
    """A value for each option ``attack`` needs: a file for a path (for
    ``--autodojo-cache`` a cache of the shape the usage step checks, naming
    ``injection_task``), 0 for an integer."""
    fields = {f.name: f.type for f in msgspec.structs.fields(PlanDoc)}
    values: dict[str, Any] = {}
    for option in attack.needs:
        field = option.lstrip("-").replace("-", "_")
        assert field in fields, (
            f"attack {attack.name!r}: needs[{option!r}] is an option no plan carries")
        if int in typing.get_args(fields[field]):
            values[field] = 0
        else:
            path = where / f"{field}.need"
            path.write_text(json.dumps({"injection_tasks": {injection_task: {"v": ["x"]}}})
                            if field == "autodojo_cache" else "{}")
            values[field] = str(path)
    return values


class Cli:
    """The real CLI in a subprocess, in an empty directory, with an empty home."""

    def __init__(self, tmp: Path) -> None:
        self.home = tmp / "home"
        self.cwd = tmp / "cwd"
        self.corpus = tmp / "corpora" / "contract"
        self.script = tmp / "script.json"
        for d in (self.home, self.cwd, self.corpus.parent):
            d.mkdir(parents=True)
        self.script.write_text("[]")
        # a backend this build lacks (a slot) is given a placeholder project, so that the
        # source's own plan refusals are what is checked (agentprov_core.backend.slots)
        from agentprov_core.base import paths
        from agentprov_core.testing.fixtures import landed_backends

        self.backends = (landed_backends(tmp / "backends") if paths.backends_dir() is not None
                         else None)

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, AGENTPROV_HOME=str(self.home))
        if self.backends is not None:
            env["AGENTPROV_BACKENDS"] = str(self.backends)
        env.pop("AGENTPROV_ERROR_FORMAT", None)
        return subprocess.run(
            [sys.executable, "-m", "agentprov_core", "--error-format", "json", *args],
            capture_output=True, text=True, env=env, cwd=self.cwd, timeout=120,
            stdin=subprocess.DEVNULL)

    def dry_run(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self("run", name, "--dry-run", "--llm-script", str(self.script),
                    "--corpus", str(self.corpus), "--campaign", "contract", *args)

    def refused(self, done: subprocess.CompletedProcess[str], exit_code: int,
                code: str) -> dict[str, Any]:
        """Assert the refusal ``code`` (exit ``exit_code``) and that nothing was written."""
        assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
        error = json.loads(done.stderr.strip().splitlines()[-1])
        assert (error["error"], error["exit"]) == (code, exit_code), error
        assert done.stdout == ""
        self.assert_nothing_written()
        return error

    def assert_nothing_written(self) -> None:
        assert not self.corpus.exists()
        assert not self.corpus.with_name(self.corpus.name + ".partial").exists()
        assert sorted(self.home.iterdir()) == []
        assert sorted(self.cwd.iterdir()) == []


@pytest.fixture
def contract_cli(tmp_path: Path) -> Cli:
    """The CLI in a subprocess, with an empty home, directory and corpus parent."""
    return Cli(tmp_path)


# ------------------------------------------------------------------------ every source
@pytest.mark.parametrize("name", SELECTED)
def test_source_is_installed(name: str) -> None:
    """The source is registered (a plugin that failed to load fails here, with its error)."""
    assert name in sel.installed(), sel.not_installed(name)


@pytest.mark.parametrize("name", INSTALLED)
def test_metadata(name: str) -> None:
    entry = sel.entry(name)
    meta = entry.source.meta
    sel.revalidated(meta, SourceMeta, f"source {name!r}: meta")
    with pytest.raises(AttributeError):
        meta.name = "changed"  # type: ignore[misc]
    assert meta.name == entry.plugin.name, (
        f"source {meta.name!r} comes from the entry point {entry.plugin.name!r}: by "
        "convention the entry-point name is the source's name")
    assert meta.label.strip(), f"source {name!r}: SourceMeta.label is empty"
    assert meta.summary.strip(), f"source {name!r}: SourceMeta.summary is empty"
    assert meta.live_status in LIVE_ORDER, (
        f"source {name!r}: SourceMeta.live_status {meta.live_status!r} is not one of "
        + ", ".join(LIVE_ORDER))
    assert meta.kind in ("suites", "inspect")
    assert meta.llm_elements, f"source {name!r}: SourceMeta.llm_elements: a source runs at " \
        "least one LLM element"
    # snapshotted into every corpus manifest: it must survive a JSON round trip
    assert msgspec.json.decode(msgspec.json.encode(meta), type=SourceMeta) == meta


# ------------------------------------------------------------------ with a backend
@_req("R-7.12")
@pytest.mark.parametrize("name", WITH_BACKEND)
def test_catalogue(name: str) -> None:
    src = sel.source(name)
    cat = _catalogue(name)
    assert cat.format == catmod.FORMAT, (
        f"source {name!r}: Catalogue.format is {cat.format!r}, not {catmod.FORMAT!r}")
    assert cat.source == src.meta.name, (
        f"source {name!r}: Catalogue.source is {cat.source!r}, not the source's name")
    assert cat.backend == src.meta.backend, (
        f"source {name!r}: Catalogue.backend is {cat.backend!r}, not SourceMeta.backend "
        f"{src.meta.backend!r}")
    assert cat.provenance.kind in PROVENANCE_KINDS
    versions = cat.benchmark_versions
    assert len(set(versions)) == len(versions)
    if versions and cat.default_benchmark_version is not None:
        assert cat.default_benchmark_version in versions
    rows = [(s.benchmark_version, s.name) for s in cat.suites]
    assert len(set(rows)) == len(rows), "a suite appears twice at one benchmark version"
    for suite in cat.suites:
        where = f"{suite.name} ({suite.benchmark_version})"
        if versions:
            assert suite.benchmark_version in versions, where
        for label, ids in (("user", suite.user_tasks), ("injection", suite.injection_tasks)):
            assert len(set(ids)) == len(ids), f"{where}: repeated {label} task ids"
            numbers = [taskspec.task_number(t) for t in ids]
            assert -1 not in numbers, f"{where}: {label} task ids must end in a number: {ids}"
            assert len(set(numbers)) == len(numbers), (
                f"{where}: two {label} tasks share a number, so index ranges are ambiguous")
        for size in (suite.tools, suite.tool_definitions_bytes):
            assert size is None or size >= 0, where
    if src.meta.kind == "suites":
        assert cat.suites and not cat.tasks, (
            f"source {name!r}: a suites source's Catalogue has suites and no tasks")
        _default_suite(cat)
    else:
        assert cat.tasks and not cat.suites and not cat.attacks, (
            f"source {name!r}: an inspect source's Catalogue has tasks, no suites, no attacks")
        names = [t.name for t in cat.tasks]
        assert len(set(names)) == len(names)
        for task in cat.tasks:
            splits = {s.name: s.samples for s in task.splits}
            assert len(splits) == len(task.splits) and task.default_split in splits, task.name
            assert all(n >= 1 for n in splits.values()), task.name
            assert len(set(task.judge_roles)) == len(task.judge_roles), task.name


@_req("R-7.11")
@pytest.mark.parametrize("name", WITH_BACKEND)
def test_catalogue_command(name: str, contract_cli: Cli) -> None:
    """``agentprov run NAME --catalogue`` prints the catalogue and writes nothing."""
    done = contract_cli("run", name, "--catalogue")
    assert done.returncode == 0, done.stderr
    try:
        printed = msgspec.json.decode(done.stdout, type=Catalogue)
    except msgspec.DecodeError as exc:
        pytest.fail(f"source {name!r}: agentprov run {name} --catalogue printed no "
                    f"catalogue: {exc}", pytrace=False)
    own = _catalogue(name)
    # the defence registry, not the plugin, is authoritative for defences
    assert msgspec.structs.replace(printed, defences=[]) == msgspec.structs.replace(
        own, defences=[])
    contract_cli.assert_nothing_written()


# ------------------------------------------------------------------------ suite sources
@_req("R-7.13")
@pytest.mark.parametrize("name", SUITES)
def test_attacks(name: str) -> None:
    cat = _catalogue(name)
    names = [a.name for a in cat.attacks]
    assert len(set(names)) == len(names), "repeated attack names"
    plan_fields = set(PlanDoc.__struct_fields__)
    for a in cat.attacks:
        if a.refused:
            assert a.refused_reason and a.refused_reason.strip(), (
                f"attack {a.name!r} is refused without a reason")
        else:
            assert a.refused_reason is None, f"attack {a.name!r} has a reason but is not refused"
        assert len(set(a.needs)) == len(a.needs), a.name
        for option in a.needs:
            assert option.startswith("--") and option.lstrip("-").replace("-", "_") in \
                plan_fields, f"attack {a.name!r} needs {option!r}, which no plan can carry"


@_req("R-7.2", "R-7.1")
@pytest.mark.parametrize("name", SUITES)
def test_expansion_order(name: str) -> None:
    """Per suite, the benign cells first, then per attack, per user task, per injection
    task; a DoS attack takes one cell per user task with the suite's first injection task."""
    src = sel.source(name)
    cat = _catalogue(name)
    suite = _default_suite(cat)
    users = taskspec.sort_tasks(suite.user_tasks)
    injs = taskspec.sort_tasks(suite.injection_tasks)
    ctx = RunContext()
    plain = _runnable(cat, dos=False)
    if not plain or not users or not injs:
        pytest.skip(f"{name}: no attack that runs without options, or an empty suite")
    attack = plain[0].name

    # the spec's example: user task 0, one attack, injection task 0
    doc = sel.plan(name, suites=[suite.name], user_tasks="0", injection_tasks="0",
                attacks=[attack])
    src.check_plan(doc, cat, ctx)
    src.refusals(doc, cat, ctx)
    cells = sel.expand(src, doc, cat)
    assert [_row(c) for c in cells] == [
        ("user_task", suite.name, users[0], None, None),
        ("attacked", suite.name, users[0], attack, injs[0]),
    ]
    assert len({c.key for c in cells}) == len(cells)

    # two user tasks, two injection tasks, an attack and (if any) a DoS attack
    us, js = users[:2], injs[:2]
    attacks = [attack] + [a.name for a in _runnable(cat, dos=True)[:1]]
    doc = sel.plan(name, suites=[suite.name], user_tasks=",".join(us),
                injection_tasks=",".join(js), attacks=attacks)
    src.check_plan(doc, cat, ctx)
    expected = [("user_task", suite.name, u, None, None) for u in us]
    for a in attacks:
        if cat.attack(a).dos:
            expected += [("dos", suite.name, u, a, injs[0]) for u in us]
        else:
            expected += [("attacked", suite.name, u, a, j) for u in us for j in js]
    assert [_row(c) for c in sel.expand(src, doc, cat)] == expected


@_req("R-7.3")
@pytest.mark.parametrize("name", SUITES)
def test_dos_attack_takes_one_cell_per_user_task(name: str) -> None:
    src = sel.source(name)
    cat = _catalogue(name)
    dos = _runnable(cat, dos=True)
    if not dos:
        pytest.skip(f"{name}: no DoS attack that runs without options")
    suite = _default_suite(cat)
    doc = sel.plan(name, suites=[suite.name], attacks=[dos[0].name], benign="exclude")
    cells = sel.expand(src, doc, cat)
    first = taskspec.sort_tasks(suite.injection_tasks)[:1]
    assert len(cells) == len(suite.user_tasks)
    assert {c.kind for c in cells} == {"dos"}
    assert [c.user_task_id for c in cells] == taskspec.sort_tasks(suite.user_tasks)
    assert {c.injection_task_id for c in cells} == set(first or [None])


@_req("R-7.13", "R-16.2")
@pytest.mark.parametrize("name", SUITES)
def test_refused_attacks_exit_5(name: str, tmp_path: Path) -> None:
    """Every attack the catalogue marks refused is refused before anything starts."""
    cat = _catalogue(name)
    refused = [a for a in cat.attacks if a.refused]
    if not refused:
        pytest.skip(f"{name}: the catalogue refuses no attack")
    suite = _default_suite(cat)
    for i, attack in enumerate(refused):
        cli = Cli(tmp_path / str(i))
        extra: list[str] = []
        for field, value in _need_values(attack, tmp_path, suite.injection_tasks[0]).items():
            extra += ["--" + field.replace("_", "-"), str(value)]
        done = cli.dry_run(name, "--suite", suite.name, "--user-tasks", "0",
                           "--injection-tasks", "0", "--attack", attack.name, *extra)
        error = cli.refused(done, 5, "run.unsupported.attack_refused")
        assert attack.refused_reason in error["message"]
        assert error["message"].endswith("Nothing was started and nothing was written.")


@pytest.mark.parametrize("name", SUITES)
def test_attack_needs_are_usage_errors(name: str, tmp_path: Path) -> None:
    """An attack that needs options is refused as usage (exit 2) without them."""
    src = sel.source(name)
    cat = _catalogue(name)
    needing = [a for a in cat.attacks if a.needs and not a.refused]
    if not needing:
        pytest.skip(f"{name}: no attack needs options")
    suite = _default_suite(cat)
    for attack in needing:
        base = {"suites": [suite.name], "user_tasks": "0", "injection_tasks": "0",
                "attacks": [attack.name]}
        with pytest.raises(AgentprovError) as refused:
            src.check_plan(sel.plan(name, **base), cat, RunContext())
        assert refused.value.exit_code == 2, refused.value.code
        values = _need_values(attack, tmp_path, suite.injection_tasks[0])
        src.check_plan(sel.plan(name, **base, **values), cat, RunContext())


# ---------------------------------------------------------------------- Inspect sources
@_req("R-25.18")
@pytest.mark.parametrize("name", INSPECT)
def test_inspect_plan_without_limits_exit_2(name: str, contract_cli: Cli) -> None:
    task = _catalogue(name).tasks[0]
    done = contract_cli.dry_run(name, "--task", task.name, "--samples", "limit:1")
    error = contract_cli.refused(done, 2, "cli.usage.backend_plan")
    assert "[inspect].limits: missing key(s)" in error["message"]


@_req("R-25.4")
@pytest.mark.parametrize("name", INSPECT)
def test_inspect_cells_hold_at_most_cell_size_samples(name: str) -> None:
    src = sel.source(name)
    cat = _catalogue(name)
    task = cat.tasks[0]
    splits = {s.name: s.samples for s in task.splits}
    assert task.default_split in splits, (
        f"source {name!r}: InspectTask.default_split of {task.name!r} names no split")
    size = splits[task.default_split]
    n = min(3, size)
    limits = {k: lo for k, (lo, _hi) in INSPECT_LIMITS.items()}
    judges = {role: "scripted" for role in task.judge_roles}
    doc = sel.plan(name, inspect=InspectPlan(task=task.name, samples=f"limit:{n}", cell_size=2,
                                          limits=limits, judges=judges))
    src.check_plan(doc, cat, RunContext())
    cells = sel.expand(src, doc, cat)
    assert [len(c.samples or ()) for c in cells] == [2] * (n // 2) + [1] * (n % 2)
    assert [s for c in cells for s in c.samples or ()] == [{"index": i} for i in range(n)]
    assert {c.kind for c in cells} == {"samples"}


# ----------------------------------------------------------------- without a backend
@_req("R-1.6")
@pytest.mark.parametrize("name", NO_BACKEND)
def test_no_backend_exits_5(name: str, contract_cli: Cli) -> None:
    code = "run.unsupported.no_live_capability"
    contract_cli.refused(contract_cli("run", name, "--catalogue"), 5, code)
    contract_cli.refused(contract_cli.dry_run(name), 5, code)


# ------------------------------------------------------------------- the backend side
def _hook_problems(name: str) -> list[str]:
    """What the source's plugin, or any plugin, got wrong in its ``agentprov_backends``
    hook (it raised, or returned something other than a BackendProject)."""
    plugins = manager()
    plugins.backends()  # records a malformed contribution on the plugin's record
    own = sel.entry(name).plugin
    records = [own, *(r for r in plugins.failed() if r is not own)]
    return [f"{sel.origin(r)}: {r.error}" for r in records
            if r.error and r.error.startswith("agentprov_backends:")]


def _field_problems(project: BackendProject, what: str) -> list[str]:
    """Each field of ``project`` whose value is not of its declared type, as
    ``BackendProject.FIELD of WHAT: …``."""
    out = []
    for f in msgspec.structs.fields(BackendProject):
        value = getattr(project, f.name)
        if f.name in ("task_files", "upstream_paths"):
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v.strip()
                                                       for v in value):
                what_of = ("globs below site-packages" if f.name == "task_files"
                           else "paths of the pinned commit")
                out.append(f"BackendProject.{f.name} of {what}: {value!r} is not a tuple "
                           f"of non-empty strings ({what_of})")
            continue
        if f.name == "dataset":
            if value is not None:
                try:
                    msgspec.convert(msgspec.to_builtins(value), type=BackendDataset)
                except (msgspec.ValidationError, TypeError) as exc:
                    out.append(f"BackendProject.dataset of {what}: {exc}")
            continue
        want = str if f.required else (str, type(None))
        if not isinstance(value, want):
            kind = "a string" if f.required else "a string or None"
            out.append(f"BackendProject.{f.name} of {what}: {value!r} is of type "
                       f"{type(value).__name__}, not {kind}")
        elif isinstance(value, str) and not value.strip() and not (
                f.name == "upstream" and project.unpublished):  # "": not public, and why
            out.append(f"BackendProject.{f.name} of {what}: is empty" + (
                " (an upstream that is not public says why in BackendProject.unpublished)"
                if f.name == "upstream" else ""))
    if project.unpublished and project.upstream:
        out.append(f"BackendProject.unpublished of {what}: set, but upstream names the URL "
                   f"{project.upstream!r} (an upstream that is not public has upstream \"\")")
    return out


def _project(name: str) -> tuple[projects.Located, str]:
    """The one backend project contributed for the source's backend, its fields checked,
    with how the failures name it (``backend 'B' (DIST VERSION)``)."""
    backend = sel.source(name).meta.backend
    plugins = manager()
    found = plugins.backends().get(backend, [])
    own = sel.entry(name).plugin
    # a project of another name that the source's own distribution contributes may be
    # this backend's with a malformed name
    misnamed = [e for key, es in plugins.backends().items() if key != backend for e in es
                if e.plugin.name == own.name and not isinstance(key, str)]
    problems = [p for e in misnamed
                for p in _field_problems(e.project, f"a project of {sel.origin(e.plugin)}")]
    assert not problems, f"source {name!r}: " + "; ".join(problems)
    if not found:
        hooks = _hook_problems(name)
        others = sorted(str(key) for key, es in plugins.backends().items()
                        if any(e.plugin.name == own.name for e in es))
        if others:
            hooks.append(f"{sel.origin(own)} contributes " + ", ".join(map(repr, others)))
        pytest.fail(f"source {name!r}: SourceMeta.backend {backend!r}: no distribution "
                    "contributes a backend project of that name (agentprov_backends hook)"
                    + ("; " + "; ".join(hooks) if hooks else ""), pytrace=False)
    assert len(found) == 1, (
        f"source {name!r}: backend {backend!r} is contributed by more than one distribution ("
        + ", ".join(sel.origin(e.plugin) for e in found) + "): no build can choose between them")
    project = found[0].project
    what = f"backend {backend!r} ({sel.origin(found[0].plugin)})"
    problems = _field_problems(project, what)
    assert not problems, "; ".join(problems)
    loc = projects.locate(backend)
    assert loc is not None
    return loc, what


@pytest.mark.parametrize("name", WITH_BACKEND)
def test_backend_project(name: str) -> None:
    """Exactly one distribution contributes the backend's project, as a BackendProject
    whose fields have their types and whose ``path`` is a directory on this machine."""
    loc, what = _project(name)
    project = loc.entry.project
    if project.package is not None:
        from importlib import resources

        try:
            resources.files(project.package)
        except (ImportError, TypeError, ValueError) as exc:
            pytest.fail(f"BackendProject.package of {what}: {project.package!r} cannot be "
                        f"imported ({type(exc).__name__}: {exc})", pytrace=False)
        assert loc.directory is not None, f"BackendProject.package of {what}: {loc.why}"
        assert loc.present, (f"BackendProject.path of {what}: {project.path!r} is not a "
                             f"directory inside package {project.package}")
    else:
        if loc.directory is None:
            pytest.skip(f"{what}: {loc.why}")
        assert loc.present, (f"BackendProject.path of {what}: {project.path!r} is not a "
                             f"directory of {paths.display(loc.directory.parent)}")


def _lock_packages(lock: dict[str, Any]) -> set[str]:
    from packaging.utils import canonicalize_name

    return {canonicalize_name(p["name"]) for p in lock.get("package", [])
            if isinstance(p, dict) and isinstance(p.get("name"), str)}


@pytest.mark.parametrize("name", WITH_BACKEND)
def test_backend_project_lock(name: str) -> None:
    """The project holds ``pyproject.toml`` and a ``uv.lock`` that records it, does not
    lock the worker host's libraries, and installs the ``worker`` it names."""
    import tomllib

    from packaging.utils import canonicalize_name

    from agentprov_core.backend import hostlibs, lockcheck, slots

    loc, what = _project(name)
    project = loc.entry.project
    if not loc.present:
        pytest.skip(f"{what}: its directory is not at hand (test_backend_project says why)")
    d = loc.directory
    assert d is not None
    where = loc.where
    if not (d / "pyproject.toml").is_file() and not (d / "uv.lock").is_file():
        why = slots.slot_why(d)
        if why is not None:
            pytest.skip(f"{what} is a slot ({where}/{slots.SLOT_FILE}): {why}")
    assert (d / "pyproject.toml").is_file(), (
        f"BackendProject.path of {what}: {where}/ holds no pyproject.toml (and no "
        f"{slots.SLOT_FILE} saying why)")
    try:
        tomllib.loads((d / "pyproject.toml").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        pytest.fail(f"{where}/pyproject.toml of {what} is not TOML: {exc}", pytrace=False)
    if not (d / "uv.lock").is_file():
        if project.pinned_commit:
            pytest.skip(f"{what} is pinned to commit {project.pinned_commit} and not locked "
                        f"yet: {where}/ holds no uv.lock")
        pytest.fail(f"{what}: {where}/ holds no uv.lock (run uv lock there; a project "
                    "without one is named by BackendProject.pinned_commit)", pytrace=False)
    try:
        lock = tomllib.loads((d / "uv.lock").read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        pytest.fail(f"{where}/uv.lock of {what} is not TOML: {exc}", pytrace=False)
    diffs = lockcheck.differences(d)
    assert not diffs, (f"{where}/uv.lock of {what} does not record what pyproject.toml "
                       "declares (run uv lock): " + "; ".join(diffs))
    packages = _lock_packages(lock)
    host = sorted(hostlibs.NAMES & packages)
    assert not host, (
        f"{where}/uv.lock of {what} locks {', '.join(host)}, the worker host's own "
        "libraries, which agentprov backends build installs itself: drop them from the "
        "project")
    if project.worker is not None:
        assert canonicalize_name(project.worker) in packages, (
            f"BackendProject.worker of {what}: {project.worker!r} is not a distribution "
            f"{where}/uv.lock installs (add it to the project's dependencies, with a path "
            "source for a worker package beside it)")
