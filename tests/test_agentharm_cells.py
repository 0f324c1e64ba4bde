"""One AgentHarm cell in the real inspect-agentharm environment: one ``inspect_ai.eval()``
of two fixture samples, run by the environment's own worker (a forked, Landlock-confined
child), with the agent and both judges answered by an OpenAI-style server on loopback.

The environment is built for this module from the project's fixture. Its validation split's
first behaviour offers ``get_contacts``, ``create_meme_image`` and ``share_on_pinterest``
and is graded by ``grade_pinterest_memes``, whose semantic judge is called when
``create_meme_image`` was called with its texts.

The server is a small stand-in for a model (a model cannot run here): it answers by what it
is asked, so that the agent's and the judges' calls may arrive in any order. The agent's
first call of a sample gets a tool call, its next one a final answer; the refusal judge's
prompt gets "Answer: No", the semantic judge's "pass".

What is proved: the cell completes; the ``.eval`` log is in staging and Inspect's own
``read_eval_log`` reads it; the capture log's chain checks, ends ``complete`` and holds one
wire request per model call Inspect recorded (the ``.eval`` log's model events), which is
also the number of requests the server answered; the judges' calls are among them, in the
scorer's order (the grading function's semantic judge, then the refusal judge); an agent
that refuses reaches only the refusal judge; the writable dataset copy is gone when the
cell ends."""

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import agentprov_capture
import pytest
from conftest import BuiltEnv, child_env

from agentprov_core.backend.workerclient import scrubbed_env, worker_argv
from agentprov_core.testing import agentharm_fixture

VALIDATION = "benchmark/harmful_behaviors_validation.json"

REFUSAL_MARK = "Answer:"  # the refusal judge's prompt asks for "Answer: Yes/No"
REFUSAL = "I'm sorry, I can't help with that."


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = {"agent": 0, "refusal_judge": 0, "semantic_judge": 0}
        self.lock = threading.Lock()
        #: how many of the agent's first requests are answered HTTP 500
        self.fail_agent = 0
        self.fail_status = 500
        #: the authorization headers the requests carried
        self.auth = set()
        #: the agent refuses: its first reply is refusal text, which the refusal judge calls
        #: a refusal
        self.refuse = False


def _tool_call(n: int, tool: dict) -> dict:
    """A call of ``tool`` with every required argument: a string "fixture", else 1."""
    fn = tool["function"]
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = (fn.get("parameters") or {}).get("required") or []
    args = {k: ("fixture" if props.get(k, {}).get("type", "string") == "string" else 1)
            for k in required}
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": fn["name"], "arguments": json.dumps(args)}}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        msgs = body.get("messages") or []
        text = json.dumps(msgs)
        if body.get("tools"):
            kind = "agent"
            if self.server.refuse:
                message = {"role": "assistant", "content": REFUSAL}
            elif any(m.get("role") == "tool" for m in msgs):
                message = {"role": "assistant", "content": "Here is the note for the group."}
            else:
                message = {"role": "assistant", "content": None,  # every offered tool
                           "tool_calls": [_tool_call(n, t) for n, t in enumerate(body["tools"])]}
        elif REFUSAL_MARK in text:
            verdict = "It refuses. Answer: Yes" if REFUSAL in text else "It helps. Answer: No"
            kind, message = "refusal_judge", {"role": "assistant", "content": verdict}
        else:
            kind, message = "semantic_judge", {"role": "assistant", "content": "pass"}
        with self.server.lock:
            self.server.seen[kind] += 1
            self.server.auth.add(self.headers.get("authorization"))
            fail = kind == "agent" and self.server.fail_agent > 0
            self.server.fail_agent -= fail
        if fail:
            data = json.dumps({"error": {"message": "stand-in fault", "type": "server_error"}})
            self.send_response(self.server.fail_status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())
            return
        reply = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                 "model": body.get("model"),
                 "choices": [{"index": 0, "message": message,
                              "finish_reason": "tool_calls" if message.get("tool_calls")
                              else "stop"}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def cells_env(tmp_path_factory) -> BuiltEnv:
    """The inspect-agentharm environment, built from the project's fixture."""
    home = tmp_path_factory.mktemp("e2e-agentharm-cells-home")
    fixture = home / "fixture"
    agentharm_fixture.write(fixture)
    e = child_env()
    e["AGENTPROV_HOME"] = str(home)
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentharm",
                        "--dataset", str(fixture), "--allow-network"],
                       capture_output=True, text=True, env=e, timeout=1200)
    assert p.returncode == 0, p.stdout + p.stderr
    env_dir = Path(p.stdout.split(" built at ")[1].split(" (")[0])
    return BuiltEnv(home, env_dir.name, env_dir)


@pytest.fixture
def stand_in():
    server = StandIn()
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


#: read in the environment (inspect_ai is there): the .eval log's status, the roles of the
#: eval's models, and each sample's model events (their roles and Inspect's retries)
READ_LOG = r"""
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
out = {"status": log.status, "task": log.eval.task, "model": log.eval.model,
       "model_roles": sorted(log.eval.model_roles or {}),
       "max_retries": log.plan.config.max_retries, "dataset": log.eval.dataset.location,
       "samples": []}
for s in log.samples:
    events = [e for e in s.events if e.event == "model"]
    out["samples"].append({"id": s.id, "epoch": s.epoch, "error": s.error is not None,
                           "roles": [e.role for e in events],
                           "retries": sum(e.retries or 0 for e in events),
                           "failed": sum(e.error is not None for e in events),
                           "scores": sorted(s.scores or {}),
                           "values": {k: v.value for k, v in (s.scores or {}).items()}})
print(json.dumps(out))
"""


def _timed_import(env_dir, module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    p = subprocess.run([str(env_dir / "bin" / "python"), "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return float(p.stdout)


#: the staging roots run_cell made, removed after each test
_STAGING: list[Path] = []


@pytest.fixture(autouse=True)
def _remove_staging():
    yield
    while _STAGING:
        shutil.rmtree(_STAGING.pop(), ignore_errors=True)


def run_cell(env: BuiltEnv, server: StandIn, tmp_path: Path, samples: list[dict],
             key: str | None = None, expect: str = "complete"):
    """One run-cell request to the environment's worker (then a shutdown): (its result, the
    session's staging directory, the worker request's wall time in seconds; the worker's
    stdout and stderr). ``key``: the agent's key, in the worker's environment as T0 puts it
    (the request names only the variable)."""
    # a short path, as T0's staging is: the worker's forkserver puts a Unix socket in TMPDIR
    # (under it), and such paths are limited to about 100 bytes
    root = Path(tempfile.mkdtemp(prefix="agentprov-w-"))
    _STAGING.append(root)
    session = root / "s-cell1"
    session.mkdir()
    req = {"id": 1, "type": "run-cell", "session_id": "s-cell1", "staging": str(session),
           "source": "agentharm", "benchmark_version": None, "defence": "none",
           # the cell as T0's launch sends it (attempt.py), with the samples it must add
           "cell": {"suite": None, "user_task_id": None, "attack": None,
                    "injection_task_id": None, "kind": "samples", "cell_key": "k1",
                    "samples": samples},
           "unit": "u1", "attempt": 1, "backend": {}, "plan_sha256": "0" * 64,
           "config_digest": "sha256:" + "0" * 64, "timeout_s": 600,
           "agent": {"scripted": key is None,
                     "base_url": f"http://127.0.0.1:{server.server_port}/v1",
                     "model_id": "scripted", "pipeline_name": "scripted",
                     "key_env": KEY_ENV if key is not None else None},
           "inspect": INSPECT}
    lines = json.dumps(req) + "\n" + json.dumps({"id": 0, "type": "shutdown"}) + "\n"
    worker_env = scrubbed_env(env.env_dir, root)
    if key is not None:
        worker_env[KEY_ENV] = key
    t = time.perf_counter()
    p = subprocess.run(worker_argv(env.env_dir), input=lines, text=True, capture_output=True,
                       env=worker_env, cwd=root, timeout=900)
    wall = time.perf_counter() - t
    assert p.returncode == 0, p.stderr[-4000:]
    replies = {r["id"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert replies[1]["ok"], replies[1]
    result = replies[1]["result"]
    assert result["status"] == expect, (result, p.stderr[-4000:])
    return result, session, wall, p.stdout + p.stderr


def read_log(env: BuiltEnv, path: Path) -> dict:
    r = subprocess.run([str(env.env_dir / "bin" / "python"), "-c", READ_LOG, str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


KEY_ENV = "AGENTPROV_TEST_AGENT_KEY"
INSPECT = {"task": "inspect_evals/agentharm", "split": "val", "epochs": 1,
           "limits": {"message_limit": 10, "token_limit": 20000, "time_limit": 600},
           "judges": {"refusal_judge": "scripted", "semantic_judge": "scripted"},
           "params": {}, "max_connections": 2}


@pytest.mark.slow
def test_one_agentharm_cell_runs_and_every_model_call_is_recorded(cells_env, stand_in,
                                                                   tmp_path):
    ids = [b["id"] for b in json.loads((cells_env.home / "fixture" / VALIDATION).read_text())
           ["behaviors"]]
    result, session, wall, _ = run_cell(cells_env, stand_in, tmp_path,
                                        [{"index": 0}, {"id": ids[1]}])
    native = result["native_log"]
    assert native.startswith("inspect/") and native.endswith(".eval")
    assert (session / native).is_file()
    assert not (session / "inspect_evals_cache").exists()  # the dataset copy is removed

    log = read_log(cells_env, session / native)
    assert log["status"] == "success" and log["task"] == "inspect_evals/agentharm"
    assert log["model"] == "openai-api/agentprov/scripted"
    assert log["model_roles"] == ["refusal_judge", "semantic_judge"]
    assert log["max_retries"] == 1  # the eval's, over the task's own 3
    # read from the cell's own copy (inspect_evals was first imported in the cell)
    assert log["dataset"] == "inspect_evals_cache/agentharm_dataset/AgentHarm/benchmark/" \
        "harmful_behaviors_validation.jsonl"
    assert sorted(s["id"] for s in log["samples"]) == sorted(ids[:2])
    assert not any(s["error"] for s in log["samples"])
    assert all(s["scores"] for s in log["samples"])
    # per sample, in the order Inspect made them: the agent's tool call and its answer,
    # then the scorer's grading function calls the semantic judge once (create_meme_image
    # was called with its texts), then the refusal judge once (the one assistant message
    # with text); each model event carries its role
    for s in log["samples"]:
        assert s["roles"] == [None, None, "semantic_judge", "refusal_judge"], s
    model_events = sum(len(s["roles"]) for s in log["samples"])
    assert sum(s["retries"] for s in log["samples"]) == 0

    chain = agentprov_capture.check((session / "capture.jsonl").read_bytes())
    assert chain.ok, chain.problems
    assert chain.end["status"] == "complete"
    kinds = [rec["kind"] for rec in chain.records]
    wire = [rec for rec in chain.records if rec["kind"] == "wire_request"]
    assert len(wire) == kinds.count("wire_response")
    # one wire request per model call Inspect recorded, and per request the server
    # answered: the agent's and both judges'
    assert stand_in.seen == {"agent": 4, "refusal_judge": 2, "semantic_judge": 2}
    assert len(wire) == model_events == sum(stand_in.seen.values())
    assert {rec["body"]["model"] for rec in wire} == {"scripted"}
    assert sum("tools" in rec["body"] for rec in wire) == 4  # the agent's
    header = chain.header
    assert "recording_transport@1 mode: observe" in header["declared_instrumentation"]
    assert header["inspect"]["judges"] == INSPECT["judges"]
    assert header["cell"]["samples"] == [{"index": 0}, {"id": ids[1]}]
    print(f"\nagentharm cell: {len(log['samples'])} samples, {model_events} model calls "
          f"(server: {stand_in.seen}); per sample, in order: "
          f"{ {s['id']: s['roles'] for s in log['samples']} }; worker request wall {wall:.2f}s; "
          f"import inspect_ai {_timed_import(cells_env.env_dir, 'inspect_ai'):.2f}s, "
          f"inspect_evals.agentharm "
          f"{_timed_import(cells_env.env_dir, 'inspect_evals.agentharm'):.2f}s")


@pytest.mark.slow
@pytest.mark.req("R-25.26")
def test_a_failed_call_is_retried_once_by_inspect_and_never_by_the_sdk(cells_env, stand_in,
                                                                       tmp_path):
    """The agent's first request is answered HTTP 500: Inspect retries it (its
    ``max_retries=1``), the SDK not at all (``max_retries=0``). Inspect records the failed
    attempt as a model event of its own (with its error; ``retries`` stays unset), so the
    wire attempts and the model events still pair one to one."""
    stand_in.fail_agent = 1
    result, session, _, _ = run_cell(cells_env, stand_in, tmp_path, [{"index": 0}])
    log = read_log(cells_env, session / result["native_log"])
    (sample,) = log["samples"]
    assert not sample["error"] and sample["failed"] == 1 and sample["retries"] == 0
    chain = agentprov_capture.check((session / "capture.jsonl").read_bytes())
    assert chain.ok, chain.problems
    responses = [rec for rec in chain.records if rec["kind"] == "wire_response"]
    wire = [rec for rec in chain.records if rec["kind"] == "wire_request"]
    assert [r["status"] for r in responses].count(500) == 1 and responses[0]["status"] == 500
    assert len(wire) == len(sample["roles"]) == sum(stand_in.seen.values()) == 5
    assert stand_in.seen == {"agent": 3, "refusal_judge": 1, "semantic_judge": 1}



@pytest.mark.slow
@pytest.mark.req("R-25.8")
@pytest.mark.parametrize("status", [401, 403])
def test_an_auth_failure_is_not_retried_and_the_cell_is_incomplete(cells_env, stand_in,
                                                                   tmp_path, status):
    """A 401 or 403 is not retried (so Inspect never rebuilds the client, which would be
    an unrecorded one): the sample errors in the harness, is kept in the .eval log, and
    the cell ends incomplete (D-743); the one attempt is recorded."""
    stand_in.fail_agent, stand_in.fail_status = 1, status
    result, session, _, _ = run_cell(cells_env, stand_in, tmp_path, [{"index": 0}],
                                     expect="incomplete")
    assert result["error"].startswith("sample(s) errored in the harness: ")
    (sample,) = read_log(cells_env, session / result["native_log"])["samples"]
    assert sample["error"] and sample["roles"] == [None] and sample["failed"] == 1
    chain = agentprov_capture.check((session / "capture.jsonl").read_bytes())
    assert chain.ok and chain.end["status"] == "incomplete"
    assert [r["status"] for r in chain.records if r["kind"] == "wire_response"] == [status]
    assert stand_in.seen == {"agent": 1, "refusal_judge": 0, "semantic_judge": 0}


#: read in the environment: every entry of a .eval log (a ZIP of zstd entries, which
#: Python 3.12's zipfile reads once inspect_ai has patched it), decompressed, to stdout
DUMP_ENTRIES = r"""
import sys, zipfile
import inspect_ai.log  # noqa: F401 - patches zipfile for zstd
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        sys.stdout.buffer.write(z.read(name))
"""


@pytest.mark.slow
@pytest.mark.req("R-25.23")
def test_the_agent_s_key_reaches_the_endpoint_and_nothing_written(cells_env, stand_in,
                                                                  tmp_path):
    """A unique key in the worker's environment is sent to the endpoint by the agent and
    both judges, and is in no byte the cell wrote: staging (the capture log, the result,
    the .eval log's entries decompressed), the worker's home and temporary directory (where
    Inspect keeps its own trace logs) and the worker's output."""
    sentinel = "sk-agentprov-sentinel-" + uuid.uuid4().hex
    result, session, _, output = run_cell(cells_env, stand_in, tmp_path, [{"index": 0}],
                                          key=sentinel)
    assert stand_in.auth == {f"Bearer {sentinel}"}
    assert stand_in.seen["refusal_judge"] and stand_in.seen["semantic_judge"]
    root = session.parent
    files = [p for p in root.rglob("*") if p.is_file()]
    assert session / "capture.jsonl" in files and session / result["native_log"] in files
    assert any(p.match("home/.local/share/inspect_ai/traces/*.log") for p in files)
    for path in files:
        assert sentinel.encode() not in path.read_bytes(), path
    entries = subprocess.run([str(cells_env.env_dir / "bin" / "python"), "-c", DUMP_ENTRIES,
                              str(session / result["native_log"])],
                             capture_output=True, timeout=120)
    assert entries.returncode == 0, entries.stderr
    assert b'"refusal_judge"' in entries.stdout  # the entries were read, decompressed
    assert sentinel.encode() not in entries.stdout
    assert sentinel not in output


@pytest.mark.slow
def test_a_refusal_reaches_only_the_refusal_judge(cells_env, stand_in, tmp_path):
    """The agent's first reply is refusal text: Inspect makes no second agent call, the
    grading function calls no semantic judge (no create_meme_image call), the refusal judge
    reads the reply and the sample is scored a refusal."""
    stand_in.refuse = True
    result, session, _, _ = run_cell(cells_env, stand_in, tmp_path, [{"index": 0}])
    (sample,) = read_log(cells_env, session / result["native_log"])["samples"]
    assert sample["roles"] == [None, "refusal_judge"] and not sample["error"]
    (value,) = sample["values"].values()
    assert value["refusal"] == 1.0
    assert stand_in.seen == {"agent": 1, "refusal_judge": 1, "semantic_judge": 0}
