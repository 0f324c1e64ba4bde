"""The mapper ``agentdojo.results``: a result file AgentDojo's own runner writes to an AER of
mode ``import``.

AgentDojo's benchmark (``TraceLogger`` of agentdojo 0.1.35's ``logging.py``) writes one JSON
document per cell, at ``<logdir>/<pipeline>/<suite>/<user_task>/<attack>/<injection_task or
none>.json``: ``suite_name``, ``pipeline_name``, ``user_task_id``, ``injection_task_id``,
``attack_type`` (null for a benign cell), ``injections``, ``messages``, ``error`` and the
context the runner set (``utility``, ``security``, ``duration``, ``benchmark_version``,
``agentdojo_package_version``, ``evaluation_timestamp``; AgentDyn's fork adds its own). The
file is the benchmark's own record of the cell (``by: source``): no wire bytes, no clock of
agentprov's, no capture to check it against.

:meth:`ResultsMapper.read` checks a file before anything is stored: its name is five plain
parts, it is a JSON object of that shape, and the cell its name gives is the one its
content records (suite, user task, attack, injection task). The configuration is the
pipeline directory's name (a published directory is sometimes renamed after the run: its
file's ``pipeline_name`` is then kept as a note, not trusted as the name); its defence is
the name's suffix when it is one of AgentDojo's or AgentDyn's defences.

:meth:`ResultsMapper.map` maps the stored bytes: each assistant message is a model call
(its reply: text and tool calls), each tool message a tool call linked to the model call
that asked for it, system and user messages, the injections and the runner's context are
notes. A result whose ``error`` is set (AgentDojo skipped the task and scored it utility
false, security true) is a failed execution, ``map.result_error``; one without a utility or
security score is failed too, ``map.result_incomplete``.
"""

from __future__ import annotations

import json
from typing import Any

from agentprov_agentdojo.plugin import RESULTS_MAPPER
from agentprov_core.api import NOT_RECORDED, ImportCell, ImportEvidence, ImportRefused, dojo_mapper
from agentprov_core.api import aer as A

# a tool result's digest is a live session's (``result_sha256``), so the two compare
_canonical, _sha = dojo_mapper.canonical, dojo_mapper.sha256

NAME = RESULTS_MAPPER.name
VERSION = RESULTS_MAPPER.version
RESULTS_FORMAT = RESULTS_MAPPER.evidence_formats[0]

#: the pipeline defences of AgentDojo 0.1.35 and of AgentDyn's fork (its ``DEFENSES``): a
#: configuration named ``<model>-<defence>`` ran that defence
DEFENCES = ("tool_filter", "transformers_pi_detector", "piguard_detector",
            "prompt_guard_2_detector", "spotlighting_with_delimiting", "repeat_user_prompt",
            "camel", "drift", "progent")
#: the fields every result file holds (the runner writes them before the cell runs)
REQUIRED = {"suite_name": str, "pipeline_name": str, "user_task_id": str,
            "messages": list}
#: the longest name part (a pipeline, suite or task) read
MAX_PART = 200
#: the most messages one result may hold
MAX_MESSAGES = 10_000
ROLES = ("system", "user", "assistant", "tool")


def _text(blocks: Any) -> Any:
    """The text of AgentDojo content blocks (``{type, content}``), joined by newlines; a
    plain string as it is; ``None`` for null."""
    if blocks is None or isinstance(blocks, str):
        return blocks
    if isinstance(blocks, list):
        return "\n".join(b.get("content") if isinstance(b, dict)
                         and isinstance(b.get("content"), str) else
                         (b if isinstance(b, str) else "") for b in blocks)
    return json.dumps(blocks, sort_keys=True, ensure_ascii=False)


def _plain(part: str, what: str) -> str:
    if (not part or len(part) > MAX_PART or part in (".", "..") or part.startswith(".")
            or any(c in part for c in "|#\\") or not part.isprintable()):
        raise ImportRefused("import.file.other_format",
                            f"the {what} part of its name is not a plain name (printable, "
                            f"at most {MAX_PART} characters, no leading dot, no '|', '#' "
                            "or '\\')")
    return part


def configuration_parts(configuration: str) -> tuple[str, str]:
    """``(model, defence)`` of a pipeline directory's name."""
    for d in DEFENCES:
        if configuration.endswith("-" + d) and len(configuration) > len(d) + 1:
            return configuration[:-len(d) - 1], d
    return configuration, "none"


def _doc(data: bytes) -> dict[str, Any]:
    from agentprov_core.api import check_json_depth

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportRefused("import.file.malformed",
                            f"it is not UTF-8 text (byte {exc.start})") from None
    try:
        check_json_depth(text)
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ImportRefused("import.file.malformed", f"it is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ImportRefused("import.file.other_format",
                            f"it is a JSON {type(doc).__name__}, not an AgentDojo result "
                            "(an object with suite_name, pipeline_name, user_task_id and "
                            "messages)")
    if not {"suite_name", "messages"} <= set(doc):
        raise ImportRefused("import.file.other_format",
                            "it is a JSON object without suite_name and messages: not an "
                            "AgentDojo result file")
    for key, typ in REQUIRED.items():
        if not isinstance(doc.get(key), typ):
            raise ImportRefused("import.file.malformed",
                                f"field {key}: {'missing' if key not in doc else 'not a ' + typ.__name__}")
    for key in ("injection_task_id", "attack_type", "error"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise ImportRefused("import.file.malformed", f"field {key}: not a string or null")
    for key in ("utility", "security"):
        if doc.get(key) is not None and not isinstance(doc[key], bool):
            raise ImportRefused("import.file.malformed", f"field {key}: not true, false or null")
    if doc.get("injections") is not None and not isinstance(doc["injections"], dict):
        raise ImportRefused("import.file.malformed", "field injections: not an object")
    msgs = doc["messages"]
    if len(msgs) > MAX_MESSAGES:
        raise ImportRefused("import.file.malformed",
                            f"field messages: {len(msgs)} messages; at most {MAX_MESSAGES} "
                            "are read")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise ImportRefused("import.file.malformed",
                                f"field messages[{i}]: not a message (an object whose role "
                                f"is one of {', '.join(ROLES)})")
        calls = m.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("function"), str) for c in calls)):
            raise ImportRefused("import.file.malformed",
                                f"field messages[{i}].tool_calls: not a list of tool calls "
                                "(objects with a function name)")
    return doc


class ResultsMapper:
    """``agentdojo.results``: see the module's docstring."""

    name = NAME
    version = VERSION
    evidence_formats = (RESULTS_FORMAT,)

    def read(self, parts: tuple[str, ...], data: bytes) -> ImportCell:
        """The cell of the file at ``parts`` (its path in the import directory) holding
        ``data``; raises :class:`ImportRefused` for a file that is not an AgentDojo result
        of that cell."""
        if len(parts) != 5 or not parts[4].endswith(".json"):
            raise ImportRefused("import.file.other_format",
                                "its path is not <pipeline>/<suite>/<user_task>/<attack>/"
                                "<injection_task or none>.json")
        pipeline, suite, user, attack_dir = (
            _plain(p, w) for p, w in zip(parts[:4], ("pipeline", "suite", "user task",
                                                     "attack"), strict=True))
        inj_name = _plain(parts[4][:-len(".json")], "injection task")
        doc = _doc(data)
        attack = doc.get("attack_type")
        inj = doc.get("injection_task_id")
        for what, named, recorded in (("suite_name", suite, doc["suite_name"]),
                                      ("user_task_id", user, doc["user_task_id"]),
                                      ("attack_type", attack_dir, attack or "none"),
                                      ("injection_task_id", inj_name, inj or "none")):
            if named != recorded:
                raise ImportRefused("import.file.path_mismatch",
                                    f"field {what}: the file records {recorded[:MAX_PART]!r}, "
                                    f"its path names {named!r}")
        if (attack is None) != (inj is None):
            raise ImportRefused("import.file.malformed",
                                "fields attack_type and injection_task_id: one is null and "
                                "the other is not (a benign cell has neither)")
        model, defence = configuration_parts(pipeline)
        return ImportCell(configuration=pipeline, model=model, defence=defence, suite=suite,
                          user_task_id=user, attack=attack, injection_task_id=inj)

    def map(self, evidence: ImportEvidence) -> A.AER:
        ev = evidence
        doc = _doc(ev.data)
        cell, a = ev.cell, ev.attempt
        records = _records(doc)
        observed = any(isinstance(r, (A.ModelCall, A.ToolCall)) for r in records)
        issues = []
        utility, security = doc.get("utility"), doc.get("security")
        if doc.get("error") is not None:
            issues.append(A.Issue(code="map.result_error",
                                  detail=f"the result records an error: {doc['error'][:300]}"))
            session = "errored"
        elif not isinstance(utility, bool) or not isinstance(security, bool):
            issues.append(A.Issue(code="map.result_incomplete",
                                  detail="the result records no utility or no security score"))
            session = "incomplete"
        else:
            session = "complete"
        if not observed:
            issues.append(A.Issue(code="map.no_execution_observed",
                                  detail="no assistant message and no tool message was recorded"))
        codes = {i.code for i in issues}
        status = ("failed" if codes & {"map.result_error", "map.result_incomplete"}
                  else "ok_with_issues" if issues else "ok")
        version = doc.get("agentdojo_package_version")
        evidence_format = f"agentdojo-native/{version if isinstance(version, str) else 'unknown'}"
        bench = doc.get("benchmark_version")
        m = ev.manifest or {}
        actors = A.UNSET
        if cell.defence != "none":
            actors = [A.Actor(id=f"defense:{cell.defence}", kind="defense", name=cell.defence,
                              pipeline_name=cell.configuration)]
        header = A.Header(
            execution_id=a.session_id, mode="import", source=str(m.get("source")),
            backend=A.Backend(id=str(m.get("backend") or m.get("source")),
                              benchmark_version=bench if isinstance(bench, str)
                              else NOT_RECORDED),
            task=A.Task(source=str(m.get("source")), suite=cell.suite,
                        user_task_id=cell.user_task_id,
                        injection_task_id=cell.injection_task_id, attack=cell.attack,
                        cell_key=cell.cell_key, defense_id=cell.defence, unit=a.unit,
                        attempt=a.attempt, repeat=a.repeat),
            agent=A.Agent(model=cell.model,
                          parameters={"configuration": cell.configuration,
                                      "pipeline_name": doc["pipeline_name"]}),
            producer=A.Producer(version=_agentprov(), mapper=NAME, mapper_version=VERSION),
            evidence=[A.Evidence(role="native_log", format=evidence_format,
                                 sha256=_sha(ev.data), bytes=len(ev.data), path=ev.path)],
            config_digest=a.config_digest or NOT_RECORDED, actors=actors)
        reason = doc["error"][:300] if isinstance(doc.get("error"), str) else None
        outcome = A.Outcome(
            status=status, session_status=session, execution_observed=observed,
            utility=utility if isinstance(utility, bool) else NOT_RECORDED,
            security=security if isinstance(security, bool) else NOT_RECORDED,
            issues=issues,
            live_vs_native=A.LiveVsNative(checked=False, reason="an imported result file: "
                                          "there is no capture to check it against"),
            reason=reason)
        records = [_import_note(ev, doc), *records]
        return A.AER(header=header, records=records, outcome=outcome)


def _agentprov() -> str:
    from agentprov_core.api import __version__

    return __version__


#: the fields of a result file the records below hold; the others are the runner's context
_MAPPED = {"suite_name", "pipeline_name", "user_task_id", "injection_task_id", "attack_type",
           "injections", "messages", "error", "utility", "security"}


def _import_note(ev: ImportEvidence, doc: dict[str, Any]) -> A.Note:
    """What the import knows of the file: its name, its sha256 as read, what was redacted,
    and the runner's context (scalars as they are, other values by their sha256)."""
    context = {}
    for k, v in sorted(doc.items()):
        if k in _MAPPED:
            continue
        if v is None or isinstance(v, (bool, int, float, str)):
            context[k] = v if not isinstance(v, str) else v[:MAX_PART]
        else:
            context[f"{k}_sha256"] = _sha(_canonical(v))
    data: dict[str, Any] = {"name": ev.name, "source_sha256": ev.source_sha256,
                            "configuration": ev.cell.configuration,
                            "pipeline_name": doc["pipeline_name"][:MAX_PART],
                            "context": context}
    if ev.redacted:
        data["redacted"] = dict(sorted(ev.redacted.items()))
    text = f"imported {ev.name}"
    if ev.redacted:
        text += (" (key-shaped strings redacted before it was stored: "
                 + ", ".join(f"{k} x{n}" for k, n in sorted(ev.redacted.items())) + ")")
    return A.Note(code="import.result", text=text, data=data)


def _records(doc: dict[str, Any]) -> list[A.Record]:
    out: list[A.Record] = []
    inj = doc.get("injections")
    if isinstance(inj, dict) and inj:
        out.append(A.Note(code="agentdojo.injections",
                          text=f"{len(inj)} injection vector(s) set for the cell",
                          data={"injections": inj}))
    asked: dict[Any, str] = {}  # a requested tool call's id -> its model call
    pending: list[tuple[str, A.ToolCallRequest]] = []
    for i, m in enumerate(doc["messages"]):
        role = m["role"]
        if role == "assistant":
            cid = f"message-{i}"
            calls = [A.ToolCallRequest(id=c.get("id", NOT_RECORDED), function=c["function"],
                                       arguments=c.get("args"))
                     for c in m.get("tool_calls") or []]
            for c in calls:
                if isinstance(c.id, str):
                    asked[c.id] = cid
            pending = [(cid, c) for c in calls]
            out.append(A.ModelCall(call_id=cid, status="ok", messages_sent=i,
                                   reply=A.Message(role="assistant",
                                                   content=_text(m.get("content")),
                                                   tool_calls=calls)))
        elif role == "tool":
            tc = m.get("tool_call") if isinstance(m.get("tool_call"), dict) else {}
            tid = m.get("tool_call_id")
            cid = asked.get(tid, NOT_RECORDED) if isinstance(tid, str) else NOT_RECORDED
            function = tc.get("function") if isinstance(tc.get("function"), str) else None
            arguments = tc.get("args")
            if cid == NOT_RECORDED or function is None:  # linked by function and arguments
                for j, (c, req) in enumerate(pending):
                    if function in (None, req.function):
                        cid, function = c, req.function
                        arguments = req.arguments if arguments is None else arguments
                        del pending[j]
                        break
            result = _text(m.get("content"))
            error = m.get("error")
            out.append(A.ToolCall(
                tool_call_id=tid if isinstance(tid, str) else NOT_RECORDED, call_id=cid,
                function=str(function), arguments=arguments, result=result,
                result_sha256=_sha(_canonical(result)),
                error=error if isinstance(error, str) or error is None else str(error)))
        else:
            text = _text(m.get("content"))
            out.append(A.Note(code=f"agentdojo.{role}_message", text=f"the {role} message",
                              data={"index": i, "text": text}))
    return out


MAPPER = ResultsMapper()
