"""The contract every source plugin passes.

Run it over every installed source, or over one (``AGENTPROV_CONTRACT_SOURCE=NAME``, as tox
does per plugin package)::

    pytest -p no:cacheprovider --pyargs agentprov_core.testing.contract
    AGENTPROV_CONTRACT_SOURCE=mybench pytest -p no:cacheprovider --pyargs agentprov_core.testing.contract

(or give the file's path: ``pytest $(python -c 'import agentprov_core.testing.contract as m;
print(m.__file__)')``; pytest collects a file named on its command line whatever its name).

What is checked, per source:

* its metadata: a frozen :class:`~agentprov_core.source.SourceMeta` whose name is the
  entry-point name, with a label, a summary and a live status;
* for a source with a backend: its catalogue (format, names, provenance, unique task ids
  sortable by their number, unique attacks whose flags agree), and
  ``agentprov run NAME --catalogue`` prints it and writes nothing (R-7.11);
* for a suite source: the expansion order (R-7.2), one cell per user task for a DoS attack
  (R-7.3), every refused attack refused with exit 5 and nothing written, an attack's
  required options refused as usage (exit 2) when missing;
* for an Inspect source: a plan without limits is refused with exit 2 (R-25.18), and
  cells hold at most ``cell_size`` samples (R-25.4);
* for a source without a backend: ``--catalogue`` and a scripted dry run exit 5.

The expansion checks call the source in-process; the refusals run the real CLI in a
subprocess, with a private ``$AGENTPROV_HOME`` that must stay empty.
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
from agentprov_core.catalogue import Attack, Catalogue, Suite
from agentprov_core.errors import AgentprovError
from agentprov_core.plan import taskspec
from agentprov_core.plan.plandoc import InspectPlan, PlanDoc
from agentprov_core.plugins import SourceEntry, manager
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
    installed = _installed()
    return [n for n in _selected() if n in installed and predicate(installed[n].source.meta)]


SELECTED = _selected()
INSTALLED = _where(lambda m: True)
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


def _need_values(attack: Attack, where: Path) -> dict[str, Any]:
    """A value for each option ``attack`` needs: a file for a path, 0 for an integer."""
    fields = {f.name: f.type for f in msgspec.structs.fields(PlanDoc)}
    values: dict[str, Any] = {}
    for option in attack.needs:
        field = option.lstrip("-").replace("-", "_")
        if int in typing.get_args(fields[field]):
            values[field] = 0
        else:
            path = where / f"{field}.need"
            path.write_text("{}")
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
    assert type(meta) is SourceMeta
    with pytest.raises(AttributeError):
        meta.name = "changed"  # type: ignore[misc]
    assert meta.name == entry.plugin.name, (
        f"source {meta.name!r} comes from the entry point {entry.plugin.name!r}: by "
        "convention the entry-point name is the source's name")
    assert meta.label.strip() and meta.summary.strip()
    assert meta.live_status in LIVE_ORDER
    assert meta.kind in ("suites", "inspect")
    assert meta.llm_elements, "a source runs at least one LLM element"
    # snapshotted into every corpus manifest: it must survive a JSON round trip
    assert msgspec.json.decode(msgspec.json.encode(meta), type=SourceMeta) == meta


# ------------------------------------------------------------------ with a backend
@_req("R-7.12")
@pytest.mark.parametrize("name", WITH_BACKEND)
def test_catalogue(name: str) -> None:
    src = _source(name)
    cat = src.catalogue()
    assert isinstance(cat, Catalogue)
    assert cat.format == catmod.FORMAT
    assert (cat.source, cat.backend) == (src.meta.name, src.meta.backend)
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
        assert cat.suites and not cat.tasks
        _default_suite(cat)
    else:
        assert cat.tasks and not cat.suites and not cat.attacks
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
    printed = msgspec.json.decode(done.stdout, type=Catalogue)
    own = _source(name).catalogue()
    # the defence registry, not the plugin, is authoritative for defences
    assert msgspec.structs.replace(printed, defences=[]) == msgspec.structs.replace(
        own, defences=[])
    contract_cli.assert_nothing_written()


# ------------------------------------------------------------------------ suite sources
@_req("R-7.13")
@pytest.mark.parametrize("name", SUITES)
def test_attacks(name: str) -> None:
    cat = _source(name).catalogue()
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
    cat = src.catalogue()
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
    cells = src.expand(doc, cat, ctx)
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
    assert [_row(c) for c in src.expand(doc, cat, ctx)] == expected


@_req("R-7.3")
@pytest.mark.parametrize("name", SUITES)
def test_dos_attack_takes_one_cell_per_user_task(name: str) -> None:
    src = _source(name)
    cat = src.catalogue()
    dos = _runnable(cat, dos=True)
    if not dos:
        pytest.skip(f"{name}: no DoS attack that runs without options")
    suite = _default_suite(cat)
    doc = _plan(name, suites=[suite.name], attacks=[dos[0].name], benign="exclude")
    cells = src.expand(doc, cat, RunContext())
    first = taskspec.sort_tasks(suite.injection_tasks)[:1]
    assert len(cells) == len(suite.user_tasks)
    assert {c.kind for c in cells} == {"dos"}
    assert [c.user_task_id for c in cells] == taskspec.sort_tasks(suite.user_tasks)
    assert {c.injection_task_id for c in cells} == set(first or [None])


@_req("R-7.13", "R-16.2")
@pytest.mark.parametrize("name", SUITES)
def test_refused_attacks_exit_5(name: str, tmp_path: Path) -> None:
    """Every attack the catalogue marks refused is refused before anything starts."""
    cat = _source(name).catalogue()
    refused = [a for a in cat.attacks if a.refused]
    if not refused:
        pytest.skip(f"{name}: the catalogue refuses no attack")
    suite = _default_suite(cat)
    for i, attack in enumerate(refused):
        cli = Cli(tmp_path / str(i))
        extra: list[str] = []
        for field, value in _need_values(attack, tmp_path).items():
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
    cat = src.catalogue()
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
        src.check_plan(_plan(name, **base, **_need_values(attack, tmp_path)), cat,
                       RunContext())


# ---------------------------------------------------------------------- Inspect sources
@_req("R-25.18")
@pytest.mark.parametrize("name", INSPECT)
def test_inspect_plan_without_limits_exit_2(name: str, contract_cli: Cli) -> None:
    task = _source(name).catalogue().tasks[0]
    done = contract_cli.dry_run(name, "--task", task.name, "--samples", "limit:1")
    error = contract_cli.refused(done, 2, "cli.usage.backend_plan")
    assert "[inspect].limits: missing key(s)" in error["message"]


@_req("R-25.4")
@pytest.mark.parametrize("name", INSPECT)
def test_inspect_cells_hold_at_most_cell_size_samples(name: str) -> None:
    src = _source(name)
    cat = src.catalogue()
    task = cat.tasks[0]
    size = {s.name: s.samples for s in task.splits}[task.default_split]
    n = min(3, size)
    limits = {k: lo for k, (lo, _hi) in INSPECT_LIMITS.items()}
    judges = {role: "scripted" for role in task.judge_roles}
    doc = _plan(name, inspect=InspectPlan(task=task.name, samples=f"limit:{n}", cell_size=2,
                                          limits=limits, judges=judges))
    src.check_plan(doc, cat, RunContext())
    cells = src.expand(doc, cat, RunContext())
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
