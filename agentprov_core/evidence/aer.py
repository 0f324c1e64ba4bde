"""The execution record, AER (``agentprov-aer/0.1``): what one session did, as evidence.

An AER is mapped from raw evidence by a mapper (``agentdojo.capture`` for a live session's
capture/0.1 log and native log; ``inspect.eval`` for an imported Inspect log). It holds a
header (what ran, where, how it was configured and instrumented, who produced the record),
the ordered records (model calls, tool calls, environment digests, decisions, notes) and the
outcome as the benchmark reported it. Anything the evidence does not hold is the string
``"not recorded"`` (:data:`NOT_RECORDED`), never a guess.

The SEM (``sem.py``) is derived from the AER alone; the PROV graph (``prov.py``) from both.
The reference is ``docs/formats/aer-0.1.md``.

**Actors.** A defended session has a second actor besides the agent: the defence (kind
``defense``), listed in ``header.actors``; the records it made (its own model calls, its
decisions, the tool results it denied, the notes of its digests) name it in ``actor``. These
fields are ``msgspec.UNSET`` unless the evidence holds them, and an unset field is left out
of the stored form: an undefended session's AER, and every AER stored before actors were
recorded, encodes exactly as before (and still passes the canonical-form check).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

AER_FORMAT = "agentprov-aer/0.1"
NOT_RECORDED = "not recorded"

#: an AER field that the evidence may not hold
Maybe = Any  # the value, or NOT_RECORDED

OutcomeStatus = Literal["ok", "ok_with_issues", "failed"]
SessionStatus = Literal["complete", "incomplete", "errored", "aborted"]


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """One stored artefact the record was mapped from (``raw/sha256/..``)."""

    role: str  # "capture" | "native_log" | "inspect_log"
    format: str  # "capture/0.1", "agentdojo-native/0.1.35", "inspect-eval/…"
    sha256: str
    bytes: int
    path: str  # relative to the corpus root, e.g. raw/sha256/ab/ab…
    head_sha256: str | None = None  # a capture log's head digest (the ledger's)


class Producer(msgspec.Struct, frozen=True, kw_only=True):
    name: str = "agentprov"
    version: str
    mapper: str  # e.g. "agentdojo.capture"
    mapper_version: str
    sandbox: dict[str, Any] | None = None  # the declared containment; null for scripted runs
    test_only: bool = False
    preset: str | None = None


class Backend(msgspec.Struct, frozen=True, kw_only=True):
    id: str  # the backend name, e.g. "agentdojo"
    environment_id: Maybe = NOT_RECORDED
    identity_sha256: Maybe = NOT_RECORDED
    benchmark_version: Maybe = NOT_RECORDED


class Task(msgspec.Struct, frozen=True, kw_only=True):
    source: str
    suite: Maybe = NOT_RECORDED
    user_task_id: Maybe = NOT_RECORDED
    injection_task_id: str | None = None
    attack: str | None = None
    cell_key: str
    defense_id: str = "none"
    unit: str
    attempt: int
    repeat: int = 0


class Agent(msgspec.Struct, frozen=True, kw_only=True):
    """The agent configuration: model, endpoint and parameters as configured."""

    model: Maybe = NOT_RECORDED  # the model id sent
    display_name: str | None = None
    endpoint_kind: Maybe = NOT_RECORDED  # "scripted" | "local" | "api"
    endpoint: Maybe = NOT_RECORDED  # base URL without credentials, or the endpoint name
    element: Maybe = NOT_RECORDED  # e.g. "OpenAILLM"
    parameters: dict[str, Any] = {}


class Actor(msgspec.Struct, frozen=True, kw_only=True):
    """An actor of the session other than the agent: a defence (``kind: "defense"``), as
    the worker observed it installed, or a judge of an Inspect task (``kind: "judge"``,
    ``judge0``, ``judge1``… in the order of the task's judge roles)."""

    id: str  # e.g. "defense:tool_filter", "judge0"; records name it in their ``actor``
    kind: str  # "defense" | "judge"
    name: str  # the defence registry's name ("tool_filter"), or the judge's role
    pipeline_name: Maybe = NOT_RECORDED  # the pipeline AgentDojo built ("local-tool_filter")
    elements: list[str] = []  # the pipeline elements the defence added or changed
    code_sha256: Maybe = NOT_RECORDED  # over its code files as installed (notes list them)
    parameters_sha256: Maybe = NOT_RECORDED  # of its parameters' canonical JSON
    weights_sha256: list[str] = []  # the weights it loads; none for the built-ins
    model: str | UnsetType = UNSET  # a judge's model, as the plan names it


class Header(msgspec.Struct, frozen=True, kw_only=True):
    format: str = AER_FORMAT
    execution_id: str  # the session id
    mode: Literal["live", "import"]
    source: str
    backend: Backend
    task: Task
    agent: Agent
    instrumentation: list[str] = []
    request_modifying: list[str] = []  # instrumentation items that change requests
    producer: Producer
    evidence: list[Evidence] = []
    plan_sha256: Maybe = NOT_RECORDED
    config_digest: Maybe = NOT_RECORDED
    started_at: Maybe = NOT_RECORDED
    ended_at: Maybe = NOT_RECORDED
    actors: list[Actor] | UnsetType = UNSET  # a defended session's defence


# ------------------------------------------------------------------------------ records
class WireAttempt(msgspec.Struct, frozen=True, kw_only=True):
    attempt_id: str
    attempt_index: int
    request_sha256: Maybe = NOT_RECORDED  # body_sha256 of the wire request
    response_sha256: Maybe = NOT_RECORDED  # body_sha256 of the reply, if one came
    http_status: int | None = None
    error_type: str | None = None  # a wire error (no complete response)
    elapsed_ms: int | None = None
    capture_seq: list[int] = []  # the capture records of this attempt


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    input_tokens: Maybe = NOT_RECORDED
    output_tokens: Maybe = NOT_RECORDED
    reasoning_tokens: Maybe = NOT_RECORDED
    cached_input_tokens: Maybe = NOT_RECORDED


class ToolCallRequest(msgspec.Struct, frozen=True, kw_only=True):
    id: Maybe
    function: str
    arguments: Any  # as the model gave them (parsed JSON when it parsed)


class Message(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: Any = None  # text, or None
    tool_calls: list[ToolCallRequest] = []


class ModelCall(msgspec.Struct, frozen=True, kw_only=True, tag="model_call", tag_field="kind"):
    call_id: str
    element: Maybe = NOT_RECORDED
    model_requested: Maybe = NOT_RECORDED
    status: Literal["ok", "error"] | str = "ok"
    request_sha256: Maybe = NOT_RECORDED  # the first attempt's request body
    reply_sha256: Maybe = NOT_RECORDED  # the reply the element used (last attempt)
    messages_sent: Maybe = NOT_RECORDED  # the number of messages in the request
    reply: Message | None = None
    served_model: Maybe = NOT_RECORDED
    finish_reason: Maybe = NOT_RECORDED
    usage: Usage = Usage()
    first_attempt_id: Maybe = NOT_RECORDED
    attempts: list[WireAttempt] = []
    retries: int = 0  # wire attempts after the first
    error_type: str | None = None
    t: Maybe = NOT_RECORDED  # seconds since the session started (capture clock)
    actor: str | UnsetType = UNSET  # an actor of header.actors (unset: the agent's call)


class ToolCall(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call", tag_field="kind"):
    tool_call_id: Maybe = NOT_RECORDED  # the id the model gave, when the evidence links it
    call_id: Maybe = NOT_RECORDED  # the model call that asked for it
    function: str
    arguments: Any = None
    result: Any = None
    result_sha256: Maybe = NOT_RECORDED
    error: str | None = None
    t: Maybe = NOT_RECORDED
    #: a tool call the model asked for and the defence ``actor`` denied: no tool ran,
    #: ``result`` is null and ``error`` is what the model was answered
    actor: str | UnsetType = UNSET
    denied: bool | UnsetType = UNSET


class OmittedValue(msgspec.Struct, frozen=True, kw_only=True):
    """A value of the environment its digest leaves out: where, and its type's name."""

    path: str
    type: str


class EnvironmentDigest(msgspec.Struct, frozen=True, kw_only=True, tag="environment_digest",
                        tag_field="kind"):
    name: str
    sha256: str  # "not recorded" when no digest could be made (method "unavailable")
    t: Maybe = NOT_RECORDED
    #: how the digest was made (docs/formats/capture-0.1.md): ``model_dump_json``,
    #: ``model_dump_json_excluding`` (with ``omitted``), ``repr`` or ``unavailable`` (with
    #: ``error``); unset in a record that predates it (``model_dump_json`` or ``repr``)
    method: str | UnsetType = UNSET
    omitted: list[OmittedValue] | UnsetType = UNSET
    error: str | UnsetType = UNSET


class Decision(msgspec.Struct, frozen=True, kw_only=True, tag="decision", tag_field="kind"):
    """Something the harness or a defence decided (a defence's verdict, a setup refusal)."""

    code: str
    text: str
    data: dict[str, Any] = {}
    t: Maybe = NOT_RECORDED
    actor: str | UnsetType = UNSET  # the actor that decided (unset: the harness)


class Note(msgspec.Struct, frozen=True, kw_only=True, tag="note", tag_field="kind"):
    code: str
    text: str
    t: Maybe = NOT_RECORDED
    actor: str | UnsetType = UNSET  # the actor the note is about
    data: dict[str, Any] | UnsetType = UNSET  # what it records, as data


Record = ModelCall | ToolCall | EnvironmentDigest | Decision | Note


# ------------------------------------------------------------------------------ outcome
class Issue(msgspec.Struct, frozen=True, kw_only=True):
    """A register code the mapping raised (``map.capture_error``, …) and its detail."""

    code: str
    detail: str = ""


class LiveVsNative(msgspec.Struct, frozen=True, kw_only=True):
    """The live-versus-native check: the capture's view against the native log's."""

    checked: bool
    agree: bool | None = None  # None when not checked
    compared: list[str] = []  # what was compared: messages, tool_calls, utility, security
    differences: list[str] = []
    reason: str | None = None  # why it was not checked


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    status: OutcomeStatus
    session_status: Maybe = NOT_RECORDED  # the capture's end status
    execution_observed: bool = False  # at least one model call or tool call was recorded
    utility: Maybe = NOT_RECORDED  # as the benchmark reported it
    security: Maybe = NOT_RECORDED
    issues: list[Issue] = []
    live_vs_native: LiveVsNative | None = None
    reason: str | None = None


class AER(msgspec.Struct, frozen=True, kw_only=True):
    header: Header
    records: list[Record] = []
    outcome: Outcome


def actor_problems(aer: AER) -> list[str]:
    """The records whose ``actor`` is not an actor of the header (the aer tier's check)."""
    known = {a.id for a in aer.header.actors} if aer.header.actors is not UNSET else set()
    out = []
    for i, r in enumerate(aer.records):
        actor = getattr(r, "actor", UNSET)
        if actor is not UNSET and actor not in known:
            out.append(f"records[{i}] ({type(r).__name__}) names actor {actor!r}, which "
                       "header.actors does not list")
    return out


def encode(aer: AER) -> bytes:
    """The stored form: canonical JSON (sorted keys, compact, UTF-8) and a newline."""
    from agentprov_core.evidence.canonical import stored

    return stored(aer)


def decode(data: bytes) -> AER:
    """Parse and type-check an AER (the aer tier of ``validate``); raises
    ``msgspec.ValidationError`` naming the field."""
    return msgspec.json.decode(data, type=AER)
