"""One Inspect cell: one ``inspect_ai.eval()`` of the cell's samples, in the forked,
confined cell process, every model call recorded.

The agent and every judge are Inspect's OpenAI-compatible provider
(``openai-api/agentprov/<model>``) at the agent's base URL and key, each built by
``get_model(..., http_client=...)``: ``http_client`` is a documented model argument of
that provider, which hands it to the ``openai.AsyncOpenAI`` client it builds. The client is
the SDK's stock ``DefaultAsyncHttpxClient`` with its transports wrapped by the recording
transport (:func:`agentprov_backend.recording.wrap_async_client`;
:mod:`agentprov_inspect.models`), so every wire attempt of
the agent and of the judges is written to the session's capture log before it leaves.
Judges reach the task as ``Model`` objects (the AgentHarm task functions take
``str | Model``), so the task's own ``get_model(judge)`` returns them unchanged; each is
built with its role (``get_model(role=...)``) and passed as the eval's ``model_roles``, so
the ``.eval`` log tells a judge's calls from the agent's even on the same model.

A judge's requests are the ones Inspect sends for the same model strings. Run by Inspect
(``inspect eval <task> --model M -T refusal_judge=M``, no generation option: one would key
the agent's model apart in ``get_model``'s memo), the task's ``get_model(M)`` finds the
agent's memoized ``Model`` and the judge *is* the active model, whose requests
``Model._resolve_config`` builds from the task's generation config (AgentHarm: ``max_tokens``
4096, ``seed`` 0, ``temperature`` 0); a judge on another model is a model of its own,
whose requests carry only what the scorer passes (``temperature`` 0). A judge here is a
model of its own in either case (its role and recording need one), so a judge on the
agent's model is given the configuration Inspect resolves for the active model
(:func:`judge_config`): its request bodies are the runner's, field by field.

Retries: Inspect's are fixed at one per model call (``max_retries=1`` on every model and on
the eval), and the SDK's own are off (``max_retries=0`` on the client), so a call makes at
most two wire attempts (D-740's K = 1).

The dataset: inspect_evals' loader writes a ``.jsonl`` beside the file it reads, and reads
its cache directory once, when ``inspect_evals`` is imported. The cell copies the files the
task reads into ``<staging>/inspect_evals_cache/`` (Landlock lets it write only there and in
its private home), points ``INSPECT_EVALS_CACHE_DIR`` at the copy and only then imports the
task module. The copy is removed when the cell ends. The ``.eval`` log is written to
``<staging>/inspect/``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from agentprov_inspect.models import recording_model

#: the harness effects on what the models saw, as the capture header declares them
DECLARED = [
    "recording_transport@1 mode: observe",
    "inspect_retries@1 max_retries: 1 (Inspect), 0 (SDK)",
    "inspect_model@1 provider: openai-api (agent and judges at the agent's endpoint)",
    "inspect_judges@1 roles: a Model per judge; one on the agent's model configured as the "
    "active model (the task's generation config), so no request field differs",
]
#: declared too in a scripted cell, whose samples run one at a time: the script's replies
#: are taken in the order the calls arrive, and concurrent samples would interleave them
SCRIPTED_ORDER = "scripted_order@1 max_samples: 1 (one sample at a time)"
#: where the cell's ``.eval`` log is written, below staging
LOG_DIR = "inspect"
#: the writable copy of the dataset, below staging (the task's cache directory)
CACHE_DIR = "inspect_evals_cache"
def judge_config(agent_model: Any, task: Any, eval_config: Any) -> Any:
    """The configuration Inspect's ``Model._resolve_config`` gives the active model before a
    call's own (the model's, then the task's merged with the eval's generation settings,
    as ``inspect_ai._eval.task.run`` makes the active one), for a judge on the agent's model:
    resolved as a model of its own (the active one's operational settings merged, then
    the call's), it makes the requests the active model makes."""
    return agent_model.config.merge(task.config.merge(eval_config))


def sample_ids(source: Any, insp: dict[str, Any], samples: list[dict[str, Any]]) -> list[str]:
    """The cell's samples as ids of the plan's split (an index is one of dataset order)."""
    task = insp["task"]
    split = insp.get("split")
    order: list[str] | None = None
    out = []
    for s in samples:
        if "id" in s:
            out.append(str(s["id"]))
        else:
            if order is None:
                order = source.sample_ids(task, split)
            out.append(order[int(s["index"])])
    return out


def run_cell(source: Any, req: dict[str, Any]) -> dict[str, Any]:
    """Run the Inspect cell ``req`` describes with ``source`` (an
    :class:`agentprov_inspect.source.InspectWorkerSource`); returns the cell's result. A
    request with ``preflight`` makes one call of the preflight probe instead
    (:func:`agentprov_inspect.probe.run_probe`)."""
    if req.get("preflight"):
        from agentprov_inspect.probe import run_probe

        return run_probe(req)
    from agentprov_backend.source import (
        RESULT_KEYS,
        open_capture,
        record_exception,
        stage_result,
    )

    staging = Path(req["staging"])
    agent = req["agent"]
    declared = DECLARED + ([SCRIPTED_ORDER] if agent.get("scripted") else [])
    writer = open_capture(req, declared, element="inspect_ai/openai-api",
                          inspect=_header(req.get("inspect") or {}))
    result: dict[str, Any] = dict.fromkeys(RESULT_KEYS) | {"status": "errored"}
    try:
        result.update(_run(source, req, writer, staging, agent))
    except BaseException as exc:  # noqa: BLE001 - a cell's failure is evidence, not a crash
        result.update(status="errored", error=record_exception(writer, exc))
    finally:
        shutil.rmtree(staging / CACHE_DIR, ignore_errors=True)
    stage_result(staging, result)
    return result


def _header(insp: dict[str, Any]) -> dict[str, Any]:
    from agentprov_backend.source import no_floats

    return no_floats({k: insp.get(k) for k in ("task", "split", "epochs", "limits", "judges",
                                               "params", "max_connections")})


def _run(source: Any, req: dict[str, Any], writer: Any, staging: Path,
         agent: dict[str, Any]) -> dict[str, Any]:
    insp = req["inspect"]
    ids = sample_ids(source, insp, list(req["cell"].get("samples") or []))
    cache = staging / CACHE_DIR
    source.stage_dataset(insp, cache)
    os.environ["INSPECT_EVALS_CACHE_DIR"] = str(cache)  # read once, at inspect_evals' import

    from agentprov_backend import timing
    from agentprov_backend.source import RESULT_KEYS, stage_result

    t = time.time()
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import GenerateConfig

    model = recording_model(agent["model_id"], agent, writer)
    judges = {role: recording_model(m, agent, writer, role)
              for role, m in sorted((insp.get("judges") or {}).items())}
    task = source.build_task(insp, judges)
    # the eval's generation settings: Inspect merges them over the task's
    generation = {"max_retries": 1, "max_connections": int(insp.get("max_connections") or 4)}
    for role, m in sorted((insp.get("judges") or {}).items()):
        if m == agent["model_id"]:
            judges[role].config = judge_config(model, task, GenerateConfig(**generation))
    timing.emit("cell.inspect_setup", t, session=req["session_id"])  # imports, models, task
    t = time.time()
    limits = insp.get("limits") or {}
    logs = inspect_eval(
        task, model=model, sample_id=ids, epochs=int(insp.get("epochs") or 1),
        message_limit=limits.get("message_limit"), token_limit=limits.get("token_limit"),
        time_limit=limits.get("time_limit"), max_samples=1 if agent.get("scripted") else None,
        model_roles=judges, fail_on_error=False, **generation,
        log_dir=str(staging / LOG_DIR), log_format="eval", display="none", score=True)
    timing.emit("cell.inspect_eval", t, session=req["session_id"])
    log = logs[0]
    path = Path(log.location)
    errored = [f"{s.id}/{s.epoch}" for s in (log.samples or []) if s.error is not None]
    if log.status != "success":
        status, reason = ("errored" if log.status == "error" else "incomplete"), \
            f"the eval ended {log.status}" + (f": {log.error.message}" if log.error else "")
    elif errored:
        status, reason = "incomplete", "sample(s) errored in the harness: " + ", ".join(errored)
    else:
        status, reason = "complete", None
    native = str(path.relative_to(staging)) if path.is_file() else None
    if native is None:
        status, reason = "incomplete", f"no .eval log at {path.name}"
    result = {"status": status, "native_log": native,
              "error": reason if status != "complete" else None}
    stage_result(staging, dict.fromkeys(RESULT_KEYS) | result)  # before the log ends
    writer.end(status, reason=reason, samples=len(ids), eval_status=log.status)
    return result
