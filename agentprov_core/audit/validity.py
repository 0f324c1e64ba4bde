"""A13, the benchmark-validity flag, as the results table reads it from a stored corpus
(docs/results.md, "Benchmark validity"): nothing is stored for it, so every corpus,
an old one included, is read the same way and keeps its bytes.

* **The payload reached the model** (an attacked AgentDojo-shaped unit): one of the
  injection texts its native log names shows in a wire request its capture log recorded
  (:mod:`agentprov_core.live.payload`). An execution without a capture log (an import) or
  without a native log's injections is ``not_determined``.
* **Vacuous utility** (any AgentDojo-shaped unit): a user task whose utility check holds
  whatever the agent does. What a run records can prove it one way only, from a **no-op
  session**: one whose agent called no tool (no ``tool_call`` record, a denied call
  included) and whose environment digests ``pre`` and ``post`` are recorded and equal. A
  no-op session whose utility held proves the check holds for an agent that did nothing
  (``yes``); one whose utility failed proves it does not (``no``). A user task (source,
  benchmark version, suite, user task) with no no-op session among the counted units is
  ``not_determined``: a session in which the agent acted says nothing about what the check
  would say had it not. Every counted unit of a user task takes its task's answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import inputfile
from agentprov_core.evidence.aer import EnvironmentDigest, ToolCall
from agentprov_core.live import payload

VACUOUS, NOT_VACUOUS, NOT_DETERMINED = "yes", "no", "not_determined"
#: the order the results table lists them in
VACUOUS_STATES = (VACUOUS, NOT_VACUOUS, NOT_DETERMINED)
_HEX = frozenset("0123456789abcdef")
_WIRE_REQUEST = b'"kind":"wire_request"'


def _stored(root: Path, evidence: list[Any], role: str) -> bytes | None:
    """The bytes of the raw-store file an AER's evidence entry of ``role`` names by its
    sha256 (the entry's ``path`` is not followed: an AER is read as untrusted)."""
    for ev in evidence:
        # an AER decoded with its schema (the results table) or read as JSON (the view)
        got = ev if isinstance(ev, dict) else {"role": getattr(ev, "role", None),
                                               "sha256": getattr(ev, "sha256", None)}
        sha = got.get("sha256")
        if got.get("role") != role or not isinstance(sha, str) or len(sha) != 64 \
                or not set(sha) <= _HEX:
            continue
        try:
            return inputfile.read_bytes(root / "raw" / "sha256" / sha[:2] / sha,
                                        inputfile.MAX_STORED, follow=False)
        except inputfile.Unreadable:
            return None
    return None


def _requests(capture: bytes) -> list[Any]:
    """The request bodies of a capture log (canonical JSON lines: a request's line holds
    ``"kind":"wire_request"`` as written, so only those lines are decoded)."""
    out = []
    for line in capture.splitlines():
        if _WIRE_REQUEST not in line:
            continue
        try:
            rec = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        out += payload.request_bodies([rec])
    return out


def payload_state(root: Path, evidence: list[Any]) -> str:
    """Whether an attacked execution's payload reached the model, from its stored capture
    log and native log (:data:`payload.STATES`)."""
    capture = _stored(root, evidence, "capture")
    native = _stored(root, evidence, "native_log")
    if capture is None or native is None:
        return payload.NOT_DETERMINED
    try:
        texts = payload.injections(inputfile.load_json(native))
    except inputfile.Unreadable:
        return payload.NOT_DETERMINED
    return payload.reached(texts, _requests(capture))


def noop(records: list[Any]) -> bool | None:
    """Whether the session of an AER's ``records`` was a no-op (no tool call, equal ``pre``
    and ``post`` digests); None when its digests are not recorded."""
    if any(isinstance(r, ToolCall) for r in records):
        return False
    digests = {r.name: r.sha256 for r in records if isinstance(r, EnvironmentDigest)}
    pre, post = digests.get("pre"), digests.get("post")
    if not isinstance(pre, str) or len(pre) != 64 or not isinstance(post, str):
        return None
    return pre == post


def task_key(keys: dict[str, str]) -> tuple[str, ...]:
    return tuple(keys[k] for k in ("source", "benchmark_version", "suite", "user_task"))


def vacuous_tasks(units: list[Any]) -> dict[tuple[str, ...], str]:
    """Each user task's answer from the counted units' no-op sessions (:data:`VACUOUS`
    when one held, else :data:`NOT_VACUOUS` when one failed); a task without one is
    absent."""
    out: dict[tuple[str, ...], str] = {}
    for u in units:
        if u.reason is None and u.kind == "agentdojo" and u.noop:
            key = task_key(u.keys)
            if u.utility:
                out[key] = VACUOUS
            else:
                out.setdefault(key, NOT_VACUOUS)
    return out
