"""The same scripted AgentDojo campaign through the real CLI with the default executor and
with ``--executor ray`` on a local 3-node Ray cluster (``ray.cluster_utils.Cluster``, one
CPU each, every node in the session's home with the built environment): the same plan and
configuration digests, the same units, the same per-unit verdicts; both corpora pass
``validate --strict`` and ``verify``, and ``stats --compare`` of the two shows no
difference. The manifest's producer block records the executor and each node."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("ray", reason="the ray executor's tests need ray (tox -e e2e)")
pytestmark = pytest.mark.slow

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
DEMO = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
        "--injection-tasks", "0", "--model-display-name", "Scripted Model")


def _partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def _ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (_partial(corpus) / "ledger.jsonl").read_text().splitlines()
            if x.strip()]


def test_ray_and_local_give_the_same_evidence(e2e_cli, agentdojo_env, tmp_path):
    from agentprov_ray.testing import local_cluster

    runs = {}
    with local_cluster(nodes=3, env={"AGENTPROV_HOME": str(agentdojo_env.home)}) as lc:
        for name in ("local", "ray"):
            corpus = tmp_path / name
            extra = ("--executor", "ray", "--ray-address", lc.address) if name == "ray" else ()
            r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "same", *DEMO,
                        "--llm-script", LIVE_DEMO, "--jobs", "2", *extra, json_errors=False)
            assert r.code == 0, r.err
            runs[name] = _ledger(corpus)
    local, ray_ = runs["local"], runs["ray"]
    digests = {(e["plan_sha256"], e["config_digest"]) for e in local}
    assert len(digests) == 1
    assert {(e["plan_sha256"], e["config_digest"]) for e in ray_} == digests

    def verdicts(entries: list[dict]) -> dict[str, tuple]:
        return {e["unit"]: (e["status"], e["conclusive"], e["utility"], e["security"])
                for e in entries}

    assert verdicts(ray_) == verdicts(local)
    assert len(verdicts(local)) == 4 and all(v[0] == "complete" for v in verdicts(local).values())
    producer = json.loads((_partial(tmp_path / "ray") / "manifest.json").read_text())["producer"]
    assert producer["executor"] == "ray"
    assert sum(n["cells"] for n in producer["nodes"]) == 4
    assert len(producer["nodes"]) == 3
    assert {n["environment_id"] for n in producer["nodes"]} == {agentdojo_env.env_id}
    assert "nodes" not in json.loads((_partial(tmp_path / "local") / "manifest.json")
                                     .read_text())["producer"]
    for name in ("local", "ray"):
        corpus = tmp_path / name
        assert e2e_cli("validate", "--strict", "--corpus", corpus).code == 0
        assert e2e_cli("verify", "--corpus", corpus).code == 0
    c = json.loads(e2e_cli("stats", "--compare", _partial(tmp_path / "local"),
                           _partial(tmp_path / "ray"), "--format", "json").out)
    (d,) = c["differences"]
    assert d["shared_cells"] == 4 and d["pairs"] == 4
    for row in d["rows"]:
        for measure in ("utility", "attack_success"):
            if row[measure] is not None:
                assert row[measure]["difference"] == 0, row


def test_one_gate_in_t0_governs_the_cells_on_ray_nodes(e2e_cli, agentdojo_env, tmp_path):
    """The adaptive start gate reads each cell's capture log as T0 ingests it, so cells on
    Ray nodes are governed by the one gate of the campaign: a rate limit the nodes' cells
    meet halves the window in the driver's manifest."""
    from agentprov_ray.testing import local_cluster

    replies = json.loads(LIVE_DEMO.read_text())
    limited = tmp_path / "limited.json"
    limited.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": 0.2,
                                   "rate_limit": {"per_minute": 120, "burst": 3},
                                   "replies": replies}))
    corpus = tmp_path / "gated"
    with local_cluster(nodes=1, cpus=2, env={"AGENTPROV_HOME": str(agentdojo_env.home)}) as lc:
        r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "gated",
                    "--suite", "banking", "--user-tasks", "0-3", "--llm-script", limited,
                    "--jobs", "2", "--adaptive-jobs", "on", "--executor", "ray",
                    "--ray-address", lc.address, json_errors=False)
    assert r.code == 0, r.err
    m = json.loads((_partial(corpus) / "manifest.json").read_text())
    assert m["producer"]["executor"] == "ray"
    [gate] = m["live"]["gate"]
    assert gate["policy"]["mode"] == "on" and gate["signals"]["http 429"] >= 1
    assert gate["decreases_total"] >= 1 and max(p[1] for p in gate["trace"]) <= 2
    assert all(e["status"] == "complete" for e in _ledger(corpus))


def _slow_script(tmp_path: Path, latency: float) -> Path:
    demo = json.loads(LIVE_DEMO.read_text())
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": latency,
                                  "replies": [{k: v for k, v in r.items() if k != "note"}
                                              for r in demo]}))
    return script


@pytest.mark.skipif(not os.environ.get("AGENTPROV_TEST_RAY_FAULTS"),
                    reason="opt-in: tox -e ray (signals to a driver with cells on nodes)")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGKILL"])
def test_the_driver_interrupted_or_killed_mid_cell_resumes_once(agentdojo_env, tmp_path, sig):
    """Ctrl-C: the cells in flight on the nodes are ledgered (sealed ``aborted`` from what
    their node carried back, or whole when one had ended first), exit 130. SIGKILL: nothing
    of theirs is ledgered. Either way no worker of the dead run is left on the nodes (each
    actor's reaper), and the next run settles every unit once."""
    import signal
    import subprocess
    import sys
    import time

    from agentprov_ray.testing import local_cluster
    from conftest import child_env

    corpus = tmp_path / "c"
    env = child_env() | {"AGENTPROV_HOME": str(agentdojo_env.home)}
    with local_cluster(nodes=2, cpus=1, env={"AGENTPROV_HOME": str(agentdojo_env.home)}) as lc:
        argv = [sys.executable, "-m", "agentprov_core", "run", "agentdojo", "--corpus",
                str(corpus), "--campaign", "sig", *DEMO, "--llm-script",
                str(_slow_script(tmp_path, 3.0)), "--jobs", "4", "--executor", "ray",
                "--ray-address", lc.address]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, cwd=ROOT)
        launched = time.monotonic() + 300  # past the node checks: the first cell launched
        while not [*(_partial(corpus) / "staging").glob("s-*")] and time.monotonic() < launched:
            time.sleep(0.2)
        time.sleep(4)  # every cell mid-way (3 calls of 3 s)
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=300)
        ledger = _partial(corpus) / "ledger.jsonl"
        if sig == "SIGINT":
            assert p.returncode == 130, err
            entries = _ledger(corpus)
            # sealed aborted, or, had it ended on its node first, ingested whole
            assert entries and all(
                (e["status"] == "aborted" and not e["conclusive"])
                or (e["status"] == "complete" and e["native_sha256"]) for e in entries), entries
        else:
            assert p.returncode == -signal.SIGKILL
            assert not ledger.exists() or not ledger.read_text().strip()
        for _ in range(60):  # the worker's group at once, its cells as they notice
            left = subprocess.run(["pgrep", "-f", f"{agentdojo_env.env_dir}/bin/python"],
                                  capture_output=True, text=True).stdout.split()
            if not left:
                break
            time.sleep(1)
        assert left == [], left
        again = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT,
                               timeout=600)
        assert again.returncode == 0, again.stderr
    settled = [e["unit"] for e in _ledger(corpus) if e["status"] == "complete"]
    assert len(settled) == 4 and len(set(settled)) == 4


def test_an_unreachable_cluster_stops_the_run_before_anything_is_written(e2e_cli, tmp_path):
    corpus = tmp_path / "c"
    r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "c", *DEMO,
                "--llm-script", LIVE_DEMO, "--executor", "ray", "--ray-address", "127.0.0.1:9",
                env={"RAY_ADDRESS": ""})
    assert r.code == 3, r.err
    assert r.error["error"] == "cli.environment.cluster"
    assert "the cluster at 127.0.0.1:9 cannot run this campaign: it cannot be reached" in \
        r.error["message"]
    assert not corpus.exists() and not _partial(corpus).exists()


#: the interrupted campaign's replies: a read-only tool call, then the final answer
READ_THEN_DONE = [
    {"tool_calls": [{"name": "read_file",
                     "arguments": {"file_path": "bill-december-2023.txt"}}]},
    {"content": "I have read the bill; nothing was paid."}]


def _ended_on_node(root: Path) -> bool:
    """A cell's capture log on the node (``agentprov-ray-*`` under the node's ``TMPDIR``)
    holds its end record: the cell ended there, and T0 has not taken it yet (the node
    removes its staging once it has carried the session back)."""
    for cap in root.glob("agentprov-ray-*/s-*/capture.jsonl"):
        try:
            if b'"kind":"end"' in cap.read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.skipif(not os.environ.get("AGENTPROV_TEST_RAY_FAULTS"),
                    reason="opt-in: tox -e ray (Ctrl-C as a cell ends on its node)")
@pytest.mark.req("R-21.26")
def test_ctrl_c_as_a_cell_ends_on_its_node_ledgers_it_whole_or_aborted(
        e2e_cli, agentdojo_env, tmp_path):
    """Ctrl-C (SIGINT) to ``agentprov run --executor ray`` the moment a cell's log ends on
    its node, before T0 has taken its answer, with other cells at other stages (staggered
    starts, 1 s a reply), several times: as under the local executor, exit 130, the
    interrupt's message, the manifest partial with the stop ``interrupt``, nothing left in
    staging; every cell in flight either ingested whole (``complete``, conclusive, its
    native log stored) or sealed ``aborted`` by T0 (``session.interrupted``), and never
    ``complete`` without its native log; the corpus verifies."""
    import signal
    import subprocess
    import sys

    from agentprov_ray.testing import local_cluster
    from conftest import child_env
    from test_campaign_faults import capture_records, wait_for

    script = tmp_path / "slow.json"
    script.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": 1.0,
                                  "replies": READ_THEN_DONE}))
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir()
    env = child_env() | {"AGENTPROV_HOME": str(agentdojo_env.home)}
    with local_cluster(nodes=1, cpus=2, env={"AGENTPROV_HOME": str(agentdojo_env.home),
                                             "TMPDIR": str(node_tmp)}) as lc:
        for trial in range(4):
            corpus = tmp_path / f"c{trial}"
            p = subprocess.Popen(
                [sys.executable, "-m", "agentprov_core", "run", "agentdojo", "--corpus",
                 str(corpus), "--campaign", "ctrl-c", "--suite", "banking", "--user-tasks",
                 "0-7", "--llm-script", str(script), "--jobs", "4", "--start-stagger", "0.7",
                 "--executor", "ray", "--ray-address", lc.address],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
            try:
                wait_for(lambda p=p: _ended_on_node(node_tmp) or p.poll() is not None, 300,
                         "a cell's end on the node")
                p.send_signal(signal.SIGINT)
                _, err = p.communicate(timeout=120)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            assert p.returncode == 130, err
            assert "interrupted: in-flight sessions were sealed aborted and ledgered" in err
            part = _partial(corpus)
            entries = _ledger(corpus)
            assert entries, err
            for e in entries:
                if e["status"] == "complete":
                    assert e["conclusive"] and e["native_sha256"] and e["native_path"], e
                    continue
                assert e["status"] == "aborted" and not e["conclusive"], e
                if e["capture_sha256"] is None:  # the request was still on its way
                    assert e["reason"] == "interrupted; the cell had not begun its capture log"
                    continue
                recs = capture_records(part, e["capture_sha256"])
                assert (recs[-2]["kind"], recs[-2]["code"]) == ("note", "session.interrupted")
                assert (recs[-1]["status"], recs[-1]["sealed_by"]) == ("aborted", "parent")
            # the cell whose end was seen (the run's first to end): ingested whole
            assert any(e["status"] == "complete" for e in entries), entries
            manifest = json.loads((part / "manifest.json").read_text())
            assert manifest["partial"] is True
            assert manifest["stops"][-1]["stop"] == "interrupt"
            assert manifest["stops"][-1]["exit"] == 130
            staging = part / "staging"
            assert not staging.is_dir() or not [*staging.glob("s-*")]
            v = e2e_cli("verify", "--corpus", corpus)
            assert v.code == 0, v.err
            # no process of the interrupted cells left on the node
            wait_for(lambda: not subprocess.run(
                ["pgrep", "-f", f"{agentdojo_env.env_dir}/bin/python"], capture_output=True,
                text=True).stdout.split(), 60, "the node's worker and cells to end")


def test_an_api_endpoint_on_a_cluster_is_refused_before_anything_is_written(e2e_cli, tmp_path):
    """An API endpoint (reached through T0's egress proxy, here the TLS stand-in) with
    ``--executor ray``: refused before the cluster is contacted and before anything is
    written (exit 4, ``cli.refused.cluster_egress``), naming the proxy's allowlist and what
    a cluster's cells can reach; no request reached the endpoint, and the key is in no
    output."""
    from test_real_campaign import StandIn, key_file, real_args, standin_env

    stand_in = StandIn(tmp_path)
    try:
        env_file, sentinel = key_file(tmp_path)
        corpus = tmp_path / "api"
        r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "20", "--max-cost-usd", "1",
                               "--containment", "vm", "--executor", "ray",
                               "--ray-address", "127.0.0.1:9"),
                    env=standin_env(stand_in) | {"RAY_ADDRESS": ""})
    finally:
        stand_in.close()
    assert r.code == 4, r.err
    assert r.error["error"] == "cli.refused.cluster_egress"
    assert ("--executor ray: the endpoint is reached through T0's egress proxy "
            "(openrouter.ai:443), which listens on this host only") in r.error["message"]
    assert "a model server on its own node (a loopback endpoint" in r.error["message"]
    assert stand_in.requests == 0
    assert not corpus.exists() and not _partial(corpus).exists()
    assert sentinel not in r.out + r.err
