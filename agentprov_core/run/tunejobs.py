"""The concurrency sweep, ``agentprov run SOURCE --tune-jobs V1,V2,…`` (D-820..D-823).

It measures how many cells to run at once against a local model server. The sample is
the plan the cell options give; without a plan or cell options, 24 AgentDojo cells: the
four suites, user tasks 0 to 2, each benign and attacked (``important_instructions``,
injection task 0). One unmeasured warm-up cell runs first (the server loads the model and
fills its caches) into ``<tune-out>/warm-up``; then each value, smallest first, runs the same
cells with that ``--jobs`` into its own working corpus, ``<tune-out>/jobs-<N>``, through the
campaign machinery of a run (:mod:`agentprov_core.run.campaign`): the same checks, evidence
and A14 before every cell. The report is :mod:`agentprov_core.run.tunereport`.

- An arm the model's memory cannot hold (the weights and one KV cache a trace, in the
  preset's share of the host's memory) is skipped, and so are the arms after an arm with
  timeouts.
- A finished arm writes ``<tune-out>/arms/jobs-<N>.json``; a re-run of the same command
  (the same source and options, ``--tune-out`` and ``--dry-run`` aside) finds its
  directory (the newest ``$AGENTPROV_HOME/calibration/tune-jobs-*`` of the same command when
  ``--tune-out`` is not given) and reuses those arms. An arm interrupted before it finished
  is run again from the start; its corpus is kept aside as ``jobs-<N>.interrupted-<time>.partial``.
- ``--dry-run`` prints the arms, those it would skip and a rough time (the preset's
  measured seconds per cell when it has them, else the estimate's), and writes nothing.
- The sweep defaults to ``--llm-element gateway_compat``. It is refused (exit 2) with
  ``--llm-script``, an endpoint that is not a local server, ``--corpus``, ``--campaign``,
  ``--jobs``, ``--limit`` and ``--preflight-only`` (the sweep names its corpora and jobs),
  and for a value list with 0, a duplicate, a value that is not a whole number, or a value
  above the host's maximum ``--jobs``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from agentprov_core.base import inputfile, paths
from agentprov_core.errors import AgentprovError
from agentprov_core.run import tunereport
from agentprov_core.run.runrequest import RunRequest

if TYPE_CHECKING:
    from agentprov_core.run.prepare import Prepared

#: the default sample (R-11.38): four suites, user tasks 0-2, benign and attacked
DEFAULT_SAMPLE = {"suite": ("banking,slack,travel,workspace",), "user_tasks": "0-2",
                  "attack": ("important_instructions",), "injection_tasks": "0",
                  "benign": "include"}
SWEEP_FILE = "tune-sweep.json"
#: options that do not make another sweep (where it is written; whether it runs)
NOT_THE_COMMAND = ("tune_out", "dry_run", "plan_json")
REFUSED_WITH = (("corpus", "--corpus"), ("campaign", "--campaign"), ("jobs", "--jobs"),
                ("limit", "--limit"), ("preflight_only", "--preflight-only"),
                ("catalogue", "--catalogue"), ("plan_json", "--plan-json"))


def parse_values(text: str) -> list[int]:
    """The sweep's ``--jobs`` values, smallest first; exit 2 naming what is wrong."""
    from agentprov_core.backend.hostlimits import max_jobs

    def bad(what: str) -> AgentprovError:
        shown = text if len(text) <= 60 else text[:60] + "…"
        return AgentprovError("cli.usage.tune_jobs", value=shown, what=what)

    out: list[int] = []
    maximum = max_jobs()
    for v in text.split(","):
        if not v:
            raise bad("an empty value (give V1,V2,…, such as 1,2,4)")
        if not (v.isascii() and v.isdigit()) or len(v) > 6 or (v[0] == "0" and v != "0"):
            raise bad(f"{v!r} is not a whole number of jobs: digits only, without a "
                      "leading zero or a space (such as 1,2,4)")
        n = int(v)
        if n == 0:
            raise bad("0 is not a number of jobs (1 or more)")
        if n in out:
            raise bad(f"{n} is given twice")
        if n > maximum:
            raise bad(f"{n} is above this host's maximum --jobs of {maximum}")
        out.append(n)
    return sorted(out)


def check_usage(req: RunRequest) -> tuple[list[int], RunRequest]:
    """Step 1 of a sweep (exit 2): its values, and the request with the sweep's defaults
    (the sample and the element)."""
    from agentprov_core.plan.plandoc import CELL_OPTIONS
    from agentprov_core.run import prepare

    o = req.options
    values = parse_values(o.tune_jobs or "")
    for name, flag in REFUSED_WITH:
        if getattr(o, name):
            raise AgentprovError("cli.usage.exclusive", first=flag, second="--tune-jobs")
    if req.scripted:
        raise AgentprovError("cli.usage.exclusive", first="--tune-jobs", second="--llm-script")
    if not (o.model or o.endpoint):
        raise AgentprovError("cli.usage.model_missing")
    ep = prepare.resolve_endpoint(req)
    if ep is not None and not ep.local:
        raise AgentprovError("cli.usage.local_only_option", option="--tune-jobs",
                             endpoint=ep.name)
    if not o.plan and not any(k in req.given for k in CELL_OPTIONS):
        req = req.replace(**DEFAULT_SAMPLE)
    if not req.options.llm_element:
        req = req.replace(llm_element="gateway_compat")
    return values, req


def sweep_key(req: RunRequest) -> str:
    """What makes two invocations the same sweep: the source and every option but where it
    is written and whether it runs."""
    opts = {k: v for k, v in sorted(req.options.asdict().items()) if k not in NOT_THE_COMMAND}
    text = json.dumps({"source": req.source, "options": opts}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _now_tag() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _read_json(p: Path) -> dict[str, Any] | None:
    """A sweep's own JSON file, or None when there is none (or it is not one of ours)."""
    try:
        data = inputfile.load_json(inputfile.read_bytes(p, follow=False))
    except inputfile.Unreadable:
        return None
    return data if isinstance(data, dict) else None


def sweep_dir(req: RunRequest, key: str) -> tuple[Path, bool]:
    """The sweep's directory and whether an earlier run of the same sweep made it."""
    given = req.options.tune_out
    if given:
        d = Path(given).expanduser().absolute()
        inputfile.output_dir("--tune-out", d, "give a new directory, or the one an earlier "
                                              "run of the same sweep wrote")
        held = _read_json(d / SWEEP_FILE)
        if held is not None and held.get("key") != key:
            raise AgentprovError("cli.usage.option_value", option="--tune-out", value=str(d),
                                 what="holds another sweep (another command); give a new "
                                      "directory")
        return d, held is not None
    base = paths.home() / "calibration"
    found = sorted((p.parent for p in base.glob(f"tune-jobs-*/{SWEEP_FILE}")
                    if (_read_json(p) or {}).get("key") == key), key=lambda p: p.name)
    if found:
        return found[-1], True
    return base / f"tune-jobs-{_now_tag()}", False


def _stage(req: RunRequest, out: Path, name: str, campaign: str, jobs: int,
           limit: int | None = None) -> RunRequest:
    staged = req.replace(corpus=str(out / name), campaign=campaign, jobs=jobs, limit=limit)
    return dataclasses.replace(staged, given=req.given | {"jobs"})


def _host(load_before: tuple[float, ...]) -> dict[str, Any]:
    from agentprov_core.backend.hostlimits import cpus, physical_memory_gb

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace"
                                                    ).splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = physical_memory_gb()
    return {"platform": sys.platform, "machine": platform.machine(), "cpus": cpus(),
            "memory_gb": round(mem, 1) if mem is not None else None,
            "description": f"{platform.platform()}" + (f", {model}" if model else ""),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()]}


def _model(prepared: Prepared) -> dict[str, Any]:
    from agentprov_core.live.local.facts import summary

    ident = prepared.local_identity
    ident_json = ident.to_json() if ident is not None else {}
    server = ident_json.get("server") or {}
    state = (ident_json.get("observed_state") or {}).get("server") or {}
    slots = state.get("total_slots")
    return {"endpoint": prepared.endpoint.name if prepared.endpoint else None,
            "model_id": ident_json.get("model_id"),
            "server": f"{server.get('kind')} {server.get('version') or ''}".strip()
            + (f", {slots} slots" if slots else ""),
            "identity_digest": ident_json.get("digest"),
            "facts": summary(prepared.model_facts).replace("  model facts: ", "")
            if prepared.model_facts else None}


def _measure(jobs: int, corpus: Path, exit_code: int | None) -> tunereport.Arm:
    from agentprov_core.corpus.working import WorkingCorpus, partial_dir

    entries = WorkingCorpus(partial_dir(corpus)).attempts()
    starts = [datetime.fromisoformat(e.started_at.replace("Z", "+00:00")) for e in entries]
    ends = [datetime.fromisoformat(e.ended_at.replace("Z", "+00:00")) for e in entries]
    durations = [(b - a).total_seconds() for a, b in zip(starts, ends, strict=True)]
    wall = (max(ends) - min(starts)).total_seconds() if entries else 0.0
    return tunereport.measure(jobs, durations, [(e.status, e.reason) for e in entries], wall,
                              paths.display(partial_dir(corpus)), exit_code)


def _plan_arms(values: list[int], holds: int | None, how: str, out: Path,
               reuse: bool) -> list[tuple[int, str | None, dict[str, Any] | None]]:
    """Each value with why it is skipped (None: it runs) and its earlier record."""
    arms = []
    for v in values:
        rec = _read_json(out / "arms" / f"jobs-{v}.json") if reuse else None
        why = None
        if rec is None and holds is not None and v > holds:
            why = f"the model's memory holds {holds} trace(s) at once ({how})"
        arms.append((v, why, rec))
    return arms


def run(req: RunRequest, started: float, cell_seconds: Callable[[Any], tuple[float, str]]
        ) -> int:
    """The sweep (see the module's text); exit 0 with a recommendation, 1 without.
    ``cell_seconds(prepared)`` is a cell's rough seconds and their basis, for the dry run
    (the estimate's, :func:`agentprov_core.estimate.presettime.cell_seconds`)."""
    from agentprov_core.run import campaign, presetrun, sequence
    from agentprov_core.run import prepare as planning

    values, req = check_usage(req)
    key = sweep_key(req)
    out, reuse = sweep_dir(req, key)
    load_before = os.getloadavg()
    first = planning.prepare(_stage(req, out, "warm-up", "tune-jobs-warm-up", 1, limit=1))
    facts = first.model_facts or {}
    preset = first.preset.preset if first.preset is not None else None
    holds, how = presetrun.memory_holds(preset, getattr(facts.get("size_gb"), "value", None),
                                        getattr(facts.get("kv_gb_per_trace"), "value", None))
    arms = _plan_arms(values, holds, how, out, reuse)
    cells = len(first.plan.cells)
    if req.options.dry_run:
        return _dry_run(first, arms, out, reuse, cells, cell_seconds)
    first = sequence.checked(first)
    consented = sequence.consented(first)
    out.mkdir(parents=True, exist_ok=True)
    (out / "arms").mkdir(exist_ok=True)
    if not reuse:
        _write(out / SWEEP_FILE, json.dumps(
            {"key": key, "command": _command(), "created_at": _iso(), "values": values},
            indent=1) + "\n")
    warm = "reused: every arm finished earlier"
    if any(rec is None and why is None for _, why, rec in arms):
        code = campaign.start(first, consented)
        warm = f"1 cell ({first.plan.cells[0].key}), exit {code}"
    results: list[tunereport.Arm] = []
    after_timeouts: int | None = None
    last = first
    for v, why, rec in arms:
        if rec is not None:
            arm = msgspec.convert(dict(rec, status="reused"), tunereport.Arm)
        elif after_timeouts is not None:
            arm = tunereport.Arm(jobs=v, status="skipped",
                                 reason=f"after --jobs {after_timeouts}, an arm with timeouts")
        elif why is not None:
            arm = tunereport.Arm(jobs=v, status="skipped", reason=why)
        else:
            corpus = out / f"jobs-{v}"
            _set_aside(corpus)
            click.echo(f"agentprov tune-jobs: arm --jobs {v} into {corpus}", err=True)
            last = sequence.checked(planning.prepare(_stage(req, out, f"jobs-{v}",
                                                            f"tune-jobs-{v}", v)))
            code = campaign.start(last, consented)
            arm = _measure(v, corpus, code)
            if arm.cells < cells:  # a stop (the canary, a cap, a drain) cut the arm short
                arm.reason = (f"the campaign stopped early (exit {code}): {arm.cells} of "
                              f"{cells} cell(s) ran")
            if code in (0, 1):  # an interrupted arm is not kept: a re-run runs it again
                _write(out / "arms" / f"jobs-{v}.json",
                       json.dumps(msgspec.to_builtins(arm), indent=1) + "\n")
        if arm.timeouts and after_timeouts is None:
            after_timeouts = v
        results.append(arm)
    head = {"created_at": _iso(), "command": _command(), "key": key,
            "preset": (f"{preset.name} v{preset.version}" if preset else None),
            "llm_element": req.options.llm_element,
            "host": _host(load_before), "model": _model(last),
            "sample": {"cells": cells, "plan_sha256": first.plan.plan_sha256,
                       "description": _describe(req), "warm_up": warm}}
    doc = tunereport.document(head, results)
    _write(out / "tune-jobs.json", json.dumps(doc, indent=1) + "\n")
    _write(out / "tune-jobs.md", tunereport.markdown(doc))
    click.echo(f"agentprov tune-jobs: {doc['recommendation']['why']}")
    click.echo(f"  report: {out / 'tune-jobs.md'} and tune-jobs.json")
    click.echo(f"agentprov: finished in {time.monotonic() - started:.1f}s", err=True)
    return 0 if doc["recommendation"]["jobs"] is not None else 1


def _set_aside(corpus: Path) -> None:
    """An arm's corpus left by an interrupted run is moved aside, never removed."""
    from agentprov_core.corpus.working import partial_dir

    work = partial_dir(corpus)
    if work.exists():
        work.rename(work.with_name(f"{corpus.name}.interrupted-{_now_tag()}.partial"))


def _dry_run(first: Any, arms: list[tuple[int, str | None, dict[str, Any] | None]], out: Path,
             reuse: bool, cells: int, cell_seconds: Callable[[Any], tuple[float, str]]) -> int:
    secs, basis = cell_seconds(first)
    lines = [f"tune-jobs: {cells} cell(s) an arm (plan {first.plan.plan_sha256[:16]}...), "
             f"after 1 unmeasured warm-up cell; into {out}"
             + (" (an earlier run of this sweep: its finished arms are reused)" if reuse
                else " (new)")]
    total = secs
    for v, why, rec in arms:
        if rec is not None:
            lines.append(f"  arm --jobs {v}: finished earlier, reused")
        elif why is not None:
            lines.append(f"  arm --jobs {v}: skipped: {why}")
        else:
            t = -(-cells // v) * secs
            total += t
            lines.append(f"  arm --jobs {v}: {cells} cell(s), roughly "
                         f"{_duration(t)} at one cell's time")
    lines.append(f"  rough time in all: {_duration(total)} (from {basis}; a server that "
                 "slows under concurrency takes longer)")
    if first.model_facts is not None:
        from agentprov_core.live.local.facts import summary

        lines.append(summary(first.model_facts))
    if first.preset is not None:
        lines += first.preset.lines()
    click.echo("\n".join(lines))
    return 0


def _duration(s: float) -> str:
    return f"{round(s)} s" if s < 60 else f"{round(s / 60)} m" if s < 3600 \
        else f"{s / 3600:.1f} h"


def _describe(req: RunRequest) -> str:
    o = req.options
    if o.plan:
        return f"the plan {o.plan}"
    parts = [f"suites {','.join(o.suite) or 'all'}", f"user tasks {o.user_tasks or 'all'}"]
    if o.attack:
        parts.append(f"attack {','.join(o.attack)} (injection tasks "
                     f"{o.injection_tasks or 'all'})")
    parts.append(f"benign {o.benign or 'include'}")
    return "; ".join(parts)


def _command() -> str:
    return shlex.join(["agentprov", *sys.argv[1:]])


def _iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write(p: Path, text: str) -> None:
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)

