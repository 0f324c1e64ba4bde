"""What a worker package contributes for one source: a :class:`WorkerSource`.

A backend environment holds the benchmark's code and a *worker package* that knows how to
serve it. The worker package registers one object per source under the entry-point group
``agentprov.worker`` (the entry point's name is the source's name)::

    [project.entry-points."agentprov.worker"]
    mybench = "mybench_worker:SOURCE"

The worker (``python -m agentprov_backend.worker``) finds it there
(:mod:`agentprov_backend.host`) and asks it, in this order over a campaign:

1. :meth:`WorkerSource.catalogue` when the environment is built (and whenever T0 asks):
   the source's ``agentprov-catalogue/0.1`` document, read from the installed benchmark.
2. :meth:`WorkerSource.check_plan` in a dry run and before a campaign: what is wrong with
   the plan's cells (an unknown task, a refused attack), as sentences.
3. :attr:`WorkerSource.preload` and :meth:`WorkerSource.warm` once, in the forkserver a
   campaign's worker starts, so that every forked cell starts warm.
4. :meth:`WorkerSource.run_cell` in a forked child per cell, confined by Landlock to the
   cell's staging directory: it runs the cell against the agent's endpoint through the
   recording transport (:mod:`agentprov_backend.recording`), writes the session's capture
   log (:func:`open_capture`) and returns the cell's result.

Everything the worker returns or stages is untrusted input to T0, which checks it; the
worker package only has to tell the truth about what ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: The result of a cell as T0 reads it from ``result.json``.
RESULT_KEYS = ("status", "utility", "security", "setup_refusal", "native_log", "error")


class WorkerSource:
    """The worker side of one source. Subclass it and set :attr:`name`.

    The defaults serve a suites-shaped catalogue (suites of user and injection tasks, and
    attacks): :meth:`check_plan` checks every cell against it.
    """

    #: the source's name, as T0's ``SourceMeta.name`` and the entry point's name say it
    name: str = ""
    #: the modules a campaign's forkserver imports once, before its first cell (the
    #: benchmark's heavy imports), so that no forked cell imports them again
    preload: tuple[str, ...] = ()

    def catalogue(self) -> dict[str, Any]:
        """The source's ``agentprov-catalogue/0.1`` document, read from the installed
        benchmark (``agentprov_backend.catalogue.FORMAT``)."""
        raise NotImplementedError(f"{type(self).__name__} serves no catalogue")

    def check_plan(self, request: dict[str, Any], catalogue: dict[str, Any]) -> list[str]:
        """What is wrong with a plan's cells, one sentence each; empty when all are served.

        :param request: the ``plan`` request: ``benchmark_version`` and ``cells`` (each with
            ``cell_key``, ``suite``, ``user_task_id``, ``injection_task_id``, ``attack``).
        :param catalogue: this source's catalogue, as :meth:`catalogue` returned it.
        """
        return suites_plan_problems(request, catalogue)

    def warm(self, asked: dict[str, Any]) -> None:
        """Build, in the forkserver, what every cell would otherwise build again.

        :param asked: what T0 names for the campaign (``benchmark_version``, ``suites``).
        """

    def run_cell(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one cell in this (forked, confined) process and return its result.

        The current directory is the cell's staging directory (``request["staging"]``), the
        only place the process may write. Write the capture log there with
        :func:`open_capture` and end its session; return a mapping with
        :data:`RESULT_KEYS` (``status`` one of ``complete``, ``errored``, ``aborted``,
        ``refused``). The host writes it to ``result.json`` unless the source staged one.

        :param request: the ``run-cell`` request: ``session_id``, ``staging``, ``cell``,
            ``agent`` (``base_url``, ``model_id``, ``key_env``, ``scripted``, …),
            ``benchmark_version``, ``unit``, ``attempt``, ``backend``, ``plan_sha256``,
            ``config_digest``, ``source``, ``defence`` (docs/protocol.md).
        """
        raise NotImplementedError(f"{type(self).__name__} runs no cells")


def open_capture(request: dict[str, Any], declared_instrumentation: list[str], *,
                 element: str | None = None, **header: Any):
    """The session's capture writer (``capture.jsonl`` in the staging directory), its header
    filled from the ``run-cell`` request as T0 expects it.

    :param declared_instrumentation: every harness effect on what the model or the tools
        saw, as ``name@version detail`` (``recording_transport@1 mode: observe`` first).
    :param element: the LLM element the agent's calls go through, unless the request names
        one (``agent.element``).
    :param header: further header fields (``defence``, …).
    """
    from agentprov_capture import CaptureWriter

    agent = request.get("agent") or {}
    fields = {
        "session_id": request["session_id"], "cell": request.get("cell") or {},
        "unit": request.get("unit"), "attempt": request.get("attempt"),
        "backend": request.get("backend", {}), "plan_sha256": request.get("plan_sha256"),
        "config_digest": request.get("config_digest"),
        "declared_instrumentation": list(declared_instrumentation),
        "source": request.get("source"), "benchmark_version": request.get("benchmark_version"),
        "test_only": agent.get("scripted", False), "agent": agent_header(agent, element),
    }
    return CaptureWriter(Path(request["staging"]) / "capture.jsonl", fields | header)


def no_floats(value: Any) -> Any:
    """A header value without floats (the writer allows floats only in payloads): a float
    is written as its decimal string, ``0.7`` as ``"0.7"``."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): no_floats(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [no_floats(v) for v in value]
    return value


def agent_header(agent: dict[str, Any], element: str | None = None) -> dict[str, Any]:
    """The agent configuration as the capture header records it: the model id, the pipeline
    name and display name, the endpoint kind and base URL (never a key, nor the name of the
    variable that holds one), the LLM element (``element`` unless the request names one),
    its wire family and the configured parameters."""
    kind = agent.get("endpoint_kind") or ("scripted" if agent.get("scripted") else None)
    return {"model": agent.get("model_id"), "pipeline_name": agent.get("pipeline_name"),
            "display_name": agent.get("display_name"), "endpoint_kind": kind,
            "base_url": agent.get("base_url"), "element": agent.get("element", element),
            "wire": agent.get("wire", "openai"),
            "parameters": no_floats(dict(agent.get("params") or {}))}


def suites_plan_problems(request: dict[str, Any], cat: dict[str, Any]) -> list[str]:
    """Check every cell against a suites-shaped catalogue: its benchmark version, suite,
    user task, attack (registered and not refused) and injection task exist."""
    version = request.get("benchmark_version") or cat["default_benchmark_version"]
    suites = {s["name"]: dict(s, user_set=set(s["user_tasks"]), inj_set=set(s["injection_tasks"]))
              for s in cat["suites"] if s["benchmark_version"] == version}
    attacks = {a["name"]: a for a in cat.get("attacks", [])}
    problems: list[str] = []
    if version not in cat["benchmark_versions"]:
        problems.append(f"benchmark version {version!r} is not one of "
                        + ", ".join(cat["benchmark_versions"]))
    for cell in request.get("cells", []):
        suite = suites.get(cell.get("suite"))
        if suite is None:
            problems.append(f"{cell.get('cell_key')}: no suite {cell.get('suite')!r} "
                            f"(suites: {', '.join(suites)})")
            continue
        if cell.get("user_task_id") not in suite["user_set"]:
            problems.append(f"{cell['cell_key']}: no user task {cell.get('user_task_id')!r} "
                            f"in {suite['name']}")
        inj = cell.get("injection_task_id")
        if cell.get("attack") is not None:
            if cell["attack"] not in attacks:
                problems.append(f"{cell['cell_key']}: no attack {cell['attack']!r} "
                                f"(attacks: {', '.join(attacks)})")
            elif attacks[cell["attack"]]["refused"]:
                problems.append(f"{cell['cell_key']}: attack {cell['attack']!r} is refused")
            if inj not in suite["inj_set"]:
                problems.append(f"{cell['cell_key']}: no injection task {inj!r} in "
                                f"{suite['name']}")
    return problems


def stage_result(staging: Path, result: dict[str, Any]) -> None:
    """Stage the cell's result as ``result.json`` in ``staging``, whole or not at all (a
    fresh file renamed over the last one). A cell stages it before it ends its log: an
    ended log then always has its result beside it (the native log it names), even when
    the cell is ended between the two (an interrupt), and T0 ingests it whole."""
    import json
    import os

    tmp = staging / "result.json.partial"
    tmp.write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    os.replace(tmp, staging / "result.json")


def record_exception(writer: Any, exc: BaseException) -> str:
    """A cell's exception as evidence: a ``cell.exception`` note in its capture (the
    exception, and the traceback's last 4,000 characters), and the session ended
    ``errored`` unless it had ended; returns the error text for the cell's result."""
    import traceback

    writer.append("note", code="cell.exception", text="".join(
        traceback.format_exception_only(type(exc), exc)).strip(),
        traceback="".join(traceback.format_exception(exc))[-4000:])
    error = f"{type(exc).__name__}: {exc}"
    if not writer.ended:
        writer.end("errored", reason=error)
    return error
