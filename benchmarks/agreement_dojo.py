"""Agreement with each AgentDojo-shaped benchmark's own runner: AgentDojo, AgentDyn and the
AutoDojo fixture fork, each run by its own runner and by ``agentprov run`` on the same cells
against the same deterministic loopback server; per cell, the verdicts and every request
body are compared. A divergence exits 1.

    python benchmarks/agreement_dojo.py [--home DIR] [--sources agentdojo,agentdyn,autodojo]
                                        [--json] [--agentprov-arg ARG ...]

The server is ``benchmarks/standin_server.py`` with ``--policy`` (a function of the request
alone; see :mod:`agreement_policy`): each cell's model calls a one-time-password tool first
where the suite has one (AgentDyn's github, shopping and dailylife), then the user task's
ground-truth tool calls (whose results carry the attack's injections in attacked cells),
then follows an injection it sees (the injection task's ground-truth calls), then answers.
The server logs every request body. Each source's cells: per suite, its first two user tasks
(by number) benign and attacked by ``important_instructions`` with its first injection task.

* the runner: ``<env>/bin/python -m agentdojo.scripts.benchmark --model VLLM_PARSED
  --benchmark-version V -s SUITE -ut … [--attack important_instructions -it …] --logdir DIR
  -f`` with ``LOCAL_LLM_PORT`` (``--model vllm_parsed`` for AgentDyn's runner; one
  invocation per suite, benign and attacked); its verdicts from its native logs, its requests from the server's
  log, cut into cells where a request holds no assistant message yet. Before attacked
  cells the runner runs each injection task as a user task (its own check that the
  injection task's ground truth succeeds): those conversations are not cells, and are
  counted, not compared.
* agentprov: ``agentprov run SOURCE --endpoint llamacpp --base-url URL --model-id m
  --model-display-name NAME --containment bwrap --i-consent-to-local-run --suite … --user-tasks
  0,1 --attack important_instructions --injection-tasks 0 --jobs 1`` (the real endpoint
  path, no ``--llm-script``), NAME being the runner's own name for its pipeline
  (``MODEL_NAMES["vllm_parsed"]``, which the attack puts in its text); its verdicts from the
  ledger, its requests from the server's log (the preflight probe left out), each matched
  to its cell by the session's capture log, whose recorded bodies must equal the server's.

Normalisations (:data:`NORMALISED`), each for something the benchmark itself makes
non-deterministic, applied to both sides alike, in the text of tool messages only: a
date-time the tools read from the clock (AgentDojo's and AgentDyn's e-mail, cloud-drive and
GitHub tools call ``datetime.now()``: a date-time with microseconds, which the suites' own
data never holds) becomes ``<clock>``; on AgentDyn, the six digits after
an ``… OTP is: `` of its one-time-password e-mails (``random.choices``, unseeded; agentprov
declares both as ``agentdyn.art.nondeterministic_tools@1``) become ``<otp>``. Nothing else
is changed; the report counts the replacements on each side and the requests that agree
only once normalised.

Wall time: the runner's invocations for a source, summed, and the one ``agentprov run``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_backend import agentprov_argv, env_python_env, t0_env  # noqa: E402
from bench_campaign import ChildServer, run_cli  # noqa: E402

ROOT = HERE.parent
STANDIN = HERE / "standin_server.py"
POLICY = HERE / "agreement_policy.py"
MODEL = "m"
ATTACK = "important_instructions"
#: the cells of each suite: indexes over its tasks sorted by number, as --user-tasks takes them
USER_TASKS, INJECTION_TASKS = [0, 1], [0]
AGENTDYN_SOURCES = ROOT.parent / "shared" / "sources" / "AgentDyn.git"

#: per source: the suites, and each suite's one-time-password tool (the first call)
#: and the runner's ``--model`` for its vllm_parsed provider (AgentDojo 0.1.35's runner takes
#: the enum's name, AgentDyn's its value)
SOURCES: dict[str, dict[str, Any]] = {
    "agentdojo": {"suites": ["banking", "slack", "travel", "workspace"], "otp": {},
                  "model": "VLLM_PARSED"},
    "agentdyn": {"suites": ["shopping", "github", "dailylife", "banking"], "model": "vllm_parsed",
                 "otp": {
        "github": ["git_get_linked_ssh_keys", {}],
        "shopping": ["update_shopping_account_password", {"password": "agentprov-Pw-1"}],
        "dailylife": ["send_money", {"recipient": "US122000000121212121212", "amount": 501,
                                     "subject": "agentprov", "date": "2024-05-01"}]}},
    "autodojo": {"suites": ["banking", "slack"], "otp": {}, "model": "VLLM_PARSED"},
}

#: (what, pattern, replacement): applied to the text of tool messages, on both sides
CLOCK = ("a date-time read from the clock (datetime.now: AgentDojo's and AgentDyn's e-mail, "
         "cloud-drive and GitHub tools)",
         re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}\.\d{6}"), "<clock>")
OTP = ("a one-time password (AgentDyn's send_otp_to_inbox: random.choices, unseeded)",
       re.compile(r"(OTP[^0-9\n]{0,60}: )\d{6}(?![0-9])"), r"\1<otp>")
NORMALISED = {"agentdojo": [CLOCK], "autodojo": [CLOCK], "agentdyn": [CLOCK, OTP]}


# ------------------------------------------------------------------------------ helpers
class Server(ChildServer):
    """The stand-in server with the policy, logging every request to ``log``."""

    def __init__(self, policy: Path, log: Path, weights: Path, cwd: Path) -> None:
        self.log = log
        super().__init__([sys.executable, str(STANDIN), "--kind", "llamacpp", "--weights",
                          str(weights), "--policy", str(policy), "--log", str(log)],
                         None, str(cwd))

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(x) for x in self.log.read_text().splitlines()]


def _text(m: dict[str, Any]) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else " ".join(
        p.get("text", "") for p in c or [] if isinstance(p, dict))


def conversations(requests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The chat request bodies cut into conversations: a new one at each request that holds
    no assistant message (a cell's first call); the preflight probe left out."""
    out: list[list[dict[str, Any]]] = []
    for r in requests:
        body = r.get("body")
        if r["method"] != "POST" or not isinstance(body, dict):
            continue
        msgs = body.get("messages") or []
        if any("report_probe" in json.dumps(t) for t in body.get("tools") or []):
            continue
        if not any(m.get("role") == "assistant" for m in msgs) or not out:
            out.append([])
        out[-1].append(body)
    return out


def first_prompt(conv: list[dict[str, Any]]) -> str:
    return next((_text(m) for m in conv[0]["messages"] if m.get("role") == "user"), "")


def normalise(source: str, body: dict[str, Any],
              counts: dict[str, int] | None = None) -> dict[str, Any]:
    """``body`` with the source's :data:`NORMALISED` rules applied to the text of its tool
    messages; ``counts`` (by rule) gets the replacements made."""
    rules = NORMALISED.get(source)
    if not rules:
        return body
    body = json.loads(json.dumps(body))
    for m in body.get("messages") or []:
        if m.get("role") != "tool":
            continue
        parts = [m] if isinstance(m.get("content"), str) else [
            p for p in m.get("content") or [] if isinstance(p, dict) and "text" in p]
        for part in parts:
            key = "content" if part is m else "text"
            for what, pattern, replacement in rules:
                part[key], n = pattern.subn(replacement, part[key])
                if counts is not None:
                    counts[what] = counts.get(what, 0) + n
    return body


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path at which ``a`` and ``b`` differ (field by field, list item by item)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only on the {'runner' if k in a else 'agentprov'} side")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [f"{path}: {len(a)} items against {len(b)}"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):  # the lengths are said above
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: {json.dumps(a)[:160]} != {json.dumps(b)[:160]}"]


# ---------------------------------------------------------------------------- building
def build(home: Path, source: str, work: Path) -> tuple[Path, dict[str, str]]:
    """The source's built environment in ``home`` (built when absent) and the variables
    T0 needs for it (the AutoDojo fixture's pin override)."""
    env = t0_env(home)
    extra: dict[str, str] = {}
    args = [source, "--allow-network"]
    if source == "agentdyn":
        if not (AGENTDYN_SOURCES / "HEAD").is_file():
            raise SystemExit(f"{AGENTDYN_SOURCES} is absent: AgentDyn cannot be built here")
        args += ["--source-repo", str(AGENTDYN_SOURCES)]
    if source == "autodojo":
        from agentprov_core.backend.autodojofork import PIN_OVERRIDE

        fork = home / "agreement-autodojo-fork"
        if not (fork / ".git").exists():
            from agentprov_core.backend.build import uv_binary
            from agentprov_core.backend.interpreters import find_python312
            from agentprov_core.testing import autodojo_fork

            wheel = autodojo_fork.install_wheel(uv_binary(), find_python312(),
                                                ROOT / "backends/agentdojo/uv.lock",
                                                work / "agentdojo-wheel")
            autodojo_fork.make_fork(fork, wheel)
        commit = subprocess.run(["git", "-C", str(fork), "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        extra[PIN_OVERRIDE] = commit
        args += ["--source-repo", str(fork)]
    env |= extra
    def built() -> list[Path]:
        envs = home / "envs"
        found = sorted(p for p in envs.iterdir() if p.is_dir() and p.name.startswith(
            f"{source}-")) if envs.is_dir() else []
        if source == "autodojo":
            found = [p for p in found if p.name.endswith(extra[PIN_OVERRIDE][:8])]
        return found

    if not built():
        run_cli(agentprov_argv("backends", "build", *args), env, str(work),
                work / f"build-{source}.log")
    return built()[-1], extra


# ------------------------------------------------------------------------------- a source
def agree(source: str, home: Path, work: Path, more: list[str]) -> dict[str, Any]:
    env_dir, extra = build(home, source, work)
    backend = env_dir.name.split("-")[0]
    cat = json.loads((env_dir / "agentprov" / f"catalogue-{backend}.json").read_text())
    version = cat["default_benchmark_version"]
    conf = SOURCES[source]
    py = str(env_dir / "bin" / "python")
    wd = work / source
    wd.mkdir(parents=True)
    spec = {"benchmark_version": version, "otp": conf["otp"],
            "suites": {s: {"user_tasks": USER_TASKS, "injection_tasks": INJECTION_TASKS}
                       for s in conf["suites"]}}
    (wd / "spec.json").write_text(json.dumps(spec))
    penv = env_python_env(home)
    made = subprocess.run([py, str(POLICY), str(wd / "spec.json")], capture_output=True,
                          text=True, env=penv, cwd=wd)
    if made.returncode != 0:
        raise RuntimeError(f"{POLICY.name} in {env_dir.name}: {made.stderr[-3000:]}")
    policy = json.loads(made.stdout)
    # the runner checks each injection task as a user task first: the policy answers those
    # conversations as it answers a model that follows the injection
    for goal, replies in policy["injections"].items():
        policy["prompts"].setdefault(goal, replies)
    (wd / "policy.json").write_text(json.dumps(policy))
    name = subprocess.run([py, "-c", "from agentdojo.models import MODEL_NAMES; "
                           "print(MODEL_NAMES['vllm_parsed'])"], capture_output=True,
                          text=True, env=penv, check=True).stdout.strip()
    weights = work / "model-00001-of-00001.gguf"
    if not weights.exists():
        weights.write_bytes(os.urandom(1 << 20))
    cell_of = {p: c for c, p in policy["cells"].items()}
    goals = set(policy["injections"])

    # (a) the runner, one invocation per suite and mode
    runner: dict[str, dict[str, Any]] = {}
    runner_wall, own_checks = 0.0, 0
    for suite in conf["suites"]:
        for attack in (None, ATTACK):
            tag = f"{suite}-{attack or 'benign'}"
            logdir = wd / "runner" / tag
            argv = [py, "-m", "agentdojo.scripts.benchmark", "--model", conf["model"],
                    "--benchmark-version", version, "-s", suite, "--logdir", str(logdir), "-f"]
            ids = policy["ids"][suite]
            argv += [a for u in ids["user_tasks"] for a in ("-ut", u)]
            if attack:
                argv += ["--attack", attack,
                         *[a for i in ids["injection_tasks"] for a in ("-it", i)]]
            with Server(wd / "policy.json", wd / f"runner-{tag}.jsonl", weights, wd) as s:
                e = penv | {"LOCAL_LLM_PORT": str(s.port)}
                runner_wall += run_cli(argv, e, str(wd), wd / f"runner-{tag}.log")
                convs = conversations(s.requests())
            for conv in convs:
                prompt = first_prompt(conv)
                if attack and prompt in goals and prompt not in cell_of:
                    own_checks += 1
                    continue
                uid = cell_of[prompt].split("/")[1]
                inj = ids["injection_tasks"][0] if attack else "none"
                key = f"{suite}/{uid}/{attack or 'none'}/{inj}"
                if key in runner:
                    raise RuntimeError(f"the runner ran {key} twice")
                native = json.loads((logdir / "vllm_parsed" / suite / uid / (attack or "none")
                                     / f"{inj}.json").read_text())
                runner[key] = {"requests": conv, "utility": native["utility"],
                               "security": native["security"]}

    # (b) agentprov run, one invocation for every cell of the source
    corpus = wd / "corpus" / "agree"
    argv = agentprov_argv(
        "run", source, "--endpoint", "llamacpp", "--base-url", "http://127.0.0.1:{port}/v1",
        "--model-id", MODEL, "--model-display-name", name, "--containment", "bwrap",
        "--i-consent-to-local-run", "--corpus", str(corpus), "--campaign", "agree",
        "--benchmark-version", version, "--suite", ",".join(conf["suites"]),
        "--user-tasks", ",".join(map(str, USER_TASKS)), "--attack", ATTACK,
        "--injection-tasks", ",".join(map(str, INJECTION_TASKS)), "--jobs", "1", *more)
    with Server(wd / "policy.json", wd / "agentprov.jsonl", weights, wd) as s:
        argv = [a.replace("{port}", str(s.port)) for a in argv]
        agentprov_wall = run_cli(argv, t0_env(home) | extra, str(wd), wd / "agentprov.log")
        served = conversations(s.requests())
    part = corpus.with_name(corpus.name + ".partial")
    ledger = [json.loads(x) for x in (part / "ledger.jsonl").read_text().splitlines()]
    mine: dict[str, dict[str, Any]] = {}
    by_bodies = {json.dumps(c, sort_keys=True): c for c in served}
    for entry in ledger:
        sha = entry["capture_sha256"]
        cap = [json.loads(x) for x in
               (part / "raw" / "sha256" / sha[:2] / sha).read_text().splitlines()]
        bodies = [r["body"] for r in cap if r.get("kind") == "wire_request"]
        if json.dumps(bodies, sort_keys=True) not in by_bodies:
            raise RuntimeError(f"{entry['cell_key']}: the capture's request bodies are not "
                               "what the server received")
        mine[entry["cell_key"]] = {"requests": bodies, "utility": entry["utility"],
                                   "security": entry["security"], "status": entry["status"]}

    # (c) the comparison
    rows, problems = [], []
    replaced: dict[str, dict[str, int]] = {"runner": {}, "agentprov": {}}
    raw_differ = 0  # request pairs that agree only once normalised
    for key in sorted(set(runner) | set(mine)):
        a, b = runner.get(key), mine.get(key)
        if a is None or b is None:
            problems.append(f"{key}: only {'agentprov' if a is None else 'the runner'} ran it")
            continue
        diffs = []
        if len(a["requests"]) != len(b["requests"]):
            diffs.append(f"{len(a['requests'])} requests against {len(b['requests'])}")
        for i, (x, y) in enumerate(zip(a["requests"], b["requests"], strict=False)):
            found = differences(normalise(source, x, replaced["runner"]),
                                normalise(source, y, replaced["agentprov"]))
            raw_differ += not found and x != y
            diffs += [f"request {i + 1}{d}" for d in found]
        verdicts = (a["utility"], a["security"]) == (b["utility"], b["security"])
        if not verdicts:
            diffs.append(f"verdicts: runner {a['utility']}/{a['security']}, agentprov "
                         f"{b['utility']}/{b['security']}")
        if b["status"] != "complete":
            diffs.append(f"agentprov's session is {b['status']}")
        injected = sum(1 for body in a["requests"][-1:] for m in body["messages"]
                       if m.get("role") == "tool" and "<INFORMATION>" in _text(m))
        rows.append({"cell": key, "requests": len(a["requests"]), "utility": a["utility"],
                     "security": a["security"], "injected_tool_results": injected,
                     "agree": not diffs, "differences": diffs[:10]})
        problems += [f"{key}: {d}" for d in diffs[:10]]
    return {"source": source, "environment": env_dir.name, "benchmark_version": version,
            "display_name": name, "cells": rows, "runner_wall_s": runner_wall,
            "agentprov_wall_s": agentprov_wall, "runner_own_checks": own_checks,
            "normalised": [w for w, _, _ in NORMALISED.get(source, [])],
            "replacements": replaced, "agree_only_normalised": raw_differ,
            "problems": problems}


# ------------------------------------------------------------------------------ report
def markdown(results: list[dict[str, Any]]) -> str:
    out = ["| source | cells (benign + attacked) | requests compared | verdicts agree | "
           "bodies agree | attacked cells whose model saw an injection | utility true / "
           "security true of attacked (runner) | runner wall (s) | agentprov wall (s) | "
           "ratio |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cells = r["cells"]
        att = [c for c in cells if "/none/none" not in c["cell"]]
        out.append(
            f"| {r['source']} ({r['environment']}, {r['benchmark_version']}) | {len(cells)} "
            f"({len(cells) - len(att)} + {len(att)}) | {sum(c['requests'] for c in cells)} | "
            f"{sum(not any(d.startswith('verdicts') for d in c['differences']) for c in cells)}"
            f"/{len(cells)} | {sum(c['agree'] for c in cells)}/{len(cells)} | "
            f"{sum(c['injected_tool_results'] > 0 for c in att)}/{len(att)} | "
            f"{sum(bool(c['utility']) for c in cells)} / "
            f"{sum(bool(c['security']) for c in att)} | {r['runner_wall_s']:.1f} | "
            f"{r['agentprov_wall_s']:.1f} | {r['agentprov_wall_s'] / r['runner_wall_s']:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="an AGENTPROV_HOME whose built environments "
                    "are reused (built there when absent); default: a new one, removed")
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--json", action="store_true", help="print the full results as JSON")
    ap.add_argument("--agentprov-arg", action="append", default=[], metavar="ARG",
                    help="one more argument for agentprov run (to see the check fail: "
                         "--agentprov-arg=--temperature=0.5)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="agentprov-agreement-"))
    (tmp / "work").mkdir()
    home = args.home or tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for source in args.sources.split(","):
            print(f"agreement: {source} ...", file=sys.stderr, flush=True)
            results.append(agree(source, home, tmp / "work", args.agentprov_arg))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results, indent=1))
    print(markdown(results))
    bad = [p for r in results for p in r["problems"]]
    for r in results:
        print(f"{r['source']}: {len(r['cells'])} cells, {len(r['problems'])} divergence(s); "
              f"the runner's own injection-task checks (not cells): {r['runner_own_checks']}; "
              f"requests that agree only once normalised: {r['agree_only_normalised']}; "
              f"replacements (runner, agentprov): {json.dumps(r['replacements'])}")
    for p in bad:
        print(f"DIVERGENCE {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
