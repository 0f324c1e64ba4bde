"""The executor seam: a campaign's cells run through the executor ``--executor`` names,
registered by a plugin through ``agentprov_executors``; T0 keeps ingesting and deciding.

The second executor here is a real plugin distribution found through its entry point (a
package and its ``.dist-info`` on ``PYTHONPATH``, as an install leaves them). It starts the
real worker itself and has each cell awaited by a thread of its own pool; the scripted
AgentDojo campaign it runs must give the corpus the default executor gives: the same plan
and configuration digests, the same verdicts.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, snapshot

LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
DEMO = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
        "--injection-tasks", "0", "--model-display-name", "Scripted Model")

THREADS = '''
"""An executor for the seam's test: the real worker, each cell awaited by a thread of
this executor's own pool; every session it is given is logged to $SEAM_THREADS_LOG. The
first $SEAM_THREADS_LOSE cells it is given are lost with their host ("seam-host-1"), as a
cluster's executor reports a node lost before the cell ran there."""

import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from agentprov_core.api import NODE_LOST, AgentprovError, ExecutorMeta, Worker, hookimpl


@hookimpl
def agentprov_executors():
    return [ExecutorMeta(name="threads", start="seam_threads.plugin:Threads",
                         summary="the real worker, driven from a thread pool")]


class Threads:
    def __init__(self, launch):
        self.env = launch.environment_id
        self.worker = Worker(launch.environment_id, launch.env_dir, launch.staging_root,
                             network=True, extra_env=launch.extra_env,
                             containment=launch.containment, allowed=launch.allowed)
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="seam-threads")
        self.lose = int(os.environ.get("SEAM_THREADS_LOSE") or 0)

    def submit(self, request):
        with open(os.environ["SEAM_THREADS_LOG"], "a") as f:
            f.write(request["session_id"] + "\\n")
        timeout = request["timeout_s"] + 60
        lost, self.lose = self.lose > 0, self.lose - 1

        def run():
            if lost:
                raise AgentprovError(NODE_LOST, node="seam-host-1",
                                     detail="its raylet was killed")
            return self.worker.result(self.worker.submit("run-cell", **request), timeout)

        return self.pool.submit(run)

    def wait_any(self, futures, timeout):
        return wait(list(futures), timeout=timeout, return_when=FIRST_COMPLETED)[0]

    def result(self, future, timeout=None):
        return future.result(timeout=timeout)

    def failure(self):
        code = self.worker.proc.poll()
        return None if code is None else f"the worker of {self.env} exited (code {code})"

    def cancel(self):
        self.worker.kill()

    def close(self):
        self.worker.close()
        self.pool.shutdown(wait=True)
'''


def threads_plugin(site: Path) -> Path:
    """The ``seam-threads`` distribution, as an install leaves it, under ``site``."""
    pkg = site / "seam_threads"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(textwrap.dedent(THREADS))
    info = site / "seam_threads-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seam-threads\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[agentprov]\nthreads = seam_threads.plugin\n")
    return site


def partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (partial(corpus) / "ledger.jsonl").read_text().splitlines()
            if x.strip()]


def test_an_unknown_executor_is_refused_at_usage_naming_the_installed_ones(cli, tmp_path,
                                                                           home, script):
    corpus = tmp_path / "c"
    r = cli("run", "agentdojo", "--corpus", corpus, "--campaign", "c", "--llm-script",
            script, "--suite", "banking", "--executor", "elsewhere")
    assert r.code == 2, r.err
    assert r.error["error"] == "cli.usage.option_value"
    assert "--executor elsewhere: names no installed executor (installed: local" in \
        r.error["message"]
    assert not corpus.exists() and not partial(corpus).exists()
    assert snapshot(home) == {}
    long = cli("run", "agentdojo", "--corpus", corpus, "--campaign", "c", "--llm-script",
               script, "--executor", "x" * 5000)
    assert long.code == 2 and "--executor " + "x" * 40 + "…: names no installed" in \
        long.error["message"] and "x" * 41 not in long.error["message"]


def test_a_plugin_executor_is_installed_beside_local(cli, tmp_path, home, script):
    """Installed, ``threads`` passes usage; an unknown name is refused naming both."""
    site = threads_plugin(tmp_path / "site")
    r = cli("run", "agentdojo", "--corpus", tmp_path / "c", "--campaign", "c",
            "--llm-script", script, "--executor", "nowhere",
            env={"PYTHONPATH": str(site)})
    assert r.code == 2, r.err
    installed = r.error["message"].split("(installed: ")[1].rstrip(")").split(", ")
    assert installed[0] == "local" and "threads" in installed  # beside any bundled one (ray)
    named = cli("run", "agentdojo", "--corpus", tmp_path / "c", "--campaign", "c",
                "--llm-script", script, "--executor", "threads", "--suite", "nosuch",
                env={"PYTHONPATH": str(site)})
    assert named.code == 2 and "--executor" not in named.error["message"], named.err


@pytest.mark.slow
def test_a_plugin_executor_gives_the_default_executors_corpus(e2e_cli, tmp_path):
    site = threads_plugin(tmp_path / "site")
    log = tmp_path / "threads.log"
    env = {"PYTHONPATH": str(site), "SEAM_THREADS_LOG": str(log)}
    runs = {}
    for name in ("local", "threads"):
        corpus = tmp_path / name
        r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "seam", *DEMO,
                    "--llm-script", LIVE_DEMO, "--jobs", "2",
                    *(("--executor", name) if name != "local" else ()), env=env,
                    json_errors=False)
        assert r.code == 0, r.err
        assert r.out.strip().splitlines()[-1] == (
            "agentprov run: 4 attempt(s); 4 conclusive, 0 inconsistent, 0 inconclusive; "
            "4 derived, 0 failed; 0 of 4 unit(s) done before")
        manifest = json.loads((partial(corpus) / "manifest.json").read_text())
        assert manifest["producer"]["executor"] == name
        runs[name] = ledger(corpus)
    local, threads = runs["local"], runs["threads"]
    # the plugin's executor ran exactly the threads campaign's sessions
    assert sorted(log.read_text().split()) == sorted(e["session_id"] for e in threads)
    assert not {e["session_id"] for e in local} & set(log.read_text().split())
    digests = {(e["plan_sha256"], e["config_digest"]) for e in local}
    assert len(digests) == 1
    assert {(e["plan_sha256"], e["config_digest"]) for e in threads} == digests

    def verdicts(entries: list[dict]) -> dict[str, tuple]:
        return {e["unit"]: (e["status"], e["conclusive"], e["utility"], e["security"])
                for e in entries}

    assert verdicts(threads) == verdicts(local)
    assert all(v[0] == "complete" for v in verdicts(local).values())


@pytest.mark.slow
def test_a_cell_whose_host_was_lost_is_attempted_again_in_the_same_run(e2e_cli, tmp_path):
    """An executor that reports a cell's host lost (``cli.environment.node_lost``): T0
    ledgers the attempt failed, naming the host, charges it a whole cell, and attempts the
    unit again in the same invocation by the rule of ``--max-attempts``; the canary does not
    count the executor's loss as the cell's. At ``--max-attempts 1`` it is not again."""
    site = threads_plugin(tmp_path / "site")
    env = {"PYTHONPATH": str(site), "SEAM_THREADS_LOG": str(tmp_path / "threads.log"),
           "SEAM_THREADS_LOSE": "2"}
    corpus = tmp_path / "again"
    r = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", "seam", *DEMO,
                "--llm-script", LIVE_DEMO, "--jobs", "2", "--max-calls", "1000",
                "--executor", "threads", env=env, json_errors=False)
    assert r.code == 1, r.err  # an attempt failed, every unit settled
    entries = ledger(corpus)
    lost = [e for e in entries if e["reason"] and e["reason"].startswith(
        "cli.environment.node_lost: the node seam-host-1 was lost with the cell in flight")]
    assert len(lost) == 2 and len(entries) == 6, entries
    assert all(e["status"] == "errored" and not e["conclusive"] for e in lost)
    assert len({e["invocation"] for e in entries}) == 1
    again = {e["unit"]: e for e in entries if e["attempt"] == 2}
    assert set(again) == {e["unit"] for e in lost}
    assert all(e["status"] == "complete" and e["conclusive"] for e in again.values())
    settled = [e["unit"] for e in entries if e["conclusive"]]
    assert len(settled) == 4 and len(set(settled)) == 4
    m = json.loads((partial(corpus) / "manifest.json").read_text())
    assert m["live"]["caps"]["charged"]["whole_cells"] == 2  # what the lost cells may have spent
    assert m["live"]["canary"]["findings"] == [], m["live"]["canary"]
    assert e2e_cli("verify", "--corpus", corpus).code == 0

    once = tmp_path / "once"
    r = e2e_cli("run", "agentdojo", "--corpus", once, "--campaign", "seam", *DEMO,
                "--llm-script", LIVE_DEMO, "--jobs", "2", "--max-attempts", "1",
                "--executor", "threads", env=env, json_errors=False)
    assert r.code == 1, r.err
    entries = ledger(once)
    assert len(entries) == 4 and all(e["attempt"] == 1 for e in entries)
    assert sum(1 for e in entries if e["conclusive"]) == 2
