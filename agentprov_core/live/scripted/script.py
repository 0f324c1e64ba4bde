"""The scripted-transport file (``--llm-script FILE``), format ``agentprov-llm-script/0.1``.

A script is a JSON list of replies, each the answer to one Chat Completions request of a
session (short form), or an object ``{"format": "agentprov-llm-script/0.1", "replies": [...],
"latency_s": 0.2}`` (long form, with a latency for every reply). The fields, defaults and
errors are documented in docs/formats/llm-script.md; :mod:`agentprov_core.live.scripted.server`
serves a :class:`Script`.

A malformed script is a usage error (``cli.usage.llm_script``, exit 2) that names the file,
the reply (numbered from 0, as in the list) and the field, for example
``script.json: reply 3: tool_calls[0].arguments must be an object (got a string)``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from agentprov_core.errors import AgentprovError

FORMAT = "agentprov-llm-script/0.1"
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "function_call")
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
Seconds = Annotated[float, Meta(ge=0, le=86400)]
Tokens = Annotated[int, Meta(ge=0)]
Status = Annotated[int, Meta(ge=400, le=599)]
# headers the server frames the response with itself
FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


class _Struct(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
              omit_defaults=True):
    pass


class ToolCall(_Struct):
    """One tool call of a reply. ``arguments`` is sent as a JSON string (compact, in the
    script's key order); ``raw_arguments`` is sent verbatim instead (for malformed-argument
    tests); ``id`` defaults to ``call_<reply>_<k>``."""

    name: str
    arguments: dict[str, Any] | UnsetType = UNSET
    raw_arguments: str | UnsetType = UNSET
    id: str | UnsetType = UNSET

    def arguments_json(self) -> str:
        if self.raw_arguments is not UNSET:
            return self.raw_arguments
        args = {} if self.arguments is UNSET else self.arguments
        return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


class Usage(_Struct):
    prompt_tokens: Tokens
    completion_tokens: Tokens
    total_tokens: Tokens | UnsetType = UNSET


class HttpError(_Struct):
    """Answer with an HTTP error: ``status`` 400-599, ``body`` a JSON value (object or list,
    sent as JSON) or a string (sent as text/plain); default an OpenAI-style error object."""

    status: Status
    body: Any = UNSET
    headers: dict[str, str] = {}


class Reply(_Struct):
    content: str | None | UnsetType = UNSET
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason | UnsetType = UNSET
    usage: Usage | None | UnsetType = UNSET
    served_model: str | None | UnsetType = UNSET  # null: the reply names no served model
    http_error: HttpError | UnsetType = UNSET
    delay_s: Seconds | UnsetType = UNSET
    hang: bool = False
    close: bool = False
    note: str | UnsetType = UNSET

    @property
    def kind(self) -> Literal["message", "http_error", "hang", "close"]:
        if self.http_error is not UNSET:
            return "http_error"
        if self.hang:
            return "hang"
        if self.close:
            return "close"
        return "message"

    @property
    def finish(self) -> str:
        """The finish reason sent: as given, else ``tool_calls`` when there are tool calls,
        else ``stop``."""
        if self.finish_reason is not UNSET:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


class RateLimit(_Struct):
    """A provider's rate limit, played by the server across all sessions: a token bucket of
    ``burst`` requests (default ``per_minute``) refilled at ``per_minute`` a minute; a
    request beyond it is answered ``status`` (429 or 503) with ``Retry-After`` (the whole
    seconds until the next token, or ``retry_after`` verbatim) and takes no reply.
    ``per_minute`` 0: every request is refused, for ever."""

    per_minute: Annotated[int, Meta(ge=0)]
    burst: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    status: Literal[429, 503] = 429
    retry_after: Annotated[str, Meta(max_length=200)] | UnsetType = UNSET


class _Header(_Struct):
    format: str
    replies: Any = UNSET
    roles: Any = UNSET
    latency_s: Seconds = 0.0
    rate_limit: RateLimit | UnsetType = UNSET
    note: str | UnsetType = UNSET


#: the role of the agent's calls in a script by role (``roles``); a judge's role is its
#: ``--judge ROLE=MODEL`` name
AGENT = "agent"
#: the agent's model id in a scripted run: what its calls name
SCRIPTED_MODEL = "scripted"


class Script(msgspec.Struct, frozen=True, kw_only=True):
    """A validated script. ``sha256`` is the digest of the file's bytes. ``roles``: the
    replies of each role, for a script by role (the long form's ``roles``), whose calls are
    told apart by the model they name (:mod:`.server`); else empty, and ``replies``
    answer every call of a session in arrival order."""

    path: str
    sha256: str
    replies: tuple[Reply, ...]
    latency_s: float = 0.0
    roles: dict[str, tuple[Reply, ...]] = {}
    rate_limit: RateLimit | None = None

    def __len__(self) -> int:
        return len(self.replies)

    def replies_of(self, role: str | None) -> tuple[Reply, ...]:
        """The replies answering ``role``'s calls (every call's, ``None``, for a script
        that is not by role)."""
        return self.replies if role is None else self.roles[role]

    def delay(self, reply: Reply) -> float:
        """Seconds to wait before answering with ``reply``: its ``delay_s``, else the
        script's ``latency_s``."""
        return self.latency_s if reply.delay_s is UNSET else reply.delay_s


def load_script(path: str | Path) -> Script:
    """Read and validate the script at ``path`` (errors name ``path`` as given)."""
    from agentprov_core.base import inputfile

    name = str(path)
    try:
        data = inputfile.read_bytes(path)
    except inputfile.Unreadable as exc:
        _fail(name, str(exc))
    return parse_script(data, name)


def parse_script(data: bytes, name: str = "<script>") -> Script:
    """Validate the bytes of a script; ``name`` is the file named in errors."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        _fail(name, f"is not UTF-8 text (byte {exc.start})")
    from agentprov_core.base import inputfile

    try:
        inputfile.check_json_depth(text)
        doc = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        _fail(name, f"is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
    except inputfile.Unreadable as exc:
        _fail(name, f"is not a script: it {exc}")
    except ValueError as exc:  # a number of more than 4,300 digits, an infinity
        _fail(name, f"is not JSON: {inputfile.number_error(exc)}")
    except RecursionError:
        _fail(name, f"is not a script: it nests more than {inputfile.MAX_DEPTH} levels deep")
    latency = 0.0
    limit = None
    if isinstance(doc, dict):
        try:
            header = msgspec.convert(doc, _Header, strict=True)
        except msgspec.ValidationError as exc:
            _fail(name, _explain(exc, _Header))
        if header.format != FORMAT:
            _fail(name, f"format must be {FORMAT!r} (got {header.format!r})")
        if (header.replies is UNSET) == (header.roles is UNSET):
            _fail(name, "give replies (every call's, in arrival order) or roles (the "
                        "replies of each role), not both" if header.roles is not UNSET
                  else "missing field replies (or roles)")
        latency = header.latency_s
        limit = header.rate_limit if header.rate_limit is not UNSET else None
        if header.roles is not UNSET:
            if not isinstance(header.roles, dict) or AGENT not in header.roles:
                _fail(name, f"roles must be an object of reply lists by role, with "
                            f"{AGENT!r} for the agent's calls (got "
                            f"{_json_kind(header.roles)}"
                            f"{'' if not isinstance(header.roles, dict) else ' without agent'})")
            roles = {role: _replies(name, entries, role)
                     for role, entries in header.roles.items()}
            return Script(path=name, sha256=hashlib.sha256(data).hexdigest(),
                          replies=roles[AGENT], latency_s=latency, roles=roles,
                          rate_limit=limit)
        entries = header.replies
    elif isinstance(doc, list):
        entries = doc
    else:
        _fail(name, "must be a JSON list of replies, or an object with format and replies "
                    f"(got {_json_kind(doc)})")
    return Script(path=name, sha256=hashlib.sha256(data).hexdigest(),
                  replies=_replies(name, entries), latency_s=latency, rate_limit=limit)


def check_roles(script: Script, judges: dict[str, str]) -> None:
    """A script by role names only the roles of the plan (``agent``, and each judge's
    ``--judge ROLE=MODEL``), and each role calls a model of its own, by which the scripted
    endpoint tells its calls apart (``cli.usage.llm_script``, exit 2)."""
    if not script.roles:
        return
    known = [AGENT, *sorted(judges)]
    extra = [r for r in script.roles if r not in known]
    if extra:
        _fail(script.path, f"roles.{extra[0]}: not a role of this plan; its roles are "
                           + ", ".join(known))
    models = {AGENT: SCRIPTED_MODEL} | judges
    seen: dict[str, str] = {}
    for role, model in models.items():
        if model in seen:
            _fail(script.path, f"roles: {seen[model]} and {role} both call the model "
                               f"{model!r}, so their calls cannot be told apart: give each "
                               f"judge a model name of its own (--judge {role}=NAME; a "
                               f"scripted run calls no real model, and the agent's is "
                               f"{SCRIPTED_MODEL!r})")
        seen[model] = role


def _replies(name: str, entries: Any, role: str | None = None) -> tuple[Reply, ...]:
    """The checked replies of the list ``entries``: the script's (``role`` None) or a
    role's, as errors name them (``script.json: roles.agent reply 3: …``)."""
    field = "replies" if role is None else f"roles.{role}"
    if not isinstance(entries, list):
        _fail(name, f"{field} must be a list (got {_json_kind(entries)})")
    replies = []
    for i, entry in enumerate(entries):
        at = f"{name}: reply {i}" if role is None else f"{name}: {field} reply {i}"
        if not isinstance(entry, dict):
            _fail(at, f"must be an object (got {_json_kind(entry)})")
        try:
            reply = msgspec.convert(entry, Reply, strict=True)
        except msgspec.ValidationError as exc:
            _fail(at, _explain(exc, Reply))
        _check(at, reply)
        replies.append(reply)
    return tuple(replies)


def _check(where: str, r: Reply) -> None:
    special = [k for k in ("http_error", "hang", "close")
               if (getattr(r, k) is not UNSET if k == "http_error" else getattr(r, k))]
    message = [k for k in ("content", "tool_calls", "finish_reason", "usage", "served_model")
               if getattr(r, k) not in (UNSET, ())]
    if len(special) > 1:
        _fail(where, f"{special[0]} and {special[1]} cannot be combined")
    if special and message:
        _fail(where, f"{special[0]} cannot be combined with {message[0]}")
    if not special and r.content is UNSET and not r.tool_calls:
        _fail(where, "a reply needs content, tool_calls, http_error, hang or close")
    for k, call in enumerate(r.tool_calls):
        if not call.name:
            _fail(where, f"tool_calls[{k}].name must not be empty")
        if call.arguments is not UNSET and call.raw_arguments is not UNSET:
            _fail(where, f"tool_calls[{k}]: arguments and raw_arguments cannot be combined")
        if call.id is not UNSET and not call.id:
            _fail(where, f"tool_calls[{k}].id must not be empty")
    if r.served_model is not UNSET and r.served_model is not None and not r.served_model:
        _fail(where, "served_model must not be empty")
    if r.http_error is not UNSET:
        body = r.http_error.body
        if body is not UNSET and not isinstance(body, dict | list | str):
            _fail(where, f"http_error.body must be an object, a list or a string "
                         f"(got {_json_kind(body)})")
        for h, v in r.http_error.headers.items():
            if not _TOKEN.match(h):
                _fail(where, f"http_error.headers: {h!r} is not a header name")
            if h.lower() in FRAMING_HEADERS:
                _fail(where, f"http_error.headers: {h} is set by the server")
            if "\r" in v or "\n" in v:
                _fail(where, f"http_error.headers.{h} must be one line")


def _fail(location: str, what: str):
    raise AgentprovError("cli.usage.llm_script", location=location, what=what)


def _no_constant(token: str):
    raise ValueError(f"{token} is not a JSON number")


_KINDS = {"object": "an object", "array": "a list", "str": "a string", "int": "an integer",
          "float": "a number", "bool": "true or false", "null": "null", "any": "a value"}
_LIMIT = re.compile(r"^Expected `(\w+)` (>=|<=|>|<) (\S+)$")
_TYPE = re.compile(r"^Expected `([^`]+)`, got `([^`]+)`$")


def _explain(exc: msgspec.ValidationError, struct: type) -> str:
    """Turn msgspec's ``Expected `object`, got `str` - at `$.tool_calls[0].arguments``` into
    ``tool_calls[0].arguments must be an object (got a string)``."""
    text = str(exc)
    msg, _, at = text.partition(" - at `")
    field = at.rstrip("`").removeprefix("$").removeprefix(".")
    subject = field or "the entry"
    if m := re.match(r"^Object missing required field `(\w+)`$", msg):
        return f"{field + ': ' if field else ''}missing field {m[1]}"
    if m := re.match(r"^Object contains unknown field `(\w+)`$", msg):
        known = _fields_at(struct, field)
        hint = f" (fields: {', '.join(known)})" if known else ""
        return f"{field + ': ' if field else ''}unknown field {m[1]}{hint}"
    if m := _TYPE.match(msg):
        return f"{subject} must be {_describe(m[1])} (got {_describe(m[2])})"
    if m := _LIMIT.match(msg):
        return f"{subject} must be {m[2]} {m[3]}"
    if m := re.match(r"^Invalid enum value (.+)$", msg):
        if field == "finish_reason":
            return f"finish_reason must be one of {', '.join(FINISH_REASONS)} (got {m[1]})"
        return f"{subject}: invalid value {m[1]}"
    return f"{subject}: {msg}"


def _describe(types: str) -> str:
    return " or ".join(_KINDS.get(t, t) for t in types.split(" | "))


def _fields_at(struct: type, field: str) -> list[str]:
    """The field names of the struct at ``field`` (a msgspec path such as ``tool_calls[0]``)."""
    nested = {"tool_calls": ToolCall, "usage": Usage, "http_error": HttpError}
    if field:
        struct = nested.get(field.split("[")[0].split(".")[0])
        if struct is None:
            return []
    return list(struct.__struct_fields__)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    return {dict: "an object", list: "a list", str: "a string", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)
