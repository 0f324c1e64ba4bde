"""Task SPECs: ``all``, task ids, or index ranges over the tasks sorted by number.

``0-2,5`` selects the first three tasks and the sixth of the list sorted by the number in
the id (so on slack, whose injection ids start at ``injection_task_1``, index 0 is
``injection_task_1``). Ids and indices may be mixed; the selection keeps catalogue order
and drops repeats. Every index must exist in every suite it is applied to.
"""

from __future__ import annotations

import re

from agentprov_core.errors import AgentprovError

_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


def task_number(task_id: str) -> int:
    m = re.search(r"(\d+)$", task_id)
    return int(m.group(1)) if m else -1


def sort_tasks(ids: list[str]) -> list[str]:
    return sorted(ids, key=lambda t: (task_number(t), t))


def normalise(spec: str | list[str] | None) -> str:
    if spec is None:
        return "all"
    if isinstance(spec, list):
        return ",".join(str(s) for s in spec)
    return str(spec)


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
            raise AgentprovError("cli.usage.task_spec", option=option, spec=spec,
                                 what="an empty item between commas")
        if item.isdigit():
            idx = int(item)
            if idx > last:
                raise AgentprovError("cli.usage.task_spec", option=option, spec=spec,
                                     what=f"index {idx} is out of range; {known}")
            chosen.add(ordered[idx])
            continue
        m = _RANGE.match(item)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise AgentprovError("cli.usage.task_spec", option=option, spec=spec,
                                     what=f"range {item} runs backwards; write {hi}-{lo}")
            if hi > last:
                raise AgentprovError("cli.usage.task_spec", option=option, spec=spec,
                                     what=f"index {hi} is out of range; {known}")
            chosen.update(ordered[lo : hi + 1])
            continue
        if item in tasks:
            chosen.add(item)
            continue
        raise AgentprovError("cli.usage.task_spec", option=option, spec=spec,
                             what=f"{item!r} is neither an index, a range nor a task id; {known}")
    return [t for t in ordered if t in chosen]


def _describe(ordered: list[str], where: str) -> str:
    suite, _, noun = where.partition(":")
    if not ordered:
        return f"{suite} has no {noun}"
    return (f"{suite} has {len(ordered)} {noun} (indices 0-{len(ordered) - 1}: "
            f"{ordered[0]} … {ordered[-1]})")
