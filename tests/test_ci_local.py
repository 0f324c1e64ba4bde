"""The local CI (``tools/ci_local.py``): its jobs and which of them run. The jobs themselves
build real environments (minutes each, the network for most); what is checked here is the
selection: the spec's jobs and the two this build adds, a network job skipped without
``--allow-network``, a dispatch-only job run only when named, an unknown job refused."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

CI = ROOT / "tools" / "ci_local.py"


def _ci(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CI), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.req("R-28.1", "R-28.2", "R-28.3", "R-28.4")
def test_the_jobs_are_the_specs_and_the_two_this_build_adds():
    p = _ci("--list")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines()}
    assert list(rows) == ["backend-agentdojo", "live-run", "backend-agentdyn",
                          "inspect-agentharm", "backend-autodojo"]
    assert "(network" not in rows["backend-agentdojo"]  # no network
    assert rows["live-run"].endswith("(network)")
    assert rows["backend-autodojo"].endswith("(network, dispatch-only)")


@pytest.mark.req("R-28.5")
def test_a_network_job_is_skipped_without_allow_network():
    p = _ci("--job", "live-run", "--job", "inspect-agentharm")
    assert p.returncode == 0, p.stderr
    assert "skipped  live-run: needs the network: --allow-network" in p.stdout
    assert "skipped  inspect-agentharm: needs the network" in p.stdout
    assert "$ " not in p.stdout  # no step ran


def test_an_unknown_job_is_a_usage_error():
    p = _ci("--job", "nightly")
    assert p.returncode == 2
    assert "no job nightly; jobs: " in p.stderr
