"""The worker is a host: it serves the sources its environment's worker packages register
under the entry-point group ``agentprov.worker``, and names no benchmark itself.

A small environment (a venv on this interpreter's base install, with the worker's real
libraries copied in) holds stand-in worker packages, each registered through a real
``.dist-info`` entry point: one that serves a suites-shaped catalogue and runs cells, one
whose module fails at import, one that registers something that is not a ``WorkerSource``.
The real worker (``python -P -m agentprov_backend.worker``) is spoken to over its pipe.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, install_worker_libraries, install_worker_source

from agentprov_core.backend.workerclient import scrubbed_env, worker_argv

HOST = ROOT / "backends" / "shared" / "src" / "agentprov_backend"

GOOD = '''
import json, os

CATALOGUE = {
    "format": "agentprov-catalogue/0.1", "source": "mailbench", "backend": "mailbench",
    "provenance": {"kind": "snapshot", "packages": {}, "generator": "test", "note": "test"},
    "benchmark_versions": ["v1"], "default_benchmark_version": "v1",
    "suites": [{"name": "mail", "benchmark_version": "v1",
                "user_tasks": ["user_task_0", "user_task_1"],
                "injection_tasks": ["injection_task_0"], "tools": 2,
                "tool_definitions_bytes": 10}],
    "attacks": [{"name": "direct", "dos": False, "refused": False, "refused_reason": None,
                 "needs": [], "names_model": False},
                {"name": "noisy", "dos": False, "refused": True,
                 "refused_reason": "not run here", "needs": [], "names_model": False}],
    "defences": [], "tasks": [],
}


def child_main(request):
    # the stand-in cell: returns its result without staging it (the host writes it)
    pass


def catalogue(self):
    return json.loads(json.dumps(CATALOGUE))
'''


@pytest.fixture(scope="module")
def host_env(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostenv") / "env"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(d)], check=True)
    site = next(d.glob("lib/python3*/site-packages"))
    install_worker_libraries(site)
    install_worker_source(site, "mailbench", GOOD, distribution="mailbench-worker")
    mod = site / "mailbench_worker_mailbench.py"
    text = mod.read_text(encoding="utf-8")
    # its catalogue, and a cell that returns a result for the host to stage
    text = text.replace("class _Source(_WorkerSource):\n    name = 'mailbench'\n",
                        "class _Source(_WorkerSource):\n    name = 'mailbench'\n"
                        "    catalogue = catalogue\n")
    text = text.replace('        child_main(request)\n        return {"status": "errored", '
                        '"error": "the stand-in staged no result"}',
                        '        return {"status": "complete", "utility": True, '
                        '"security": None, "setup_refusal": None, "native_log": None, '
                        '"error": None, "cwd": os.getcwd()}')
    mod.write_text(text, encoding="utf-8")
    install_worker_source(site, "brokenbench", "raise RuntimeError('the import fails')\n",
                          distribution="brokenbench-worker")
    (site / "notasource_worker.py").write_text("SOURCE = object()\n", encoding="utf-8")
    info = site / "notasource_worker-0.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: notasource-worker\n"
                                   "Version: 0.0.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[agentprov.worker]\n"
                                           "notasource = notasource_worker:SOURCE\n",
                                           encoding="utf-8")
    return d


def talk(env_dir: Path, tmp_path: Path, *requests: dict) -> dict:
    """Send ``requests`` (numbered from 1) and a shutdown; the replies by id."""
    staging = tmp_path / "staging"
    staging.mkdir(exist_ok=True)
    lines = [json.dumps({"id": i, **r}) for i, r in enumerate(requests, 1)]
    lines.append(json.dumps({"id": 0, "type": "shutdown"}))
    p = subprocess.run(worker_argv(env_dir), input="\n".join(lines) + "\n", text=True,
                       capture_output=True, env=scrubbed_env(env_dir, staging), cwd=staging,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return {r["id"]: r for r in map(json.loads, p.stdout.splitlines())}


def test_the_host_library_names_no_benchmark():
    """Nothing in the worker host's code names a benchmark: what a source serves comes from
    its worker package."""
    named = {}
    for path in sorted(HOST.rglob("*.py")):
        found = re.findall(r"agentdojo|autodojo|agentdyn|agentharm|inspect_evals",
                           path.read_text(encoding="utf-8"), re.I)
        if found:
            named[path.name] = sorted(set(found))
    assert named == {}


def test_the_hello_lists_what_each_worker_package_serves(host_env, tmp_path):
    hello = talk(host_env, tmp_path, {"type": "hello"})[1]["result"]
    assert hello["sources"] == ["mailbench"]
    served = hello["served"]
    assert served["mailbench"] == {"distribution": "mailbench-worker", "version": "0.0.0",
                                   "entry_point": "mailbench_worker_mailbench:SOURCE"}
    assert served["brokenbench"]["distribution"] == "brokenbench-worker"
    assert served["brokenbench"]["error"].endswith(
        "fails to load: RuntimeError: the import fails")
    assert "brokenbench-worker (agentprov.worker brokenbench = " in served["brokenbench"]["error"]
    assert served["notasource"]["error"].endswith(
        "registers an object of type 'object', not an agentprov_backend.source.WorkerSource")


def test_a_broken_worker_package_fails_only_its_own_source(host_env, tmp_path):
    r = talk(host_env, tmp_path,
             {"type": "catalogue", "source": "brokenbench"},
             {"type": "catalogue", "source": "nosuchbench"},
             {"type": "catalogue", "source": "mailbench"},
             {"type": "plan", "source": "brokenbench", "cells": []})
    assert r[1]["ok"] is False and r[1]["error"]["code"] == "worker.source_unavailable"
    assert "RuntimeError: the import fails" in r[1]["error"]["message"]
    assert r[2]["error"]["code"] == "worker.unknown_source"
    assert "serves brokenbench, mailbench, notasource, not 'nosuchbench'" in \
        r[2]["error"]["message"]
    assert r[3]["ok"] is True and r[3]["result"]["source"] == "mailbench"
    assert r[3]["result"]["provenance"]["kind"] == "worker"
    assert r[4]["error"]["code"] == "worker.source_unavailable"


def test_the_default_plan_check_reads_the_source_s_catalogue(host_env, tmp_path):
    cells = [
        {"cell_key": "a", "suite": "mail", "user_task_id": "user_task_1", "attack": None,
         "injection_task_id": None},
        {"cell_key": "b", "suite": "mail", "user_task_id": "user_task_9", "attack": None,
         "injection_task_id": None},
        {"cell_key": "c", "suite": "mail", "user_task_id": "user_task_0", "attack": "noisy",
         "injection_task_id": "injection_task_0"},
        {"cell_key": "d", "suite": "post", "user_task_id": "user_task_0", "attack": None,
         "injection_task_id": None},
    ]
    res = talk(host_env, tmp_path, {"type": "plan", "source": "mailbench",
                                    "benchmark_version": "v1", "cells": cells})[1]["result"]
    assert res["problems"] == ["b: no user task 'user_task_9' in mail",
                               "c: attack 'noisy' is refused",
                               "d: no suite 'post' (suites: mail)"]


def test_a_cell_runs_in_its_staging_directory_and_the_host_stages_its_result(host_env,
                                                                             tmp_path):
    session = tmp_path / "staging" / "s-1"
    r = talk(host_env, tmp_path, {
        "type": "run-cell", "session_id": "s-1", "staging": str(session), "source": "mailbench",
        "cell": {"cell_key": "a"}, "agent": {}, "benchmark_version": "v1", "timeout_s": 60},
        {"type": "run-cell", "session_id": "s-2", "staging": str(tmp_path / "staging" / "s-2"),
         "source": "brokenbench", "cell": {}, "agent": {}, "benchmark_version": "v1"})
    assert r[1]["ok"] is True, r[1]
    assert r[1]["result"]["status"] == "complete"
    assert r[1]["result"]["cwd"] == str(session)
    assert json.loads((session / "result.json").read_text()) == r[1]["result"]
    # a source that cannot load is the request's error: no cell is forked, nothing staged
    assert r[2]["error"]["code"] == "worker.source_unavailable"
    assert not (tmp_path / "staging" / "s-2").exists()
