"""Task SPECs: ``all``, task ids, or index ranges over the tasks sorted by number.

``0-2,5`` selects the first three tasks and the sixth of the list sorted by the number in
the id (so on slack, whose injection ids start at ``injection_task_1``, index 0 is
``injection_task_1``). Ids and indices may be mixed; the selection keeps catalogue order
and drops repeats. Every index must exist in every suite it is applied to.
"""

from __future__ import annotations

import re

from agentprov_core.errors import AgentprovError

_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$", re.ASCII)
#: An index of more digits than this is out of range of any catalogue (and never given to
#: ``int``, which refuses more than 4,300 digits).
MAX_DIGITS = 9


def task_number(task_id: str) -> int:
    m = re.search(r"(\d+)$", task_id, re.ASCII)
    if m is None:
        return -1
    return int(m.group(1)) if len(m.group(1)) <= MAX_DIGITS else 10**MAX_DIGITS  # sorts last


def _index(digits: str, last: int) -> int:
    """An index as given; one of more than :data:`MAX_DIGITS` digits is past ``last``."""
    return int(digits) if len(digits) <= MAX_DIGITS else last + 1


def sort_tasks(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda t: (task_number(t), t))


def select(spec: str, tasks: list[str], *, option: str, where: str) -> list[str]:
    """The ids of ``tasks`` that ``spec`` selects, in sorted order."""
    ordered = sort_tasks(tasks)
    spec = spec.strip()
    if spec == "all":
        return ordered
    if not spec:
        raise AgentprovError("cli.usage.task_spec", option=option, spec="''",
                             what="empty; give all, ids or index ranges")
    chosen: set[str] = set()
    last = len(ordered) - 1
    known = _describe(ordered, where)
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise AgentprovError("cli.usage.task_spec", option=option, spec=_short(spec),
                                 what="an empty item between commas")
        if item.isascii() and item.isdigit():
            idx = _index(item, last)
            if idx > last:
                raise AgentprovError("cli.usage.task_spec", option=option, spec=_short(spec),
                                     what=f"index {_short(item)} is out of range; {known}")
            chosen.add(ordered[idx])
            continue
        m = _RANGE.match(item)
        if m:
            lo, hi = _index(m.group(1), last), _index(m.group(2), last)
            for given, idx in ((m.group(1), lo), (m.group(2), hi)):
                if idx > last:
                    raise AgentprovError("cli.usage.task_spec", option=option,
                                         spec=_short(spec),
                                         what=f"index {_short(given)} is out of range; {known}")
            if lo > hi:
                raise AgentprovError("cli.usage.task_spec", option=option, spec=_short(spec),
                                     what=f"range {item} runs backwards; write {hi}-{lo}")
            chosen.update(ordered[lo : hi + 1])
            continue
        if item in tasks:
            chosen.add(item)
            continue
        raise AgentprovError("cli.usage.task_spec", option=option, spec=_short(spec),
                             what=f"{_short(item)!r} is neither an index, a range nor a task "
                                  f"id; {known}")
    return [t for t in ordered if t in chosen]


def _short(text: str, limit: int = 40) -> str:
    """``text`` as a message shows it: at most ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _describe(ordered: list[str], where: str) -> str:
    suite, _, noun = where.partition(":")
    if not ordered:
        return f"{suite} has no {noun}"
    return (f"{suite} has {len(ordered)} {noun} (indices 0-{len(ordered) - 1}: "
            f"{ordered[0]} … {ordered[-1]})")
