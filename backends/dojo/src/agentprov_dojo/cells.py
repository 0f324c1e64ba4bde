"""Running one AgentDojo-shaped cell in a child process, recording it as capture/0.1.

The worker imports the benchmark once (a forkserver preloads it) and forks a fresh process
per cell, so cells are isolated and never pay the import again. The child:

1. writes the capture header, builds the stock pipeline (``AgentPipeline.from_config`` with
   AgentDojo's own ``OpenAILLM`` and the plan's defence, by
   :func:`agentprov_dojo.defended.build_pipeline`) over an ``openai.OpenAI`` client whose
   HTTP transport is the recording transport;
2. loads the attack (a setup refusal, such as an attack that addresses the model by name
   when the pipeline name has no stock entry, ends the session ``errored`` with the
   refusal recorded, and is reported so that T0 stops the campaign: a config stop);
3. runs the cell with AgentDojo's own runner inside ``OutputLogger`` so that the native log
   is written to ``<staging>/native/``; records tool results and the environment digests;
4. ends the capture ``complete`` (native log present and valid), ``incomplete`` (missing or
   damaged) or ``errored`` (an exception), and writes ``result.json``.

The only harness effects are declared in the header's instrumentation list.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

DECLARED = [
    "http_backoff@1 policy: stock_sdk",  # gateway_compat: its own (element_declared)
    "recording_transport@1 mode: observe",
    "tool_recorder@1 mode: observe",
    "environment_digest@1 mode: observe",
    "call_boundary@1 mode: observe",
]


def _jsonable(obj: Any) -> Any:
    try:
        json.dumps(obj)
        return obj
    except (TypeError, ValueError):
        if hasattr(obj, "model_dump"):
            try:
                return obj.model_dump(mode="json")
            except Exception:  # noqa: BLE001 - fall through to repr
                pass
        return repr(obj)


def native_log_path(native: Path, pipeline: str, suite: str, user: str, attack: str | None,
                    inj: str | None) -> Path:
    return native / pipeline / suite / user / (attack or "none") / f"{inj or 'none'}.json"


def element_kwargs(agent: dict[str, Any]) -> dict[str, Any]:
    """The configured parameters as AgentDojo's stock ``OpenAILLM`` takes them: the
    temperature (recorded as decimal text, passed as a float; the element itself drops 0)
    and the reasoning effort. Anything else is not taken by the stock element."""
    params = agent.get("params") or {}
    kw: dict[str, Any] = {}
    if params.get("temperature") is not None:
        kw["temperature"] = float(params["temperature"])
    if params.get("reasoning_effort"):
        kw["reasoning_effort"] = params["reasoning_effort"]
    return kw


def anthropic_kwargs(agent: dict[str, Any]) -> dict[str, Any]:
    """The configured parameters as AgentDojo's stock ``AnthropicLLM`` takes them: the
    ``max_tokens`` the run requires on an Anthropic endpoint (``harness-default`` keeps the
    element's own 1,024) and the temperature (passed as a float; unset keeps the element's
    own 0.0)."""
    params = agent.get("params") or {}
    kw: dict[str, Any] = {}
    if isinstance(params.get("max_tokens"), int):
        kw["max_tokens"] = params["max_tokens"]
    if params.get("temperature") is not None:
        kw["temperature"] = float(params["temperature"])
    return kw


def make_anthropic_client(agent: dict[str, Any], writer, **client_kwargs: Any):
    """The anthropic SDK's client over the recording transport, for ``AnthropicLLM``.

    It is an ``anthropic.AsyncAnthropic``: the stock element turns a sync ``Anthropic``
    client into a new ``AsyncAnthropic`` built from its key, base URL, timeout and retries
    only (its ``http_client`` would be dropped, and the calls would go out unrecorded), and
    always calls ``client.messages.stream(...)``. Its HTTP client is the SDK's stock
    ``DefaultAsyncHttpxClient`` wrapped by the recording transport. The key is read as
    :func:`make_client` reads it."""
    import anthropic
    from agentprov_backend.recording import recording_anthropic_http_client

    key = os.environ.get(agent["key_env"]) if agent.get("key_env") else None
    return anthropic.AsyncAnthropic(api_key=key or "agentprov-no-key",
                                    base_url=agent["base_url"],
                                    http_client=recording_anthropic_http_client(writer),
                                    **client_kwargs)


def make_llm(agent: dict[str, Any], writer, **client_kwargs: Any):
    """(the stock LLM element for the agent's wire, its class)."""
    if agent.get("wire") == "anthropic":
        from agentdojo.agent_pipeline.llms.anthropic_llm import AnthropicLLM

        client = make_anthropic_client(agent, writer, **client_kwargs)
        return AnthropicLLM(client, agent["model_id"], **anthropic_kwargs(agent)), AnthropicLLM
    if agent.get("llm_element") == "gateway_compat":  # its own retries, none of the SDK's
        from agentprov_dojo import gateway

        cls = gateway.element_class()
        client = make_client(agent, writer, **{**client_kwargs, "max_retries": 0})
        timeout = (agent.get("params") or {}).get("timeout_s")
        return cls(client, agent["model_id"], timeout_s=float(timeout) if timeout else None,
                   **element_kwargs(agent)), cls
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM

    client = make_client(agent, writer, **client_kwargs)
    return OpenAILLM(client, agent["model_id"], **element_kwargs(agent)), OpenAILLM


def element_declared(agent: dict[str, Any]) -> tuple[str, list[str]]:
    """The element's name and the declared items of a cell: :data:`DECLARED`, with
    ``gateway_compat``'s own retries in place of the stock SDK backoff and its role rewrite
    after them."""
    if agent.get("llm_element") == "gateway_compat" and agent.get("wire") != "anthropic":
        from agentprov_dojo import gateway

        return gateway.NAME, [*gateway.DECLARED, *DECLARED[1:]]
    return ("AnthropicLLM" if agent.get("wire") == "anthropic" else "OpenAILLM",
            list(DECLARED))


def make_client(agent: dict[str, Any], writer, **client_kwargs: Any):
    """The stock ``openai.OpenAI`` client over the recording transport. The key is read from
    the worker's environment under the variable ``agent["key_env"]`` names (T0 puts it there;
    never in argv, never in a file); a scripted or keyless local endpoint gets a
    placeholder the server ignores."""
    import openai
    from agentprov_backend.recording import recording_http_client

    key = os.environ.get(agent["key_env"]) if agent.get("key_env") else None
    placeholder = "agentprov-scripted" if agent.get("scripted") else "agentprov-no-key"
    return openai.OpenAI(base_url=agent["base_url"], api_key=key or placeholder,
                         http_client=recording_http_client(writer), **client_kwargs)


def upstream_header() -> dict[str, Any]:
    """The pinned upstream commit the environment's benchmark was built from, as the build
    recorded it (``agentprov/upstream.json`` in the environment, a guarded file), for the
    capture header: ``{"upstream": {repository, commit, tree, licence}}``; empty for a
    backend installed from a registry."""
    import sys

    try:
        rec = json.loads((Path(sys.prefix) / "agentprov" / "upstream.json").read_text(
            encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {"upstream": {k: rec.get(k) for k in ("repository", "commit", "tree", "licence")}}


def run_cell(req: dict[str, Any], declared: tuple[str, ...] = ()) -> dict[str, Any]:
    """Run the cell described by ``req`` (a run-cell request) in this process; a request
    with ``preflight`` runs one call of the preflight probe instead (:func:`run_probe`).
    ``declared`` is the backend's own declared instrumentation (``SourceProfile.declared``)."""
    from agentprov_dojo import defended

    if req.get("preflight"):
        return run_probe(req)

    staging = Path(req["staging"])
    agent = req["agent"]
    defence = req.get("defence") or "none"
    own = declared
    element_name, declared = element_declared(agent)
    if agent.get("display_name"):
        declared.append(f"model_display_name@1 value: {agent['display_name']}")
    from agentprov_dojo import provisioned

    declared += defended.declared(defence)
    declared += provisioned.declared(req)  # a provisioned defence's code, weights, port
    declared += own  # the backend's own behaviour (a fork's differences from AgentDojo)
    if req.get("test_fault") in NATIVE_LOG_FAULTS:  # a test's fault, declared as such
        declared.append(f"test_fault@1 native_log: {req['test_fault']} "
                        "(AGENTPROV_TEST_NATIVE_LOG; a test, never a real run)")
    hostile = _hostile_fault(req.get("test_fault"))
    if hostile is not None:
        declared.append(f"test_fault@1 hostile: {hostile['hostile']} "
                        "(AGENTPROV_TEST_HOSTILE; a test, never a real run)")
    from agentprov_backend.source import open_capture, record_exception, stage_result

    writer = open_capture(req, declared, element=element_name, defence=defence,
                          **upstream_header())
    result: dict[str, Any] = {"status": "errored", "utility": None, "security": None,
                              "setup_refusal": None, "native_log": None, "error": None}
    local = req.get("local_model")
    if local is not None:  # A14: T0 re-observed the local model just before this cell
        writer.append("note", code="agentdojo/local_model", text=(
            "the served model matches the plan's identity record" if local.get("matches")
            else "the served model does not match the plan's identity record")
            + f" (agentprov-local-model digest {local.get('digest')})", local_model=local)
    try:
        provisioned.prepare(req, writer)
        result.update(_run(req, writer, staging))
    except BaseException as exc:  # noqa: BLE001 - a cell's failure is evidence, not a crash
        result.update(status="errored", error=record_exception(writer, exc))
    if hostile is not None:
        try:
            _stage_hostile(hostile, staging, result)
        except OSError as exc:  # said in the result, so that the test sees it
            result["error"] = f"test_fault hostile {hostile['hostile']} not staged: {exc}"
    stage_result(staging, result)
    if hostile is not None and hostile["hostile"] == "capture_symlink_ledger":
        (staging / "result.json").write_text("{", encoding="utf-8")  # the worker's request fails
    return result


def _run(req: dict[str, Any], writer, staging: Path) -> dict[str, Any]:
    from agentdojo import models
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.benchmark import (
        run_task_with_injection_tasks,
        run_task_without_injection_tasks,
    )
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.logging import OutputLogger
    from agentdojo.task_suite.load_suites import get_suite
    from agentdojo.task_suite.task_suite import TaskSuite
    from agentprov_backend.source import RESULT_KEYS, stage_result

    cell, agent = req["cell"], req["agent"]
    version = req["benchmark_version"]
    suite = get_suite(version, cell["suite"])
    user_task = suite.get_user_task_by_id(cell["user_task_id"])
    llm, element = make_llm(agent, writer)
    llm.name = agent["pipeline_name"]

    # --- observation hooks (declared): call boundaries, tool results, environment digests
    from agentprov_backend.recording import model_call

    from agentprov_dojo import defended, envdigest

    counter = {"calls": 0}

    def next_call_id() -> str:  # the agent's calls and a defence's share one numbering
        counter["calls"] += 1
        return f"c{counter['calls']}"

    original_query = element.query

    def query(self, *args, **kwargs):
        with model_call(writer, next_call_id(), element=element.__name__, model=self.model):
            return original_query(self, *args, **kwargs)

    element.query = query
    original_run = FunctionsRuntime.run_function
    in_agent = {"depth": 0}  # > 0 while the agent's pipeline runs (see pipeline_query)

    def run_function(self, env, function, kwargs, raise_on_error=False):
        out, error = original_run(self, env, function, kwargs, raise_on_error)
        writer.append("tool_result", tool=function, arguments=_jsonable(dict(kwargs)),
                      result=_jsonable(out), error=error,
                      phase="agent" if in_agent["depth"] else "harness")
        return out, error

    FunctionsRuntime.run_function = run_function
    original_check = TaskSuite._check_task_result
    seen = {"done": False}

    def check(self, task, model_output, pre_environment, task_environment, trace):
        if not seen["done"]:
            seen["done"] = True
            # envdigest.digest never raises: the cell is scored whatever its digest gives
            writer.append("environment_digest", name="pre", **envdigest.digest(pre_environment))
            writer.append("environment_digest", name="post",
                          **envdigest.digest(task_environment))
        return original_check(self, task, model_output, pre_environment, task_environment, trace)

    TaskSuite._check_task_result = check

    # AgentDojo names a defended pipeline f"{llm.name}-{defence}": the native log's
    # directory and the attack's model-name lookup follow pipeline.name. A provisioned
    # defence's factory builds its own, named the same way.
    from agentprov_dojo import provisioned

    pipeline = provisioned.pipeline(req, llm, agent, writer, next_call_id) or defended.build_pipeline(
        req.get("defence"), llm, agent, writer, next_call_id)
    # tool calls made outside the agent's pipeline are the benchmark's own (AgentDojo runs
    # the user task's ground truth to find the injection candidates): phase "harness"
    pipeline_query = pipeline.query

    def agent_query(*args, **kwargs):
        in_agent["depth"] += 1
        try:
            return pipeline_query(*args, **kwargs)
        finally:
            in_agent["depth"] -= 1

    pipeline.query = agent_query
    native = staging / "native"
    attack = None
    if cell.get("attack"):
        if agent.get("display_name"):
            models.MODEL_NAMES[agent["pipeline_name"]] = agent["display_name"]
        try:
            attack = load_attack(cell["attack"], suite, pipeline)
        except ValueError as exc:
            refusal = {"code": "setup.attack_model_name",
                       "message": f"attack '{cell['attack']}' names the model, and the pipeline "
                                  "name has no stock MODEL_NAMES entry: "
                                  "attack_params.model_display_name (--model-display-name) is "
                                  "required", "detail": str(exc)}
            writer.append("note", code="setup_refusal", text=refusal["message"],
                          refusal_code=refusal["code"])
            writer.end("errored", reason="setup refusal")
            return {"status": "errored", "setup_refusal": refusal,
                    "calls": counter["calls"]}
    with OutputLogger(str(native)):
        if attack is None:
            utility, security = run_task_without_injection_tasks(
                suite, pipeline, user_task, logdir=native, force_rerun=True,
                benchmark_version=version)
        else:
            u, s = run_task_with_injection_tasks(
                suite, pipeline, user_task, attack, logdir=native, force_rerun=True,
                injection_tasks=[cell["injection_task_id"]], benchmark_version=version)
            key_ = (cell["user_task_id"], cell["injection_task_id"])
            utility, security = u.get(key_), s.get(key_)
    log = native_log_path(native, pipeline.name, cell["suite"], cell["user_task_id"],
                          cell.get("attack"), cell.get("injection_task_id") if attack else None)
    _native_log_fault(req.get("test_fault"), log)
    status, reason = "complete", None
    try:
        json.loads(log.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        status, reason = "incomplete", f"native log {log.name}: {type(exc).__name__}"
    result = {"status": status, "utility": utility, "security": security,
              "native_log": str(log.relative_to(staging)) if log.exists() else None,
              "calls": counter["calls"]}
    stage_result(staging, dict.fromkeys(RESULT_KEYS) | result)  # before the log ends
    writer.end(status, reason=reason, utility=utility, security=security, calls=counter["calls"])
    return result


#: test-only faults of the native log (T0 passes one only when AGENTPROV_TEST_NATIVE_LOG is
#: set, and the header declares it): the log removed, or cut to its first half, after the
#: benchmark wrote it and before the cell's end is judged
NATIVE_LOG_FAULTS = ("remove", "truncate")


def _native_log_fault(fault: Any, log: Path) -> None:
    if fault == "remove":
        log.unlink(missing_ok=True)
    elif fault == "truncate" and log.is_file():
        data = log.read_bytes()
        log.write_bytes(data[: len(data) // 2])


#: test-only hostile input (T0 passes ``{"hostile": KIND, "target": PATH}`` for the first
#: cell of an invocation only when AGENTPROV_TEST_HOSTILE is set, and the header declares
#: it): once the cell has ended, its own process stages what a hostile worker could, for T0
#: to refuse. TARGET is a host file outside staging (its content must never reach T0's
#: corpus). ``capture_symlink_ledger`` also makes the worker's request fail (a result that
#: is no JSON), so that T0 seals the session its worker could not end.
HOSTILE_FAULTS = ("capture_symlink_host", "capture_symlink_ledger", "native_symlink_host",
                  "native_dotdot", "native_absolute", "native_nul", "native_long_name",
                  "fifo", "socket", "hardlink", "huge_sparse", "symlink_other_session")
#: the size of ``huge_sparse``'s native log (sparse: no block is written)
HUGE_SPARSE = 8 << 30


def _hostile_fault(fault: Any) -> dict[str, Any] | None:
    if isinstance(fault, dict) and fault.get("hostile") in HOSTILE_FAULTS:
        return fault
    return None


def _stage_hostile(fault: dict[str, Any], staging: Path, result: dict[str, Any]) -> None:
    kind, target = fault["hostile"], fault.get("target") or ""
    native_name = result.get("native_log") or "native/none.json"
    native = staging / native_name
    native.parent.mkdir(parents=True, exist_ok=True)
    if kind == "capture_symlink_host":
        _replace_with_link(staging / "capture.jsonl", target)
    elif kind == "capture_symlink_ledger":  # staging/<session>/ -> the corpus's ledger
        _replace_with_link(staging / "capture.jsonl", "../../ledger.jsonl")
    elif kind == "native_symlink_host":
        _replace_with_link(native, target)
    elif kind == "symlink_other_session":  # another session's file, by a relative link
        _replace_with_link(native, os.path.relpath(target, native.parent))
    elif kind == "native_dotdot":
        result["native_log"] = os.path.relpath(target, staging)
    elif kind == "native_absolute":
        result["native_log"] = target
    elif kind == "native_nul":
        result["native_log"] = native_name + "\x00.json"
    elif kind == "native_long_name":
        result["native_log"] = "n" * 10_000
    elif kind == "fifo":
        native.unlink(missing_ok=True)
        os.mkfifo(native)
        result["native_log"] = native_name
    elif kind == "socket":
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind("agentprov-test.sock")  # relative: the cell's working directory is staging
        s.close()
    elif kind == "hardlink":  # a second name for a host file; where the sandbox hides the
        native.unlink(missing_ok=True)  # host file, a second name for a staged one
        try:
            os.link(target, native)
        except OSError:
            os.link(staging / "capture.jsonl", native)
        result["native_log"] = native_name
    elif kind == "huge_sparse":
        with open(native, "wb") as f:
            f.truncate(HUGE_SPARSE)
        result["native_log"] = native_name


def _replace_with_link(path: Path, target: str) -> None:
    path.unlink(missing_ok=True)
    os.symlink(target, path)


PROBE_FUNCTION = "report_probe"


def _status_errors() -> tuple[type[BaseException], ...]:
    """The SDKs' HTTP status errors: openai's, and anthropic's when it is installed."""
    import openai

    try:
        import anthropic
    except ImportError:
        return (openai.APIStatusError,)
    return (openai.APIStatusError, anthropic.APIStatusError)


def run_probe(req: dict[str, Any]) -> dict[str, Any]:
    """One call of the preflight probe (R-18), in its own capture session.

    The request is built by AgentDojo's own element, exactly as a cell's first call is: the
    instruction in the system message (sent in the stock role, ``developer`` for
    ``OpenAILLM``, the ``system`` field for ``AnthropicLLM``), a user message, one tool, and
    the configured parameters as the element transmits them; through the same recording transport and the same proxy. One wire
    attempt only: the SDK's retries and tenacity's are turned off, so each probe call is one
    billed call at most. T0 judges the recorded exchange (:mod:`agentprov_core.live.preflight`)."""
    from agentdojo.functions_runtime import FunctionsRuntime, make_function
    from agentdojo.types import ChatSystemMessage, ChatUserMessage, text_content_block_from_string
    from agentprov_backend.recording import model_call
    from tenacity import stop_after_attempt

    staging = Path(req["staging"])
    agent, probe = req["agent"], req["preflight"]
    from agentprov_backend.source import open_capture

    writer = open_capture(req, ["recording_transport@1 mode: observe",
                                "preflight_probe@1 calls: 1"], element="OpenAILLM",
                          unit=None, attempt=probe.get("call"))
    result: dict[str, Any] = {"status": "errored", "error": None, "error_type": None,
                              "http_status": None, "calls": 1}

    def report_probe(code: str) -> str:
        """Report the probe code you were given.

        :param code: the code from your instructions
        """
        return code

    try:
        llm, element = make_llm(agent, writer, max_retries=0)
        if hasattr(llm, "attempts"):  # gateway_compat's own retries: one attempt too
            llm.attempts = 1
        if agent.get("wire") == "anthropic":
            import agentdojo.agent_pipeline.llms.anthropic_llm as element_module
        else:
            import agentdojo.agent_pipeline.llms.openai_llm as element_module
        original = element_module.chat_completion_request
        single = original.retry_with(stop=stop_after_attempt(1))
        runtime = FunctionsRuntime([make_function(report_probe)])
        messages = [
            ChatSystemMessage(role="system", content=[text_content_block_from_string(
                probe["instruction"])]),
            ChatUserMessage(role="user", content=[text_content_block_from_string(
                probe["user"])])]
        element_module.chat_completion_request = single
        try:
            with model_call(writer, "p1", element=element.__name__, model=llm.model):
                llm.query("", runtime, messages=messages)
        finally:
            element_module.chat_completion_request = original
        result["status"] = "complete"
        writer.end("complete", reason=None)
    except _status_errors() as exc:
        result.update(status="errored", error=str(exc)[:500], error_type=type(exc).__name__,
                      http_status=exc.status_code)
        writer.end("errored", reason=f"{type(exc).__name__}: HTTP {exc.status_code}")
    except BaseException as exc:  # noqa: BLE001 - the verdict is T0's, from the record
        result.update(status="errored", error=f"{type(exc).__name__}: {exc}"[:500],
                      error_type=type(exc).__name__)
        if not writer._ended:
            writer.end("errored", reason=result["error"])
    (staging / "result.json").write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    return result

