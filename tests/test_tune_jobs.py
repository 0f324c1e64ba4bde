"""The concurrency sweep's fast parts (D-820..D-823): the value list and its refusals (exit 2,
nothing written), the default sample, the report's arithmetic (the recommendation rule with
its ties, timeouts, failed cells, skipped and reused arms), the arms the model's memory
cannot hold, finding an earlier run of the same sweep, and the dry run (arms and a rough
time) against a loopback llama.cpp stand-in. The sweep run end to end is
tests/test_tune_jobs_run.py (slow)."""

from __future__ import annotations

import json

import pytest
from conftest import make_marker, snapshot

from tests.test_endpoints_consent import env_id
from tests.test_local_models import FakeServer, llamacpp_routes
from tests.test_presets import write_preset

LOCAL = ("--endpoint", "llamacpp", "--model-id", "m")


@pytest.mark.req("R-11.37")
def test_the_values_are_whole_distinct_numbers_within_the_host_maximum(monkeypatch):
    from agentprov_core.backend import hostlimits
    from agentprov_core.errors import AgentprovError
    from agentprov_core.run import tunejobs

    monkeypatch.setattr(hostlimits, "max_jobs", lambda: 8)
    assert tunejobs.parse_values("4,1,2") == [1, 2, 4]
    for text, what in (("1,0", "0 is not a number of jobs"), ("1,2,1", "1 is given twice"),
                       ("1,x", "'x' is not a whole number"), ("1,,2", "an empty value"),
                       ("2.5", "'2.5' is not a whole number"), ("-1", "'-1' is not a whole"),
                       ("1,9", "9 is above this host's maximum --jobs of 8")):
        with pytest.raises(AgentprovError) as e:
            tunejobs.parse_values(text)
        assert e.value.code == "cli.usage.tune_jobs" and what in e.value.params["what"], text


@pytest.mark.req("R-11.37")
@pytest.mark.parametrize("args, code, names", [
    (("--tune-jobs", "1,0", *LOCAL), "cli.usage.tune_jobs", "0 is not"),
    (("--tune-jobs", "2,2", *LOCAL), "cli.usage.tune_jobs", "2 is given twice"),
    (("--tune-jobs", "1,a", *LOCAL), "cli.usage.tune_jobs", "'a' is not a whole number"),
    (("--tune-jobs", "1,100000", *LOCAL), "cli.usage.tune_jobs", "above this host's maximum"),
    (("--tune-jobs", "1,2", "--model", "openrouter", "--model-id", "x"),
     "cli.usage.local_only_option", "--tune-jobs"),
    (("--tune-jobs", "1,2", "--llm-script", "SCRIPT"), "cli.usage.exclusive", "--llm-script"),
    (("--tune-jobs", "1,2", "--corpus", "CORPUS", *LOCAL), "cli.usage.exclusive", "--corpus"),
    (("--tune-jobs", "1,2", "--jobs", "2", *LOCAL), "cli.usage.exclusive", "--jobs"),
    (("--tune-out", "OUT", *LOCAL, "--corpus", "CORPUS", "--campaign", "c"),
     "cli.usage.option_value", "belongs to --tune-jobs"),
], ids=["zero", "duplicate", "not-integer", "above-host", "api", "script", "corpus", "jobs",
        "tune-out-alone"])
def test_sweep_refusals_exit_2_and_write_nothing(cli, home, corpora, script, tmp_path, args,
                                                 code, names):
    make_marker(home, env_id())
    subst = {"SCRIPT": str(script), "CORPUS": str(corpora / "c"), "OUT": str(tmp_path / "o")}
    args = tuple(subst.get(a, a) for a in args)
    before = snapshot(home)
    for dry in ((), ("--dry-run",)):
        r = cli("run", "agentdojo", *dry, *args, "--containment", "vm",
                "--i-consent-to-local-run")
        assert (r.code, r.error["error"]) == (2, code), r.err
        assert names in r.error["message"], r.error["message"]
    assert snapshot(home) == before and list(corpora.iterdir()) == []
    assert not (tmp_path / "o").exists() and not (home / "calibration").exists()


def arm(jobs, tph, status="measured", timeouts=0, failed=0, complete=4):
    from agentprov_core.run.tunereport import Arm

    return Arm(jobs=jobs, status=status, cells=complete + failed + timeouts, complete=complete,
               failed=failed, timeouts=timeouts, wall_s=1.0, traces_per_hour=tph)


@pytest.mark.req("R-11.40", "F-18")
def test_the_recommendation_is_the_smallest_value_within_90_percent_of_the_best():
    from agentprov_core.run.tunereport import recommend

    # 0.9 x 200 = 180: --jobs 2 reaches it exactly (inclusive), --jobs 1 does not
    assert recommend([arm(1, 100), arm(2, 180), arm(4, 195), arm(8, 200)])[0] == 2
    assert recommend([arm(1, 100), arm(2, 179.9), arm(4, 195), arm(8, 200)])[0] == 4
    # ties at the best: the smaller value
    jobs, why = recommend([arm(4, 300), arm(2, 300), arm(1, 100)])
    assert jobs == 2 and "best traces per hour (300 at --jobs 2)" in why
    # an arm with timeouts or failed cells is never recommended nor the best
    assert recommend([arm(1, 100), arm(2, 120), arm(4, 500, timeouts=1)])[0] == 2
    assert recommend([arm(1, 100), arm(2, 500, failed=1)])[0] == 1
    # skipped arms do not count; reused ones do
    assert recommend([arm(1, 100), arm(2, None, status="skipped", complete=0),
                      arm(4, 1000, status="reused")])[0] == 4
    jobs, why = recommend([arm(1, 100, timeouts=2), arm(2, None, status="skipped")])
    assert jobs is None and "no recommendation" in why


@pytest.mark.req("R-11.40")
def test_an_arm_is_measured_from_its_attempts():
    from agentprov_core.run.tunereport import measure

    a = measure(2, [10.0, 20.0, 30.0, 40.0],
                [("complete", None), ("complete", None),
                 ("aborted", "the cell timed out after 1800 s"),
                 ("errored", "worker: ValueError")], 3600.0, "c", 1)
    assert (a.cells, a.complete, a.timeouts, a.failed) == (4, 2, 1, 1)
    assert a.traces_per_hour == 2.0  # complete cells over the wall hours
    assert (a.seconds_per_cell_p50, a.seconds_per_cell_p90) == (20.0, 40.0)
    assert not a.eligible
    ok = measure(1, [30.0, 30.0], [("complete", None)] * 2, 120.0, "c", 0)
    assert ok.traces_per_hour == 60.0 and ok.eligible


@pytest.mark.req("R-11.40", "R-11.41")
def test_the_report_lists_every_arm_with_its_reason(tmp_path):
    from agentprov_core.run import tunereport
    from agentprov_core.run.tunereport import Arm

    arms = [arm(1, 100), arm(2, 150, timeouts=1),
            Arm(jobs=4, status="skipped", reason="after --jobs 2, an arm with timeouts")]
    doc = tunereport.document({"created_at": "t", "host": {"cpus": 2}, "sample": {"cells": 4}},
                              arms)
    assert doc["format"] == "agentprov-tune-jobs/0.1"
    assert doc["recommendation"]["jobs"] == 1
    assert [a["status"] for a in doc["arms"]] == ["measured", "measured", "skipped"]
    md = tunereport.markdown(json.loads(json.dumps(doc)))
    assert "**Recommendation:** --jobs 1" in md
    assert "| 4 | skipped |" in md and "after --jobs 2, an arm with timeouts" in md


@pytest.mark.req("R-11.41")
def test_arms_the_memory_cannot_hold_are_skipped(tmp_path, monkeypatch):
    from agentprov_core.backend import hostlimits
    from agentprov_core.run import presetrun, tunejobs

    monkeypatch.setattr(hostlimits, "physical_memory_gb", lambda: 10.0)
    holds, how = presetrun.memory_holds(None, 4.0, 2.0)  # the whole memory without a preset
    assert holds == 3 and "holds the weights (4 GB) and 3 trace(s)" in how
    arms = tunejobs._plan_arms([1, 2, 4, 8], holds, how, tmp_path, reuse=False)
    assert [(v, why is None) for v, why, _ in arms] == [(1, True), (2, True), (3 + 1, False),
                                                       (8, False)]
    assert "memory holds 3 trace(s)" in arms[2][1]
    assert presetrun.memory_holds(None, None, 2.0)[0] is None  # unknown size: not checked


@pytest.mark.req("R-11.42")
def test_a_rerun_of_the_same_sweep_finds_its_directory(home, monkeypatch, tmp_path):
    from agentprov_core.errors import AgentprovError
    from agentprov_core.run import tunejobs
    from agentprov_core.run.runrequest import RunRequest

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    req = RunRequest.of("agentdojo", {"tune_jobs": "1,2", "endpoint": "llamacpp",
                                   "model_id": "m", "dry_run": False})
    key = tunejobs.sweep_key(req)
    again = req.replace(dry_run=True, tune_out=None)
    assert tunejobs.sweep_key(again) == key  # --dry-run and --tune-out are not the command
    other = req.replace(tune_jobs="1,4")
    assert tunejobs.sweep_key(other) != key
    d, reuse = tunejobs.sweep_dir(req, key)
    assert not reuse and d.parent == home / "calibration" and d.name.startswith("tune-jobs-")
    d.mkdir(parents=True)
    (d / tunejobs.SWEEP_FILE).write_text(json.dumps({"key": key}))
    (home / "calibration" / "tune-jobs-00000000T000000Z").mkdir()  # another, older, keyless
    assert tunejobs.sweep_dir(req, key) == (d, True)
    assert tunejobs.sweep_dir(other, tunejobs.sweep_key(other))[1] is False
    # --tune-out naming another sweep's directory is refused
    with pytest.raises(AgentprovError) as e:
        tunejobs.sweep_dir(other.replace(tune_out=str(d)),
                           tunejobs.sweep_key(other))
    assert e.value.code == "cli.usage.option_value" and "another sweep" in e.value.message
    # finished arms are reused, others run
    (d / "arms").mkdir()
    (d / "arms" / "jobs-1.json").write_text(json.dumps({"jobs": 1, "status": "measured"}))
    arms = tunejobs._plan_arms([1, 2], None, "", d, reuse=True)
    assert arms[0][2] == {"jobs": 1, "status": "measured"} and arms[1][2] is None


@pytest.mark.req("R-11.38", "R-11.43", "R-11.51", "F-18")
def test_the_dry_run_shows_the_default_sample_the_arms_and_a_rough_time(cli, home, tmp_path):
    make_marker(home, env_id())
    write_preset(home, "here", calibrated=False)  # an uncalibrated preset plans a sweep
    server = FakeServer(llamacpp_routes(tmp_path))
    before = snapshot(home)
    try:
        r = cli("run", "agentdojo", "--dry-run", "--tune-jobs", "4,1,2", *LOCAL, "--base-url",
                server.base_url, "--containment", "vm", "--preset", "here",
                "--model-size-gb", "1", "--kv-gb-per-trace", "100000")
        r2 = cli("run", "agentdojo", "--dry-run", "--tune-jobs", "1,2", *LOCAL, "--base-url",
                 server.base_url, "--containment", "vm", "--suite", "banking",
                 "--user-tasks", "0", "--benign", "only")
    finally:
        server.close()
    assert r.code == 0, r.err
    assert "tune-jobs: 24 cell(s) an arm" in r.out  # 4 suites x user tasks 0-2 x 2
    assert "after 1 unmeasured warm-up cell" in r.out
    # 100,000 GB a trace: no arm fits in this host's memory
    assert "arm --jobs 1: skipped: the model's memory holds 0 trace(s)" in r.out
    assert "rough time in all" in r.out and "preset here v1" in r.out
    assert r2.code == 0, r2.err
    assert "tune-jobs: 1 cell(s) an arm" in r2.out
    assert "arm --jobs 1: 1 cell(s), roughly" in r2.out
    assert "arm --jobs 2: 1 cell(s), roughly" in r2.out
    assert "the estimate's" in r2.out  # no preset: the priors' time
    # nothing but the weight digest cache (any observation of a local model fills it)
    after = {k: v for k, v in snapshot(home).items() if not k.startswith("cache/")}
    assert after == before and not (home / "calibration").exists()
    assert not [p for _, p, _ in server.requests if p == "/v1/chat/completions"]


@pytest.mark.req("R-11.42")
def test_an_interrupted_arm_is_set_aside_never_removed(tmp_path):
    from agentprov_core.run import tunejobs

    work = tmp_path / "jobs-2.partial"
    work.mkdir()
    (work / "ledger.jsonl").write_text("{}\n")
    tunejobs._set_aside(tmp_path / "jobs-2")
    assert not work.exists()
    [kept] = tmp_path.glob("jobs-2.interrupted-*.partial")
    assert (kept / "ledger.jsonl").read_text() == "{}\n"
    tunejobs._set_aside(tmp_path / "jobs-3")  # nothing there: nothing done
    assert sorted(p.name for p in tmp_path.iterdir()) == [kept.name]
