"""Time for a local model (D-826): ``agentprov estimate`` takes the run's time from a
calibrated preset's rows for this host and a local endpoint, chosen by the model's active
parameters, else the last row; a model above a bounded last row (or of unknown size) keeps
the priors' time; the estimate says so in a warning and in each group's basis; calls and
tokens still come from the priors. The preset is --preset, else the setting compute.preset,
else m5ultra (calibrated for a Mac Studio: on another host the priors' time stays)."""

from __future__ import annotations

import json
import platform
import sys

import pytest

from tests.test_estimate import estimate, marked  # noqa: F401 (a fixture)
from tests.test_presets import write_preset

LOCAL = ("--endpoint", "llamacpp", "--model-id", "m")
UNBOUNDED = """
[[compute]]
max_active_params_b = 2
jobs = 2
start_stagger_s = 0
request_timeout_s = 60
seconds_per_cell_p50 = 10.0
seconds_per_cell_p90 = 30.0
status = "measured"

[[compute]]
jobs = 1
start_stagger_s = 0
request_timeout_s = 60
seconds_per_cell_p50 = 100.0
seconds_per_cell_p90 = 300.0
status = "provisional"
"""


def doc_of(cli, corpora, *extra):
    r = estimate(cli, corpora, "--format", "json", *extra, model=LOCAL, caps=())
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.req("R-9.11", "R-9.12", "R-9.13", "R-9.14")
def test_the_time_comes_from_the_settings_preset_row_of_the_model(cli, marked, corpora):  # noqa: F811
    priors = doc_of(cli, corpora)
    write_preset(marked, "here")  # a 2 B measured row (10 s, 20 s at 3 jobs), then provisional
    assert cli("settings", "set", "compute.preset", "here").code == 0
    d = doc_of(cli, corpora, "--active-params-b", "1")
    units = d["units_due"]
    assert d["time_s"] == {"p50": round(10 * units / 3), "p90": round(20 * units / 3), "jobs": 3}
    assert any("preset here v1, <= 2 B active" in w and "D-826" in w for w in d["warnings"])
    assert all(g["basis"].endswith("; time: preset here v1, <= 2 B active")
               for g in d["by_suite"] + d["by_attack"])
    assert d["model_calls"] == priors["model_calls"] and d["tokens"] == priors["tokens"]
    # --jobs given: the row's seconds at that many jobs
    assert doc_of(cli, corpora, "--active-params-b", "1", "--jobs", "1")["time_s"]["p50"] == \
        round(10 * units)
    # above the last bounded time row, or of unknown size: the priors' time, and why
    for extra in (("--active-params-b", "30"), ()):
        kept = doc_of(cli, corpora, *extra)
        assert kept["time_s"] == priors["time_s"]
        assert any("the priors' time is kept (D-826)" in w for w in kept["warnings"])
        assert not any("time:" in g["basis"] for g in kept["by_suite"])


@pytest.mark.req("R-9.12")
def test_an_unbounded_last_row_times_a_model_of_unknown_size(cli, marked, corpora):  # noqa: F811
    write_preset(marked, "open", rows=UNBOUNDED)
    d = doc_of(cli, corpora, "--preset", "open")  # the flag names the preset too
    assert d["time_s"]["p50"] == round(100 * d["units_due"] / 1)
    assert any("preset open v1, any size" in w for w in d["warnings"])


@pytest.mark.req("R-9.11")
def test_a_preset_not_calibrated_for_this_host_keeps_the_priors(cli, marked, corpora):  # noqa: F811
    priors = doc_of(cli, corpora)
    write_preset(marked, "elsewhere", host='platform = "plan9"\nmachine = "mips"\n')
    write_preset(marked, "draft", calibrated=False)
    for name in ("elsewhere", "draft"):
        d = doc_of(cli, corpora, "--preset", name, "--active-params-b", "1")
        assert d["time_s"] == priors["time_s"]
        assert not any("D-826" in w for w in d["warnings"])
    if not (sys.platform == "darwin" and platform.machine() == "arm64"):
        d = doc_of(cli, corpora, "--active-params-b", "1")  # m5ultra: a Mac Studio's
        assert d["time_s"] == priors["time_s"]
