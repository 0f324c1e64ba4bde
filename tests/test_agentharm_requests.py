"""agentprov's AgentHarm requests are Inspect's own, field by field: the agent's and each
judge's request bodies of ``agentprov run agentharm`` (a real-endpoint run: preflight, T0,
the confined worker, one ``eval()`` per cell) against those of Inspect's own ``eval()`` with
the same task arguments and model strings, on fixture samples of both tasks, both runs
answered by one deterministic server on loopback (``benchmarks/agentharm_standin.py``:
each reply a function of the request) that logs every body.

Compared as multisets of bodies (``tools`` as a set: inspect_evals shuffles their order
unseeded; the post ids two tools draw unseeded masked), and per sample the scores Inspect's
log holds against the ones agentprov's record holds (``benchmarks/agreement_inspect.py``,
whose comparison this is; ``tox -e agreement`` runs it on more samples).

Both tasks with the judges on the agent's model (what caps require), and one with the
judges on another model. Inspect resolves the two apart: judges on the agent's model are
the active model in Inspect's own run, so their requests carry the task's generation config
(``max_tokens`` 4096, ``seed`` 0, ``temperature`` 0); judges on another model are models of
their own and send only the scorer's ``temperature`` 0."""

from __future__ import annotations

import sys

import pytest
from conftest import ROOT, bwrap_unusable

sys.path.insert(0, str(ROOT / "benchmarks"))

from agentharm_standin import JUDGE, MODEL, StandIn  # noqa: E402
from agreement_inspect import compare_task  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(bwrap_unusable() is not None,
                                 reason=f"a real-endpoint run needs bwrap: {bwrap_unusable()}")]

#: per task, samples that reach the semantic judge (45-1, 97-1: grade_pinterest_memes),
#: call a tool whose result holds an unseeded id (100-4: upload_file) and end in a refusal
#: (45-1, 97-1: by the stand-in's rule)
SAMPLES = {"inspect_evals/agentharm": ("45-1", "48-4"),
           "inspect_evals/agentharm_benign": ("97-1", "100-4")}
#: the agent's requests: the task's config, the default agent's tool choice
AGENT = {"model": MODEL, "max_tokens": 4096, "seed": 0, "temperature": 0.0, "tool_choice": "auto"}


@pytest.fixture
def server():
    s = StandIn()
    yield s
    s.close()


@pytest.mark.req("R-25.1", "R-25.12")
@pytest.mark.parametrize(("task", "judge"), [("inspect_evals/agentharm", MODEL),
                                             ("inspect_evals/agentharm_benign", MODEL),
                                             ("inspect_evals/agentharm", JUDGE)])
def test_agent_and_judge_requests_are_inspect_s_own(agentharm_env, server, tmp_path, task,
                                                    judge):
    res = compare_task(agentharm_env.env_dir, agentharm_env.home, server, tmp_path, task,
                       str(tmp_path), samples=SAMPLES[task], via="api", judge=judge)
    assert res["problems"] == [], "\n".join(res["problems"])
    assert res["probes"] == 1
    assert res["requests"]["agentprov"] == res["requests"]["inspect"]
    assert set(res["requests"]["inspect"]) == {"agent", "refusal_judge", "semantic_judge"}
    on_agent = {"model": MODEL, "max_tokens": 4096, "seed": 0, "temperature": 0.0}
    judged = on_agent if judge == MODEL else {"model": JUDGE, "temperature": 0.0}
    for side in ("inspect", "agentprov"):
        settings = res["settings"][side]
        assert settings["agent"] == [AGENT], side
        assert settings["refusal_judge"] == settings["semantic_judge"] == [judged], side
    assert all(r["inspect"] for r in res["rows"])  # every sample scored, on both sides
