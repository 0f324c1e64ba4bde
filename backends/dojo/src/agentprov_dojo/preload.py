"""Imported once by the worker's forkserver, so that every forked cell starts warm.

Besides the benchmark, what the SDK imports lazily at a cell's first model call:
``client.chat.completions``, httpx2's transport (``httpcore2``, ``h11``) and ``truststore``
(the client's SSL context). Left to the cell, every forked process imports these 62 modules
again: about 75 ms a cell from the environment's bytecode, 0.25 s compiling from source
(``benchmarks/bench_campaign.py`` checks that a forked cell imports nothing more).

It also builds the client's TLS context once (``recording.warm_tls_context``): reading the
trust store costs about 40 ms, which every forked cell would otherwise pay again.

And :func:`warm_cells` (``DojoSource.warm``) runs one stock cell offline: agentdojo's runner runs all its
cells in one process, so its second and later cells find built what the first one built
lazily (the SDK's request and response models, its parameter transforms, pydantic's JSON
schemas of the tools, the suites' files read and parsed once by ``read_suite_file``);
without it every forked cell builds them again, about 25 ms a cell.
"""

import time

_t0 = time.time()

import agentdojo.agent_pipeline  # noqa: F401, E402
import agentdojo.attacks.attack_registry  # noqa: F401, E402
import agentdojo.benchmark  # noqa: F401, E402
import agentdojo.task_suite.load_suites  # noqa: F401, E402
import agentprov_backend.recording  # noqa: F401, E402
import agentprov_capture  # noqa: F401, E402
import h11  # noqa: F401, E402
import httpcore2  # noqa: F401, E402
import openai  # noqa: F401, E402
import openai.resources.chat.chat  # noqa: F401, E402
import openai.resources.chat.completions.completions  # noqa: F401, E402
import truststore  # noqa: F401, E402
from agentprov_backend import timing  # noqa: E402

import agentprov_dojo.cells  # noqa: F401, E402
import agentprov_dojo.defended  # noqa: F401, E402
import agentprov_dojo.provisioned  # noqa: F401, E402

agentprov_backend.recording.warm_tls_context()


def warm_cells(asked: dict) -> None:
    """One benign banking cell (``user_task_0``), through AgentDojo's stock pipeline and
    ``OpenAILLM`` over an ``openai.OpenAI`` client whose transport answers in process (a
    ``get_balance`` call, then a text): no network, nothing written but a native log in a
    temporary directory, removed. Also reads the files of the suites T0 names (the plan's)
    into agentdojo's own cache. The benchmark version is the one T0 names, else the latest
    registered. The cells forked afterwards start from this state, as a
    runner's later cells do; a failure leaves them cold, nothing else."""
    import contextlib
    import io
    import json
    import shutil
    import tempfile
    from pathlib import Path

    import httpx2
    from agentdojo.agent_pipeline import AgentPipeline, PipelineConfig
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
    from agentdojo.benchmark import run_task_without_injection_tasks
    from agentdojo.logging import OutputLogger
    from agentdojo.task_suite.load_suites import _SUITES, get_suites
    from agentdojo.task_suite.task_suite import read_suite_file

    def answer(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        tools_seen = sum(1 for m in body["messages"] if m.get("role") == "tool")
        message = ({"role": "assistant", "content": "done"} if tools_seen else
                   {"role": "assistant", "content": None, "tool_calls": [
                       {"id": "call_warm", "type": "function",
                        "function": {"name": "get_balance", "arguments": "{}"}}]})
        return httpx2.Response(200, json={
            "id": "warm", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    version = asked.get("benchmark_version")
    if version not in _SUITES:
        version = max(_SUITES, key=lambda v: tuple(int(x) for x in v.lstrip("v").split(".")))
    suites = get_suites(version)
    for name in asked.get("suites") or ():
        if name in suites:
            for file in ("environment.yaml", "injection_vectors.yaml"):
                read_suite_file(name, file, suites[name].data_path)
    suite = suites["banking"]
    client = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm", max_retries=0,
                           http_client=openai.DefaultHttpxClient(
                               transport=httpx2.MockTransport(answer)))
    llm = OpenAILLM(client, "warm")
    llm.name = "warm"
    pipeline = AgentPipeline.from_config(PipelineConfig(
        llm=llm, model_id="warm", defense=None, system_message_name=None, system_message=None))
    logdir = tempfile.mkdtemp(prefix="agentprov-warm-")
    try:
        with contextlib.redirect_stdout(io.StringIO()), OutputLogger(logdir):
            run_task_without_injection_tasks(
                suite, pipeline, suite.get_user_task_by_id("user_task_0"),
                logdir=Path(logdir), force_rerun=True, benchmark_version=version)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


timing.emit("forkserver.preload.agentprov_dojo", _t0)
