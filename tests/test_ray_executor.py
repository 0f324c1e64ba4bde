"""The ``ray`` executor (plugins/agentprov-ray) on a real local Ray cluster started by the
test (``ray.cluster_utils.Cluster``: a head and a second node, one CPU each, a small object
store), running the real worker host in a small environment (a venv on this interpreter's
base install with the worker's real libraries and a stand-in source, ``raybench``).

Proven here: dispatch across both nodes, each cell's staged session carried back as bytes
and written into T0's staging; the node checks (a node whose environment differs is
refused by address and difference, exit 3, unless ``--skip-refused-nodes``); the key's
sentinel in the worker on the node yet in no file under Ray's session directory, in no
output of ``ray list tasks --detail`` / ``ray list actors --detail`` and in nothing carried
back; a node whose actor died failing its cells with ``cli.environment.node_lost`` naming
it; an unreachable cluster refused with exit 3. ``--executor ray`` without the plugin is
refused at usage (exit 2) naming the distribution. The campaign through the CLI, its
digests against the local executor's, is ``tests/test_ray_campaign.py`` (slow)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import install_worker_libraries, install_worker_source, make_marker, snapshot

ray = pytest.importorskip("ray", reason="the ray executor's tests need ray (tox -e core)")

from agentprov_core.api import Launch, Target  # noqa: E402
from agentprov_core.errors import AgentprovError  # noqa: E402

pytest_plugins = ["agentprov_core.testing.fixtures"]

ENV_ID = "raybench-0000abcd"
KEY_VAR = "AGENTPROV_TEST_RAY_KEY"
SENTINEL = "sk-ray-sentinel-" + uuid.uuid4().hex
#: the stand-in cell: stages a capture log and a native log and returns the sha256 of the
#: key it found in its environment (proof it was there), never the key itself
CELL = '''
import hashlib, json, os


def child_main(request):
    key = os.environ.get("AGENTPROV_TEST_RAY_KEY", "")
    with open("capture.jsonl", "w") as f:
        f.write(json.dumps({"kind": "start", "session": request["session_id"]}) + "\\n")
    with open("native.json", "w") as f:
        json.dump({"cell": request["cell"]["cell_key"], "pid": os.getpid()}, f)
    with open("result.json", "w") as f:
        json.dump({"status": "complete", "utility": True, "security": None, "calls": 0,
                   "native_log": "native.json", "setup_refusal": None, "error": None,
                   "reason": hashlib.sha256(key.encode()).hexdigest()}, f)
'''


def _env(home: Path) -> Path:
    """The ``raybench`` environment, built into ``home`` as ``backends build`` would lay
    it out: a marker and a venv with the worker host and the stand-in source."""
    make_marker(home, ENV_ID)
    d = home / "envs" / ENV_ID
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(d)], check=True)
    site = next(d.glob("lib/python3*/site-packages"))
    install_worker_libraries(site)
    install_worker_source(site, "raybench", CELL, distribution="raybench-worker")
    return d


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One node (the CPU budget of the default run; three nodes are ``tox -e ray``'s), two
    CPUs, an 80 MiB object store, started in a home that holds the environment
    (``node_home``) with the key in its own environment; T0, this process, may then look
    at another home."""
    from agentprov_ray.testing import local_cluster

    node_home = tmp_path_factory.mktemp("ray-homes") / "node"
    _env(node_home)
    with local_cluster(nodes=1, cpus=2, dashboard=True, env={
            "AGENTPROV_HOME": str(node_home), KEY_VAR: SENTINEL}) as lc:
        ctx = ray.init(address=lc.address, namespace="agentprov-test", log_to_driver=False)
        try:
            yield {"node_home": node_home, "temp": lc.temp,
                   "dashboard": "http://" + ctx.dashboard_url}
        finally:
            ray.shutdown()


def _request(staging_root: Path, n: int) -> dict:
    sid = f"s-{uuid.uuid4().hex[:16]}"
    return {"session_id": sid, "staging": str(staging_root / sid), "source": "raybench",
            "cell": {"cell_key": f"cell-{n}"}, "agent": {"key_env": KEY_VAR},
            "benchmark_version": "v1", "timeout_s": 60}


def _launch(staging_root: Path, **options) -> Launch:
    from agentprov_core.backend.environments import environment_dir

    return Launch(ENV_ID, environment_dir(ENV_ID), staging_root,
                  extra_env={KEY_VAR: SENTINEL}, key_variable=KEY_VAR,
                  options={"jobs": 2} | options)


def test_cells_run_on_the_node_and_come_back_into_t0s_staging(cluster, tmp_path):
    from agentprov_ray.executor import RayExecutor

    staging = tmp_path / "staging"
    staging.mkdir()
    ex = RayExecutor(_launch(staging))
    try:
        assert len(ex.cluster.nodes) == 1 and not ex.cluster.refused
        reqs = [_request(staging, n) for n in range(6)]
        pending = {}
        results = {}
        for req in reqs:
            while sum(n.in_flight for n in ex.cluster.nodes) >= 2:
                for fut in ex.wait_any(pending, timeout=30):
                    results[pending.pop(fut)] = ex.result(fut)
            pending[ex.submit(req)] = req["session_id"]
        while pending:
            for fut in ex.wait_any(pending, timeout=30):
                results[pending.pop(fut)] = ex.result(fut)
        record = ex.record()
    finally:
        ex.close()
    key_sha = hashlib.sha256(SENTINEL.encode()).hexdigest()
    for req in reqs:
        r = results[req["session_id"]]
        assert r["status"] == "complete" and r["staging_refused"] == []
        assert r["reason"] == key_sha  # the worker on the node read the node's own key
        landed = Path(req["staging"])
        native = json.loads((landed / "native.json").read_text())
        assert native["cell"] == req["cell"]["cell_key"]
        assert (landed / "capture.jsonl").read_bytes().startswith(b'{"kind": "start"')
    assert [n["cells"] for n in record["nodes"]] == [6], record
    assert {n["environment_id"] for n in record["nodes"]} == {ENV_ID}
    # the key: in no file under Ray's session directory, in nothing ray list shows, in
    # nothing carried back into T0's staging
    assert SENTINEL.encode() not in b"".join(snapshot(staging).values())
    hits = [str(p) for p in Path(cluster["temp"]).rglob("*") if p.is_file()
            and not p.is_symlink() and SENTINEL.encode() in _read(p)]
    assert hits == []
    for what in ("tasks", "actors"):
        out = subprocess.run([str(Path(sys.executable).parent / "ray"), "list", what, "--detail",
                              "--address", cluster["dashboard"]], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert "run_cell" in out.stdout or "Node" in out.stdout
        assert SENTINEL not in out.stdout + out.stderr


def _read(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError:
        return b""


def test_a_node_whose_actor_died_fails_its_cells_as_lost_naming_the_node(cluster, tmp_path):
    """The node's actor gone (as when its node is removed or its raylet killed; here killed
    before the cell reached it): the cell fails with ``cli.environment.node_lost`` naming
    the node, which T0 attempts again elsewhere; the node offers no slot any more, and with
    every node lost the executor can run nothing (``failure()``). The node removed under a
    campaign on three nodes is ``tests/test_ray_faults.py`` (``tox -e ray``)."""
    from agentprov_ray.executor import RayExecutor

    staging = tmp_path / "staging"
    staging.mkdir()
    ex = RayExecutor(_launch(staging))
    try:
        (node,) = ex.cluster.nodes
        assert ex.capacity() == node.slots and ex.failure() is None
        ray.kill(node.actor, no_restart=True)
        fut = ex.submit(_request(staging, 0))
        assert ex.wait_any([fut], timeout=60) == {fut}
        with pytest.raises(AgentprovError) as lost:
            ex.result(fut)
        record = ex.record()
    finally:
        ex.close()
    assert lost.value.code == "cli.environment.node_lost"
    assert lost.value.message.startswith(f"the node {node.address} was lost with the cell "
                                         f"in flight ({node.lost}: ")
    assert node.lost.startswith("Actor") and ex.capacity() == 0
    assert ex.failure() == "every node of the cluster was lost"
    assert record["nodes"][0]["lost"] == node.lost


def test_a_node_whose_environment_differs_is_refused_by_address(cluster, tmp_path,
                                                                monkeypatch):
    from agentprov_ray.executor import _release, connect

    # T0 reads its environment from another home, whose marker records another identity
    t0_home = tmp_path / "t0"
    marker = t0_home / "envs" / ENV_ID / "AGENTPROV_ENV.json"
    marker.parent.mkdir(parents=True)
    theirs = json.loads((cluster["node_home"] / "envs" / ENV_ID / "AGENTPROV_ENV.json")
                        .read_text())
    assert theirs["identity_sha256"] == "0" * 64
    marker.write_text(json.dumps(theirs | {"identity_sha256": "1" * 64}))
    monkeypatch.setenv("AGENTPROV_HOME", str(t0_home))
    with pytest.raises(AgentprovError) as refused:
        connect(Target(ENV_ID, key_variable=KEY_VAR, options={"jobs": 1}))
    assert refused.value.code == "cli.environment.node_refused"
    assert refused.value.exit_code == 3
    msg = refused.value.message
    assert msg.startswith("1 node(s) of the cluster refused before any cell ran: ")
    assert f"identity_sha256 {'0' * 12}… (here {'1' * 12}…)" in msg
    assert ray.util.get_node_ip_address() in msg  # the node by its address
    assert "(every node of the cluster)" in msg
    # --skip-refused-nodes runs on the others: here there are none, so it is refused too
    with pytest.raises(AgentprovError) as still:
        connect(Target(ENV_ID, key_variable=KEY_VAR,
                       options={"jobs": 1, "skip_refused_nodes": True}))
    assert still.value.code == "cli.environment.node_refused"
    # the same environment: accepted
    monkeypatch.setenv("AGENTPROV_HOME", str(cluster["node_home"]))
    ok = connect(Target(ENV_ID, key_variable=KEY_VAR, options={"jobs": 1}))
    try:
        assert len(ok.nodes) == 1 and ok.refused == []
    finally:
        _release(ok)


def test_a_node_without_the_key_is_refused(cluster):
    from agentprov_ray.executor import connect

    with pytest.raises(AgentprovError) as refused:
        connect(Target(ENV_ID, key_variable="AGENTPROV_TEST_RAY_NO_SUCH_KEY",
                       options={"jobs": 1}))
    assert refused.value.code == "cli.environment.node_refused"
    assert "key AGENTPROV_TEST_RAY_NO_SUCH_KEY not set (here AGENTPROV_TEST_RAY_NO_SUCH_KEY " \
           "set)" in refused.value.message
    assert "(every node of the cluster)" in refused.value.message


def test_jobs_above_the_cluster_maximum_are_refused(cluster):
    from agentprov_ray.executor import connect

    with pytest.raises(AgentprovError) as refused:
        connect(Target(ENV_ID, options={"jobs": 10_000}))
    assert refused.value.code == "cli.usage.option_value" and refused.value.exit_code == 2
    assert "is above the cluster's maximum of" in refused.value.message


def test_an_unreachable_cluster_is_exit_3(tmp_path):
    """In a process of its own (this module's is connected): nothing listens on port 9."""
    code = ("from agentprov_core.api import Target\n"
            "from agentprov_ray.executor import check\n"
            "try:\n"
            "    check(Target('raybench-0000abcd', options={'ray_address': '127.0.0.1:9'}))\n"
            "except Exception as exc:\n"
            "    print(exc.code, exc.exit_code, exc.message)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=os.environ | {"RAY_ADDRESS": ""})
    assert p.stdout.startswith("cli.environment.cluster 3 the cluster at 127.0.0.1:9 cannot "
                               "run this campaign: it cannot be reached (Connection refused)"), \
        p.stdout + p.stderr


def test_ray_executor_without_the_plugin_is_refused_naming_the_distribution(
        agentprov_plugin, agentprov_cli, tmp_path, script):
    import agentprov_agentdojo.plugin

    agentprov_plugin(agentprov_agentdojo.plugin, "agentdojo")  # beside the core; no ray
    corpus = tmp_path / "c"
    r = agentprov_cli("--error-format", "json", "run", "agentdojo", "--corpus", corpus,
                      "--campaign", "c", "--llm-script", script, "--executor", "ray")
    assert r.exit_code == 2, r.stderr
    err = r.error
    assert err["error"] == "cli.usage.option_value"
    assert "--executor ray: is the executor of the distribution agentprov-ray, which is " \
           "not installed: pip install 'agentprov[ray]'" in err["message"]
    assert not corpus.exists() and not corpus.with_name("c.partial").exists()


def test_ray_address_without_the_ray_executor_is_a_usage_error(cli, tmp_path, script):
    r = cli("run", "agentdojo", "--corpus", tmp_path / "c", "--campaign", "c",
            "--llm-script", script, "--ray-address", "127.0.0.1:6379")
    assert r.code == 2 and r.error["error"] == "cli.usage.option_value"
    assert "--ray-address 127.0.0.1:6379: is for --executor ray only" in r.error["message"]


def test_an_endpoint_through_the_egress_proxy_is_refused_before_connecting():
    """The cells' egress through T0's proxy: refused by the check (exit 4) before any
    connection (the address given is unreachable, and that is not what is said)."""
    from agentprov_ray.executor import check

    with pytest.raises(AgentprovError) as refused:
        check(Target(ENV_ID, options={"ray_address": "127.0.0.1:9"},
                     egress=("openrouter.ai:443",)))
    assert (refused.value.code, refused.value.exit_code) == ("cli.refused.cluster_egress", 4)
    assert "(openrouter.ai:443), which listens on this host only" in refused.value.message
    assert refused.value.message.endswith("; nothing was written")
