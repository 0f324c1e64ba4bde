"""Node faults under ``--executor ray`` on a local 3-node Ray cluster
(``ray.cluster_utils.Cluster``, one CPU each, every node in the session's home with the
built AgentDojo environment), each fault over ``AGENTPROV_TEST_RAY_TRIALS`` trials (10 by
default), opt-in (``tox -e ray``: ``AGENTPROV_TEST_RAY_FAULTS``).

The campaign: AgentDojo's banking user tasks 0-3, benign and under
``important_instructions`` with injection task 0 (8 units), scripted replies after 1.5 s
each, ``--jobs 6`` (two cells on each node), under ``--max-calls``. Each trial waits until
three cells are in flight, then a random 0.5 to 10 s (the first cells or the next), or,
every other driver kill, until 1 to 5 attempts are ledgered, then up to 2 s; and then:

- **a node removed** (``Cluster.remove_node``, not gracefully: its raylet and workers
  killed): its attempts are ledgered failed with ``cli.environment.node_lost`` naming the
  node, charged a whole cell each, and their units attempted again on the other nodes in
  the same invocation, within ``--max-attempts``; a fresh node replaces it for the next trial;
- **the driver killed** (SIGKILL): no cell of it runs on on the nodes, and the next
  ``agentprov run`` of the same plan resumes from the working corpus; no session the dead
  driver had in flight is ever ledgered.

Counted over the trials, and each must be 0: units of the plan with no conclusive attempt
(lost), units with two conclusive attempts or a session ledgered twice (run twice),
corpora failing ``verify``, and cells left running. ``AGENTPROV_TEST_RAY_FAULTS_REPORT=FILE``
writes the counts, the date and the durations as JSON (docs/faults.md, "Faults on a Ray
cluster")."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, child_env

pytest.importorskip("ray", reason="the ray executor's tests need ray (tox -e ray)")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("AGENTPROV_TEST_RAY_FAULTS"),
                       reason="opt-in: tox -e ray (node faults over many trials)"),
]

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
PLAN = ("--suite", "banking", "--user-tasks", "0-3", "--attack", "important_instructions",
        "--injection-tasks", "0", "--model-display-name", "Scripted Model")
UNITS = 8
TRIALS = int(os.environ.get("AGENTPROV_TEST_RAY_TRIALS") or 10)
LOST = "cli.environment.node_lost: the node "


def _partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def _ledger(corpus: Path) -> list[dict]:
    path = _partial(corpus) / "ledger.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _script(tmp_path: Path) -> Path:
    demo = json.loads(LIVE_DEMO.read_text())
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": 1.5,
                                  "replies": [{k: v for k, v in r.items() if k != "note"}
                                              for r in demo]}))
    return script


def _argv(corpus: Path, script: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "agentprov_core", "run", "agentdojo", "--corpus",
            str(corpus), "--campaign", "faults", *PLAN, "--llm-script", str(script),
            "--jobs", "6", "--max-calls", "1000", "--executor", "ray", "--ray-address",
            address]


def _in_flight(corpus: Path, n: int, proc: subprocess.Popen, limit: float = 300) -> bool:
    """Wait until ``n`` sessions are staged (cells in flight); False when the run ended."""
    staging = _partial(corpus) / "staging"
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if staging.is_dir() and sum(1 for _ in staging.iterdir()) >= n:
            return True
        time.sleep(0.1)
    return False


def _ledgered(corpus: Path, n: int, proc: subprocess.Popen, limit: float = 300) -> bool:
    """Wait until ``n`` attempts are ledgered; False when the run ended."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if len(_ledger(corpus)) >= n:
            return True
        time.sleep(0.1)
    return False


def _cells_left(env_dir: Path, wait_s: float = 60) -> list[str]:
    """The environment's processes still running after ``wait_s`` seconds at most."""
    for _ in range(int(wait_s)):
        left = subprocess.run(["pgrep", "-f", f"{env_dir}/bin/python"], capture_output=True,
                              text=True).stdout.split()
        if not left:
            return []
        time.sleep(1)
    return left


def _counts(corpus: Path, e2e_cli) -> dict[str, int]:
    """What must be 0 after a trial: units lost, units run twice, sessions ledgered twice,
    ledgered captures without an execution, executions indexed twice, a failing
    ``verify`` (the counts of docs/faults.md's kill faults)."""
    entries = _ledger(corpus)
    conclusive = Counter(e["unit"] for e in entries if e["conclusive"])
    sessions = Counter(e["session_id"] for e in entries)
    index = _partial(corpus) / "executions.jsonl"
    executions = Counter(json.loads(x)["execution_id"] for x in index.read_text().splitlines()
                         if x.strip()) if index.exists() else Counter()
    return {"units_lost": UNITS - len(conclusive),
            "units_run_twice": sum(1 for n in conclusive.values() if n > 1),
            "sessions_ledgered_twice": sum(1 for n in sessions.values() if n > 1),
            "attempts_without_an_execution": sum(
                1 for e in entries if e.get("capture_sha256") and e["status"] != "quarantined"
                and not executions[e["session_id"]]),
            "executions_indexed_twice": sum(1 for n in executions.values() if n > 1),
            "verify_failed": int(e2e_cli("verify", "--corpus", corpus).code != 0)}


def _trials(agentdojo_env, tmp_path: Path, seed: int):
    """The seeded draws, the script, the driver's environment, and when and at what load
    the trials started."""
    rng = random.Random(int(os.environ.get("AGENTPROV_TEST_RAY_SEED") or seed))
    env = child_env() | {"AGENTPROV_HOME": str(agentdojo_env.home)}
    return rng, _script(tmp_path), env, (time.time(), time.monotonic(), os.getloadavg())


def _report(kind: str, trials: list[dict], clock: tuple, draws: int) -> dict:
    """The trials' counts summed (``draws``: trials run, a miss drawn again)."""
    started, t0, load = clock
    total = Counter()
    for t in trials:
        total.update({k: v for k, v in t.items() if isinstance(v, int)})
    out = {"fault": kind, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
           "duration_s": round(time.monotonic() - t0, 1), "draws": draws, "trials": trials,
           "totals": dict(total), "load_before": load, "load_after": os.getloadavg()}
    path = os.environ.get("AGENTPROV_TEST_RAY_FAULTS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(out) + "\n")
    return out


MUST_BE_0 = ("units_lost", "units_run_twice", "sessions_ledgered_twice",
             "attempts_without_an_execution", "executions_indexed_twice", "verify_failed",
             "cells_left_running")


def test_a_node_removed_mid_cell_is_attempted_again_in_the_same_run(e2e_cli, agentdojo_env,
                                                                   tmp_path):
    from agentprov_ray.testing import local_cluster

    rng, script, env, clock = _trials(agentdojo_env, tmp_path, 32)
    trials: list[dict] = []
    draws = 0
    with local_cluster(nodes=3, cpus=1, env={"AGENTPROV_HOME": str(agentdojo_env.home)}) as lc:
        while len(trials) < TRIALS:
            draws += 1
            corpus = tmp_path / f"node-{len(trials)}-{rng.randrange(1 << 30):x}"
            start = time.monotonic()
            p = subprocess.Popen(_argv(corpus, script, lc.address), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            removed_at = None
            if _in_flight(corpus, 3, p):
                time.sleep(rng.uniform(0.5, 10.0))
                removed_at = time.monotonic() - start
                lc.cluster.remove_node(lc.workers.pop(0), allow_graceful=False)
            _, err = p.communicate(timeout=900)
            if removed_at is not None:
                lc.add_node()  # three nodes again for the next trial
            entries = _ledger(corpus)
            lost = [e for e in entries if (e["reason"] or "").startswith(LOST)]
            if not lost:  # the node had no cell in flight any more: a miss, drawn again
                continue
            assert p.returncode == 1, err  # an attempt failed; the run went on
            assert all(not e["conclusive"] and e["status"] in ("aborted", "errored")
                       for e in lost), lost
            invocations = {e["invocation"] for e in entries}
            assert len(invocations) == 1  # every unit settled in this one invocation
            again = {e["unit"] for e in entries if e["attempt"] > 1}
            assert {e["unit"] for e in lost} <= again, entries
            producer = json.loads((_partial(corpus) / "manifest.json").read_text())
            nodes = producer["producer"]["nodes"]
            assert [n for n in nodes if n.get("lost")], nodes
            charged = producer["live"]["caps"]["charged"]
            assert charged["whole_cells"] >= len(lost), charged  # what it may have spent
            trial = {"seconds": round(time.monotonic() - start, 1),
                     "removed_after_s": round(removed_at or 0, 1),
                     "lost_attempts": len(lost), "attempts": len(entries),
                     "cells_left_running": len(_cells_left(agentdojo_env.env_dir)),
                     **_counts(corpus, e2e_cli)}
            trials.append(trial)
    report = _report("node removed", trials, clock, draws)
    for key in MUST_BE_0:
        assert report["totals"].get(key, 0) == 0, report


def test_the_driver_killed_mid_campaign_resumes_and_ingests_nothing_twice(
        e2e_cli, agentdojo_env, tmp_path):
    from agentprov_ray.testing import local_cluster

    rng, script, env, clock = _trials(agentdojo_env, tmp_path, 33)
    trials: list[dict] = []
    draws = 0
    with local_cluster(nodes=3, cpus=1, env={"AGENTPROV_HOME": str(agentdojo_env.home)}) as lc:
        while len(trials) < TRIALS:
            draws += 1
            corpus = tmp_path / f"driver-{len(trials)}-{rng.randrange(1 << 30):x}"
            argv = _argv(corpus, script, lc.address)
            start = time.monotonic()
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=env, cwd=ROOT)
            # every other trial once some cells are ledgered: a resume of a corpus half done
            if not (_in_flight(corpus, 3, p) if draws % 2 else
                    _ledgered(corpus, rng.randint(1, 5), p)):
                p.communicate(timeout=600)
                continue
            time.sleep(rng.uniform(0.5, 10.0) if draws % 2 else rng.uniform(0.0, 2.0))
            killed_at = time.monotonic() - start
            p.send_signal(signal.SIGKILL)
            p.communicate(timeout=60)
            if p.returncode != -signal.SIGKILL:  # it had ended first: a miss
                continue
            left = _cells_left(agentdojo_env.env_dir)
            before = {e["session_id"] for e in _ledger(corpus)}
            in_flight = {d.name for d in (_partial(corpus) / "staging").iterdir()} - before
            again = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT,
                                   timeout=900)
            assert again.returncode == 0, again.stderr
            entries = _ledger(corpus)
            trial = {"seconds": round(time.monotonic() - start, 1),
                     "killed_after_s": round(killed_at, 1),
                     "ledgered_before_kill": len(before), "in_flight_at_kill": len(in_flight),
                     "cells_left_running": len(left),
                     "dead_sessions_ledgered": len(in_flight & {e["session_id"]
                                                                for e in entries}),
                     **_counts(corpus, e2e_cli)}
            trials.append(trial)
    report = _report("driver killed", trials, clock, draws)
    for key in (*MUST_BE_0, "dead_sessions_ledgered"):
        assert report["totals"].get(key, 0) == 0, report
