"""Cell expansion, task SPECs and the plan and configuration digests (in-process: the
environment check is replaced by a fixed environment id; everything else is real)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, fake_identity

from agentprov_core.backend import environments
from agentprov_core.base import paths
from agentprov_core.run import prepare as planning
from agentprov_core.run.runrequest import RunRequest


@pytest.fixture(autouse=True)
def built(monkeypatch, tmp_path):
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))  # outside the repository


SCRIPT = str(ROOT / "examples" / "scripts" / "live-demo.json")


def plan(source="agentdojo", given=(), **options):
    # under the home: a restricted source's corpus (agentharm's) stays there
    options.setdefault("corpus", str(paths.home() / "corpora" / "c"))
    options.setdefault("campaign", "demo")
    if not any(options.get(k) for k in ("model", "endpoint")):
        options.setdefault("llm_script", SCRIPT)
    return planning.prepare(RunRequest.of(source, options, set(given) | set(options))).plan


def keys(p):
    return [c.key for c in p.cells]


@pytest.mark.req("R-7.2", "R-8.6", "R-7.1", "R-8.13", "R-8.7")
def test_the_spec_example_expands_in_order():
    p = plan(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
             injection_tasks="0")
    assert keys(p) == [
        "banking/user_task_0/none/none", "banking/user_task_1/none/none",
        "banking/user_task_0/important_instructions/injection_task_0",
        "banking/user_task_1/important_instructions/injection_task_0"]
    assert (p.units, p.attempts_due, p.corpus_id) == (4, 12, "agentdojo-live-demo")
    assert p.benchmark_version == "v1.2.2"


@pytest.mark.req("R-7.2")
def test_order_is_per_suite_then_attack_then_user_then_injection():
    p = plan(suite=("slack,banking",), user_tasks="0-1", injection_tasks="0-1",
             attack=("direct,important_instructions",))
    ks = keys(p)
    assert ks[:2] == ["slack/user_task_0/none/none", "slack/user_task_1/none/none"]
    # slack has no injection_task_0: index 0 is injection_task_1 (tasks sorted by number)
    assert ks[2:6] == ["slack/user_task_0/direct/injection_task_1",
                       "slack/user_task_0/direct/injection_task_2",
                       "slack/user_task_1/direct/injection_task_1",
                       "slack/user_task_1/direct/injection_task_2"]
    assert ks[6].startswith("slack/user_task_0/important_instructions/")
    assert ks[10] == "banking/user_task_0/none/none"
    assert len(ks) == 20


@pytest.mark.req("R-7.3")
def test_a_dos_attack_takes_one_cell_per_user_task():
    p = plan(suite=("banking",), user_tasks="0-2", injection_tasks="all", attack=("dos",),
             benign="exclude")
    assert keys(p) == [f"banking/user_task_{i}/dos/injection_task_0" for i in range(3)]
    assert {c.kind for c in p.cells} == {"dos"}


@pytest.mark.req("R-7.7", "R-7.6")
def test_benign_include_exclude_only():
    base = dict(suite=("banking",), user_tasks="0", injection_tasks="0-1",
                attack=("direct",))
    assert len(plan(**base).cells) == 3
    assert len(plan(**base, benign="exclude").cells) == 2
    assert keys(plan(suite=("banking",), user_tasks="0", benign="only")) == [
        "banking/user_task_0/none/none"]
    assert keys(plan(suite=("banking",), user_tasks="0")) == ["banking/user_task_0/none/none"]


@pytest.mark.req("R-7.5")
def test_task_specs_ids_ranges_and_mixtures():
    p = plan(suite=("banking",), user_tasks="user_task_3,0-1,5,1")
    assert keys(p) == [f"banking/user_task_{i}/none/none" for i in (0, 1, 3, 5)]
    # indices count over tasks sorted by number, not by string
    p = plan(suite=("banking",), user_tasks="10-11")
    assert keys(p) == ["banking/user_task_10/none/none", "banking/user_task_11/none/none"]
    assert len(plan(suite=("workspace",)).cells) == 40


@pytest.mark.req("R-7.4")
def test_benchmark_version_selects_the_task_set():
    p = plan(suite=("workspace",), user_tasks="0", attack=("direct",), benign="exclude",
             benchmark_version="v1")
    assert len(p.cells) == 6  # v1's workspace has 6 injection tasks, v1.2.2 has 14
    assert p.benchmark_version == "v1"
    assert len(plan(suite=("workspace",), user_tasks="0", attack=("direct",),
                    benign="exclude").cells) == 14


@pytest.mark.req("R-7.8", "R-8.13")
def test_repeats_multiply_units_and_attempts():
    p = plan(suite=("banking",), user_tasks="0-1", repeats=3, max_attempts=2)
    assert (len(p.cells), p.repeats, p.units, p.attempts_due) == (2, 3, 6, 12)


@pytest.mark.req("R-8.10", "R-8.12", "R-22.29")
def test_digests_depend_on_cells_and_defence_not_on_corpus():
    a = plan(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
             injection_tasks="0")
    b = plan(suite=("banking",), user_tasks="user_task_0,user_task_1",
             attack=("important_instructions",), injection_tasks="injection_task_0",
             corpus="/tmp/other/place", campaign="other")
    assert a.plan_sha256 == b.plan_sha256 and a.config_digest == b.config_digest
    d = plan(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
             injection_tasks="0", defence="spotlighting_with_delimiting")
    assert d.plan_sha256 != a.plan_sha256
    assert d.config_digest == a.config_digest  # decision 9
    c = plan(suite=("banking",), user_tasks="0-2", attack=("important_instructions",),
             injection_tasks="0")
    assert c.plan_sha256 != a.plan_sha256 and c.config_digest == a.config_digest


@pytest.mark.req("R-8.11")
def test_config_digest_changes_with_the_agent_and_the_backend_identity(monkeypatch):
    base = dict(suite=("banking",), user_tasks="0")
    a = plan(**base)
    b = plan(**base, llm_element="gateway_compat")
    assert a.config_digest != b.config_digest and a.plan_sha256 != b.plan_sha256
    monkeypatch.setattr(environments, "backend_identity", fake_identity("11111111"))
    c = plan(**base)
    assert c.config_digest != a.config_digest
    # the display name is an attack parameter, not configuration: re-running with it resumes
    assert plan(**base, model_display_name="Scripted Model").config_digest == c.config_digest


def test_digests_are_stable_across_processes_and_machines(tmp_path):
    code = ("import json; from agentprov_core.backend import environments; from agentprov_core.run import prepare as planning;"
            "from agentprov_core.run.runrequest import RunRequest;"
            "environments.backend_identity = lambda m: ('agentdojo-00000000',"
            " {'environment_id': 'agentdojo-00000000'});"
            "o = dict(suite=('banking',), user_tasks='0-1', attack=('important_instructions',),"
            f" injection_tasks='0', llm_script={SCRIPT!r}, corpus='/x/c', campaign='demo');"
            "p = planning.prepare(RunRequest.of('agentdojo', o, set(o))).plan;"
            "print(json.dumps([p.plan_sha256, p.config_digest]))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=cwd, env={"PYTHONHASHSEED": seed, "HOME": str(tmp_path),
                                         "PATH": "/usr/bin:/bin"}, check=True).stdout
            for cwd, seed in ((ROOT, "1"), (tmp_path, "2"))}
    assert len(outs) == 1
    p = plan(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
             injection_tasks="0", corpus="/x/c")
    assert json.loads(outs.pop()) == [p.plan_sha256, p.config_digest]


@pytest.mark.req("R-8.16", "R-8.17", "R-8.18", "R-8.19")
def test_dry_plan_document_shape():
    p = plan(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
             injection_tasks="0")
    doc = p.dry_plan()
    assert sorted(doc) == ["attempts_due", "backend", "benchmark_version", "cells",
                           "config_digest", "corpus_id", "format", "max_attempts",
                           "plan_sha256", "repeats", "settled", "units"]
    assert doc["format"] == "agentprov-run-dry-plan/0.1"
    assert doc["config_digest"].startswith("sha256:")
    assert doc["cells"][0] == {"attack": None, "cell_key": "banking/user_task_0/none/none",
                               "injection_task_id": None, "kind": "user_task", "settled": 0,
                               "suite": "banking", "user_task_id": "user_task_0"}
    assert doc["cells"][2]["attack"] == "important_instructions"
    lines = planning.plan_lines(p)
    assert lines[0] == (f"plan {p.plan_sha256[:16]}...: 4 cell(s) x 1 repeat(s); corpus "
                        "agentdojo-live-demo; backend agentdojo-00000000")
    assert lines[1] == (f"  config digest sha256:{p.config_digest[:16]}...; 0 unit(s) already "
                        "settled; up to 12 attempt(s) due (--max-attempts 3)")
    assert lines[2:] == [f"  cell {k}" for k in keys(p)]


@pytest.mark.req("R-25.4", "R-25.21", "R-25.16")
def test_agentharm_cells_of_cell_size_samples(tmp_path, monkeypatch, landed_env):
    from types import SimpleNamespace

    monkeypatch.setattr(environments, "read_marker",
                        lambda meta, env_id: SimpleNamespace(probe={}))  # --containment vm
    env_file = tmp_path / ".env"
    env_file.write_text("OPENROUTER_API_KEY=sk-test-planning\n")
    opts = dict(task="inspect_evals/agentharm", samples="limit:5", message_limit=10,
                token_limit=20000, time_limit=600,
                judge=("refusal_judge=m", "semantic_judge=m"))
    p = plan("agentharm", **opts, cell_size=2)
    assert [len(c.samples) for c in p.cells] == [2, 2, 1]
    assert all(len(c.key) == 16 for c in p.cells)
    assert len(plan("agentharm", **opts).cells) == 1          # default 25
    capped = plan("agentharm", **opts, model="openrouter", model_id="m", max_calls=100,
                  max_cost_usd=1.0, price_in=0.15, price_out=0.6, llm_script=None,
                  env_file=str(env_file), containment="vm")
    assert len(capped.cells) == 5                              # 1 under caps
    ids = plan("agentharm", **{**opts, "samples": "1-1,2-3"}, cell_size=1)
    assert [c.samples for c in ids.cells] == [({"id": "1-1"},), ({"id": "2-3"},)]


@pytest.mark.req("R-7.9")
def test_one_defence_for_the_whole_plan():
    """``--defence NAME`` is one value of the plan: every unit of every cell and repeat runs
    it, so a defended plan shares no unit with the undefended one."""
    from collections import Counter
    from types import SimpleNamespace

    from agentprov_core.run import units as unitsmod

    base = dict(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
                injection_tasks="0", repeats=2)
    defended = plan(**base, defence="spotlighting_with_delimiting")
    assert defended.defence == "spotlighting_with_delimiting"
    units, _ = unitsmod.due_units(SimpleNamespace(plan=defended), set(), Counter())
    assert len(units) == defended.units == 8
    assert {u.key.split("|")[1] for u in units} == {"spotlighting_with_delimiting"}
    assert {u.key.split("|")[0] for u in units} == set(keys(defended))
    plain, _ = unitsmod.due_units(SimpleNamespace(plan=plan(**base)), set(), Counter())
    assert {u.key.split("|")[1] for u in plain} == {"none"}
    assert not {u.key for u in units} & {u.key for u in plain}


INSPECT = dict(task="inspect_evals/agentharm", samples="limit:2", message_limit=10,
               token_limit=20000, time_limit=600,
               judge=("refusal_judge=example-model", "semantic_judge=example-model"))


@pytest.mark.req("R-25.33", "R-25.35", "R-25.39")
def test_the_specs_inspect_dry_run_example(landed_env):
    """The specification's AgentHarm dry run (scripted, no caps): two samples at
    ``--cell-size 1`` are two cells named by an id, up to 6 attempts, in corpus
    ``agentharm-live-ah``; without ``--cell-size`` (25 when there are no caps) they are one
    cell of two."""
    p = plan("agentharm", **INSPECT, cell_size=1, campaign="ah")
    assert (len(p.cells), p.repeats, p.attempts_due) == (2, 1, 6)
    assert p.corpus_id == "agentharm-live-ah"
    assert [c.samples for c in p.cells] == [({"index": 0},), ({"index": 1},)]
    ids = keys(p)
    assert len(set(ids)) == 2 and all(len(k) == 16 and int(k, 16) >= 0 for k in ids)
    assert planning.plan_lines(p)[2:] == [f"  cell {k}" for k in ids]
    whole = plan("agentharm", **INSPECT, campaign="ah")
    assert [len(c.samples) for c in whole.cells] == [2]
    assert whole.attempts_due == 3 and whole.plan_sha256 != p.plan_sha256


@pytest.mark.req("R-25.14")
def test_an_inspect_plan_names_a_catalogue_task(landed_env):
    from agentprov_core.errors import AgentprovError

    def refused(**options) -> str:
        with pytest.raises(AgentprovError) as e:
            plan("agentharm", **options)
        assert (e.value.code, e.value.exit_code) == ("cli.usage.backend_plan", 2)
        return e.value.message

    no_task = {k: v for k, v in INSPECT.items() if k != "task"}
    assert refused(**no_task) == (
        "the backend refused the plan: [inspect].task: missing (--task NAME; tasks: "
        "inspect_evals/agentharm, inspect_evals/agentharm_benign)")
    assert "[inspect].task: 'agentharm' is not a catalogue task" in refused(
        **INSPECT | {"task": "agentharm"})
    assert refused(**{k: v for k, v in INSPECT.items() if k != "samples"}).endswith(
        "[inspect].samples: missing (--samples limit:N or ID,ID…)")
    assert plan("agentharm", **INSPECT | {"task": "inspect_evals/agentharm_benign"}).cells
