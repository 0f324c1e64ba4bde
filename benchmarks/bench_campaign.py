"""Live campaigns: the recording's overhead, concurrency, and agentdojo's own runner.

The real AgentDojo environment is built once in a temporary ``AGENTPROV_HOME``
(``python -m agentprov_core backends build agentdojo --allow-network``; skipped, saying why,
when it cannot be built). Every model call is answered by agentprov's scripted endpoint
(``agentprov_core.live.scripted.server.ScriptedEndpoint``) on loopback, with a fixed latency per
call; every cell makes three calls (the replies of ``examples/scripts/live-demo.json``: two
tool calls and a final text). Three measurements, each side by side in one run,
interleaved (forward order on even rounds, reverse on odd) after an untimed warm-up:

1. **Recording overhead.** Inside the backend environment (``<env>/bin/python``,
   ``PYTHONPATH`` = the checkout's ``backends/shared/src``, ``backends/dojo/src`` and ``packages/capture/src``, ``PYTHONDONTWRITEBYTECODE=1``
   as the worker runs): a parent that imported what the worker's forkserver imports forks a
   fresh process per cell, as the worker does, and the cell (banking ``user_task_0``) runs
   either with AgentDojo's own pipeline over the stock ``openai.OpenAI`` client, or as
   ``agentprov_dojo.cells.run_cell`` does (``recording_http_client(writer)``, the
   ``CaptureWriter`` and the observation hooks), with ``durable=True`` (the default: an
   fsync at the header, before each wire request and at the end) and with ``durable=False``; at 0 ms and at 50 ms per call. The endpoint runs
   in a separate process of T0's interpreter. Besides: what a forked cell still imports after
   the worker's preload (a check that the preload covers it), what a cell costs when forked
   from a parent that has run a cell itself (the state of agentdojo's runner from its second
   cell on), the capture's own time measured inside the cell, and one fsync on the disk.
2. **Concurrency.** 24 benign cells (``--suite banking,slack --user-tasks 0-11``) through the
   real CLI at ``--jobs 1`` and ``--jobs 4`` (or the host's maximum ``--jobs``, if lower:
   ``agentprov_core.backend.hostlimits``), 200 ms per call, a fresh corpus per run; the ledger and the capture
   logs split each run into its serial part and its cells.
3. **Against agentdojo's own runner.** ``<env>/bin/python -m agentdojo.scripts.benchmark
   --model VLLM_PARSED -s banking`` (its 16 benign cells; ``vllm_parsed`` is the provider
   that drives AgentDojo's own ``OpenAILLM``, the element agentprov runs, against
   ``http://localhost:$LOCAL_LLM_PORT/v1``) against ``agentprov run agentdojo --suite banking
   --benign only --jobs 1``, 200 ms per call. Where agentprov's time goes is measured by
   running the same command in a fresh process with timers around its phases, joined
   with the capture logs and native logs of its corpus.

Run it alone (``python benchmarks/bench_campaign.py``). The ratios are the result; the
absolute times belong to the machine that measured them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_backend import Skip, agentprov_argv, env_python_env, run_build, t0_env
from bench_cli_start import console_script, p90
from benchutil import load_avg

ROOT = Path(__file__).resolve().parent.parent
#: the worker library's and the capture library's sources, ahead of what the environment
#: installed
WORKER_SRC = os.pathsep.join([str(ROOT / "backends" / "shared" / "src"),
                              str(ROOT / "backends" / "dojo" / "src"),
                              str(ROOT / "packages" / "capture" / "src")])
DEMO_SCRIPT = ROOT / "examples" / "scripts" / "live-demo.json"
BACKEND = "agentdojo"

RECORDING_TARGET = 0.05   # the target: recording under 5% of a cell's wall time
CONCURRENCY_TARGET = 3.5  # the target: --jobs 4 at least 3.5x --jobs 1
RUNNER_TARGET = 1.15      # the target: agentprov --jobs 1 within 1.15x of agentdojo's runner
CALLS_PER_CELL = 3

# ----------------------------------------------------------------------------- children
# The scripted endpoint, in a separate process of T0's interpreter. argv: script, mode.
# Mode "runner" also answers /v1/... (agentdojo's runner has no session in its base URL)
# as the one session "runner"; the script then holds every cell's replies in a row.
ENDPOINT_CHILD = r'''
import json, re, sys
from agentprov_core.live.scripted import server
from agentprov_core.live.scripted.script import load_script
if sys.argv[2] == "runner":
    _route = server._Handler._route
    def route(self):
        m = re.match(r"^/v1/(chat/completions|models)$", self.path.split("?", 1)[0])
        return ("runner", m[1]) if m else _route(self)
    server._Handler._route = route
ep = server.ScriptedEndpoint(load_script(sys.argv[1])).start()
print(ep.port, flush=True)
sys.stdin.read()
ep.stop()
print(json.dumps(ep.sessions()), flush=True)
'''

# A cell runner in the backend environment. It imports what the worker's forkserver
# imports (agentprov_dojo.preload) and the modules named in argv[1], runs the stock cell
# of argv[2] in itself when one is given (a parent in the state of a runner's later cells),
# then, per request
# line on stdin, forks a child that runs one cell (a fresh process per cell, as the worker
# does) and answers one line: the child's report and the wall time from fork to reap.
HARNESS = r'''
import importlib, json, os, sys, time
proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr
t0 = time.perf_counter()
import agentprov_dojo.preload  # noqa: F401  what the worker's forkserver imports
preload_s = time.perf_counter() - t0
failed = []
t0 = time.perf_counter()
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001
        failed.append(f"{name}: {type(exc).__name__}")
extra_s = time.perf_counter() - t0
from pathlib import Path
import agentprov_capture as capture
from agentprov_backend import recording
from agentprov_dojo import cells


def stock_cell(req, own_tls=False):
    """cells._run without the recording: AgentDojo's pipeline over the stock client, with
    the forkserver's TLS context as the worker's cells have it (``own_tls``: the client
    builds its own, as ``openai.OpenAI()`` does in a fresh process)."""
    import openai
    from agentdojo.agent_pipeline import AgentPipeline, PipelineConfig
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
    from agentdojo.benchmark import run_task_without_injection_tasks
    from agentdojo.logging import OutputLogger
    from agentdojo.task_suite.load_suites import get_suite

    staging, cell, agent = Path(req["staging"]), req["cell"], req["agent"]
    suite = get_suite(req["benchmark_version"], cell["suite"])
    user_task = suite.get_user_task_by_id(cell["user_task_id"])
    kw = {} if own_tls else {"http_client": openai.DefaultHttpxClient(
        verify=recording.shared_tls_context())}
    client = openai.OpenAI(base_url=agent["base_url"], api_key="agentprov-scripted", **kw)
    llm = OpenAILLM(client, agent["model_id"])
    llm.name = agent["pipeline_name"]
    pipeline = AgentPipeline.from_config(PipelineConfig(
        llm=llm, model_id=agent["model_id"], defense=None, system_message_name=None,
        system_message=None))
    native = staging / "native"
    with OutputLogger(str(native)):
        utility, security = run_task_without_injection_tasks(
            suite, pipeline, user_task, logdir=native, force_rerun=True,
            benchmark_version=req["benchmark_version"])
    log = cells.native_log_path(native, agent["pipeline_name"], cell["suite"],
                                cell["user_task_id"], None, None)
    json.loads(log.read_text(encoding="utf-8"))
    result = {"status": "complete", "utility": utility, "security": security,
              "native_log": str(log.relative_to(staging))}
    (staging / "result.json").write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    return result


def child(job):
    req = job["req"]
    staging = Path(req["staging"])
    staging.mkdir(parents=True)
    os.chdir(staging)
    # as in the worker, whose fd 1 is its stderr file: AgentDojo's prints go to a file
    fd = os.open(staging / "stdout.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", encoding="utf-8", closefd=False)
    before = set(sys.modules)
    acc = {"writer": 0.0, "fsync": 0.0, "hooks": 0.0}

    def timed(fn, key):  # time spent inside fn, summed (a few microseconds of its own)
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                acc[key] += time.perf_counter() - t
        return wrapper

    t = time.perf_counter()
    if job["variant"] in ("stock", "stock-own-tls"):
        res = stock_cell(req, own_tls=job["variant"] == "stock-own-tls")
    else:
        if job["variant"] == "rec-nofsync":
            capture.CaptureWriter.__init__.__kwdefaults__["durable"] = False
        for name in ("__init__", "append", "end"):  # every record, the header included
            setattr(capture.CaptureWriter, name,
                    timed(getattr(capture.CaptureWriter, name), "writer"))
        os.fsync = timed(os.fsync, "fsync")
        recording.body_fields = timed(recording.body_fields, "hooks")
        cells._env_digest = timed(cells._env_digest, "hooks")
        cells._jsonable = timed(cells._jsonable, "hooks")
        res = cells.run_cell(req)
    inner = time.perf_counter() - t
    doc = {"inner": inner, "status": res.get("status"), "error": res.get("error"),
           "new_modules": sorted(set(sys.modules) - before), **acc}
    if res.get("native_log"):
        native = json.loads((staging / res["native_log"]).read_text(encoding="utf-8"))
        doc["assistant_messages"] = sum(1 for m in native["messages"] if m["role"] == "assistant")
        doc["duration"] = native.get("duration")
    cap = staging / "capture.jsonl"
    if cap.exists():
        data = cap.read_bytes()
        doc["records"] = data.count(b"\n")
        doc["capture_bytes"] = len(data)
    return doc


warm = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
warm_s = None
if warm:  # one stock cell in the parent itself, as agentdojo's runner runs its first cell
    here = os.getcwd()
    Path(warm["staging"]).mkdir(parents=True)
    os.chdir(warm["staging"])
    t0 = time.perf_counter()
    stock_cell(warm)
    warm_s = time.perf_counter() - t0
    os.chdir(here)
proto.write(json.dumps({"preload_s": preload_s, "extra_s": extra_s, "failed": failed,
                        "warm_s": warm_s, "modules": len(sys.modules)}) + "\n")
proto.flush()
for line in sys.stdin:
    job = json.loads(line)
    r, w = os.pipe()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            doc = child(job)
        except BaseException as exc:  # noqa: BLE001
            import traceback
            doc = {"error": "".join(traceback.format_exception(exc))[-3000:]}
        data = json.dumps(doc).encode()
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t
    doc = json.loads(b"".join(chunks) or b"{}")
    doc["wall"] = wall
    doc["exit"] = os.waitstatus_to_exitcode(status)
    proto.write(json.dumps(doc) + "\n")
    proto.flush()
'''

# `agentprov run ...` in-process, in a fresh process of T0's interpreter, with timers around
# its phases (wall clock, to join with the capture logs' started_at). argv: output, args...
INSTRUMENTED_CHILD = r'''
import json, sys, time
t_first = time.time()
events = []


def wrap(owner, name, label, detail=None):
    orig = getattr(owner, name)

    def timed(*a, **k):
        t = time.time()
        out = None
        try:
            out = orig(*a, **k)
            return out
        finally:
            events.append([label, t, time.time(), detail(a, k, out) if detail else None])
    setattr(owner, name, timed)


from agentprov_core.cli.main import main
from agentprov_core.run import attempt, campaign, checks, dryrun, prepare as planning, units
from agentprov_core.backend import workerclient
from agentprov_core.live.scripted import server

wrap(planning, "prepare", "prepare")
wrap(checks, "check_corpus", "check_corpus")
wrap(units, "read_progress", "read_progress")
wrap(dryrun, "dry_run", "check")
wrap(workerclient, "network_block_prefix", "probe")
wrap(workerclient.Worker, "__init__", "worker_init", lambda a, k, o: bool(k.get("network")))
wrap(workerclient.Worker, "request", "request", lambda a, k, o: a[1])
wrap(workerclient.Worker, "close", "worker_close")
wrap(campaign, "run", "campaign_run")
wrap(campaign, "_campaign", "campaign_cells")
wrap(attempt, "launch", "launch", lambda a, k, o: o.session_id if o is not None else None)
wrap(attempt, "ingest", "ingest", lambda a, k, o: a[2].session_id)
wrap(server.ScriptedEndpoint, "start", "endpoint_start")
wrap(server.ScriptedEndpoint, "stop", "endpoint_stop")
t_imported = time.time()
code = 0
try:
    main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
t_last = time.time()
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump({"t_first": t_first, "t_imported": t_imported, "t_last": t_last, "code": code,
               "events": events}, f)
'''


# --------------------------------------------------------------------------- helpers
def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values),
            "p90": p90(values) if len(values) > 1 else values[0], "n": len(values),
            "values": values}


def _epoch(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=dt.UTC).timestamp()


def fs_of(path: Path) -> str:
    """The filesystem type and device a path lives on (/proc/mounts, longest prefix)."""
    try:
        mounts = [line.split()[:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "?"
    p = str(path.resolve())
    best = max((m for m in mounts if p == m[1] or p.startswith(m[1].rstrip("/") + "/")),
               key=lambda m: len(m[1]), default=None)
    return f"{best[2]} ({best[0]})" if best else "?"


def replies() -> list[dict[str, Any]]:
    """The three replies of the user guide's script, without their notes."""
    out = json.loads(DEMO_SCRIPT.read_text(encoding="utf-8"))
    return [{k: v for k, v in r.items() if k != "note"} for r in out]


def write_script(path: Path, latency_s: float, cells: int = 1) -> Path:
    path.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": latency_s,
                                "replies": replies() * cells}), encoding="utf-8")
    return path


class ChildServer:
    """A loopback server in a process of its own: it prints its port on its first line of
    stdout, stops when its stdin closes and then prints one JSON line of what it answered
    (:meth:`close` returns it)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None, cwd: str) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, cwd=cwd)
        self.port = int(self.proc.stdout.readline())
        self.answered: dict[str, int] = {}

    def close(self) -> dict[str, int]:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            line = self.proc.stdout.readline()
            self.answered = json.loads(line) if line.strip() else {}
            self.proc.wait(timeout=30)
        return self.answered

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Endpoint(ChildServer):
    """The scripted endpoint in its own process of T0's interpreter; :meth:`close` returns
    the requests per session."""

    def __init__(self, script: Path, mode: str, env: dict[str, str], cwd: str) -> None:
        super().__init__([sys.executable, "-c", ENDPOINT_CHILD, str(script), mode], env, cwd)

    def base_url(self, session_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/s/{session_id}/v1"


class Harness:
    """HARNESS in the backend environment: forks one process per cell."""

    def __init__(self, py: Path, env: dict[str, str], cwd: Path, extras: list[str],
                 name: str, warmup: dict[str, Any] | None = None) -> None:
        self.log = cwd / f"harness-{name}.stderr"
        self._err = open(self.log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([str(py), "-c", HARNESS, json.dumps(extras),
                                      json.dumps(warmup)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, env=env, cwd=str(cwd))
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the harness did not start: {self._tail()}")
        self.info = json.loads(line)

    def _tail(self) -> str:
        self._err.flush()
        return self.log.read_text(errors="replace")[-3000:]

    def run(self, variant: str, req: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"variant": variant, "req": req}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the harness ended: {self._tail()}")
        doc = json.loads(line)
        if doc.get("exit") != 0 or doc.get("status") != "complete" or (
                doc.get("assistant_messages") != CALLS_PER_CELL):
            raise RuntimeError(f"{variant}: the cell did not complete with "
                               f"{CALLS_PER_CELL} model calls: {json.dumps(doc)[:3000]}")
        return doc

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self._err.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def interleave(rounds: int, cmds: dict[str, Callable[[], float]],
               warmup: tuple[str, ...] | None = None) -> dict[str, list[float]]:
    """An untimed warm-up (every command, or those named), then ``rounds`` rounds, forward
    order on even rounds and reverse on odd ones."""
    keys = list(cmds)
    for key in (keys if warmup is None else warmup):
        cmds[key]()
    samples: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        for key in (keys if r % 2 == 0 else list(reversed(keys))):
            samples[key].append(cmds[key]())
    return samples


# ------------------------------------------------------------------------------ build
def build(home: Path, cwd: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "agentprov_core", "--error-format", "json", "backends",
            "build", BACKEND, "--allow-network"]
    env_dir, marker, took = run_build(argv, home, cwd, BACKEND)
    cat = json.loads((env_dir / "agentprov" / f"catalogue-{BACKEND}.json").read_text())
    dists = marker.get("distributions") or {}
    versions = {name: (d.get("version", "?") if isinstance(d, dict) else str(d))
                for name, d in dists.items()} if isinstance(dists, dict) else {}
    compiled = marker.get("compiled") or {}
    return {"env_id": env_dir.name, "env_dir": str(env_dir), "build_s": took,
            "pyc_files": compiled.get("files", 0),
            "python": marker["python"], "benchmark_version": cat["default_benchmark_version"],
            "agentdojo": versions.get("agentdojo", "?"), "openai": versions.get("openai", "?")}


# ------------------------------------------------------------- 1. recording overhead
CONFIGS_1 = {  # key -> (parent, variant, label)
    "a": ("warm", "stock", "stock `openai.OpenAI` client (over the forkserver's TLS context, "
                           "as the worker's cells), no capture"),
    "g": ("warm", "stock-own-tls", "(a) with a client that builds its own TLS context, as "
                                   "`openai.OpenAI()` does in a fresh process"),
    "b": ("warm", "rec", "recording transport + capture writer + hooks, `durable=True` "
                         "(the default: fsync at the header, each wire request and the end)"),
    "c": ("warm", "rec-nofsync", "(b) with `durable=False` (no fsync)"),
    "d": ("plain", "rec", "(b) forked from the worker's preload alone, as the worker does"),
    "e": ("plain", "stock", "(a) forked from the worker's preload alone"),
    "f": ("hot", "stock", "(a) forked from a parent that has run one stock cell itself (the "
                          "state agentdojo's runner runs its later cells in)"),
}


def cell_req(scratch: Path, ep: Endpoint, env_id: str, version: str) -> dict[str, Any]:
    sid = f"s-{uuid.uuid4().hex[:16]}"
    key = "banking/user_task_0/none/none"
    return {"session_id": sid, "staging": str(scratch / "cells" / sid), "source": BACKEND,
            "benchmark_version": version, "defence": "none",
            "cell": {"suite": "banking", "user_task_id": "user_task_0", "attack": None,
                     "injection_task_id": None, "kind": "benign", "cell_key": key},
            "unit": f"{key}#0", "attempt": 1,
            "agent": {"scripted": True, "base_url": ep.base_url(sid), "model_id": "scripted",
                      "pipeline_name": "scripted", "key_env": None, "display_name": None},
            "backend": {"environment_id": env_id}, "plan_sha256": "0" * 64,
            "config_digest": "sha256:" + "0" * 64, "timeout_s": 1800}


def fsync_cost(directory: Path, n: int = 200, size: int = 1600) -> dict[str, float]:
    """The time of one ``fsync`` after appending ``size`` bytes (a capture record's size)
    to a file in ``directory``, ``n`` times."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    data = b"x" * (size - 1) + b"\n"
    times = []
    try:
        for _ in range(n):
            os.write(fd, data)
            t = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        path.unlink()
    return _stats(times)


def measure_recording(rounds: int, built: dict[str, Any], home: Path,
                      work: Path) -> dict[str, Any]:
    env_dir = Path(built["env_dir"])
    py = env_dir / "bin" / "python"
    henv = env_python_env(home) | {"PYTHONPATH": WORKER_SRC}
    tenv = t0_env(home)
    scratch = work / "recording"
    scratch.mkdir()
    s0 = write_script(work / "script-0ms.json", 0.0)
    s50 = write_script(work / "script-50ms.json", 0.05)
    out: dict[str, Any] = {"rounds": rounds, "scratch_fs": fs_of(scratch), "latencies": {}}

    def req(ep: Endpoint) -> dict[str, Any]:
        return cell_req(scratch, ep, built["env_id"], built["benchmark_version"])

    with Endpoint(s0, "sessions", tenv, str(work)) as ep0, \
            Endpoint(s50, "sessions", tenv, str(work)) as ep50:
        with Harness(py, henv, scratch, [], "plain") as plain:
            # what a cell imports after the fork: one cell of each kind, untimed
            found = set(plain.run("rec", req(ep0))["new_modules"])
            found |= set(plain.run("stock", req(ep0))["new_modules"])
            extras = sorted(found)
            out["preload"] = {"plain": plain.info, "extras": extras}
            keys = [k for k in CONFIGS_1 if extras or CONFIGS_1[k][0] != "plain"]
            with Harness(py, henv, scratch, extras, "warm") as warm, \
                    Harness(py, henv, scratch, extras, "hot", warmup=req(ep0)) as hot:
                parents = {"plain": plain, "warm": warm, "hot": hot}
                out["preload"] |= {"warm": warm.info, "hot": hot.info}
                for ms, ep in ((0, ep0), (50, ep50)):
                    docs: dict[str, list[dict[str, Any]]] = {k: [] for k in keys}

                    def one(key: str, ep: Endpoint = ep, docs=docs) -> float:
                        parent, variant, _ = CONFIGS_1[key]
                        doc = parents[parent].run(variant, req(ep))
                        docs[key].append(doc)
                        return doc["wall"]

                    samples = interleave(rounds, {k: (lambda k=k: one(k)) for k in keys})
                    rows = {k: _stats(v) for k, v in samples.items()}
                    for k in keys:
                        timed = docs[k][1:]  # not the warm-up's
                        rows[k]["inner"] = statistics.median(d["inner"] for d in timed)
                        rows[k]["duration"] = statistics.median(d["duration"] for d in timed)
                        for part in ("writer", "fsync", "hooks"):
                            rows[k][part] = statistics.median(d[part] for d in timed)
                        if "records" in timed[0]:
                            rows[k]["records"] = statistics.median(d["records"] for d in timed)
                            rows[k]["capture_bytes"] = statistics.median(
                                d["capture_bytes"] for d in timed)
                    # paired: the two cells of a pair ran in the same round
                    pairs = {}
                    for x, y in (("b", "a"), ("c", "a"), ("b", "c"), ("a", "f"), ("d", "e"),
                                 ("e", "a"), ("g", "a"), ("b", "g")):
                        if x in samples and y in samples:
                            pairs[f"{x}-{y}"] = statistics.median(
                                p - q for p, q in zip(samples[x], samples[y], strict=True))
                    out["latencies"][ms] = {"rows": rows, "paired": pairs}
        sessions = ep0.close() | ep50.close()
    if any(n != CALLS_PER_CELL for n in sessions.values()):
        raise RuntimeError(f"a cell's session did not make {CALLS_PER_CELL} requests: "
                           f"{sorted(set(sessions.values()))}")
    out["sessions"] = len(sessions)
    out["fsync"] = fsync_cost(scratch)
    return out


# -------------------------------------------------------------------- 2. concurrency
def run_cli(argv: list[str], env: dict[str, str], cwd: str, log: Path) -> float:
    t = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, env=env,
                              cwd=cwd)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                           f"{log.read_text(errors='replace')[-3000:]}")
    return wall


def ledger(corpus: Path) -> list[dict[str, Any]]:
    part = corpus.with_name(corpus.name + ".partial")
    return [json.loads(line) for line in (part / "ledger.jsonl").read_text().splitlines()]


def raw(corpus: Path, sha: str) -> bytes:
    part = corpus.with_name(corpus.name + ".partial")
    return (part / "raw" / "sha256" / sha[:2] / sha).read_bytes()


ANOMALIES: list[dict[str, Any]] = []  # attempts that did not run as scripted, for the report


def check_corpus(corpus: Path, cells: int, what: str) -> list[dict[str, Any]]:
    """The corpus's ledger, checked: ``cells`` attempts. An attempt that is not complete and
    conclusive with 3 model calls is kept in ``ANOMALIES`` with what its capture log shows
    (wire attempts and errors), and reported; the run's timing is kept."""
    entries = ledger(corpus)
    if len(entries) != cells:
        raise RuntimeError(f"{corpus}: {len(entries)} attempts in the ledger, {cells} expected")
    for e in entries:
        if e["status"] == "complete" and e["conclusive"] and e.get("calls") == CALLS_PER_CELL:
            continue
        seen: dict[str, int] = {}
        errors = []
        if e.get("capture_sha256"):
            for line in raw(corpus, e["capture_sha256"]).decode().splitlines():
                rec = json.loads(line)
                seen[rec["kind"]] = seen.get(rec["kind"], 0) + 1
                if rec["kind"] == "wire_error" or (rec["kind"] == "wire_response"
                                                   and rec.get("status") != 200):
                    errors.append(f"{rec['kind']} {rec.get('status', '')} "
                                  f"{rec.get('error_type', '')} {rec.get('error_message', '')}"
                                  .strip()[:300])
        ANOMALIES.append({"what": what, "cell_key": e["cell_key"], "status": e["status"],
                          "reason": e.get("reason"), "calls": e.get("calls"),
                          "records": seen, "errors": errors[:3]})
    return entries


def measure_concurrency(rounds: int, home: Path, work: Path, cores: int) -> dict[str, Any]:
    from agentprov_core.backend.hostlimits import max_jobs

    jobs_hi = min(4, max_jobs())
    if jobs_hi < 2:
        return {"skipped": f"the host's maximum --jobs is {max_jobs()}: above 1 is refused"}
    script = write_script(work / "script-200ms.json", 0.2)
    env, cwd = t0_env(home), str(work)
    runs: dict[str, list[dict[str, Any]]] = {"j1": [], "jn": []}

    def go(key: str, jobs: int) -> float:
        corpus = work / "corpora" / f"conc-{uuid.uuid4().hex[:8]}"
        argv = agentprov_argv("run", BACKEND, "--corpus", str(corpus), "--campaign", "conc",
                              "--suite", "banking,slack", "--user-tasks", "0-11", "--benign",
                              "only", "--llm-script", str(script), "--jobs", str(jobs))
        wall = run_cli(argv, env, cwd, work / f"{corpus.name}.log")
        entries = check_corpus(corpus, 24, f"concurrency, --jobs {jobs}")
        started = [_epoch(e["started_at"]) for e in entries]
        ended = [_epoch(e["ended_at"]) for e in entries]
        headers = [_epoch(json.loads(raw(corpus, e["capture_sha256"]).split(b"\n", 1)[0])
                          ["started_at"]) for e in entries if e.get("capture_sha256")]
        phase = max(ended) - min(started)
        runs[key].append({"wall": wall, "cell_phase": phase,
                          # after the forkserver's preload: the first cell's header onwards
                          "after_preload": max(ended) - min(headers),
                          "in_flight": sum(b - a for a, b in zip(started, ended, strict=True))
                          / phase})
        shutil.rmtree(corpus.with_name(corpus.name + ".partial"))
        return wall

    samples = interleave(rounds, {"j1": lambda: go("j1", 1), "jn": lambda: go("jn", jobs_hi)},
                         warmup=("jn",))
    rows = {k: _stats(v) for k, v in samples.items()}
    for k in rows:
        timed = runs[k][-rounds:]
        for part in ("cell_phase", "after_preload", "in_flight"):
            rows[k][part] = _stats([r[part] for r in timed])
    return {"rounds": rounds, "cores": cores, "jobs": jobs_hi, "rows": rows,
            "argv": ["agentprov", "run", BACKEND, "--corpus", "$CORPUS", "--campaign", "conc",
                     "--suite", "banking,slack", "--user-tasks", "0-11", "--benign", "only",
                     "--llm-script", "$SCRIPT_200MS", "--jobs", "N"]}


# ---------------------------------------------------- 3. against agentdojo's runner
def native_durations_runner(logdir: Path) -> list[float]:
    return [json.loads(p.read_text())["duration"] for p in sorted(logdir.rglob("*.json"))
            if p.parent.name == "none" and p.name == "none.json"]


def measure_runner(rounds: int, instrumented: int, built: dict[str, Any], home: Path,
                   work: Path) -> dict[str, Any]:
    env_dir = Path(built["env_dir"])
    py = str(env_dir / "bin" / "python")
    tenv = t0_env(home)
    cwd = str(work)
    cells = 16
    script = write_script(work / "script-200ms.json", 0.2)
    runner_script = write_script(work / "script-200ms-runner.json", 0.2, cells=cells)
    extra: dict[str, list[dict[str, Any]]] = {"runner": [], "agentprov": []}

    def runner() -> float:
        run_dir = work / "runner" / uuid.uuid4().hex[:8]
        run_dir.mkdir(parents=True)
        env = env_python_env(home)
        with Endpoint(runner_script, "runner", tenv, cwd) as ep:
            env["LOCAL_LLM_PORT"] = str(ep.port)
            argv = [py, "-m", "agentdojo.scripts.benchmark", "--model", "VLLM_PARSED",
                    "-s", "banking", "--logdir", str(run_dir / "runs"), "-f"]
            wall = run_cli(argv, env, str(run_dir), run_dir / "out.log")
            sessions = ep.close()
        durations = native_durations_runner(run_dir / "runs")
        if len(durations) != cells or sessions.get("runner") != cells * CALLS_PER_CELL:
            raise RuntimeError(f"agentdojo's runner: {len(durations)} logs, {sessions} "
                               f"requests; {cells} cells of {CALLS_PER_CELL} calls expected")
        extra["runner"].append({"wall": wall, "sum_duration": sum(durations)})
        shutil.rmtree(run_dir)
        return wall

    def cli_argv(corpus: Path) -> list[str]:
        return ["run", BACKEND, "--corpus", str(corpus), "--campaign", "bench", "--suite",
                "banking", "--benign", "only", "--jobs", "1", "--llm-script", str(script)]

    def durations_of(corpus: Path) -> list[float]:
        return [json.loads(raw(corpus, e["native_sha256"]))["duration"]
                for e in check_corpus(corpus, cells, "runner comparison, agentprov")
                if e.get("native_sha256")]

    def agentprov() -> float:
        corpus = work / "corpora" / f"vs-{uuid.uuid4().hex[:8]}"
        wall = run_cli(agentprov_argv(*cli_argv(corpus)), tenv, cwd,
                       work / f"{corpus.name}.log")
        extra["agentprov"].append({"wall": wall, "sum_duration": sum(durations_of(corpus))})
        shutil.rmtree(corpus.with_name(corpus.name + ".partial"))
        return wall

    samples = interleave(rounds, {"runner": runner, "agentprov": agentprov})
    rows = {k: _stats(v) for k, v in samples.items()}
    for k in rows:
        rows[k]["sum_duration"] = _stats([r["sum_duration"] for r in extra[k][-rounds:]])

    # where agentprov's time goes: the same command, in-process with timers
    phases = []
    for _ in range(instrumented):
        corpus = work / "corpora" / f"inst-{uuid.uuid4().hex[:8]}"
        out = work / f"{corpus.name}.json"
        argv = [sys.executable, "-c", INSTRUMENTED_CHILD, str(out), *cli_argv(corpus)]
        began = time.time()
        run_cli(argv, tenv, cwd, work / f"{corpus.name}.log")
        ended = time.time()
        doc = json.loads(out.read_text())
        check_corpus(corpus, cells, "runner comparison, instrumented")
        phases.append(phase_rows(doc, began, ended, corpus))
        shutil.rmtree(corpus.with_name(corpus.name + ".partial"))
    breakdown = [{"phase": name, "s": statistics.median(p[i][1] for p in phases)}
                 for i, (name, _) in enumerate(phases[0])]

    # the forkserver's preload alone, as the worker runs it (no bytecode written)
    env = env_python_env(home)

    def preload() -> float:
        t = time.perf_counter()
        subprocess.run([py, "-c", "import agentprov_dojo.preload"], env=env, cwd=cwd,
                       check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t

    pre_samples = interleave(rounds, {"preload": preload})
    return {"rounds": rounds, "instrumented": instrumented, "cells": cells, "rows": rows,
            "breakdown": breakdown, "preload": _stats(pre_samples["preload"])}


def phase_rows(doc: dict[str, Any], began: float, ended: float,
               corpus: Path) -> list[tuple[str, float]]:
    """The instrumented run's phases, in order; they add up to its wall time."""
    ev = doc["events"]

    def one(label: str, pick: Callable[[list], bool] = lambda e: True) -> list:
        found = [e for e in ev if e[0] == label and pick(e)]
        if not found:
            raise RuntimeError(f"no {label} event in the instrumented run")
        return found[0]

    def dur(e: list) -> float:
        return e[2] - e[1]

    prep, cc, rp = one("prepare"), one("check_corpus"), one("read_progress")
    check, run, cells_ev = one("check"), one("campaign_run"), one("campaign_cells")
    inside = [e for e in ev if check[1] <= e[1] <= check[2]]
    probe = [e for e in inside if e[0] == "probe"]
    w_init = [e for e in inside if e[0] == "worker_init"]
    reqs = {e[3]: e for e in inside if e[0] == "request"}
    w_close = [e for e in inside if e[0] == "worker_close"]
    launches = sorted((e for e in ev if e[0] == "launch"), key=lambda e: e[1])
    ingests = {e[3]: e for e in ev if e[0] == "ingest"}
    entries = {e["session_id"]: e for e in ledger(corpus)}
    cells = []
    for la in launches:
        sid = la[3]
        recs = [json.loads(line) for line in raw(corpus, entries[sid]["capture_sha256"])
                .decode().splitlines()]
        header = _epoch(recs[0]["started_at"])
        end = header + recs[-1]["t"]
        native = (json.loads(raw(corpus, entries[sid]["native_sha256"]))
                  if entries[sid].get("native_sha256") else {"duration": 0.0})
        cells.append({"launch": la[1], "header": header, "end": end,
                      "duration": native["duration"], "ingest": ingests[sid]})
    first, rest = cells[0], cells[1:]
    between = [nxt["launch"] - cur["ingest"][2] for cur, nxt in zip(cells, cells[1:], strict=False)]
    campaign_worker = [e for e in ev if e[0] == "worker_init" and e[3]]
    n = len(cells)
    rows = [
        ("interpreter start (to the first line)", doc["t_first"] - began),
        ("T0: imports, plugins, options (to the plan)", prep[1] - doc["t_first"]),
        ("T0: the plan (`planning.prepare`)", dur(prep)),
        ("T0: corpus checks (`check_corpus`, `read_progress`)", dur(cc) + dur(rp)),
        ("check worker (network blocked): the probe for a network block",
         sum(map(dur, probe))),
        ("check worker: start (`Popen`)", sum(map(dur, w_init))),
        ("check worker: `hello` (the worker's interpreter start and imports)",
         dur(reqs["hello"]) if "hello" in reqs else 0.0),
        ("check worker: `catalogue`", dur(reqs["catalogue"]) if "catalogue" in reqs else 0.0),
        ("check worker: `plan`", dur(reqs["plan"]) if "plan" in reqs else 0.0),
        ("check worker: shutdown (`close`)", sum(map(dur, w_close))),
        ("the check's rest (re-expanding the plan from the served catalogue)",
         dur(check) - sum(map(dur, probe + w_init + w_close)) - sum(map(dur, reqs.values()))),
        ("campaign: corpus lock, manifest, ledger read", cells_ev[1] - run[1]),
        ("campaign: endpoint start, campaign worker start", first["launch"] - cells_ev[1]),
        ("first cell: launch to its capture header (forkserver start + preload, fork)",
         first["header"] - first["launch"]),
        (f"cells 2-{n}: launch to capture header (fork from the forkserver)",
         sum(c["header"] - c["launch"] for c in rest)),
        (f"{n} cells: capture header to end, outside agentdojo's task timer "
         "(imports left to the child, suite, client, pipeline)",
         sum(c["end"] - c["header"] - c["duration"] for c in cells)),
        (f"{n} cells: agentdojo's task timer (`duration` of the native logs)",
         sum(c["duration"] for c in cells)),
        (f"{n} cells: end record to T0's ingest (child exit, result, worker reply)",
         sum(c["ingest"][1] - c["end"] for c in cells)),
        (f"{n} cells: T0's ingest (hash chain, redaction scan, raw store, ledger; fsyncs)",
         sum(dur(c["ingest"]) for c in cells)),
        (f"{n} cells: ingest to the next launch", sum(between)),
        ("after the last cell: worker shutdown, endpoint stop",
         cells_ev[2] - cells[-1]["ingest"][2]),
        ("campaign: manifest, summary", run[2] - cells_ev[2]),
        ("interpreter shutdown (after the command)", ended - run[2]),
    ]
    if len(campaign_worker) != 1:
        raise RuntimeError("expected one campaign worker")
    return rows


# ----------------------------------------------------------------------------- driver
def run(recording_rounds: int = 30, rounds: int = 5, instrumented: int = 3,
        only: tuple[str, ...] = ("recording", "concurrency", "runner"),
        home: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentprov-bench-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        if home is None:
            home = Path(tmp) / "home"
            home.mkdir()
        try:
            built = build(home, str(work))
        except Skip as exc:
            return {"skipped": str(exc)}
        cores = os.cpu_count() or 1
        res: dict[str, Any] = {"build": built, "cores": cores, "load_before": load_avg(),
                               "console_script": console_script(),
                               "work_fs": fs_of(work)}
        if "recording" in only:
            res["recording"] = measure_recording(recording_rounds, built, home, work)
        if "concurrency" in only:
            res["concurrency"] = measure_concurrency(rounds, home, work, cores)
        if "runner" in only:
            res["runner"] = measure_runner(rounds, instrumented, built, home, work)
        res["load_after"] = load_avg()
        res["anomalies"] = list(ANOMALIES)
        pyc = sum(1 for _ in Path(built["env_dir"]).rglob("*.pyc"))
        if pyc != built["pyc_files"]:
            raise RuntimeError(f"the environment holds {pyc} .pyc files; its build recorded "
                               f"{built['pyc_files']}: bytecode was written into it")
    return res


# ---------------------------------------------------------------------------- report
def _ms(v: float) -> str:
    return f"{v * 1000:,.0f}" if abs(v) >= 1 else f"{v * 1000:.1f}"


def _s(v: float) -> str:
    return f"{v:.2f}"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _packages(mods: list[str]) -> str:
    tops: dict[str, int] = {}
    for m in mods:
        tops[m.split(".")[0]] = tops.get(m.split(".")[0], 0) + 1
    return ", ".join(f"`{k}` ({v})" for k, v in sorted(tops.items(), key=lambda kv: -kv[1]))


def markdown(res: dict[str, Any]) -> str:
    out = ["### Live campaigns", ""]
    if "skipped" in res:
        return "\n".join(out + ["Skipped: the AgentDojo environment could not be built here "
                                "(it needs uv, Python 3.12, and PyPI or uv's cache holding the "
                                f"locked wheels). The build said: {res['skipped']}", ""])
    b = res["build"]
    out += [f"`{b['env_id']}` (agentdojo {b['agentdojo']}, openai {b['openai']}, Python "
            f"{b['python']}, benchmark version {b['benchmark_version']}), built in "
            f"{b['build_s']:.1f} s in a temporary `AGENTPROV_HOME`, "
            + (f"holding {b['pyc_files']:,} `.pyc` files compiled by the build (every process "
               "below reads them; none writes bytecode)" if b["pyc_files"] else
               "holding no bytecode (every process below compiles what it imports from "
               "source; none writes bytecode)")
            + f"; {res['cores']} cores; "
            f"scratch and corpora on {res['work_fs']}; load average {res['load_before']} "
            f"before, {res['load_after']} after. Every model call is answered by "
            "`ScriptedEndpoint` on loopback from the three replies of "
            "`examples/scripts/live-demo.json` (two tool calls, then the final text), so "
            "every cell makes 3 model calls.", ""]
    if "recording" in res:
        out += _md_recording(res["recording"])
    if "concurrency" in res:
        out += _md_concurrency(res["concurrency"])
    if "runner" in res:
        out += _md_runner(res["runner"])
    if res.get("anomalies"):
        out += ["#### Attempts that did not run as scripted", "",
                "Kept in the timings above; each should have been complete and conclusive "
                "with 3 model calls.", "",
                "| measurement | cell | status | calls | reason | records | wire errors |",
                "|---|---|---|---:|---|---|---|"]
        for a in res["anomalies"]:
            recs = ", ".join(f"{k} {v}" for k, v in sorted(a["records"].items()))
            out.append(f"| {a['what']} | {a['cell_key']} | {a['status']} | {a['calls']} | "
                       f"{a['reason'] or ''} | {recs} | {'; '.join(a['errors'])} |")
        out.append("")
    return "\n".join(out)


def _md_recording(r: dict[str, Any]) -> list[str]:
    pre = r["preload"]
    n_extra = len(pre["extras"])
    out = ["#### Recording overhead", "",
           "What is measured: one benign cell, banking `user_task_0`, run inside the backend "
           "environment the way the worker runs it: a parent process imports what the "
           "worker's forkserver imports (`agentprov_dojo.preload`) and forks a fresh "
           "process per cell; the time is the parent's, from `fork` to reaping the child. "
           "(a) runs AgentDojo's own pipeline (`AgentPipeline.from_config` with `OpenAILLM`, "
           "`run_task_without_injection_tasks` inside `OutputLogger`) over the stock "
           "`openai.OpenAI` client; (b) is `agentprov_dojo.cells.run_cell`, the worker's "
           "cell: the same pipeline over `recording_http_client(writer)`, the "
           "`CaptureWriter` and the observation hooks (call boundaries, tool results, "
           "environment digests); (c) is (b) without its fsyncs. "
           + (f"(a) to (c) fork from a parent that has also imported the {n_extra} modules a "
              "cell would otherwise import after the fork (found by running one cell of each "
              "kind first), so that the cell's time is its own work; (d) and (e) fork from a "
              "parent with the worker's preload alone, as the worker does. " if n_extra else
              "A forked cell imports no module beyond the worker's preload (checked by "
              "running one cell of each kind first), so (a) to (c) fork exactly as the "
              "worker does. ")
           + "(f) forks from a parent that has also run one stock cell itself: the state in "
           "which agentdojo's runner runs its second and later cells. The endpoint "
           "runs in a separate process of T0's interpreter; each cell has its own session. "
           f"{r['rounds']} rounds per latency, interleaved after a warm-up round; "
           f"{r['sessions']} sessions in all, each checked to have made 3 requests, each "
           "cell to have completed with 3 assistant messages. The overhead is given two ways: "
           "the ratio of the medians, and the median of the per-round differences (the two "
           "cells of a round ran back to back, so a slow spell of the machine hits both) over "
           "the median of (a); the verdict uses the second. In (b) to (d) the child also "
           "sums the time spent inside the `CaptureWriter` (creating it, which writes the "
           "header, `append` and `end`: header allowlist, URL sanitising, checks, canonical "
           "JSON, sha256, `write`, `fsync`), inside `os.fsync`, and inside `body_fields` (the "
           "transport's encoding of each body) and the hooks' `_env_digest` and `_jsonable`: "
           "a direct, low-noise measure of the capture's own cost, which differences of wall "
           "times (noisy at this size) cannot resolve better than a few ms. The transport's "
           "remaining work (reading the response before the SDK does, re-wrapping it) is "
           "only in the wall times.", ""]
    fs = r["fsync"]
    for ms, lat in r["latencies"].items():
        rows, pairs = lat["rows"], lat["paired"]
        a = rows["a"]["median"]
        out += [f"At **{ms} ms** per model call:", "",
                "| | cell | median ms | p90 ms | ÷ (a) | in the child, ms | agentdojo's "
                "timer, ms | capture writer ms | of which fsync ms | bodies + hooks ms | records "
                "| capture bytes |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for k, (_, _, label) in CONFIGS_1.items():
            if k not in rows:
                continue
            row = rows[k]
            rec = f"{row['records']:.0f}" if "records" in row else "–"
            size = f"{row['capture_bytes']:,.0f}" if "capture_bytes" in row else "–"
            parts = [(_ms(row[p]) if rec != "–" else "–") for p in ("writer", "fsync", "hooks")]
            out.append(f"| ({k}) | {label} | {_ms(row['median'])} | {_ms(row['p90'])} | "
                       f"{row['median'] / a:.3f} | {_ms(row['inner'])} | "
                       f"{_ms(row['duration'])} | {' | '.join(parts)} | {rec} | {size} |")
        bm, cm = rows["b"]["median"], rows["c"]["median"]
        own = rows["b"]["writer"] + rows["b"]["hooks"]
        paired = pairs["b-a"] / a
        verdict = "met" if paired < RECORDING_TARGET else "**missed**"
        out += ["",
                f"- Recording overhead, (b) against (a): **{_pct(paired)}** by the paired "
                f"differences ({_ms(pairs['b-a'])} ms a cell), {_pct(bm / a - 1)} by the "
                f"medians; target under {RECORDING_TARGET:.0%}: {verdict}. The capture's own "
                f"time measured inside (b)'s cell, writer, bodies and hooks: {_ms(own)} ms, "
                f"{_pct(own / a)} of (a).",
                f"- Without the fsyncs, (c) against (a): {_pct(pairs['c-a'] / a)} paired "
                f"({_ms(pairs['c-a'])} ms), {_pct(cm / a - 1)} by the medians; the fsyncs, "
                f"(b) against (c): {_ms(pairs['b-c'])} ms a cell paired.",
                f"- A parent that has run a cell, (a) against (f): {_ms(pairs['a-f'])} ms a "
                "cell paired, the first-use work (lazily built schemas, caches, the first "
                "request's code paths) that every forked cell repeats and a runner's later "
                "cells do not."]
        if "g-a" in pairs:
            out.append(f"- The TLS context built once in the forkserver: a client that builds "
                       f"its own, (g) against (a): {_ms(pairs['g-a'])} ms a cell paired; "
                       f"agentprov's recorded cell (b) against that default stock client (g): "
                       f"{_pct(pairs['b-g'] / rows['g']['median'])} paired.")
        if "d-e" in pairs:
            out.append(f"- From the worker's preload alone, (d) against (e): "
                       f"{_pct(pairs['d-e'] / rows['e']['median'])} paired; what the preload "
                       f"leaves to the forked cell, (e) against (a): {_ms(pairs['e-a'])} ms a "
                       "cell paired.")
        out.append("")
    records = next(iter(r["latencies"].values()))["rows"]["b"].get("records", 0)
    out += [f"One fsync after appending a record-sized line (1,600 bytes) to a file in the "
            f"scratch directory ({r['scratch_fs']}), 200 times: median "
            f"{fs['median'] * 1000:.2f} ms, p90 {fs['p90'] * 1000:.2f} ms. A cell writes "
            f"{records:.0f} records and fsyncs the log 5 times (the header, 3 wire requests, "
            f"the end) and its directory once: {6 * fs['median'] * 1000:.0f} ms a cell at the "
            "median."]
    if n_extra:
        out += ["", f"A forked cell imports {n_extra} modules after the worker's "
                f"preload ({_packages(pre['extras'])}), loaded again in every forked cell; the "
                f"preload took {pre['plain']['preload_s']:.1f} s, importing the {n_extra} "
                f"modules besides {pre['warm']['extra_s'] * 1000:.0f} ms once"
                + (f" (not importable: {', '.join(pre['warm']['failed'])})"
                   if pre["warm"]["failed"] else "") + "."]
    else:
        out += ["", "The worker's preload (`agentprov_backend/preload.py`) covers everything a "
                f"forked cell imports; it took {pre['plain']['preload_s']:.1f} s in the parent, "
                f"and the warm-up cell of (f) {pre['hot']['warm_s'] * 1000:.0f} ms."]
    return out + [""]


def _md_concurrency(c: dict[str, Any]) -> list[str]:
    out = ["#### Concurrency", ""]
    if "skipped" in c:
        return out + [f"Skipped: {c['skipped']}.", ""]
    rows, j = c["rows"], c["jobs"]
    out += ["What is measured: 24 benign cells (banking and slack, user tasks 0-11 of each) "
            "through the real CLI, `" + " ".join(c["argv"]) + "`, with 200 ms per model call, "
            "at `--jobs 1` and `--jobs " + str(j) + "`, a fresh corpus per run, "
            f"{c['rounds']} rounds interleaved after a warm-up run. Every run is checked: exit "
            "0, 24 complete, conclusive attempts of 3 calls each. The wall time is the "
            "command's; the cell phase runs from the first attempt's start to the last one's "
            "end (the ledger's `started_at` and `ended_at`). The slack cells call the script's "
            "banking tools, which AgentDojo answers with a tool-not-found result: still 3 "
            f"calls a cell. The target is for `--jobs 4`; this host has {c['cores']} cores "
            "and its maximum `--jobs` (8 per CPU, bounded by memory: "
            "`agentprov_core/backend/hostlimits.py`) allows it, so "
            + ("`--jobs 4` was measured." if j == 4 else
               f"`--jobs {j}` was measured and the target is scaled to it "
               f"({CONCURRENCY_TARGET}/4 of the ideal, {CONCURRENCY_TARGET / 4 * j:.2f}x)."),
            "",
            "The cell phase after the preload runs from the first capture header (the "
            "forkserver has imported the benchmark; every first cell waits for it) to the last "
            "attempt's end; \"in flight\" is the attempts' summed duration over the cell "
            "phase.", "",
            "| | `--jobs` | median s | p90 s | cell phase s | after the preload s | in flight |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for key, lab, jobs in (("j1", "(a)", 1), ("jn", "(b)", j)):
        row = rows[key]
        out.append(f"| {lab} | {jobs} | {_s(row['median'])} | {_s(row['p90'])} | "
                   f"{_s(row['cell_phase']['median'])} | {_s(row['after_preload']['median'])} | "
                   f"{row['in_flight']['median']:.2f} |")
    whole = rows["j1"]["median"] / rows["jn"]["median"]
    phase = rows["j1"]["cell_phase"]["median"] / rows["jn"]["cell_phase"]["median"]
    after = rows["j1"]["after_preload"]["median"] / rows["jn"]["after_preload"]["median"]
    target = CONCURRENCY_TARGET / 4 * j
    verdict = "met" if whole >= target else "**missed**"
    fixed = rows["j1"]["median"] - rows["j1"]["after_preload"]["median"]
    cells = rows["j1"]["after_preload"]["median"]
    out += ["", f"- Speed-up (a) ÷ (b): **{whole:.2f}x** end to end, {phase:.2f}x over the cell "
            f"phase, {after:.2f}x after the preload (ideal {j}x); target {target:.2f}x at "
            f"`--jobs {j}`: {verdict}.",
            f"- What `--jobs` cannot shorten, the wall time before the first capture header "
            f"and after the last cell (start-up, the check worker, the forkserver's start and "
            f"preload, wrap-up): {fixed:.1f} s of (a)'s {_s(rows['j1']['median'])} s. By "
            f"Amdahl's law, with that serial part and (a)'s {cells:.1f} s of cells divided by "
            "4, `--jobs 4` could reach at most "
            f"{(fixed + cells) / (fixed + cells / 4):.2f}x here (arithmetic, not measured); "
            "3.5x needs the serial part under "
            f"{max(0.0, (cells - 3.5 * cells / 4) / 2.5):.1f} s for this many cells.", ""]
    return out


def _md_runner(r: dict[str, Any]) -> list[str]:
    rows = r["rows"]
    out = ["#### Against agentdojo's own runner", "",
           f"What is measured: the {r['cells']} benign banking cells, 200 ms per model call, "
           "(a) by agentdojo's runner, `<env>/bin/python -m agentdojo.scripts.benchmark "
           "--model VLLM_PARSED -s banking --logdir DIR -f` with `LOCAL_LLM_PORT` set "
           "(click 8.5 lists the enum's names): "
           "`vllm_parsed` is the provider that drives AgentDojo's own `OpenAILLM` (native "
           "tool calls, the element agentprov runs) against `http://localhost:PORT/v1`, after "
           "one `GET /v1/models` for the model id; `--model local` would drive `LocalLLM`, "
           "which parses tool calls out of the text, a different element. The endpoint is "
           "agentprov's `ScriptedEndpoint` in a separate process, answering `/v1/...` as one "
           f"session whose script holds the {r['cells']} cells' replies in a row (started "
           "and stopped outside the timed window, and checked to have answered "
           f"{r['cells'] * CALLS_PER_CELL} requests). (a) runs with `PYTHONDONTWRITEBYTECODE=1`, "
           "as agentprov's worker does, so both read the same bytecode of the environment "
           "(or compile from source alike). (b) "
           "is `agentprov run agentdojo --corpus DIR --campaign bench --suite banking --benign "
           "only --jobs 1 --llm-script SCRIPT` (the console script, a fresh corpus per run, "
           "checked: exit 0, 16 complete attempts of 3 calls). "
           f"{r['rounds']} rounds interleaved after a warm-up round. \"agentdojo's timer\" is "
           "the sum over the cells of the native logs' `duration` (AgentDojo's own timing of "
           "each task run); the rest is the harness's time around it.", "",
           "| | command | median s | p90 s | agentdojo's timer s | the rest s | ÷ (a) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    a = rows["runner"]["median"]
    for key, lab, what in (("runner", "(a)", "agentdojo's runner"),
                           ("agentprov", "(b)", "`agentprov run ... --jobs 1`")):
        row = rows[key]
        sd = row["sum_duration"]["median"]
        out.append(f"| {lab} | {what} | {_s(row['median'])} | {_s(row['p90'])} | {_s(sd)} | "
                   f"{_s(row['median'] - sd)} | {row['median'] / a:.2f} |")
    bm = rows["agentprov"]["median"]
    out += ["", f"Target: (b) within {RUNNER_TARGET}x of agentdojo's runner."]
    verdict = "met" if bm / a <= RUNNER_TARGET else "**missed**"
    timer_b = rows["agentprov"]["sum_duration"]["median"]
    timer_a = rows["runner"]["sum_duration"]["median"]
    out.append(f"- (b) ÷ (a) = **{bm / a:.2f}**: {verdict} ({bm - a:+.1f} s: agentdojo's timer "
               f"{timer_b - timer_a:+.1f} s, the rest {(bm - timer_b) - (a - timer_a):+.1f} s)")
    pre = r["preload"]
    out += ["", "Where (b)'s time goes: the same command in a fresh process of T0's "
            "interpreter, run in-process with timers around its phases (wall clock), joined "
            "with the capture logs' `started_at` and `t` and the native logs' `duration` from "
            f"its corpus; median of {r['instrumented']} runs per row. The rows add up to the "
            "run's wall time.", "",
            "| phase | s | share |", "|---|---:|---:|"]
    total = sum(p["s"] for p in r["breakdown"])
    out += [f"| {p['phase']} | {p['s']:.2f} | {p['s'] / total:.0%} |" for p in r["breakdown"]]
    timer = [p for p in r["breakdown"] if "task timer" in p["phase"]]
    top = sorted((p for p in r["breakdown"] if p not in timer), key=lambda p: -p["s"])[:3]
    out += [f"| **sum of the rows** | **{total:.2f}** | |", "",
            "Besides agentdojo's timer, the largest rows: " + "; ".join(
                f"{p['phase']}, {p['s']:.2f} s" for p in top) + ".", "",
            "The forkserver's preload alone, `<env>/bin/python -c \"import "
            "agentprov_dojo.preload\"` as the worker runs it, in a fresh process "
            f"({r['rounds']} rounds after a warm-up): {_s(pre['median'])} s (p90 "
            f"{_s(pre['p90'])}); agentdojo's runner pays about the same import before its "
            "first cell.", ""]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording-rounds", type=int, default=30,
                    help="rounds of the recording-overhead cells, per latency [30]")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of the concurrency and runner comparisons [5]")
    ap.add_argument("--instrumented", type=int, default=3,
                    help="instrumented runs for the phase breakdown [3]")
    ap.add_argument("--only", action="append", choices=["recording", "concurrency", "runner"],
                    help="run only this measurement (repeatable)")
    ap.add_argument("--home", type=Path,
                    help="an AGENTPROV_HOME to build in and reuse (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    args = ap.parse_args(argv)
    res = run(args.recording_rounds, args.rounds, args.instrumented,
              tuple(args.only or ("recording", "concurrency", "runner")),
              args.home.absolute() if args.home else None)
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
