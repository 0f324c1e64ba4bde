"""The agentdyn source plugin on its own."""

import json
import subprocess
import sys

import pytest
from agentprov_agentdyn.plugin import AgentDyn


@pytest.mark.req("R-24.2")
def test_declared_catalogue_counts():
    r = subprocess.run([sys.executable, "-m", "agentprov_core", "run", "agentdyn", "--catalogue"],
                       capture_output=True, text=True)
    doc = json.loads(r.stdout)
    assert [s["name"] for s in doc["suites"]] == ["workspace", "travel", "banking", "slack",
                                                  "shopping", "github", "dailylife"]
    assert sum(len(s["user_tasks"]) for s in doc["suites"]) == 157
    assert sum(len(s["injection_tasks"]) for s in doc["suites"]) == 63


def test_environment_id_is_the_pinned_commit():
    from agentprov_core.backend.environments import environment_id

    assert environment_id(AgentDyn.meta) == "agentdyn-5353cf76"
