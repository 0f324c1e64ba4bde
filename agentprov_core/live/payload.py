"""A13's first half: whether an attacked session's injection reached the model, decided
from the wire requests its capture log recorded, not from the benchmark's verdict.

The injections are the texts the benchmark placed in the environment, as its native log
names them (AgentDojo's ``OutputLogger`` JSON: ``injections``, injection vector to text).
The payload **reached** the model when one of them shows in a model request of the session
(any ``wire_request``, the agent's or a defence's own call); **not reached** when none
does; **not determined** when the evidence cannot say (no capture log, no native log, no
injection text, a log that does not read).

A tool result reaches the model re-encoded, not verbatim: AgentDojo renders it as YAML
(which folds long lines, doubles a quote and collapses blank lines) or as a Python
``repr`` (which escapes a line break as ``\\n``). So both sides are compared as their
words: lower-cased runs of letters and digits, after a literal ``\\n``, ``\\t`` or ``\\r``
escape is read as a space. An injection reached a request when its words are a contiguous
run of the request's words. (An attacker's text of no word at all is not determined.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REACHED = "reached"
NOT_REACHED = "not_reached"
NOT_DETERMINED = "not_determined"
#: the order the results table and the canary list them in
STATES = (REACHED, NOT_REACHED, NOT_DETERMINED)

_ESCAPE = re.compile(r"\\[ntr]")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> str:
    """``text`` as its words, each followed by one space: ``" ".join(words) + " "``, with a
    leading space, so that a run of words is a substring test on word boundaries."""
    return " " + " ".join(_WORD.findall(_ESCAPE.sub(" ", text).lower())) + " "


def injections(native: Any) -> list[str]:
    """The injection texts of a native log's document (``injections``: vector to text),
    each non-empty string."""
    inj = native.get("injections") if isinstance(native, dict) else None
    if not isinstance(inj, dict):
        return []
    return [v for _, v in sorted(inj.items()) if isinstance(v, str) and v.strip()]


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def request_bodies(records: Iterable[Any]) -> list[Any]:
    """The body of every ``wire_request`` of a capture's records (every attempt: a retried
    request sends what its first attempt sent)."""
    return [r.get("body") for r in records
            if isinstance(r, dict) and r.get("kind") == "wire_request"]


def reached(texts: list[str], bodies: list[Any]) -> str:
    """:data:`REACHED` when one of ``texts`` shows in one of the request ``bodies``,
    :data:`NOT_REACHED` when none does, :data:`NOT_DETERMINED` when there is no text of a
    word to look for."""
    wanted = [w for w in (words(t) for t in texts) if w.strip()]
    if not wanted:
        return NOT_DETERMINED
    for body in bodies:
        found: list[str] = []
        _strings(body, found)
        sent = words(" ".join(found))
        if any(w in sent for w in wanted):
            return REACHED
    return NOT_REACHED
