"""Compute presets (D-822, D-823): the shipped m5ultra as the specification states it, the
preset file's schema, the refusals of a preset run (exit 2 at step 1, exit 5 at step 2,
nothing written), and what a preset plans: the row by active parameters, the jobs the
model's memory holds, the request timeout in ``agent.params.timeout_s`` (so in the
configuration digest), gateway_compat by default, and the manifest's producer block.

The run path is prepared in this process against a loopback llama.cpp stand-in
(tests/test_local_models.py) with a test preset for this host written to the overlay
``$AGENTPROV_HOME/registry/presets/``; the real campaign of a preset run is in
tests/test_tune_jobs_run.py (slow)."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import pytest
from conftest import ROOT, make_marker, snapshot

from tests.test_endpoints_consent import env_id
from tests.test_local_models import FakeServer, llamacpp_routes

ONE_CELL = ("--suite", "banking", "--user-tasks", "0", "--benign", "only")
HERE = f'platform = "{sys.platform}"\nmachine = "{platform.machine()}"\n'


def write_preset(home: Path, name: str, *, calibrated: bool = True, host: str = HERE,
                 rows: str | None = None, extra: str = "") -> Path:
    """A preset in the overlay of ``home`` (for this host unless ``host`` says otherwise)."""
    d = home / "registry" / "presets"
    d.mkdir(parents=True, exist_ok=True)
    rows = rows or """
[[compute]]
max_active_params_b = 2
jobs = 3
start_stagger_s = 0.5
request_timeout_s = 120
seconds_per_cell_p50 = 10.0
seconds_per_cell_p90 = 20.0
status = "measured"

[[compute]]
jobs = 2
start_stagger_s = 1.0
request_timeout_s = 240
status = "provisional"
"""
    p = d / f"{name}.toml"
    p.write_text(f'''format = "agentprov-preset/0.1"
name = "{name}"
version = 1
date = "2026-12-01"
calibrated = {"true" if calibrated else "false"}
report = "docs/reports/x/README.md"
{extra}
[host]
{host}
{rows}''')
    return p


@pytest.mark.req("R-11.48", "R-9.15", "R-11.45")
def test_m5ultra_is_shipped_as_the_specification_states_it():
    from agentprov_core.registries import presets

    p = presets.load("m5ultra")
    assert (p.name, p.version, p.date, p.calibrated) == ("m5ultra", 2, "2026-10-28", True)
    assert p.report == "docs/reports/mac-studio-calibration/README.md"
    report = (ROOT / p.report).read_text()
    assert "a machine we do not have" in report and "specification's" in report
    assert {r.jobs for r in p.compute} == {4}  # 4 jobs for every model size
    measured = [r for r in p.compute if r.status == "measured"]
    assert len(measured) == 1
    m = measured[0]
    assert (m.max_active_params_b, m.seconds_per_cell_p50, m.seconds_per_cell_p90) == \
        (15, 14.3, 27.4)
    larger = [r for r in p.compute if r is not m]
    assert larger and all(r.status == "provisional" and r.jobs <= m.jobs for r in larger)
    assert [r.max_active_params_b for r in p.compute][-1] is None  # every size has a row
    assert p.row_for(7) is m and p.row_for(15) is m and p.row_for(30) is larger[0]
    assert p.row_for(None) is p.compute[-1]


@pytest.mark.req("R-11.45")
@pytest.mark.parametrize("change, field", [
    ('status = "measured"\nseconds_per_cell_p50 = 1.0', "compute[0]"),  # measured, no p90
    ("bogus = 1", "bogus"),
])
def test_a_malformed_preset_is_refused_naming_the_field(home, monkeypatch, change, field):
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries import presets

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    rows = f"""
[[compute]]
jobs = 1
start_stagger_s = 0
request_timeout_s = 10
{change if field != "bogus" else 'status = "provisional"'}
"""
    write_preset(home, "bad", calibrated=False, rows=rows,
                 extra=change if field == "bogus" else "")
    with pytest.raises(AgentprovError) as e:
        presets.load("bad")
    assert e.value.code in ("cli.usage.registry_field", "cli.usage.registry_file")
    assert field in str(e.value.params) and "bad.toml" in str(e.value.params)


@pytest.mark.req("R-11.45")
def test_a_calibrated_preset_needs_a_report_and_a_measured_row(home, monkeypatch):
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries import presets

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    rows = """
[[compute]]
jobs = 1
start_stagger_s = 0
request_timeout_s = 10
status = "provisional"
"""
    write_preset(home, "nomeasure", rows=rows)
    with pytest.raises(AgentprovError) as e:
        presets.load("nomeasure")
    assert "no measured row" in e.value.params["what"]


@pytest.mark.req("R-11.44", "R-11.52")
@pytest.mark.parametrize("args, code", [
    (("--preset", "nosuch", "--endpoint", "llamacpp", "--model-id", "m"),
     "cli.usage.unknown_preset"),
    (("--m5ultra", "--model", "openrouter", "--model-id", "x"), "cli.usage.local_only_option"),
    (("--m5ultra", "--llm-script", "SCRIPT"), "cli.usage.exclusive"),
    (("--m5ultra", "--preset", "m5ultra", "--endpoint", "llamacpp", "--model-id", "m"),
     "cli.usage.exclusive"),
    (("--m5ultra", "--llm-element", "native", "--endpoint", "llamacpp", "--model-id", "m"),
     "cli.usage.preset_native_element"),
], ids=["unknown", "api", "script", "both", "native"])
def test_preset_usage_refusals_exit_2_and_write_nothing(cli, home, corpora, script, args, code):
    make_marker(home, env_id())
    args = tuple(str(script) if a == "SCRIPT" else a for a in args)
    before = snapshot(home)
    for dry in ((), ("--dry-run",)):
        r = cli("run", "agentdojo", *dry, "--corpus", corpora / "c", "--campaign", "c",
                *ONE_CELL, *args, "--containment", "vm", "--i-consent-to-local-run")
        assert (r.code, r.error["error"]) == (2, code), r.err
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-11.47")
def test_an_uncalibrated_preset_is_refused_outside_dry_run_exit_5(cli, home, corpora):
    make_marker(home, env_id())
    write_preset(home, "draft", calibrated=False)
    before = snapshot(home)
    r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *ONE_CELL,
            "--preset", "draft", "--endpoint", "llamacpp", "--model-id", "m",
            "--containment", "vm", "--i-consent-to-local-run")
    assert (r.code, r.error["error"]) == (5, "run.unsupported.preset_uncalibrated"), r.err
    assert r.error["message"].endswith("Nothing was started and nothing was written.")
    # a dry run passes the gate and goes on to step 4 (no server listens here: exit 3)
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *ONE_CELL, "--preset", "draft", "--endpoint", "llamacpp", "--model-id", "m",
            "--base-url", "http://127.0.0.1:9/v1", "--containment", "vm")
    assert (r.code, r.error["error"]) == (3, "run.local.unreachable"), r.err
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-11.46")
@pytest.mark.skipif(sys.platform == "darwin" and platform.machine() == "arm64",
                    reason="this host is the kind m5ultra was calibrated for")
def test_m5ultra_on_another_host_is_refused_exit_5(cli, home, corpora):
    make_marker(home, env_id())
    r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", *ONE_CELL,
            "--m5ultra", "--endpoint", "llamacpp", "--model-id", "m", "--containment", "vm",
            "--i-consent-to-local-run")
    assert (r.code, r.error["error"]) == (5, "run.unsupported.preset_host"), r.err
    assert "darwin/arm64" in r.error["message"]
    assert list(corpora.iterdir()) == []


def facts_of(**values):
    from agentprov_core.live.local.facts import Fact

    return {k: Fact(v, "flag") for k, v in values.items()}


@pytest.mark.req("R-11.18", "R-11.44", "R-11.46")
def test_the_plan_takes_the_row_of_the_active_parameters_and_the_memory_bounds_it(
        home, monkeypatch):
    from agentprov_core.backend import hostlimits
    from agentprov_core.errors import AgentprovError
    from agentprov_core.registries import presets
    from agentprov_core.run import presetrun
    from agentprov_core.run.options import RunOptions

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    monkeypatch.setattr(hostlimits, "physical_memory_gb", lambda: 16.0)
    monkeypatch.setattr(hostlimits, "max_jobs", lambda: 8)
    write_preset(home, "t")
    p = presets.load("t")
    none = RunOptions()
    plan = presetrun.plan(p, facts_of(active_params_b=1.0), none, set())
    assert (plan.row.status, plan.jobs, plan.request_timeout_s) == ("measured", 3, 120)
    assert (plan.jobs, plan.start_stagger_s, plan.request_timeout_s) == (3, 0.5, 120)
    plan = presetrun.plan(p, facts_of(active_params_b=30.0), none, set())
    assert (plan.row.status, plan.jobs, plan.request_timeout_s) == ("provisional", 2, 240)
    # 16 GB x 0.75 = 12 GB: 8 GB of weights and 2 GB a trace hold 2 traces, not 3
    plan = presetrun.plan(p, facts_of(active_params_b=1.0, size_gb=8.0, kv_gb_per_trace=2.0),
                          none, set())
    assert (plan.jobs, plan.memory_holds) == (2, 2)
    assert any("reduced from 3 to 2" in n for n in plan.notes)
    # an explicit --jobs wins, and says so
    o = RunOptions(jobs=1, start_stagger=0.0)
    plan = presetrun.plan(p, facts_of(active_params_b=1.0), o, {"jobs", "start_stagger"})
    assert (plan.jobs, plan.start_stagger_s) == (1, 0.0)
    assert any("--jobs 1 given" in n for n in plan.notes)
    with pytest.raises(AgentprovError) as e:  # 12 GB cannot hold 11 GB and 2 GB a trace
        presetrun.plan(p, facts_of(size_gb=11.0, kv_gb_per_trace=2.0), none, set())
    assert e.value.code == "run.unsupported.preset_memory"


@pytest.mark.req("R-11.22")
def test_the_preset_is_the_last_source_of_a_model_fact(home, monkeypatch):
    from agentprov_core.live.local import facts
    from agentprov_core.registries import presets

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    p = presets.load("m5ultra")
    got = facts.resolve({"kv_gb_per_trace": "0.5"}, "llamacpp", "m", p)
    assert (got["kv_gb_per_trace"].value, got["kv_gb_per_trace"].source) == (0.5, "flag")
    assert (got["context_tokens"].value, got["context_tokens"].source) == (32768, "preset")
    assert "m5ultra v2" in got["context_tokens"].line("context_tokens")
    assert got["size_gb"].value is None and "not in the preset m5ultra" in got["size_gb"].detail
    assert facts.resolve({}, "llamacpp", "m")["size_gb"].detail == "no preset"


def prepared_run(home, tmp_path, monkeypatch, *extra: str):
    """``prepare`` of a consented local run against a llama.cpp stand-in (steps 1-6)."""
    import click

    from agentprov_core.cli.run import run as run_cmd
    from agentprov_core.run import prepare
    from agentprov_core.run.runrequest import RunRequest

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    args = ["agentdojo", "--corpus", str(tmp_path / "corpora" / "c"), "--campaign", "c",
            *ONE_CELL, "--endpoint", "llamacpp", "--model-id", "m", "--containment", "vm",
            "--i-consent-to-local-run", *extra]
    server = FakeServer(llamacpp_routes(tmp_path))
    try:
        ctx = run_cmd.make_context("run", [*args, "--base-url", server.base_url])
        given = {n for n in ctx.params
                 if ctx.get_parameter_source(n) == click.core.ParameterSource.COMMANDLINE}
        opts = dict(ctx.params)
        source = opts.pop("source")
        return prepare.prepare(RunRequest.of(source, opts, given))
    finally:
        server.close()


@pytest.mark.req("R-11.46", "R-11.49", "R-11.50", "R-11.51", "R-11.52")
def test_a_preset_run_plans_jobs_stagger_and_timeout_into_the_configuration(
        home, tmp_path, monkeypatch):
    from agentprov_core.run import manifest

    make_marker(home, env_id())
    write_preset(home, "here")
    plain = prepared_run(home, tmp_path, monkeypatch)
    assert plain.preset is None and "timeout_s" not in str(plain.plan.content)
    assert plain.request.options.llm_element in (None, "native")
    got = prepared_run(home, tmp_path, monkeypatch, "--preset", "here",
                       "--active-params-b", "1")
    o = got.request.options
    assert (o.jobs, o.start_stagger, o.llm_element) == (3, 0.5, "gateway_compat")
    assert got.preset.request_timeout_s == 120
    from agentprov_core.run.prepare import agent_config

    params = got.params
    assert params == {"timeout_s": 120}
    agent = agent_config(got.request, got.endpoint, got.resolved, params, got.local_record)
    assert agent["params"]["timeout_s"] == 120 and agent["element"] == "gateway_compat"
    assert got.plan.config_digest != plain.plan.config_digest  # part of the digest
    m = manifest.manifest_of(got, None)
    assert m["producer"]["preset"] == "here"
    assert m["producer"]["preset_plan"]["jobs"] == 3
    assert m["producer"]["preset_plan"]["request_timeout_s"] == 120
    assert m["live"]["llm_element"] == "gateway_compat"
    assert "preset" not in manifest.manifest_of(plain, None)["producer"]
    lines = "\n".join(got.preset.lines())
    assert "preset here v1" in lines and "row <= 2 B active (measured)" in lines
    assert "agent.params.timeout_s 120" in lines


@pytest.mark.req("R-11.45")
def test_every_shipped_preset_loads_and_a_calibrated_one_names_its_committed_report():
    from agentprov_core.registries import presets

    shipped = sorted(p.stem for p in (ROOT / "registry" / "presets").glob("*.toml"))
    assert "m5ultra" in shipped and "debian-2core-gemma270m" in shipped
    for name in shipped:
        p = presets.read_file(ROOT / "registry" / "presets" / f"{name}.toml")
        if p.calibrated:
            assert (ROOT / p.report).is_file(), p.report
            assert any(r.status == "measured" for r in p.compute)
    d = presets.read_file(ROOT / "registry" / "presets" / "debian-2core-gemma270m.toml")
    report = json.loads((ROOT / "docs/reports/debian-2core-gemma270m-calibration/"
                                "tune-jobs.json").read_text())
    [arm] = [a for a in report["arms"] if a["jobs"] == report["recommendation"]["jobs"]]
    measured = d.compute[0]
    assert measured.status == "measured" and measured.jobs == arm["jobs"]
    assert (measured.seconds_per_cell_p50, measured.seconds_per_cell_p90) == \
        (round(arm["seconds_per_cell_p50"], 1), round(arm["seconds_per_cell_p90"], 1))
    assert all(r.jobs <= measured.jobs and r.status == "provisional" for r in d.compute[1:])
