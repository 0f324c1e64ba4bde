"""The digest of a benchmark environment (a cell's ``environment_digest`` records): what it
is the sha256 of, and how it is made when the environment cannot be serialised whole.

An AgentDojo-shaped environment is a pydantic model. Its digest is the sha256 of pydantic's
own JSON of it, by one of these methods, named in the record's ``method``:

``model_dump_json``
    ``env.model_dump_json()``, the whole environment (every environment of AgentDojo's and
    AutoDojo's suites, and AgentDyn's until one of its one-time-password tools runs).
``model_dump_json_excluding``
    the whole environment cannot be serialised: ``env.model_dump_json(exclude=OMITTED)``,
    where OMITTED are the values pydantic cannot serialise, each named in the record's
    ``omitted`` by its ``path`` and the ``type`` of its value. AgentDyn's one-time-password
    tools store a pending action in ``verification_stack[otp]`` as ``(function, args)``: a
    function, and args that hold the environment's own models (a cycle). The walk starts
    at the environment and descends into a value only while pydantic cannot serialise it
    (``model_dump_json(include=PATH)``): into a model's fields, a dict's entries (string or
    integer keys) and a list's items; any other value it cannot serialise (a tuple, a
    function, an object), or a value already on the walk's way down (a cycle), is omitted
    whole at its path. A path reads like ``github_platform.account_list[0]
    .verification_stack["531840"]``: fields after a dot, list indexes and dict keys (as
    JSON) in brackets. The omitted values are what the digest leaves out, and the pending
    actions' keys are in the paths.
``repr``
    an environment that is not a pydantic model: the sha256 of its ``repr``.
``unavailable``
    none of the above could be made (``sha256`` is null, ``error`` says why).

:func:`digest` never raises: the benchmark scores the cell whatever the digest gives.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

WHOLE = "model_dump_json"
EXCLUDING = "model_dump_json_excluding"
REPR = "repr"
UNAVAILABLE = "unavailable"


def digest(env: Any) -> dict[str, Any]:
    """The ``environment_digest`` fields for ``env``: ``sha256``, ``method`` and, for
    :data:`EXCLUDING`, ``omitted`` (``[{path, type}]``); for :data:`UNAVAILABLE`, ``error``."""
    try:
        if not hasattr(env, "model_dump_json"):
            return {"sha256": _sha(repr(env)), "method": REPR}
        try:
            return {"sha256": _sha(env.model_dump_json()), "method": WHOLE}
        except Exception:  # noqa: BLE001 - pydantic's serialisation errors are several types
            pass
        omitted = unserialisable(env)
        if not omitted or omitted[0][0] == ():
            raise ValueError("pydantic cannot serialise the environment, and no value of it "
                             "is to blame")
        data = env.model_dump_json(exclude=_nested([path for path, _, _ in omitted]))
        return {"sha256": _sha(data), "method": EXCLUDING,
                "omitted": [{"path": text, "type": kind} for _, text, kind in omitted]}
    except Exception as exc:  # noqa: BLE001 - the digest never reaches the scoring
        return {"sha256": None, "method": UNAVAILABLE,
                "error": f"{type(exc).__name__}: {exc}"[:500]}


def unserialisable(env: Any) -> list[tuple[tuple[Any, ...], str, str]]:
    """(path, path as text, type name) of each value of ``env`` that pydantic cannot
    serialise, in the walk's order (the fields' declared order, dict and list order)."""
    out: list[tuple[tuple[Any, ...], str, str]] = []

    def fails(path: tuple[Any, ...]) -> bool:
        try:
            env.model_dump_json(include=_nested([path]))
        except Exception:  # noqa: BLE001
            return True
        return False

    def walk(value: Any, path: tuple[Any, ...], text: str, above: frozenset[int]) -> None:
        children = None if id(value) in above else _children(value)
        if children is None:
            out.append((path, text, type(value).__qualname__))
            return
        inner = above | {id(value)}
        for key, child, step in children:
            if fails((*path, key)):
                walk(child, (*path, key), text + step if text or step[0] != "." else step[1:],
                     inner)

    walk(env, (), "", frozenset())
    return out


def _children(value: Any) -> list[tuple[Any, Any, str]] | None:
    """(key, value, the path's step as text) of what the walk descends into, or None for a
    value it omits whole."""
    fields = getattr(type(value), "model_fields", None)
    if isinstance(fields, dict) and hasattr(value, "model_dump_json"):
        return [(name, getattr(value, name, None), f".{name}") for name in fields]
    if isinstance(value, dict) and all(type(k) in (str, int) for k in value):
        return [(k, v, f"[{json.dumps(k)}]") for k, v in value.items()]
    if isinstance(value, list):
        return [(i, v, f"[{i}]") for i, v in enumerate(value)]
    return None


def _nested(paths: list[tuple[Any, ...]]) -> dict[Any, Any]:
    """Paths as pydantic's nested ``include``/``exclude`` mapping."""
    root: dict[Any, Any] = {}
    for path in paths:
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = True
    return root


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
