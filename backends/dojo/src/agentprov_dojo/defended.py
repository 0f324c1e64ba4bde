"""The agent's pipeline under a defence, and the record of what the defence did.

:func:`build_pipeline` is the one place the worker builds the agent's pipeline. Undefended,
it is AgentDojo's own ``AgentPipeline.from_config`` over the stock LLM element. Defended,
it is the same call with the defence's name (AgentDojo names the pipeline
``f"{llm_name}-{defence}"``, which drives the native log's directory and the attack's
model-name lookup), and then the harness's own effects, each declared in the capture
header (:func:`declared`):

``defence_pipeline_rewrite@1``
    ``tool_filter`` only: AgentDojo's ``OpenAILLMToolFilter`` is built with
    ``model=llm.name``, the pipeline name (``local``, ``scripted``, or an API model id
    with ``/`` written ``_``), which is not a model the endpoint serves. The harness sets
    the element's ``model`` to the agent's model id, so the filter runs on the agent's own
    model. This changes what the filter's request sends (``mode: rewrite``).
``defence_aux_span@1``
    the defence's own model calls (the filter's, one per pass) run inside a model-call
    span of their own, ``model_call_start`` … ``model_call_end`` with ``actor`` naming the
    defence, so the mapper attributes them to the defence's actor and the caps, the canary
    and the call count see them. Nothing sent changes.
``defence_recorder@1``
    the defence's elements are wrapped to note what they did (capture ``note`` records
    with ``actor``): the defence as installed (``defence.installed``: pipeline name,
    elements, the sha256 of its code as installed, its parameters and their digest, its
    weights), and each intervention (the tool list the filter kept and removed, a call to
    a removed tool, a delimited tool output and the system-message warning, a repeated
    user prompt). Nothing sent changes.

The defence itself is the experimental treatment: it is never declared as instrumentation.
A provisioned defence (one that needs ``--defence-assets``) adds its builder to
:data:`BUILDERS`; a name without a builder is refused here (the session errors) rather
than left to AgentDojo, which would fetch weights at run time.

Standard library only at import time; agentdojo is imported when a pipeline is built.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

REWRITE = ("defence_pipeline_rewrite@1 mode: rewrite OpenAILLMToolFilter.model: the agent's "
           "model id, not the pipeline name")
AUX_SPAN = "defence_aux_span@1 mode: observe"
RECORDER = "defence_recorder@1 mode: observe"

#: the modules that hold each built-in defence's code: how ``from_config`` assembles the
#: pipeline, and the elements the defence adds or changes
CODE_MODULES = {
    "repeat_user_prompt": ("agentdojo.agent_pipeline.agent_pipeline",
                           "agentdojo.agent_pipeline.basic_elements"),
    "spotlighting_with_delimiting": ("agentdojo.agent_pipeline.agent_pipeline",
                                     "agentdojo.agent_pipeline.tool_execution"),
    "tool_filter": ("agentdojo.agent_pipeline.agent_pipeline",
                    "agentdojo.agent_pipeline.llms.openai_llm"),
}
#: the text the delimiting formatter is probed with, to observe its delimiters
_PROBE = "agentprov-delimiter-probe"


def declared(defence: str | None) -> list[str]:
    """The harness's declared items for a session under ``defence`` (none undefended)."""
    if defence in (None, "none"):
        return []
    if defence == "tool_filter":
        return [REWRITE, AUX_SPAN, RECORDER]
    return [RECORDER]


def actor_id(defence: str) -> str:
    """The id of the defence's actor, as model calls and notes name it."""
    return f"defense:{defence}"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def code_digests(modules: tuple[str, ...]) -> list[dict[str, str]]:
    """The sha256 of each module's source file as installed, by its path inside the
    environment's site-packages (``agentdojo/agent_pipeline/agent_pipeline.py``)."""
    out = []
    for name in modules:
        mod = importlib.import_module(name)
        path = Path(mod.__file__)
        top = Path(importlib.import_module(name.split(".")[0]).__file__).parent.parent
        out.append({"module": name, "path": path.relative_to(top).as_posix(),
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return out


def combined_sha256(code: list[dict[str, str]]) -> str:
    """One digest over a defence's code files: sha256 of ``"<path> <sha256>"`` lines, sorted."""
    lines = sorted(f"{c['path']} {c['sha256']}" for c in code)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def _text(blocks: Any) -> str:
    """The text of AgentDojo content blocks (``{type, content}``), joined by newlines."""
    if blocks is None:
        return ""
    return "\n".join(b.get("content") or "" for b in blocks if isinstance(b, dict))


def _qualname(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


class Recorder:
    """What a defence's pipeline records through (``defence_recorder@1``): the capture
    writer, the session's model-call ids, the defence's actor, and the pass in progress."""

    def __init__(self, writer, defence: str, next_call_id: Callable[[], str]) -> None:
        self.writer = writer
        self.defence = defence
        self.actor = actor_id(defence)
        self.next_call_id = next_call_id
        self.passes = 0  # the agent's pipeline runs up to 3 passes of the user task
        self.tool_batches = 0  # tool batches executed in the pass in progress

    def note(self, code: str, text: str, *, message: tuple[int, str, str, str] | None = None,
             **fields: Any) -> None:
        """An intervention: a note naming the defence's actor and the pass it was made in.
        ``message`` is ``(index, role, text, sent_as)`` of the message of the pass's
        conversation it shows in (as AgentDojo's native log keeps it: ``sent_as`` is
        ``content`` or ``error``, the field the text is in); its text is recorded by
        sha256."""
        fields["pass"] = self.passes
        if message is not None:
            i, role, sent, sent_as = message
            fields.update(message_index=i, role=role, text_sha256=sha256_text(sent),
                          sent_as=sent_as)
        self.writer.append("note", code=code, text=text, actor=self.actor,
                           defence=self.defence, **fields)

    def installed(self, pipeline, elements: list[Any], parameters: dict[str, Any],
                  rewrites: list[dict[str, Any]] = (), *,
                  code: list[dict[str, str]] | None = None,
                  weights: list[dict[str, Any]] = ()) -> None:
        """The ``defence.installed`` note: the pipeline AgentDojo built, the elements the
        defence added or changed, the sha256 of its code files as installed (by default
        the built-in's modules, :data:`CODE_MODULES`), its parameters and their digest,
        the harness's rewrites, and its weights (``{path, sha256}``; none for a built-in)."""
        from agentprov_backend.source import no_floats  # floats as decimal text

        code = code_digests(CODE_MODULES[self.defence]) if code is None else list(code)
        parameters = no_floats(parameters)
        code_sha, params_sha = combined_sha256(code), \
            hashlib.sha256(_canonical(parameters)).hexdigest()
        self.writer.append(
            "note", code="defence.installed", actor=self.actor, defence=self.defence,
            text=f"defence {self.defence} installed: pipeline {pipeline.name}, code sha256 "
                 f"{code_sha}, parameters sha256 {params_sha}, "
                 + (f"{len(weights)} weight file(s)" if weights else "no weights"),
            pipeline_name=pipeline.name, elements=[_qualname(e) for e in elements],
            code_files=code, code_sha256=code_sha, parameters=parameters,
            parameters_sha256=params_sha, weights=list(weights), rewrites=list(rewrites))


def _messages(args: tuple, kwargs: dict) -> Any:
    """The ``messages`` argument of an element's ``query(query, runtime, env, messages,
    extra_args)`` (AgentDojo passes all five by position)."""
    return args[3] if len(args) > 3 else kwargs.get("messages", [])


def _wrap(element: Any, after: Callable[[Any, Any], None],
          before: Callable[[], None] | None = None) -> None:
    """Wrap one element instance's ``query``: ``before()`` runs first, ``after(messages,
    out)`` once it returned (``messages`` as the element got them). What the element does
    and returns is unchanged."""
    original = element.query

    def query(*args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        out = original(*args, **kwargs)
        after(_messages(args, kwargs), out)
        return out

    element.query = query


def _count_passes(pipeline, rec: Recorder, also: Callable[[Any], None] | None = None):
    """The system message element starts each pass of the agent's pipeline."""
    from agentdojo.agent_pipeline.basic_elements import SystemMessage

    sm = next(e for e in pipeline.elements if isinstance(e, SystemMessage))

    def start() -> None:
        rec.passes += 1
        rec.tool_batches = 0

    _wrap(sm, after=lambda messages, out: also(out) if also else None, before=start)
    return sm


def _parts(pipeline):
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor

    loop = next(e for e in pipeline.elements if isinstance(e, ToolsExecutionLoop))
    executor = next(e for e in loop.elements if isinstance(e, ToolsExecutor))
    return loop, executor


def _tool_filter(pipeline, llm, agent: dict[str, Any], rec: Recorder) -> None:
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLMToolFilter
    from agentprov_backend.recording import model_call

    filt = next(e for e in pipeline.elements if isinstance(e, OpenAILLMToolFilter))
    built_with = filt.model
    filt.model = agent["model_id"]  # defence_pipeline_rewrite@1
    _count_passes(pipeline, rec)
    removed: set[str] = set()
    original = filt.query

    def query(*args: Any, **kwargs: Any) -> Any:  # defence_aux_span@1
        runtime = args[1] if len(args) > 1 else kwargs["runtime"]
        at = len(_messages(args, kwargs))  # the filter's prompt is appended here
        offered = list(runtime.functions)
        call_id = rec.next_call_id()
        with model_call(rec.writer, call_id, element=type(filt).__name__, model=filt.model,
                        actor=rec.actor):
            out = original(*args, **kwargs)
        kept = list(out[1].functions)
        gone = [t for t in offered if t not in kept]
        removed.update(gone)
        rec.note("defence.tool_filter.filtered",
                 f"the tool filter kept {len(kept)} of {len(offered)} tool(s)"
                 + (f" and removed {', '.join(gone)}" if gone else ""),
                 message=(at, "user", filt.prompt, "content"),
                 call_id=call_id, offered=offered, kept=kept, removed=gone)
        return out

    filt.query = query
    _, executor = _parts(pipeline)

    def denied(messages, out) -> None:
        for i, m in enumerate(out[3][len(messages):], len(messages)):
            call = m.get("tool_call") if m.get("role") == "tool" else None
            if call is not None and call.function in removed and m.get("error"):
                rec.note("defence.tool_denied",
                         f"the agent called {call.function}, which the tool filter removed; "
                         f"AgentDojo answered: {m['error']}",
                         message=(i, "tool", m["error"], "error"),
                         tool=call.function, arguments=dict(call.args),
                         tool_call_id=call.id, error=m["error"])

    _wrap(executor, after=denied)
    rec.installed(pipeline, [filt], {"prompt": filt.prompt, "model": filt.model,
                                     "temperature": filt.temperature},
                  [{"element": type(filt).__name__, "field": "model",
                    "from": built_with, "to": filt.model}])


def _spotlighting(pipeline, llm, agent: dict[str, Any], rec: Recorder) -> None:
    from agentdojo.agent_pipeline.agent_pipeline import load_system_message

    base = load_system_message(None)

    def system(out) -> None:
        text = _text(out[3][0]["content"]) if out[3] else ""
        warning = text[len(base):].strip() if text.startswith(base) else text
        rec.note("defence.spotlighting.system_message",
                 "the system message carries the delimiter warning",
                 message=(0, "system", text, "content"), warning=warning)

    sm = _count_passes(pipeline, rec, also=system)
    _, executor = _parts(pipeline)
    probe = executor.output_formatter(_PROBE)
    prefix, _, suffix = probe.partition(_PROBE)

    def delimited(messages, out) -> None:
        start = len(messages)
        for i, m in enumerate(out[3][start:], start):
            if m.get("role") != "tool" or m.get("tool_call") is None:
                continue
            text = _text(m.get("content"))
            rec.note("defence.spotlighting.delimited",
                     f"the output of {m['tool_call'].function} was sent between {prefix} "
                     f"and {suffix}",
                     message=(i, "tool", text, "content"), tool=m["tool_call"].function,
                     tool_call_id=m.get("tool_call_id"),
                     delimited=text.startswith(prefix) and text.endswith(suffix))

    _wrap(executor, after=delimited)
    warning = sm.system_message[len(base):].strip() \
        if sm.system_message.startswith(base) else sm.system_message
    rec.installed(pipeline, [sm, executor],
                  {"system_message_warning": warning, "delimiters": [prefix, suffix]})


def _repeat_user_prompt(pipeline, llm, agent: dict[str, Any], rec: Recorder) -> None:
    from agentdojo.agent_pipeline.basic_elements import InitQuery

    _count_passes(pipeline, rec)
    loop, _ = _parts(pipeline)
    repeat = next(e for e in loop.elements if isinstance(e, InitQuery))

    def repeated(messages, out) -> None:
        rec.tool_batches += 1
        i = len(out[3]) - 1
        rec.note("defence.repeat_user_prompt.repeated",
                 f"the user prompt was repeated after tool batch {rec.tool_batches}",
                 message=(i, "user", _text(out[3][i]["content"]), "content"),
                 after_tool_batch=rec.tool_batches)

    _wrap(repeat, after=repeated)
    rec.installed(pipeline, [repeat], {})


#: how each defence's pipeline is finished and recorded after ``from_config`` built it:
#: ``builder(pipeline, llm, agent, recorder)``
BUILDERS: dict[str, Callable[..., None]] = {
    "repeat_user_prompt": _repeat_user_prompt,
    "spotlighting_with_delimiting": _spotlighting,
    "tool_filter": _tool_filter,
}


def build_pipeline(defence: str | None, llm, agent: dict[str, Any], writer,
                   next_call_id: Callable[[], str]):
    """The agent's pipeline: AgentDojo's ``from_config`` over ``llm`` (whose ``name`` is the
    pipeline name) with ``defence`` (``None`` or ``"none"``: undefended), finished and
    recorded by the defence's builder. Raises ``ValueError`` for a defence the worker has
    no builder for."""
    from agentdojo.agent_pipeline import AgentPipeline, PipelineConfig

    name = None if defence in (None, "none") else defence
    if name is not None and name not in BUILDERS:
        raise ValueError(f"the worker builds no pipeline for defence {name!r} (it builds: "
                         f"{', '.join(sorted(BUILDERS))})")
    pipeline = AgentPipeline.from_config(PipelineConfig(
        llm=llm, model_id=agent["model_id"], defense=name, system_message_name=None,
        system_message=None))
    if name is not None:
        BUILDERS[name](pipeline, llm, agent, Recorder(writer, name, next_call_id))
    return pipeline
