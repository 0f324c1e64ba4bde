"""The autodojo source plugin on its own: declared catalogue, pinned commit, refusals."""

import json
import subprocess
import sys

import pytest
from agentprov_autodojo.plugin import AutoDojo


def agentprov(*args):
    return subprocess.run([sys.executable, "-m", "agentprov_core", "--error-format", "json",
                           *args], capture_output=True, text=True)


@pytest.mark.req("R-5.1", "R-5.2")
def test_environment_id_is_the_pinned_commit():
    from agentprov_core.backend.environments import environment_id

    assert environment_id(AutoDojo.meta) == "autodojo-aa458794"


@pytest.mark.req("R-7.16")
def test_declared_catalogue():
    doc = json.loads(agentprov("run", "autodojo", "--catalogue").stdout)
    assert doc["provenance"]["kind"] == "declared"
    suites = doc["suites"]
    assert len(suites) == 17
    assert sum(len(s["user_tasks"]) for s in suites) == 337
    assert sum(len(s["injection_tasks"]) for s in suites) == 143
    refused = sorted(a["name"] for a in doc["attacks"] if a["refused"])
    assert refused == ["ours", "variant_generation"]


def test_gateway_compat_is_not_an_element_here():
    assert AutoDojo.meta.llm_elements == ("native",)
