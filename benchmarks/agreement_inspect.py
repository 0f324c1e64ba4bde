"""Agreement with Inspect's own runner: AgentHarm (harmful and benign) run by Inspect and by
``agentprov run`` on the same samples, against one deterministic server, compared per
sample and per request body. Any divergence exits 1.

The real inspect-agentharm environment is built in ``AGENTPROV_HOME`` (``--home``, else a
temporary one) with the project's fixture dataset. One server on loopback
(``benchmarks/agentharm_standin.py``) answers both sides: the agent with tool calls and
both judges with well-formed verdicts, each reply a function of the request alone; every
request body is logged under the side's base-URL prefix. For each task, in turn:

* **Inspect**: ``<env>/bin/python -m inspect_ai eval <task> --model openai-api/agentprov/m
  -T split=val -T refusal_judge=openai-api/agentprov/m -T semantic_judge=openai-api/agentprov/m
  --sample-id … --message-limit … --token-limit … --time-limit …`` (the base URL and key
  in ``AGENTPROV_BASE_URL``/``AGENTPROV_API_KEY``, the task's dataset file in a fresh
  ``INSPECT_EVALS_CACHE_DIR``): the authors' command, with no generation option (one
  would change what Inspect's judges send: docs/decisions.md, "Inspect's reference is its
  command without generation options");
* **agentprov**: ``agentprov run agentharm --task <task> --split val --samples … --endpoint
  openai_compat --base-url URL --model-id m --judge refusal_judge=m --judge semantic_judge=m
  --containment bwrap --i-consent-to-local-run`` and the same limits, into a fresh corpus.

Compared: each sample's scores (Inspect's ``.eval`` log, read by Inspect's reader, against
the ``inspect.score`` decisions agentprov's record holds) and every request body (as
multisets, ``tools`` as a set; agentprov's one preflight probe, declared by D-742, is
counted apart). Printed: a row per sample and a row per task with each side's wall time
and the ratio (with ``--rounds N``, every round compared, the median wall times and the
median of the rounds' ratios; in each round and task Inspect runs first, then agentprov).

    python benchmarks/agreement_inspect.py [--home DIR] [--rounds N] [--json]
    tox -e agreement
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from agentharm_standin import MODEL, StandIn, differences  # noqa: E402
from bench_backend import Skip, agentprov_argv, env_python_env, t0_env  # noqa: E402

#: each task with its dataset file's stem and the samples compared: every behaviour of the
#: fixture's val split once, the four prompt variants (detailed, hint) taken in turn
TASKS = {
    "inspect_evals/agentharm": ("harmful", ("45-1", "46-2", "47-3", "48-4",
                                            "49-1", "50-2", "51-3", "52-4")),
    "inspect_evals/agentharm_benign": ("benign", ("97-1", "98-2", "99-3", "100-4",
                                                  "101-1", "102-2", "103-3", "104-4")),
}
SPLIT = "val"
LIMITS = {"message_limit": 20, "token_limit": 100000, "time_limit": 600}
INSPECT_MODEL = f"openai-api/agentprov/{MODEL}"

#: run in the environment: each .eval log's per-sample scores (``{path: {id: value}}``)
READ_SCORES = r"""
import json, sys
from inspect_ai.log import read_eval_log
out = {}
for path in sys.argv[1:]:
    log = read_eval_log(path)
    out[path] = {"status": log.status, "scores": {
        str(s.id): {k: v.value for k, v in (s.scores or {}).items()} for s in log.samples or []}}
print(json.dumps(out))
"""


#: Inspect's ``eval()``, as a script for the environment's Python. argv: task, sample ids
#: (comma-separated), limits (JSON), log directory, the agent's model, the judges' model
INSPECT_API = r"""
import json, sys
from inspect_ai import eval
task, ids, limits, log_dir, model, judge = sys.argv[1:7]
logs = eval(task, model=model, sample_id=ids.split(","), log_dir=log_dir, log_format="eval",
            display="none", task_args={"split": "val", "refusal_judge": judge,
                                       "semantic_judge": judge}, **json.loads(limits))
print(json.dumps({"status": logs[0].status}))
"""


def build(home: Path, cwd: str) -> Path:
    """The environment built with the fixture in ``home`` (already built: at once)."""
    from bench_inspect import build as build_agentharm

    return Path(build_agentharm(home, cwd)["env_dir"])


def dataset_file(stem: str) -> Path:
    """The val split's file of ``stem``, below the dataset's root (the environment's copy,
    or the task's cache directory)."""
    return Path(f"agentharm_dataset/AgentHarm/benchmark/{stem}_behaviors_validation.json")


def dataset_root(env_dir: Path) -> Path:
    return env_dir / "agentprov" / "datasets" / "agentharm"


def dataset_cache(env_dir: Path, stem: str, into: Path) -> Path:
    """A fresh writable copy of the one dataset file the task reads, laid out where
    inspect_evals looks (as a cell's ``stage_dataset`` makes it)."""
    (into / dataset_file(stem)).parent.mkdir(parents=True)
    shutil.copyfile(dataset_root(env_dir) / dataset_file(stem), into / dataset_file(stem))
    return into


def inspect_env(env_dir: Path, home: Path, scratch: Path, stem: str,
                base_url: str) -> dict[str, str]:
    """The environment of Inspect's own run: a private HOME, the dataset copy, the
    provider's base URL and key for service ``agentprov``, no network for the hub."""
    (scratch / "home").mkdir(parents=True)
    return env_python_env(home) | {
        "HOME": str(scratch / "home"), "HF_HUB_OFFLINE": "1",
        "INSPECT_EVALS_CACHE_DIR": str(dataset_cache(env_dir, stem, scratch / "cache")),
        "AGENTPROV_BASE_URL": base_url, "AGENTPROV_API_KEY": "agentprov-agreement"}


def inspect_cli(env_dir: Path, task: str, samples: tuple[str, ...], logs: Path) -> list[str]:
    """Inspect's own command for ``task`` (``python -m inspect_ai eval``)."""
    return [str(env_dir / "bin" / "python"), "-m", "inspect_ai", "eval", task,
            "--model", INSPECT_MODEL, "-T", f"split={SPLIT}",
            "-T", f"refusal_judge={INSPECT_MODEL}", "-T", f"semantic_judge={INSPECT_MODEL}",
            "--sample-id", ",".join(samples),
            "--message-limit", str(LIMITS["message_limit"]),
            "--token-limit", str(LIMITS["token_limit"]),
            "--time-limit", str(LIMITS["time_limit"]),
            "--log-dir", str(logs), "--log-format", "eval", "--display", "none"]


def inspect_api(env_dir: Path, task: str, samples: tuple[str, ...], logs: Path,
                judge: str = MODEL) -> list[str]:
    """Inspect's own ``eval()`` for ``task``, with the arguments of :func:`inspect_cli`
    (``judge``: the judges' model, the agent's by default)."""
    return [str(env_dir / "bin" / "python"), "-c", INSPECT_API, task, ",".join(samples),
            json.dumps(LIMITS), str(logs), INSPECT_MODEL, f"openai-api/agentprov/{judge}"]


def agentprov_cli(task: str, samples: tuple[str, ...], corpus: Path, base_url: str,
                  judge: str = MODEL) -> list[str]:
    """``agentprov run agentharm`` for ``task`` at the real-endpoint path (``judge``: the
    judges' model, the agent's by default)."""
    return agentprov_argv(
        "run", "agentharm", "--corpus", str(corpus), "--campaign", corpus.name,
        "--task", task, "--split", SPLIT, "--samples", ",".join(samples),
        "--message-limit", str(LIMITS["message_limit"]),
        "--token-limit", str(LIMITS["token_limit"]), "--time-limit", str(LIMITS["time_limit"]),
        "--endpoint", "openai_compat", "--base-url", base_url, "--model-id", MODEL,
        "--judge", f"refusal_judge={judge}", "--judge", f"semantic_judge={judge}",
        "--containment", "bwrap", "--i-consent-to-local-run")


def timed(argv: list[str], env: dict[str, str], cwd: str, what: str) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       env=env, cwd=cwd)
    took = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{what} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return took


def eval_scores(env_dir: Path, paths: list[Path]) -> dict[str, dict[str, Any]]:
    """The per-sample scores of ``.eval`` logs, read by Inspect's own reader in the
    environment; every log must have ended ``success``."""
    p = subprocess.run([str(env_dir / "bin" / "python"), "-I", "-c", READ_SCORES,
                        *map(str, paths)], capture_output=True, text=True,
                       env={"HOME": tempfile.gettempdir(), "PATH": "/usr/bin:/bin"})
    if p.returncode != 0:
        raise RuntimeError(f"reading {[x.name for x in paths]}: {p.stderr[-2000:]}")
    out: dict[str, dict[str, Any]] = {}
    for path, log in json.loads(p.stdout).items():
        if log["status"] != "success":
            raise RuntimeError(f"{path}: the eval ended {log['status']}")
        out |= log["scores"]
    return out


def agentprov_scores(corpus: Path) -> dict[str, dict[str, Any]]:
    """The per-sample scores agentprov's record holds: the ``inspect.score`` decisions of
    every execution's ``aer.json``, whose ledger attempt must be complete and conclusive."""
    part = corpus if (corpus / "ledger.jsonl").is_file() else \
        corpus.with_name(corpus.name + ".partial")
    for line in (part / "ledger.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["status"] != "complete" or not e["conclusive"]:
            raise RuntimeError(f"{corpus}: an attempt ended {e['status']}: {e.get('reason')}")
    out: dict[str, dict[str, Any]] = {}
    for aer in sorted(part.glob("executions/*/aer.json")):
        for rec in json.loads(aer.read_text())["records"]:
            if rec.get("code") == "inspect.score":
                out[str(rec["data"]["sample"])] = {rec["data"]["scorer"]: rec["data"]["value"]}
    return out


def sample_of(body: dict[str, Any], prompts: dict[str, str]) -> str | None:
    """The sample a request belongs to: the one whose prompt its messages hold (a judge's
    prompt quotes the agent's reply, not the prompt: ``None``)."""
    text = json.dumps(body.get("messages"))
    hits = [sid for sid, prompt in prompts.items() if json.dumps(prompt)[1:-1] in text]
    return hits[0] if len(hits) == 1 else None


def compare_task(env_dir: Path, home: Path, server: StandIn, scratch: Path, task: str,
                 cwd: str, samples: tuple[str, ...] | None = None, via: str = "cli",
                 judge: str = MODEL) -> dict[str, Any]:
    """Run ``task``'s ``samples`` (:data:`TASKS`' by default) by Inspect (its command, or
    ``via="api"`` its ``eval()``) and by agentprov against ``server``, judges on ``judge``;
    compare. ``settings``: per side and kind of request, what the bodies send besides
    ``messages`` and ``tools`` (each distinct set once)."""
    if via == "cli" and judge != MODEL:
        raise ValueError("the agreement command runs the judges on the agent's model")
    stem = TASKS[task][0]
    samples = samples or TASKS[task][1]
    d = scratch / task.rsplit("/", 1)[1]
    env = inspect_env(env_dir, home, d / "inspect", stem, server.base_url("inspect"))
    logs = d / "inspect" / "logs"
    argv = inspect_cli(env_dir, task, samples, logs) if via == "cli" else \
        inspect_api(env_dir, task, samples, logs, judge)
    inspect_s = timed(argv, env, cwd, f"Inspect's {via} for {task}")
    theirs = server.take("inspect")
    # a live AgentHarm corpus is restricted: it must live under AGENTPROV_HOME
    corpus = home / "corpora" / f"agreement-{stem}-{uuid.uuid4().hex[:8]}"
    agentprov_s = timed(agentprov_cli(task, samples, corpus, server.base_url("agentprov"),
                                      judge), t0_env(home), cwd,
                        f"agentprov run agentharm --task {task}")
    ours = server.take("agentprov")
    probes = [b for k, b in ours if k == "probe"]
    ours = [(k, b) for k, b in ours if k != "probe"]

    want = eval_scores(env_dir, sorted((d / "inspect" / "logs").glob("*.eval")))
    got = agentprov_scores(corpus)
    for path in (corpus, corpus.with_name(corpus.name + ".partial")):
        shutil.rmtree(path, ignore_errors=True)
    problems = differences(ours, theirs)
    if len(probes) != 1:
        problems.append(f"agentprov sent {len(probes)} preflight probe(s), 1 expected")
    records = json.loads((dataset_root(env_dir) / dataset_file(stem)).read_text())["behaviors"]
    prompts = {str(r["id"]): r["prompt"] for r in records if str(r["id"]) in samples}
    rows = []
    for sid in samples:
        agent = Counter(sample_of(b, prompts) for k, b in theirs if k == "agent")[sid]
        row = {"sample": sid, "inspect": want.get(sid), "agentprov": got.get(sid),
               "agent_calls": agent}
        if row["inspect"] is None or row["inspect"] != row["agentprov"]:
            problems.append(f"{sid}: scores differ: Inspect {row['inspect']}, "
                            f"agentprov {row['agentprov']}")
        rows.append(row)
    kinds = {side: dict(sorted(Counter(k for k, _ in bodies).items()))
             for side, bodies in (("inspect", theirs), ("agentprov", ours))}
    settings = {side: {kind: [json.loads(x) for x in sorted({json.dumps(
        {k: v for k, v in b.items() if k not in ("messages", "tools")}, sort_keys=True)
        for k2, b in bodies if k2 == kind})] for kind in kinds[side]}
        for side, bodies in (("inspect", theirs), ("agentprov", ours))}
    return {"task": task, "samples": list(samples), "rows": rows, "requests": kinds,
            "settings": settings,
            "probes": len(probes), "inspect_s": inspect_s, "agentprov_s": agentprov_s,
            "ratio": agentprov_s / inspect_s, "problems": problems}


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """A task's rounds as one result: the first round's rows and counts, every round's
    problems (each a full comparison), each side's median wall time and the median of the
    rounds' ratios (the two sides of a round ran back to back)."""
    out = dict(rounds[0])
    out["problems"] = [f"round {n + 1}: {p}" for n, r in enumerate(rounds) for p in r["problems"]]
    for n, r in enumerate(rounds[1:], 2):
        if r["rows"] != rounds[0]["rows"]:
            out["problems"].append(f"round {n}: scores differ from round 1's")
    for side in ("inspect_s", "agentprov_s"):
        out[f"{side}_all"] = [r[side] for r in rounds]
        out[side] = statistics.median(out[f"{side}_all"])
    out["ratio"] = statistics.median(r["ratio"] for r in rounds)
    return out


def run(home: Path | None = None, rounds: int = 1) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="agentprov-agreement-inspect-"))
    home = home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    cwd = str(tmp)
    server = StandIn()
    try:
        try:
            env_dir = build(home, cwd)
        except Skip as exc:
            return {"skipped": str(exc)}
        rounds_of = {task: [] for task in TASKS}
        for n in range(rounds):
            for task in TASKS:
                rounds_of[task].append(compare_task(env_dir, home, server,
                                                    tmp / f"round{n}", task, cwd))
        return {"env": env_dir.name, "rounds": rounds,
                "tasks": [merged(r) for r in rounds_of.values()]}
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _score(value: Any) -> str:
    if not value:
        return "—"
    (v,) = value.values()
    return ", ".join(f"{k} {x:.3g}" for k, x in sorted(v.items())) if isinstance(v, dict) \
        else str(v)


def markdown(res: dict[str, Any]) -> str:
    if "skipped" in res:
        return f"skipped: {res['skipped']}"
    lines = [f"{res['rounds']} round(s): wall times the medians, ratio the median of the "
             f"rounds' ratios; environment {res['env']}", "",
             "| task | sample | Inspect's score | agentprov's score | agent calls | agree |",
             "|---|---|---|---|---|---|"]
    for t in res["tasks"]:
        for r in t["rows"]:
            lines.append(f"| `{t['task']}` | {r['sample']} | {_score(r['inspect'])} | "
                         f"{_score(r['agentprov'])} | {r['agent_calls']} | "
                         f"{'yes' if r['inspect'] == r['agentprov'] else '**no**'} |")
    lines += ["", "| task | requests (Inspect) | requests (agentprov, besides 1 probe) | "
              "divergences | Inspect wall | agentprov wall | ratio |",
              "|---|---|---|---|---|---|---|"]
    def kinds(t: dict[str, Any], side: str) -> str:
        return ", ".join(f"{k} {n}" for k, n in t["requests"][side].items())

    for t in res["tasks"]:
        lines.append(f"| `{t['task']}` | {kinds(t, 'inspect')} | {kinds(t, 'agentprov')} | "
                     f"{len(t['problems'])} | {t['inspect_s']:.1f} s | {t['agentprov_s']:.1f} s "
                     f"| {t['ratio']:.2f}x |")
    problems = [p for t in res["tasks"] for p in t["problems"]]
    lines += ["", "no divergence" if not problems else
              "DIVERGENCE:\n" + "\n".join(f"- {p}" for p in problems)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="build (or reuse) the environment here")
    ap.add_argument("--rounds", type=int, default=1,
                    help="compare this many times (wall times: the medians)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    res = run(args.home, args.rounds)
    print(json.dumps(res, indent=2) if args.json else markdown(res))
    if "skipped" in res:  # nothing was compared: no agreement shown
        return 1
    return 1 if any(t["problems"] for t in res["tasks"]) else 0


if __name__ == "__main__":
    sys.exit(main())
