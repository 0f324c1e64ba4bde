"""One call of the preflight probe (R-18, D-742) for an Inspect source, in its own capture
session: the request goes through Inspect's own model, as a cell's agent calls do.

The agent's model is built as a cell builds it (:func:`agentprov_inspect.models.recording_model`:
Inspect's ``openai-api`` provider at the agent's base URL and key, over the recording
transport, the SDK's retries off), and the call's own ``GenerateConfig(max_retries=0)``
turns Inspect's retries off too (a call's config wins over the model's), so one probe call
is one wire attempt and one billed call at most. One ``Model.generate`` call sends the instruction
as the system message, a user message and one tool, ``report_probe(code: str)``. No
sampling parameter of the agent's configuration is passed: an Inspect task fixes its own
(the spec's Preflight paragraph), so the request carries only what Inspect sends for a bare
``generate``. T0 judges the recorded exchange (:mod:`agentprov_core.live.preflight`) from
the capture records: the ``wire_request``, the ``wire_response`` (or ``wire_error``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: the harness effects on what the model saw, as the capture header declares them
DECLARED = [
    "recording_transport@1 mode: observe",
    "preflight_probe@1 calls: 1",
    "inspect_retries@1 max_retries: 0 (Inspect), 0 (SDK)",
    "inspect_model@1 provider: openai-api (the agent's model at the agent's endpoint)",
]
#: the LLM element the capture header names (a cell's own)
ELEMENT = "inspect_ai/openai-api"
PROBE_FUNCTION = "report_probe"


def _tool() -> Any:
    from inspect_ai.tool import ToolInfo, ToolParam, ToolParams

    return ToolInfo(name=PROBE_FUNCTION, description="Report the probe code you were given.",
                    parameters=ToolParams(properties={"code": ToolParam(
                        type="string", description="the code from your instructions")},
                        required=["code"]))


def _cause(exc: BaseException) -> BaseException:
    """The error itself: Inspect's retry loop raises tenacity's ``RetryError`` around the
    last attempt's error once its retries (none here) are spent."""
    import tenacity

    if isinstance(exc, tenacity.RetryError) and exc.last_attempt.failed:
        return exc.last_attempt.exception() or exc
    return exc


def _status(exc: BaseException) -> int | None:
    """The HTTP status of an SDK status error (``openai.APIStatusError``), else None."""
    import openai

    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def run_probe(req: dict[str, Any]) -> dict[str, Any]:
    """One probe call ``req["preflight"]`` describes (``call``, ``instruction``, ``user``);
    writes ``capture.jsonl`` and ``result.json`` in staging and returns the result."""
    import asyncio

    from agentprov_backend.recording import model_call
    from agentprov_backend.source import open_capture

    staging = Path(req["staging"])
    agent, probe = req["agent"], req["preflight"]
    # the header names the element that made the call, whatever element the request names
    writer = open_capture(req | {"agent": agent | {"element": ELEMENT}}, DECLARED,
                          unit=None, attempt=probe.get("call"))
    result: dict[str, Any] = {"status": "errored", "error": None, "error_type": None,
                              "http_status": None, "calls": 1}
    try:
        from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig

        from agentprov_inspect.models import recording_model

        model = recording_model(agent["model_id"], agent, writer)
        messages = [ChatMessageSystem(content=probe["instruction"]),
                    ChatMessageUser(content=probe["user"])]
        # the call's config wins over the model's (Model._resolve_config): no Inspect retry
        single = GenerateConfig(max_retries=0)
        with model_call(writer, "p1", element=ELEMENT, model=agent["model_id"]):
            output = asyncio.run(model.generate(messages, tools=[_tool()], config=single))
        if output.error:  # an error Inspect turned into an output (a refusal, a filter)
            result.update(error=str(output.error)[:500])
        result["status"] = "complete"
        writer.end("complete", reason=None)
    except BaseException as caught:  # noqa: BLE001 - the verdict is T0's, from the record
        exc = _cause(caught)
        status = _status(exc)
        result.update(status="errored", error=f"{type(exc).__name__}: {exc}"[:500],
                      error_type=type(exc).__name__, http_status=status)
        if not writer.ended:
            writer.end("errored", reason=(f"{type(exc).__name__}: HTTP {status}"
                                          if status is not None else result["error"]))
    (staging / "result.json").write_text(json.dumps(result, sort_keys=True), encoding="utf-8")
    return result
