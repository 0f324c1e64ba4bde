"""The worker's forkserver (``agentprov_backend.forkserver``) has the source's worker package
run one stock cell offline before it forks any (``agentprov_dojo.preload.warm_cells``), so that every forked cell starts in the state of a runner's later cells:
the plan's suites' files read once, the SDK and pydantic models built. It needs no network
and writes nothing outside a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

pytestmark = pytest.mark.slow

PROBE = r'''
import json
import agentprov_backend.forkserver
from agentdojo.task_suite.task_suite import read_suite_file
from openai.types.chat import ChatCompletion
print(json.dumps({"cached": read_suite_file.cache_info().currsize,
                  "completion_model_built": bool(ChatCompletion.__pydantic_complete__)
                  and not type(ChatCompletion.__pydantic_validator__).__name__.startswith("Mock")}))
'''


def run(agentdojo_env, tmp_path, warm: dict | None) -> tuple[dict, str, list[str]]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "PYTHONDONTWRITEBYTECODE": "1"}
    if warm is not None:
        env["AGENTPROV_WORKER_WARM"] = json.dumps(warm)
    from agentprov_core.backend.workerclient import network_block_prefix

    # without network, as the check worker runs: the warm-up's client answers in process
    argv = [*network_block_prefix(), str(agentdojo_env.env_dir / "bin" / "python"), "-c", PROBE]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr, sorted(os.listdir(tmp_path))


def test_the_warm_up_reads_the_plans_suites_and_builds_the_sdk_models(agentdojo_env, tmp_path):
    doc, err, left = run(agentdojo_env, tmp_path,
                         {"source": "agentdojo", "benchmark_version": "v1.2.2",
                          "suites": ["slack", "travel"]})
    assert "warm-up failed" not in err, err
    assert doc["cached"] == 6  # banking (the warm cell), slack and travel: environment, vectors
    assert doc["completion_model_built"] is True
    assert left == []  # its native log's temporary directory is gone


def test_without_a_request_it_warms_the_latest_version_and_banking_only(agentdojo_env,
                                                                        tmp_path):
    doc, err, _ = run(agentdojo_env, tmp_path, None)
    assert "warm-up failed" not in err, err
    assert doc["cached"] == 2
