"""A defended session's part of the AER, read from the capture's defence notes.

The worker records a defence with ``defence_recorder@1`` (``agentprov_dojo.defended``):
the header's ``defence`` (what the worker was asked to run), one ``defence.installed`` note
(what it built: the pipeline name, the elements, the sha256 of the defence's code as
installed, its parameters and their digest, its weights), and one note per intervention,
each naming the defence's actor in ``actor``. They map to:

* ``task.defense_id`` as observed: the installed note's defence, else the header's, else
  the ledger's (an older capture); two that differ raise ``map.defence_mismatch``;
* ``header.actors``: one actor of kind ``defense``;
* the notes ``defence.code``, ``defence.parameters`` and ``defence.weights`` (the digests,
  with the files and values in ``data``);
* a decision per intervention (``defence.tool_filter.filtered``,
  ``defence.spotlighting.system_message``, ``defence.spotlighting.delimited``,
  ``defence.repeat_user_prompt.repeated``), with the note's fields as ``data``;
* a denied tool result per ``defence.tool_denied``: a tool call with ``denied: true``,
  ``result`` null and ``error`` the text the model was answered.

Everything is read as untrusted: a field of the wrong type is left out or not recorded.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from agentprov_core.api import NOT_RECORDED
from agentprov_core.api import aer as A

INSTALLED = "defence.installed"
DENIED = "defence.tool_denied"
PREFIX = "defence."
#: the fields of a capture note that are not its data
_RECORD_FIELDS = frozenset({"seq", "prev", "kind", "t", "code", "text", "actor", "defence"})


def _str(v: Any) -> Any:
    return v if isinstance(v, str) else NOT_RECORDED


def _strs(v: Any) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def installed_note(raw: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The session's ``defence.installed`` note, or None."""
    return next((r for r in raw if r.get("kind") == "note" and r.get("code") == INSTALLED),
                None)


def observed(header: dict[str, Any], raw: list[dict[str, Any]], ledger: str | None
             ) -> tuple[str, list[str]]:
    """``(defense_id, disagreements)``: the defence the capture observed (the installed
    note's, else the header's, else the ledger's) and how the three disagree."""
    seen = []
    note = installed_note(raw)
    if note is not None and isinstance(note.get("defence"), str):
        seen.append(("the installed defence", note["defence"]))
    if isinstance(header.get("defence"), str):
        seen.append(("the capture header", header["defence"]))
    seen.append(("the ledger", ledger or "none"))
    first = seen[0][1]
    why = [f"{a} names {va!r}, {b} {vb!r}" for (a, va), (b, vb) in zip(seen, seen[1:],
                                                                         strict=False)
           if va != vb]
    return first, why


def actors(defense_id: str, header: dict[str, Any], raw: list[dict[str, Any]]
           ) -> list[A.Actor] | Any:
    """The defence's actor (``msgspec.UNSET`` when the session is undefended or its
    capture records no defence)."""
    note = installed_note(raw)
    if defense_id == "none" or (note is None and not isinstance(header.get("defence"), str)):
        return UNSET
    note = note or {}
    return [A.Actor(id=actor_id(defense_id), kind="defense", name=defense_id,
                    pipeline_name=_str(note.get("pipeline_name")),
                    elements=_strs(note.get("elements")),
                    code_sha256=_str(note.get("code_sha256")),
                    parameters_sha256=_str(note.get("parameters_sha256")),
                    weights_sha256=[w.get("sha256") for w in note.get("weights") or []
                                    if isinstance(w, dict) and isinstance(w.get("sha256"), str)]
                    if isinstance(note.get("weights"), list) else [])]


def actor_id(defense_id: str) -> str:
    return f"defense:{defense_id}"


def _actor(r: dict[str, Any]) -> Any:
    return r["actor"] if isinstance(r.get("actor"), str) else UNSET


def digest_notes(r: dict[str, Any]) -> list[A.Note]:
    """The notes of a ``defence.installed`` record: code, parameters and weights digests."""
    t, actor = r.get("t", NOT_RECORDED), _actor(r)
    files = [f for f in r.get("code_files") or [] if isinstance(f, dict)] \
        if isinstance(r.get("code_files"), list) else []
    weights = [w for w in r.get("weights") or [] if isinstance(w, dict)] \
        if isinstance(r.get("weights"), list) else []
    code = _str(r.get("code_sha256"))
    params = _str(r.get("parameters_sha256"))
    return [
        A.Note(code="defence.code", t=t, actor=actor,
               text=f"the defence's code as installed: sha256 {code} over "
                    + ("; ".join(f"{f.get('path')} sha256 {f.get('sha256')}" for f in files)
                       or "no file recorded"),
               data={"code_sha256": code, "files": files}),
        A.Note(code="defence.parameters", t=t, actor=actor,
               text=f"the defence's parameters: sha256 {params} of their canonical JSON",
               data={"parameters_sha256": params,
                     "parameters": r.get("parameters") if isinstance(r.get("parameters"), dict)
                     else NOT_RECORDED,
                     "rewrites": r.get("rewrites") if isinstance(r.get("rewrites"), list)
                     else []}),
        A.Note(code="defence.weights", t=t, actor=actor,
               text="the defence loads no weights" if not weights else
               "the defence's weights: " + "; ".join(
                   f"{w.get('path')} sha256 {w.get('sha256')}" for w in weights),
               data={"weights": weights}),
    ]


def is_intervention(r: dict[str, Any]) -> bool:
    code = r.get("code")
    return (r.get("kind") == "note" and isinstance(code, str) and code.startswith(PREFIX)
            and code not in (INSTALLED, DENIED) and isinstance(r.get("actor"), str))


def decision(r: dict[str, Any]) -> A.Decision:
    return A.Decision(code=str(r["code"]), text=str(r.get("text")), actor=r["actor"],
                      data={k: v for k, v in r.items() if k not in _RECORD_FIELDS},
                      t=r.get("t", NOT_RECORDED))


def denied_call(r: dict[str, Any], tool_call_id: Any, call_id: Any) -> A.ToolCall:
    """A tool call the defence denied: no tool ran; the model was answered ``error``."""
    return A.ToolCall(tool_call_id=tool_call_id, call_id=call_id, function=str(r.get("tool")),
                      arguments=r.get("arguments"), result=None, result_sha256=None,
                      error=r.get("error") if isinstance(r.get("error"), str) else None,
                      t=r.get("t", NOT_RECORDED), actor=_actor(r), denied=True)
