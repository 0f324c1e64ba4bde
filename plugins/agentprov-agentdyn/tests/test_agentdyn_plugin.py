"""The agentdyn source plugin on its own."""

import json
import subprocess
import sys

import pytest
from agentprov_agentdyn.plugin import AgentDyn


@pytest.mark.req("R-24.2")
def test_snapshot_catalogue_counts():
    r = subprocess.run([sys.executable, "-m", "agentprov_core", "run", "agentdyn", "--catalogue"],
                       capture_output=True, text=True)
    doc = json.loads(r.stdout)
    suites = [s for s in doc["suites"]
              if s["benchmark_version"] == doc["default_benchmark_version"]]
    assert [s["name"] for s in suites] == ["workspace", "travel", "banking", "slack",
                                           "shopping", "github", "dailylife"]
    assert sum(len(s["user_tasks"]) for s in suites) == 157
    assert sum(len(s["injection_tasks"]) for s in suites) == 63
    assert len(doc["attacks"]) == 17 and sum(a["dos"] for a in doc["attacks"]) == 5


def test_backend_project_declares_the_full_pin():
    from agentprov_agentdyn.plugin import agentprov_backends

    (p,) = agentprov_backends()
    assert (p.pinned_commit, p.tree, p.upstream) == (
        "5353cf7615b135cace8d07c8f12dac53a16b6db3", "08c04b47c307bba017a19f641111ffa4946c193a",
        "https://github.com/SaFo-Lab/AgentDyn")
    assert "runs" not in p.upstream_paths and p.worker == "agentprov-worker-agentdyn"


def test_environment_id_is_the_pinned_commit():
    from agentprov_core.backend.environments import environment_id

    assert environment_id(AgentDyn.meta) == "agentdyn-5353cf76"
