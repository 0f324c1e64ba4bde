"""The agentdojo source plugin on its own: metadata, catalogue, expansion."""

import json
import subprocess
import sys

import pytest
from agentprov_agentdojo.plugin import AgentDojo


def agentprov(*args):
    return subprocess.run([sys.executable, "-m", "agentprov_core", *args], capture_output=True,
                          text=True)


def test_metadata():
    m = AgentDojo.meta
    assert (m.name, m.backend, m.kind, m.live_status) == ("agentdojo", "agentdojo", "suites",
                                                          "partial")
    assert m.takes_defences and "gateway_compat" in m.llm_elements


@pytest.mark.req("R-7.15", "R-7.14")
def test_catalogue_through_the_cli():
    r = agentprov("run", "agentdojo", "--catalogue")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    v122 = [s for s in doc["suites"] if s["benchmark_version"] == "v1.2.2"]
    assert [s["name"] for s in v122] == ["workspace", "travel", "banking", "slack"]
    assert sum(len(s["user_tasks"]) for s in v122) == 97
    assert sum(len(s["injection_tasks"]) for s in v122) == 35
    assert len(doc["attacks"]) == 17 and sum(a["dos"] for a in doc["attacks"]) == 5
    assert len(doc["defences"]) == 10


def test_slack_injection_ids_start_at_one():
    cat = AgentDojo().catalogue()
    slack = cat.suite("v1.2.2", "slack")
    assert slack.injection_tasks[0] == "injection_task_1"


def test_the_capture_and_results_mappers_are_contributed():
    from agentprov_agentdojo import plugin
    from agentprov_agentdojo.capture_mapper import CaptureMapper
    from agentprov_agentdojo.results_mapper import ResultsMapper

    from agentprov_core.mapping import MapperRef

    [m, r] = plugin.agentprov_mappers()
    assert isinstance(m, MapperRef)  # by reference: listing it imports no mapping code
    assert (m.name, m.evidence_formats, m.imports) == ("agentdojo.capture", ("capture/0.1",),
                                                       None)
    assert isinstance(m.load(), CaptureMapper) and m.load().version == m.version
    assert (r.name, r.evidence_formats, r.imports) == ("agentdojo.results",
                                                       ("agentdojo-results",), "agentdojo")
    assert isinstance(r.load(), ResultsMapper) and r.load().version == r.version
