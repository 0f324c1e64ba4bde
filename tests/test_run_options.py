"""A run's options are parsed once into one frozen, typed value at the command line, and
``prepare`` runs each check of the order once (in-process: the environment check is
replaced by a fixed environment id; everything else is real)."""

import dataclasses

import msgspec
import pytest
from conftest import ROOT, fake_identity

from agentprov_core.backend import environments
from agentprov_core.base import paths
from agentprov_core.run import prepare as planning
from agentprov_core.run.options import RunOptions
from agentprov_core.run.runrequest import RunRequest

SCRIPT = str(ROOT / "examples" / "scripts" / "live-demo.json")


@pytest.fixture(autouse=True)
def built(monkeypatch, tmp_path):
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))  # outside the repository


def request(**options) -> RunRequest:
    o = {"corpus": str(paths.home() / "corpora" / "c"), "campaign": "demo",
         "llm_script": SCRIPT, "suite": ("banking",), "user_tasks": "0-1"} | options
    return RunRequest.of("agentdojo", o, set(o))


def test_the_options_are_exactly_the_commands_options():
    """Every option of ``agentprov run`` (and so of ``agentprov estimate``, which takes the
    same) is a field, and nothing else is: an option added to one and not the other fails."""
    from agentprov_core.cli.estimate_cmd import estimate
    from agentprov_core.cli.run import run

    fields = set(RunOptions.__struct_fields__)
    assert {p.name for p in run.params} - {"source"} == fields
    assert fields <= {p.name for p in estimate.params}
    ctx = run.make_context("run", ["agentdojo", "--suite", "banking", "--attack", "a,b",
                                   "--max-cost-usd", "1", "--jobs", "2"])
    parsed = RunOptions.from_click({k: v for k, v in ctx.params.items() if k != "source"})
    assert (parsed.suite, parsed.attack, parsed.max_cost_usd, parsed.jobs, parsed.dry_run) == \
        (("banking",), ("a,b",), 1.0, 2, False)


def test_the_options_and_the_request_are_frozen():
    req = request()
    with pytest.raises(AttributeError):
        req.options.jobs = 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.given = frozenset()
    changed = req.replace(jobs=4)
    assert (changed.options.jobs, req.options.jobs) == (4, None)
    assert changed.given == req.given and changed.source == req.source


@pytest.mark.req("R-16.1", "R-16.6")
def test_prepare_runs_each_step_once(monkeypatch):
    """The capability gate, the usage checks, the model parameters and the plan: once each
    in one ``prepare``."""
    from agentprov_core.run import prepare as mod

    calls: dict[str, int] = {}

    def counted(name):
        real = getattr(mod, name)

        def wrapper(*a, **k):
            calls[name] = calls.get(name, 0) + 1
            return real(*a, **k)
        monkeypatch.setattr(mod, name, wrapper)

    for name in ("gate_capability", "check_usage", "model_params", "make_plan",
                 "plan_document", "resolve_endpoint"):
        counted(name)
    p = planning.prepare(request())
    assert calls == dict.fromkeys(calls, 1) and len(calls) == 6
    assert (p.params, p.wire) == ({}, None)  # the scripted transport: no model parameters


def test_the_plan_is_made_again_only_for_another_catalogue(monkeypatch):
    """The worker's check hands over the catalogue it serves: the one the plan was made
    from (equal, not only the same object) keeps the plan; another one re-makes it, with
    the model parameters ``prepare`` resolved."""
    p = planning.prepare(request())
    same = msgspec.convert(msgspec.to_builtins(p.catalogue), type=type(p.catalogue))
    assert same is not p.catalogue
    assert planning.with_worker_catalogue(p, same) is p
    made: list[dict] = []
    real = planning.make_plan
    monkeypatch.setattr(planning, "model_params", None)  # never computed again
    monkeypatch.setattr(planning, "make_plan",
                        lambda *a: made.append(a[9]) or real(*a))
    fewer = msgspec.structs.replace(p.catalogue, attacks=[])
    again = planning.with_worker_catalogue(p, fewer)
    assert again is not p and again.catalogue == fewer and made == [p.params]
    assert again.plan.cells == p.plan.cells  # a benign plan needs no attack


def test_a_preset_and_the_sweep_settle_their_defaults_in_a_new_request():
    """What a stage settles (the sweep's sample and element) is a new request; the one
    the command line parsed is unchanged."""
    from agentprov_core.run import tunejobs

    req = RunRequest.of("agentdojo", {"tune_jobs": "1,2", "endpoint": "llamacpp",
                                      "model_id": "m"}, {"tune_jobs", "endpoint", "model_id"})
    values, swept = tunejobs.check_usage(req)
    assert values == [1, 2]
    assert (swept.options.llm_element, swept.options.user_tasks) == ("gateway_compat", "0-2")
    assert (req.options.llm_element, req.options.user_tasks) == (None, None)
