"""The agentharm source plugin on its own: Inspect tasks, limits, judges."""

import json
import os
import subprocess
import sys

import pytest


def agentprov(*args, home):
    """The CLI with a private, empty home (the usage checks come before the environment)."""
    env = dict(os.environ, AGENTPROV_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "agentprov_core", "--error-format", "json",
                           *args], capture_output=True, text=True, env=env)


@pytest.mark.req("R-25.9", "R-25.10")
def test_catalogue_tasks(tmp_path):
    doc = json.loads(agentprov("run", "agentharm", "--catalogue", home=tmp_path / "h").stdout)
    assert [t["name"] for t in doc["tasks"]] == ["inspect_evals/agentharm",
                                                 "inspect_evals/agentharm_benign"]


@pytest.mark.req("R-25.18")
@pytest.mark.parametrize("missing", ["--message-limit", "--token-limit", "--time-limit"])
def test_every_limit_is_required(tmp_path, missing):
    limits = {"--message-limit": "10", "--token-limit": "20000", "--time-limit": "600"}
    del limits[missing]
    (tmp_path / "script.json").write_text("[]")
    r = agentprov("run", "agentharm", "--dry-run", "--corpus", tmp_path / "c", "--campaign", "c",
                  "--task", "inspect_evals/agentharm", "--samples", "limit:2",
                  *[x for kv in limits.items() for x in kv], "--judge", "refusal_judge=m",
                  "--judge", "semantic_judge=m", "--llm-script", tmp_path / "script.json",
                  home=tmp_path / "h")
    err = json.loads(r.stderr)
    assert (r.returncode, err["error"]) == (2, "cli.usage.backend_plan")
    assert missing.lstrip("-").replace("-", "_") in err["message"]


def test_suite_options_do_not_apply(tmp_path):
    (tmp_path / "script.json").write_text("[]")
    r = agentprov("run", "agentharm", "--dry-run", "--corpus", tmp_path / "c", "--campaign", "c",
                  "--suite", "banking", "--llm-script", tmp_path / "script.json",
                  home=tmp_path / "h")
    assert json.loads(r.stderr)["error"] == "cli.usage.option_for_other_kind"


@pytest.mark.req("R-25.28", "R-25.30")
def test_the_declared_d740_figures():
    """AgentHarm declares a = 1, j = 3, K = 1: 42 billed calls a sample at
    --message-limit 10 and 82 at 20 (one epoch)."""
    from agentprov_agentharm.plugin import AgentHarm

    from agentprov_core.source import InspectCellBound

    b = AgentHarm.cell_bound
    assert b == InspectCellBound(judge_calls_per_agent_call=1, judge_calls_per_sample=3,
                                 retries_per_call=1)
    assert [b.calls(n, 1, m) for m in (20, 10) for n in (1, 4)] == [82, 328, 42, 168]
    assert AgentHarm.wires == ("openai",)
