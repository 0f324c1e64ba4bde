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
  entry-point name, with a label, a summary and a live status;
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
  named by its JSON path) of this source; it accepts a plan of each suite's first user
  task, and rejects a cell with an unknown user task naming that task.

Each failure names the source, the field and, for a backend project, the distribution that
contributed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
import warnings
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
from agentprov_core.plugins import PluginRecord, SourceEntry, manager
from agentprov_core.source import INSPECT_LIMITS, LIVE_ORDER, RunContext, Source, SourceMeta

ENV = "AGENTPROV_CONTRACT_SOURCE"
PROVENANCE_KINDS = ("snapshot", "declared", "worker")


def _req(*rids: str):
    """Mark a check with the R-ids it proves, where the ``req`` marker is registered (as
    in agentprov's own pyproject); elsewhere the check runs unmarked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        try:
            return pytest.mark.req(*rids)
        except pytest.fail.Exception:  # --strict-markers and no such marker
            return lambda f: f


# -------------------------------------------------------------------- which sources
def _installed() -> dict[str, SourceEntry]:
    return manager().sources()


def _selected() -> list[str]:
    """The named source, else every installed source and every plugin that failed to load
    (by its entry-point name, which by convention is its source's name)."""
    only = os.environ.get(ENV, "").strip()
    if only:
        return [only]
    return sorted(set(_installed()) | {r.name for r in manager().failed()})


def _where(predicate) -> list[str]:
    """The selected installed sources whose metadata is a SourceMeta and satisfies
    ``predicate`` (a malformed one fails :func:`test_metadata`, and only that)."""
    installed = _installed()
    out = []
    for n in _selected():
        meta = getattr(installed[n].source, "meta", None) if n in installed else None
        if isinstance(meta, SourceMeta) and predicate(meta):
            out.append(n)
    return out


SELECTED = _selected()
INSTALLED = [n for n in SELECTED if n in _installed()]
WITH_BACKEND = _where(lambda m: m.backend is not None)
SUITES = _where(lambda m: m.backend is not None and m.kind == "suites")
INSPECT = _where(lambda m: m.backend is not None and m.kind == "inspect")
NO_BACKEND = _where(lambda m: m.backend is None)


def _entry(name: str) -> SourceEntry:
    entry = _installed().get(name)
    if entry is None:
        pytest.fail(_not_installed(name))
    return entry


def _source(name: str) -> Source:
    return _entry(name).source


def _not_installed(name: str) -> str:
    plugins = manager()
    rec = plugins.record(name)
    if rec is not None and rec.status == "failed":
        return (f"source {name!r}: its plugin {rec.distribution} {rec.version} failed to load: "
                f"{rec.error}")
    if rec is not None:
        return f"source {name!r}: its plugin is {rec.status} (AGENTPROV_* variables)"
    return (f"source {name!r} is not installed; installed sources: "
            + (", ".join(sorted(_installed())) or "none"))


# ------------------------------------------------------------------------- helpers
def _converted(doc: Any, type_: type, what: str) -> Any:
    """``doc`` converted to ``type_``, or a failure naming ``what`` and the JSON path of the
    first field that does not convert (msgspec's ``at $.suites[0].name``)."""
    try:
        return msgspec.convert(doc, type=type_)
    except msgspec.ValidationError as exc:
        pytest.fail(f"{what}: {exc}", pytrace=False)


def _revalidated(value: Any, type_: type, what: str) -> Any:
    """A struct the plugin built (msgspec does not check types on construction) checked
    field by field: it must be a ``type_`` and survive conversion from its builtins."""
    assert type(value) is type_, (
        f"{what} is a {type(value).__name__}, not a {type_.__module__}.{type_.__name__}")
    try:
        builtins = msgspec.to_builtins(value)
    except TypeError as exc:
        pytest.fail(f"{what} holds a value that is not JSON data: {exc}", pytrace=False)
    return _converted(builtins, type_, what)


def _catalogue(name: str) -> Catalogue:
    """The source's catalogue, checked to be a well-typed Catalogue."""
    src = _source(name)
    try:
        cat = src.catalogue()
    except Exception as exc:
        pytest.fail(f"source {name!r}: catalogue() raised {type(exc).__name__}: {exc}",
                    pytrace=False)
    _revalidated(cat, Catalogue, f"source {name!r}: catalogue()")
    return cat


def _expand(src: Source, doc: PlanDoc, cat: Catalogue) -> list[Any]:
    """The source's cells for ``doc``, checked to be a list of :class:`Cell`."""
    from agentprov_core.plan.plans import Cell

    cells = src.expand(doc, cat, RunContext())
    name = src.meta.name
    assert isinstance(cells, list), (
        f"source {name!r}: expand() returned a {type(cells).__name__}, not a list of Cell")
    for i, c in enumerate(cells):
        assert isinstance(c, Cell), (
            f"source {name!r}: expand()[{i}] is a {type(c).__name__}, not a "
            "agentprov_core.plan.plans.Cell")
    return cells


def _default_suite(cat: Catalogue) -> Suite:
    version = cat.default_benchmark_version or ""
    suites = cat.suites_of(version)
    assert suites, f"no suite at the default benchmark version {version!r}"
    return suites[0]


def _runnable(cat: Catalogue, dos: bool) -> list[Attack]:
    """Attacks a plan can take with no further option and no refusal."""
    return [a for a in cat.attacks if not a.refused and not a.needs and a.dos == dos]


def _plan(name: str, **fields: Any) -> PlanDoc:
    return msgspec.convert(dict(fields, backend=name), type=PlanDoc)


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
    assert name in _installed(), _not_installed(name)


@pytest.mark.parametrize("name", INSTALLED)
def test_metadata(name: str) -> None:
    entry = _entry(name)
    meta = entry.source.meta
    _revalidated(meta, SourceMeta, f"source {name!r}: meta")
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
    src = _source(name)
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
    src = _source(name)
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
    doc = _plan(name, suites=[suite.name], user_tasks="0", injection_tasks="0",
                attacks=[attack])
    src.check_plan(doc, cat, ctx)
    src.refusals(doc, cat, ctx)
    cells = _expand(src, doc, cat)
    assert [_row(c) for c in cells] == [
        ("user_task", suite.name, users[0], None, None),
        ("attacked", suite.name, users[0], attack, injs[0]),
    ]
    assert len({c.key for c in cells}) == len(cells)

    # two user tasks, two injection tasks, an attack and (if any) a DoS attack
    us, js = users[:2], injs[:2]
    attacks = [attack] + [a.name for a in _runnable(cat, dos=True)[:1]]
    doc = _plan(name, suites=[suite.name], user_tasks=",".join(us),
                injection_tasks=",".join(js), attacks=attacks)
    src.check_plan(doc, cat, ctx)
    expected = [("user_task", suite.name, u, None, None) for u in us]
    for a in attacks:
        if cat.attack(a).dos:
            expected += [("dos", suite.name, u, a, injs[0]) for u in us]
        else:
            expected += [("attacked", suite.name, u, a, j) for u in us for j in js]
    assert [_row(c) for c in _expand(src, doc, cat)] == expected


@_req("R-7.3")
@pytest.mark.parametrize("name", SUITES)
def test_dos_attack_takes_one_cell_per_user_task(name: str) -> None:
    src = _source(name)
    cat = _catalogue(name)
    dos = _runnable(cat, dos=True)
    if not dos:
        pytest.skip(f"{name}: no DoS attack that runs without options")
    suite = _default_suite(cat)
    doc = _plan(name, suites=[suite.name], attacks=[dos[0].name], benign="exclude")
    cells = _expand(src, doc, cat)
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
    src = _source(name)
    cat = _catalogue(name)
    needing = [a for a in cat.attacks if a.needs and not a.refused]
    if not needing:
        pytest.skip(f"{name}: no attack needs options")
    suite = _default_suite(cat)
    for attack in needing:
        base = {"suites": [suite.name], "user_tasks": "0", "injection_tasks": "0",
                "attacks": [attack.name]}
        with pytest.raises(AgentprovError) as refused:
            src.check_plan(_plan(name, **base), cat, RunContext())
        assert refused.value.exit_code == 2, refused.value.code
        values = _need_values(attack, tmp_path, suite.injection_tasks[0])
        src.check_plan(_plan(name, **base, **values), cat, RunContext())


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
    src = _source(name)
    cat = _catalogue(name)
    task = cat.tasks[0]
    splits = {s.name: s.samples for s in task.splits}
    assert task.default_split in splits, (
        f"source {name!r}: InspectTask.default_split of {task.name!r} names no split")
    size = splits[task.default_split]
    n = min(3, size)
    limits = {k: lo for k, (lo, _hi) in INSPECT_LIMITS.items()}
    judges = {role: "scripted" for role in task.judge_roles}
    doc = _plan(name, inspect=InspectPlan(task=task.name, samples=f"limit:{n}", cell_size=2,
                                          limits=limits, judges=judges))
    src.check_plan(doc, cat, RunContext())
    cells = _expand(src, doc, cat)
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
def _origin(rec: PluginRecord) -> str:
    """The contributing distribution, as the failures name it."""
    return f"{rec.distribution} {rec.version}" if rec.distribution else f"plugin {rec.name}"


def _hook_problems(name: str) -> list[str]:
    """What the source's plugin, or any plugin, got wrong in its ``agentprov_backends``
    hook (it raised, or returned something other than a BackendProject)."""
    plugins = manager()
    plugins.backends()  # records a malformed contribution on the plugin's record
    own = _entry(name).plugin
    records = [own, *(r for r in plugins.failed() if r is not own)]
    return [f"{_origin(r)}: {r.error}" for r in records
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
    backend = _source(name).meta.backend
    plugins = manager()
    found = plugins.backends().get(backend, [])
    own = _entry(name).plugin
    # a project of another name that the source's own distribution contributes may be
    # this backend's with a malformed name
    misnamed = [e for key, es in plugins.backends().items() if key != backend for e in es
                if e.plugin.name == own.name and not isinstance(key, str)]
    problems = [p for e in misnamed
                for p in _field_problems(e.project, f"a project of {_origin(e.plugin)}")]
    assert not problems, f"source {name!r}: " + "; ".join(problems)
    if not found:
        hooks = _hook_problems(name)
        others = sorted(str(key) for key, es in plugins.backends().items()
                        if any(e.plugin.name == own.name for e in es))
        if others:
            hooks.append(f"{_origin(own)} contributes " + ", ".join(map(repr, others)))
        pytest.fail(f"source {name!r}: SourceMeta.backend {backend!r}: no distribution "
                    "contributes a backend project of that name (agentprov_backends hook)"
                    + ("; " + "; ".join(hooks) if hooks else ""), pytrace=False)
    assert len(found) == 1, (
        f"source {name!r}: backend {backend!r} is contributed by more than one distribution ("
        + ", ".join(_origin(e.plugin) for e in found) + "): no build can choose between them")
    project = found[0].project
    what = f"backend {backend!r} ({_origin(found[0].plugin)})"
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


# -------------------------------------------------------------------- the worker side
def _built(name: str) -> str:
    """The id of the source's backend environment built in ``$AGENTPROV_HOME``, or skip
    saying how to build it."""
    from agentprov_core.backend import environments, slots
    from agentprov_core.backend.marker import MARKER

    meta = _source(name).meta
    try:
        loc = projects.locate(meta.backend) if meta.backend else None
    except AgentprovError:  # contributed twice: the project checks name it
        loc = None
    unpublished = loc.entry.project.unpublished if loc is not None else None
    build = (f"build it with `agentprov backends build {meta.backend}"
             + (f" --source-repo URL` (a copy of its upstream: {unpublished})" if unpublished
                else "`"))
    try:
        why = slots.unbuildable(meta)
    except AgentprovError as exc:  # a malformed slot file: the lock check names it
        why = exc.message
    if why is not None:
        pytest.skip(f"source {name!r}: backend {meta.backend!r} cannot be built in this "
                    f"build: {why}")
    try:
        env_id = environments.environment_id(meta)
    except AgentprovError as exc:
        pytest.skip(f"source {name!r}: no environment id for backend {meta.backend!r} "
                    f"({exc.message})")
    env_dir = environments.environment_dir(env_id)
    if not (env_dir / MARKER).is_file():
        pytest.skip(f"source {name!r}: backend environment {env_id} is not built in "
                    f"$AGENTPROV_HOME ({paths.home()}): {build}, then run the suite again")
    return env_id


def _worker_catalogue(name: str, doc: Any, env_id: str) -> Catalogue:
    """The catalogue the worker served, converted (the bad field named by its JSON path)."""
    cat = _converted(doc, Catalogue,
                     f"source {name!r}: catalogue served by the worker of {env_id}")
    assert cat.source == name, (
        f"source {name!r}: catalogue served by the worker of {env_id}: $.source is "
        f"{cat.source!r}, not {name!r}")
    return cat


#: a user task id no catalogue holds, for the plan the worker must reject
UNKNOWN_TASK = "user_task_contract_unknown_0"


@pytest.mark.parametrize("name", WITH_BACKEND)
def test_worker_serves_the_source(name: str) -> None:
    """The built environment's worker (no keys, no network, its hello checked against the
    marker) serves the source from the project's worker package, serves a catalogue of it,
    accepts a plan of each suite's first user task and rejects an unknown user task."""
    from packaging.utils import canonicalize_name

    from agentprov_core.backend import session
    from agentprov_core.plan.plans import Cell

    env_id = _built(name)
    src = _source(name)
    meta = src.meta
    want = getattr(projects.locate(meta.backend), "entry", None)
    worker = want.project.worker if want is not None else None
    try:
        with session.plan_check(meta, env_id) as pc:
            served = pc.hello.get("served")
            mine = served.get(name) if isinstance(served, dict) else None
            mine = mine if isinstance(mine, dict) else {}
            if mine.get("error"):
                pytest.fail(f"source {name!r}: the worker of {env_id} cannot serve it: "
                            f"{mine['error']}", pytrace=False)
            assert pc.serves, (
                f"source {name!r}: the worker of {env_id} does not serve it (its hello's "
                f"sources: {', '.join(pc.hello.get('sources') or []) or 'none'}): no worker "
                "package in the environment registers it (entry-point group "
                f"agentprov.worker, name {name})")
            if worker is not None:
                assert mine.get("distribution") == canonicalize_name(worker), (
                    f"source {name!r}: the worker of {env_id} serves it from "
                    f"{mine.get('distribution')} ({mine.get('entry_point')}), not from "
                    f"BackendProject.worker {worker!r}")
            cat = _worker_catalogue(name, pc.catalogue_document(), env_id)
            if meta.kind == "suites":
                version = cat.default_benchmark_version
                suites = [s for s in cat.suites_of(version or "") if s.user_tasks]
                assert suites, (f"source {name!r}: the catalogue served by the worker of "
                                f"{env_id} has no suite with user tasks at {version!r}")
                cells = [Cell.suite_cell("user_task", s.name,
                                         taskspec.sort_tasks(s.user_tasks)[0], None, None)
                         for s in suites]
                bad = Cell.suite_cell("user_task", suites[0].name, UNKNOWN_TASK, None, None)
                asked = None
            else:
                assert cat.tasks, (f"source {name!r}: the catalogue served by the worker of "
                                   f"{env_id} has no task")
                task = cat.tasks[0]
                doc = _plan(name, inspect=InspectPlan(
                    task=task.name, samples="limit:1", cell_size=1,
                    limits={k: lo for k, (lo, _hi) in INSPECT_LIMITS.items()},
                    judges={role: "scripted" for role in task.judge_roles}))
                version, cells, bad = None, _expand(src, doc, cat), None
                asked = session.inspect_request(doc)
            problems = pc.plan_problems(version, cells, asked)
            assert problems == [], (
                f"source {name!r}: the worker of {env_id} rejects a plan of "
                + ", ".join(c.key for c in cells) + ": " + "; ".join(map(str, problems)))
            if bad is not None:
                problems = pc.plan_problems(version, [bad])
                assert any(UNKNOWN_TASK in str(p) for p in problems), (
                    f"source {name!r}: the worker of {env_id} accepts the cell {bad.key}, "
                    f"whose user task {UNKNOWN_TASK!r} its catalogue does not hold "
                    f"(problems: {problems})")
    except AgentprovError as exc:
        pytest.fail(f"source {name!r}: the worker of {env_id}: [{exc.code}] {exc.message}",
                    pytrace=False)
