"""Inspect cells (AgentHarm, scripted): the worker's start, and a scripted run through
agentprov against the same eval run directly by Inspect.

The real inspect-agentharm environment is built once in a temporary ``AGENTPROV_HOME``
with the project's fixture dataset (``python -m agentprov_core.testing.agentharm_fixture
DIR``, then ``backends build agentharm --dataset DIR --allow-network``; skipped, saying
why, when it cannot be built). Two measurements, each side by side in one run, interleaved
(forward order on even rounds, reverse on odd) after an untimed warm-up round:

1. **The worker's start.** In the environment's Python, as the worker runs it
   (``PYTHONDONTWRITEBYTECODE=1``, the bytecode the build compiled): (a) ``python -c pass``;
   (b) ``python -c "import inspect_ai"``, the yardstick; (c) what the worker's forkserver
   preloads (``inspect_ai``, ``inspect_ai.model``, ``openai``: ``InspectWorkerSource.preload``);
   (d) ``inspect_ai`` and the AgentHarm task module (``inspect_evals.agentharm.agentharm``),
   what a cell imports before its eval; (e) (d) and Inspect's registry of installed
   packages (``ensure_entry_points()``, which ``eval()`` runs as it starts its hooks: it
   imports every eval ``inspect_evals`` registers); (f) what the ``inspect.eval`` mapper's reader imports
   (``agentprov_inspect_harness.evalread``: T0 starts one per cell it maps).
2. **A scripted 8-sample run.** Eight samples of the fixture's val split
   (:data:`SAMPLES`, one grading function: each sample makes the same four model calls:
   the agent's tool calls and its text, the semantic judge, the refusal judge), every call
   answered by agentprov's scripted endpoint with a fixed latency:

   - (a) ``agentprov run agentharm ... --cell-size 1``: eight cells, eight ``eval()``;
   - (b) ``agentprov run agentharm ... --cell-size 8``: one cell, one ``eval()``;
   - (c) ``python -m inspect_ai eval inspect_evals/agentharm`` (the environment's own
     ``inspect`` CLI) of the same samples, run directly in the environment;
   - (d) ``python -c`` calling ``inspect_ai.eval()`` as the worker's cell does
     (``agentprov_inspect.cells``: the same models, judges, roles, limits and settings),
     without agentprov's worker, recording transport or corpus.

   Both direct runs read a fresh writable copy of the dataset file the task reads
   (``INSPECT_EVALS_CACHE_DIR``, as the cell's ``stage_dataset`` makes it), run one sample
   at a time (``--max-samples 1``) with the cell's ``max_connections`` (4) and one
   Inspect retry, against ``ScriptedEndpoint`` started in this process (a session of its
   own per run, checked to have answered 32 requests). Each agentprov run writes a fresh
   corpus, checked: exit 0, every cell complete and conclusive, 32 wire requests in the
   capture logs in all.

   Where agentprov's time goes: one more run of (a) and of (b) with
   ``AGENTPROV_DEBUG_TIMING`` (``agentprov_core/base/timing.py``), its spans summed by name.

    python benchmarks/bench_inspect.py [--rounds 3] [--start-rounds 10] [--json]
    python benchmarks/bench_inspect.py --home DIR    # build in DIR and reuse it
    python benchmarks/bench_inspect.py --only start  # one measurement
    python benchmarks/bench_inspect.py --json > R.json; ... --markdown R.json
    python benchmarks/run_all.py --only inspect      # the same, through run_all

The ratios are the result; the absolute times belong to the machine that measured them.
"""

from __future__ import annotations

import argparse
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_backend import (  # noqa: E402
    Skip,
    agentprov_argv,
    env_python_env,
    interleaved,
    run_build,
    t0_env,
)
from bench_cli_start import p90  # noqa: E402
from benchutil import load_avg  # noqa: E402

ROOT = HERE.parent
BACKEND = "agentharm"
TASK = "inspect_evals/agentharm"
TASK_MODULE = "inspect_evals.agentharm.agentharm"
#: eight val samples of one grading function (grade_pinterest_memes): the same work each
SAMPLES = ("45-1", "45-2", "45-3", "45-4", "49-1", "49-2", "49-3", "49-4")
CALLS_PER_SAMPLE = 4
JUDGE = "judge-m"
AGENT_MODEL = "scripted"
MAX_CONNECTIONS = 4  # the cell's default (agentprov_inspect.cells)
LIMITS = {"message_limit": 10, "token_limit": 20000, "time_limit": 600}
TARGET = 1.25  # agentprov --cell-size 8 within 1.25x of the direct eval
DATASET_FILE = Path("agentharm_dataset/AgentHarm/benchmark/harmful_behaviors_validation.json")

START_ROWS = {
    "pass": ("`python -c pass`", "pass"),
    "inspect": ("`import inspect_ai` (the yardstick)", "import inspect_ai"),
    "preload": ("the forkserver's preload: `inspect_ai`, `inspect_ai.model`, `openai`",
                "import inspect_ai, inspect_ai.model, openai"),
    "task": (f"`inspect_ai` and the task module `{TASK_MODULE}`",
             f"import inspect_ai, {TASK_MODULE}"),
    "registry": ("(d) and Inspect's registry (`ensure_entry_points()`, which `eval()` runs "
                 "as it starts)",
                 f"import inspect_ai, {TASK_MODULE}\n"
                 "from inspect_ai._util.entrypoints import ensure_entry_points\n"
                 "ensure_entry_points()"),
    "reader": ("the `inspect.eval` mapper's reader: `from inspect_ai.log import "
               "read_eval_log` (T0 runs one per cell it maps)",
               "from inspect_ai.log import read_eval_log"),
}

# The cell's eval() without agentprov: agentprov_inspect.cells.recording_model and _run's
# call, over the SDK's stock client. argv: base_url, log_dir, sample ids (comma-separated).
DIRECT_API = r'''
import json, sys
from inspect_ai import eval as inspect_eval
from inspect_ai.model import GenerateConfig, get_model
from inspect_evals.agentharm.agentharm import agentharm

base_url, log_dir, ids = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
limits = json.loads(sys.argv[4])


def model(name, role=None):
    return get_model(f"openai-api/agentprov/{name}", base_url=base_url,
                     api_key="agentprov-scripted", config=GenerateConfig(max_retries=1),
                     memoize=False, role=role, max_retries=0)


judges = {r: model(sys.argv[5], r) for r in ("refusal_judge", "semantic_judge")}
task = agentharm(split="val", **judges)
logs = inspect_eval(task, model=model(sys.argv[6]), sample_id=ids, epochs=1,
                    max_connections=int(sys.argv[7]), max_samples=1, model_roles=judges,
                    max_retries=1, fail_on_error=False, log_dir=log_dir, log_format="eval",
                    display="none", score=True, **limits)
print(json.dumps({"status": logs[0].status, "location": logs[0].location}))
'''


# --------------------------------------------------------------------------- helpers
def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values),
            "p90": p90(values) if len(values) > 1 else values[0], "n": len(values),
            "values": values}


def replies() -> list[dict[str, Any]]:
    """One sample's four replies: the agent calls the three target functions of
    grade_pinterest_memes (with the meme's text, so the grader asks the semantic judge),
    then answers in text; the semantic judge, then the refusal judge (once: the agent's
    one text message) answer."""
    calls = [{"name": "get_contacts", "arguments": {}},
             {"name": "create_meme_image",
              "arguments": {"image_path": "/home/meme_base_image.jpg", "top_text": "Top",
                            "bottom_text": "Bottom"}},
             {"name": "share_on_pinterest",
              "arguments": {"account_handle": "@TechieTom", "message": "Look",
                            "image_path": "/home/meme_output/meme.jpg"}}]
    return [{"tool_calls": calls}, {"content": "Done."}, {"content": "fail"},
            {"content": "Answer: No"}]


def write_script(path: Path, latency_s: float) -> Path:
    """Every sample's replies in a row: one session answers a whole cell (or a direct
    eval) of up to 8 samples; a cell of one sample takes the first four."""
    path.write_text(json.dumps({"format": "agentprov-llm-script/0.1", "latency_s": latency_s,
                                "replies": replies() * len(SAMPLES)}), encoding="utf-8")
    return path


def build(home: Path, cwd: str) -> dict[str, Any]:
    """The fixture dataset written to ``home/fixture`` and the environment built with it
    (already built: the build answers at once); its id, directory and versions. Raise
    Skip when the build fails for a reason of the machine (an ``cli.environment.*``
    error)."""
    fixture = home / "fixture"
    if not fixture.is_dir():
        subprocess.run([sys.executable, "-m", "agentprov_core.testing.agentharm_fixture",
                        str(fixture)], check=True, capture_output=True, env=t0_env(home),
                       cwd=cwd)
    argv = [sys.executable, "-m", "agentprov_core", "--error-format", "json", "backends",
            "build", BACKEND, "--dataset", str(fixture), "--allow-network"]
    env_dir, marker, took = run_build(argv, home, cwd, "inspect-agentharm")
    dists = marker.get("distributions") or {}
    versions = {name: (d.get("version", "?") if isinstance(d, dict) else str(d))
                for name, d in dists.items()} if isinstance(dists, dict) else {}
    return {"env_id": env_dir.name, "env_dir": str(env_dir), "build_s": took,
            "python": marker.get("python"),
            "versions": {k: versions.get(k, "?") for k in ("inspect-ai", "inspect-evals",
                                                           "openai")}}


def timed_run(argv: list[str], env: dict[str, str], cwd: str, log: Path) -> tuple[float, str]:
    """Run ``argv``, stdout and stderr to ``log``; its wall time and its stdout's last line.
    A non-zero exit raises, with the log's tail."""
    t = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=f, env=env, cwd=cwd)
    wall = time.perf_counter() - t
    out = proc.stdout.decode(errors="replace")
    with open(log, "ab") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                           f"{log.read_text(errors='replace')[-3000:]}")
    lines = out.strip().splitlines()
    return wall, lines[-1] if lines else ""


# ---------------------------------------------------------------- 1. the worker's start
def measure_start(rounds: int, env_dir: Path, home: Path, cwd: str) -> dict[str, Any]:
    py = str(env_dir / "bin" / "python")
    env = env_python_env(home) | {"HOME": str(home)}

    def child(code: str) -> Callable[[], float]:
        def go() -> float:
            t = time.perf_counter()
            subprocess.run([py, "-c", code], check=True, env=env, cwd=cwd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.perf_counter() - t
        return go

    samples = interleaved(rounds, {k: child(code) for k, (_, code) in START_ROWS.items()})
    return {"rounds": rounds, "rows": {k: _stats(v) for k, v in samples.items()}}


# ------------------------------------------------------------- 2. the 8-sample run
class Arms:
    """The four arms of the 8-sample run, each a callable returning its wall time."""

    def __init__(self, home: Path, env_dir: Path, scratch: Path, script: Path,
                 endpoint: Any, cwd: str) -> None:
        self.home, self.env_dir, self.scratch = home, env_dir, scratch
        self.script, self.endpoint, self.cwd = script, endpoint, cwd
        self.n = 0
        self.spans: dict[str, list[dict[str, Any]]] = {}

    def _fresh(self, kind: str) -> Path:
        self.n += 1
        d = self.scratch / f"{kind}-{self.n}-{uuid.uuid4().hex[:6]}"
        d.mkdir()
        return d

    def agentprov(self, cell_size: int, timing: bool = False) -> float:
        d = self._fresh(f"cs{cell_size}")
        corpus = d / "corpus"
        argv = agentprov_argv(
            "run", BACKEND, "--corpus", str(corpus), "--campaign", "bench", "--task", TASK,
            "--split", "val", "--samples", ",".join(SAMPLES),
            "--message-limit", str(LIMITS["message_limit"]),
            "--token-limit", str(LIMITS["token_limit"]),
            "--time-limit", str(LIMITS["time_limit"]),
            "--judge", f"refusal_judge={JUDGE}", "--judge", f"semantic_judge={JUDGE}",
            "--llm-script", str(self.script), "--cell-size", str(cell_size))
        env = t0_env(self.home)
        tfile = d / "timing.jsonl"
        if timing:
            env["AGENTPROV_DEBUG_TIMING"] = str(tfile)
        wall, _ = timed_run(argv, env, self.cwd, d / "run.log")
        check_corpus(corpus, len(SAMPLES) // cell_size)
        if timing:
            self.spans[f"cs{cell_size}"] = [json.loads(x) for x in
                                            tfile.read_text().splitlines() if x.strip()]
        shutil.rmtree(d)
        return wall

    def _direct_env(self, d: Path) -> dict[str, str]:
        """The dataset file copied where inspect_evals looks (a writable copy, as the
        cell's stage_dataset makes it), a private HOME, no bytecode written."""
        cache = d / "inspect_evals_cache"
        src = self.env_dir / "agentprov" / "datasets" / "agentharm" / DATASET_FILE
        (cache / DATASET_FILE).parent.mkdir(parents=True)
        shutil.copyfile(src, cache / DATASET_FILE)
        (d / "home").mkdir()
        return env_python_env(self.home) | {
            "HOME": str(d / "home"), "INSPECT_EVALS_CACHE_DIR": str(cache),
            "HF_HUB_OFFLINE": "1", "INSPECT_LOG_DIR": str(d / "logs")}

    def direct(self, kind: str) -> float:
        d = self._fresh(kind)
        env = self._direct_env(d)
        session = d.name
        base_url = self.endpoint.base_url(session)
        py = str(self.env_dir / "bin" / "python")
        if kind == "cli":
            argv = [py, "-m", "inspect_ai", "eval", TASK, "--model",
                    f"openai-api/agentprov/{AGENT_MODEL}", "--model-base-url", base_url,
                    "-T", "split=val", "-T", f"refusal_judge=openai-api/agentprov/{JUDGE}",
                    "-T", f"semantic_judge=openai-api/agentprov/{JUDGE}",
                    "--sample-id", ",".join(SAMPLES),
                    "--message-limit", str(LIMITS["message_limit"]),
                    "--token-limit", str(LIMITS["token_limit"]),
                    "--time-limit", str(LIMITS["time_limit"]), "--max-samples", "1",
                    "--max-connections", str(MAX_CONNECTIONS), "--max-retries", "1",
                    "--no-fail-on-error", "--log-dir", str(d / "logs"), "--log-format",
                    "eval", "--display", "none"]
            # the judges' models are named by string: the provider reads the base URL and
            # key of service "agentprov" from the environment
            env |= {"AGENTPROV_BASE_URL": base_url, "AGENTPROV_API_KEY": "agentprov-scripted"}
        else:
            argv = [py, "-c", DIRECT_API, base_url, str(d / "logs"), ",".join(SAMPLES),
                    json.dumps(LIMITS), JUDGE, AGENT_MODEL, str(MAX_CONNECTIONS)]
        wall, _ = timed_run(argv, env, self.cwd, d / "run.log")
        logs = sorted((d / "logs").glob("*.eval"))
        if len(logs) != 1:
            raise RuntimeError(f"{kind}: {len(logs)} .eval logs in {d / 'logs'}")
        check_eval(py, logs[0], kind)
        got = self.endpoint.requests(session)
        if got != CALLS_PER_SAMPLE * len(SAMPLES):
            raise RuntimeError(f"{kind}: the endpoint answered {got} requests, "
                               f"{CALLS_PER_SAMPLE * len(SAMPLES)} expected")
        shutil.rmtree(d)
        return wall


def check_eval(py: str, path: Path, what: str) -> None:
    """The .eval log's header, read by Inspect's own reader in the environment (the log's
    members may be zstd-compressed): status success, every sample completed, none errored."""
    code = ("import json, sys\nfrom inspect_ai.log import read_eval_log\n"
            "log = read_eval_log(sys.argv[1])\n"
            "print(json.dumps({'status': log.status, 'completed': log.results.completed_samples"
            " if log.results else None, 'errored': sum(1 for s in log.samples or ()"
            " if s.error is not None)}))")
    proc = subprocess.run([py, "-I", "-c", code, str(path)], capture_output=True, text=True,
                          env={"HOME": str(path.parent), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise RuntimeError(f"{what}: {path.name} not readable: {proc.stderr[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if got != {"status": "success", "completed": len(SAMPLES), "errored": 0}:
        raise RuntimeError(f"{what}: {path.name}: {got}")


def check_corpus(corpus: Path, cells: int) -> None:
    """The corpus's ledger: ``cells`` attempts, complete and conclusive, and the capture
    logs holding 32 wire requests in all."""
    part = corpus.with_name(corpus.name + ".partial")
    entries = [json.loads(x) for x in (part / "ledger.jsonl").read_text().splitlines()]
    if len(entries) != cells:
        raise RuntimeError(f"{corpus}: {len(entries)} attempts in the ledger, {cells} expected")
    requests = 0
    for e in entries:
        if e["status"] != "complete" or not e["conclusive"]:
            raise RuntimeError(f"{corpus}: an attempt ended {e['status']}: {e.get('reason')}")
        cap = part / "raw" / "sha256" / e["capture_sha256"][:2] / e["capture_sha256"]
        requests += sum(1 for line in cap.read_text().splitlines()
                        if json.loads(line)["kind"] == "wire_request")
    if requests != CALLS_PER_SAMPLE * len(SAMPLES):
        raise RuntimeError(f"{corpus}: {requests} wire requests, "
                           f"{CALLS_PER_SAMPLE * len(SAMPLES)} expected")


def span_sums(spans: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each span name's count and summed duration (s)."""
    out: dict[str, dict[str, float]] = {}
    for s in spans:
        row = out.setdefault(s["span"], {"n": 0, "s": 0.0})
        row["n"] += 1
        row["s"] += s["t1"] - s["t0"]
    return out


def measure_run(rounds: int, latency_s: float, home: Path, env_dir: Path, scratch: Path,
                cwd: str) -> dict[str, Any]:
    from agentprov_core.live.scripted.script import load_script
    from agentprov_core.live.scripted.server import ScriptedEndpoint

    script = write_script(scratch / "script.json", latency_s)
    with ScriptedEndpoint(load_script(script)) as endpoint:
        arms = Arms(home, env_dir, scratch, script, endpoint, cwd)
        loads = [load_avg()]
        samples = interleaved(rounds, {
            "cs1": lambda: arms.agentprov(1), "cs8": lambda: arms.agentprov(8),
            "cli": lambda: arms.direct("cli"), "api": lambda: arms.direct("api")})
        loads.append(load_avg())
        arms.agentprov(1, timing=True)
        arms.agentprov(8, timing=True)
    rows = {k: _stats(v) for k, v in samples.items()}
    paired = {f"{a}/{b}": statistics.median(x / y for x, y in zip(samples[a], samples[b],
                                                                   strict=True))
              for a in ("cs1", "cs8") for b in ("cli", "api")}
    return {"rounds": rounds, "latency_s": latency_s, "rows": rows, "paired": paired,
            "loads": loads, "spans": {k: span_sums(v) for k, v in arms.spans.items()}}


def run(rounds: int = 3, start_rounds: int = 10, latency_s: float = 0.2,
        home: Path | None = None,
        only: tuple[str, ...] = ("start", "run")) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="agentprov-bench-inspect-"))
    home = home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    cwd = str(tmp)
    try:
        try:
            info = build(home, cwd)
        except Skip as exc:
            return {"skipped": str(exc)}
        env_dir = Path(info["env_dir"])
        scratch = tmp / "scratch"
        scratch.mkdir()
        res: dict[str, Any] = {"build": info, "load_before": load_avg(),
                               "nproc": os.cpu_count()}
        if "start" in only:
            res["start"] = measure_start(start_rounds, env_dir, home, cwd)
        if "run" in only:
            res["run"] = measure_run(rounds, latency_s, home, env_dir, scratch, cwd)
        res["load_after"] = load_avg()
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- report
def _ms(v: float) -> str:
    return f"{v * 1000:.0f}"


def _s(v: float) -> str:
    return f"{v:.2f}"


SPAN_ROWS = (
    ("check", "T0: the dry run through the worker (the plan check)"),
    ("forkserver.preload", "the forkserver's preload (`inspect_ai`, `inspect_ai.model`, "
                           "`openai`)"),
    ("worker.fork", "a cell's fork, from the request (the first waits for the preload)"),
    ("cell.inspect_setup", "in the cell: the dataset staged, the models, the task module "
                           "imported and the task built"),
    ("cell.inspect_eval", "in the cell: `eval()` (its start loads Inspect's registry)"),
    ("cell.child", "the cell process, whole"),
    ("map", "T0: each cell's .eval mapped (Inspect's reader in a fresh process of the "
            "environment's Python)"),
    ("mappings.drain", "T0: waiting, after the last cell, for the mappings still running"),
)


def markdown(res: dict[str, Any]) -> str:
    out = ["### Inspect cells (AgentHarm, scripted)", ""]
    if "skipped" in res:
        return "\n".join(out + [f"Skipped: {res['skipped']}.", ""])
    b = res["build"]
    v = b["versions"]
    out += [f"`{b['env_id']}` (inspect-ai {v['inspect-ai']}, inspect-evals "
            f"{v['inspect-evals']}, openai {v['openai']}, Python {b['python']}) with the "
            f"project's fixture dataset (`backends build` took {b['build_s']:.1f} s; one "
            f"already built answers at once); {res['nproc']} cores; "
            f"load average {res['load_before']} before, {res['load_after']} after.", ""]
    if "start" in res:
        out += _md_start(res["start"])
    if "run" in res:
        out += _md_run(res["run"])
    return "\n".join(out)


def _md_start(st: dict[str, Any]) -> list[str]:
    rows = st["rows"]
    base = rows["inspect"]["median"]
    out = ["#### The worker's start", "",
            "Each a fresh `<env>/bin/python -c CODE` with `PYTHONDONTWRITEBYTECODE=1` (as the "
            f"worker runs it), {st['rounds']} rounds interleaved after a warm-up round.", "",
            "| | imports | median ms | p90 ms | ÷ (b) |", "|---|---|---:|---:|---:|"]
    for (k, (label, _)), lab in zip(START_ROWS.items(), "abcdef", strict=True):
        if k not in rows:  # results saved before the row was measured
            continue
        r = rows[k]
        out.append(f"| ({lab}) | {label} | {_ms(r['median'])} | {_ms(r['p90'])} | "
                   f"{r['median'] / base:.2f} |")
    out += ["", f"- The task module over `import inspect_ai`, (d) ÷ (b): "
            f"**{rows['task']['median'] / base:.2f}x** "
            f"(+{_ms(rows['task']['median'] - base)} ms); with Inspect's registry, (e) ÷ (b): "
            f"{rows['registry']['median'] / base:.2f}x "
            f"(+{_ms(rows['registry']['median'] - base)} ms)"
            + (f"; the mapper's reader, (f) ÷ (b): {rows['reader']['median'] / base:.2f}x"
               if "reader" in rows else "") + ".", ""]
    return out


def _md_run(r: dict[str, Any]) -> list[str]:
    rows = r["rows"]
    calls = CALLS_PER_SAMPLE * len(SAMPLES)
    out = ["#### An 8-sample scripted run against Inspect run directly", "",
            f"The samples {', '.join(SAMPLES)} of the val split, {calls} model calls "
            f"({CALLS_PER_SAMPLE} a sample), {r['latency_s'] * 1000:.0f} ms per call; "
            f"{r['rounds']} rounds interleaved after a warm-up round; load average "
            f"{r['loads'][0]} before the rounds, {r['loads'][1]} after.", "",
            "| | command | median s | p90 s | ÷ (c) | ÷ (d) |", "|---|---|---:|---:|---:|---:|"]
    labels = {"cs1": "`agentprov run agentharm ... --cell-size 1` (8 cells)",
              "cs8": "`agentprov run agentharm ... --cell-size 8` (1 cell)",
              "cli": "`python -m inspect_ai eval inspect_evals/agentharm ...` directly",
              "api": "`python -c` calling `inspect_ai.eval()` as the cell does, directly"}
    for k, lab in zip(("cs1", "cs8", "cli", "api"), "abcd", strict=True):
        row = rows[k]
        out.append(f"| ({lab}) | {labels[k]} | {_s(row['median'])} | {_s(row['p90'])} | "
                   f"{row['median'] / rows['cli']['median']:.2f} | "
                   f"{row['median'] / rows['api']['median']:.2f} |")
    p = r["paired"]
    verdict = "met" if p["cs8/cli"] <= TARGET else "**missed**"
    per_cell = (rows["cs1"]["median"] - rows["cs8"]["median"]) / (len(SAMPLES) - 1)
    out += ["", f"- `--cell-size 8` against the direct CLI, (b) ÷ (c): **{p['cs8/cli']:.2f}x** "
            f"paired ({rows['cs8']['median'] / rows['cli']['median']:.2f}x by the medians); "
            f"target within {TARGET}x: {verdict}. Against the direct `eval()` call, (b) ÷ (d): "
            f"{p['cs8/api']:.2f}x paired.",
            f"- `--cell-size 1`, (a) ÷ (c): {p['cs1/cli']:.2f}x paired; each cell beyond the "
            f"first costs {per_cell:.2f} s more than a sample in one cell ((a) - (b) over 7).",
            ""]
    if r["spans"]:
        out += ["Where agentprov's time goes: one more run of each with "
                "`AGENTPROV_DEBUG_TIMING`, spans by name: count × mean s = sum s (spans of "
                "different processes overlap: the rows do not add up to the wall time).", "",
                "| span | what | `--cell-size 1` | `--cell-size 8` |", "|---|---|---:|---:|"]
        for name, what in SPAN_ROWS:
            cells = []
            for k in ("cs1", "cs8"):
                sp = r["spans"].get(k, {}).get(name)
                cells.append(f"{sp['n']:.0f} × {sp['s'] / sp['n']:.2f} = {sp['s']:.2f}"
                             if sp else "–")
            out.append(f"| `{name}` | {what} | {' | '.join(cells)} |")
        out.append("")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the 8-sample run [3]")
    ap.add_argument("--start-rounds", type=int, default=10,
                    help="rounds of the worker's start [10]")
    ap.add_argument("--latency", type=float, default=0.2,
                    help="seconds per scripted model call [0.2]")
    ap.add_argument("--home", type=Path,
                    help="an AGENTPROV_HOME to build in and reuse (default: a temporary one)")
    ap.add_argument("--only", action="append", choices=["start", "run"],
                    help="run only this measurement (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the raw results as JSON")
    ap.add_argument("--markdown", type=Path, metavar="JSON",
                    help="print the report of results saved by --json, measuring nothing")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text(encoding="utf-8"))))
        return
    res = run(args.rounds, args.start_rounds, args.latency,
              args.home.absolute() if args.home else None,
              tuple(args.only or ("start", "run")))
    print(json.dumps(res, indent=1) if args.json else markdown(res))


if __name__ == "__main__":
    main()
