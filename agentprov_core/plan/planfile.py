"""Reading a ``--plan PLAN.toml`` file into a :class:`~agentprov_core.plan.plandoc.PlanDoc`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from agentprov_core.base import tomlfile
from agentprov_core.errors import AgentprovError
from agentprov_core.plan.plandoc import INSPECT_KEYS, PLAN_FORMAT, PLAN_KEYS, PlanDoc

CODE = "cli.usage.plan_file"


def load(path: Path) -> PlanDoc:
    data, text = tomlfile.read(path, CODE)

    def fail(what: str, key: str | None = None, table: str | None = None) -> AgentprovError:
        loc = tomlfile.location(path, text, key, table) if key else str(path)
        return AgentprovError(CODE, location=loc, what=what)

    unknown_tables = sorted(set(data) - {"plan", "inspect"})
    if unknown_tables:
        raise fail(f"unknown table [{unknown_tables[0]}] (a plan has [plan] and, for an "
                   "Inspect source, [inspect])")
    plan = data.get("plan")
    if not isinstance(plan, dict):
        raise fail("no [plan] table (the first line of a plan is [plan], then "
                   f'format = "{PLAN_FORMAT}")')
    for key in plan:
        if key not in PLAN_KEYS:
            raise fail(f"[plan] has an unknown key {key!r}; keys: {', '.join(PLAN_KEYS)}",
                       key, "plan")
    if plan.get("format") != PLAN_FORMAT:
        raise fail(f'[plan].format must be "{PLAN_FORMAT}" (found {plan.get("format")!r})',
                   "format", "plan")
    doc: dict[str, Any] = dict(plan)
    for key in ("user_tasks", "injection_tasks"):
        if isinstance(doc.get(key), list):
            doc[key] = ",".join(str(v) for v in doc[key])
        elif isinstance(doc.get(key), int):
            doc[key] = str(doc[key])
    insp = data.get("inspect")
    if insp is not None:
        if not isinstance(insp, dict):
            raise fail("[inspect] must be a table")
        for key in insp:
            if key not in INSPECT_KEYS:
                raise fail(f"[inspect] has an unknown key {key!r}; keys: {', '.join(INSPECT_KEYS)}",
                           key, "inspect")
        doc["inspect"] = insp
    try:
        return msgspec.convert(doc, type=PlanDoc)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        key = _key_from_path(msg)
        table = "plan"
        if key and key.startswith("inspect."):
            table, key = "inspect", key.split(".", 2)[1]
        what = _friendly(msg)
        if "invalid enum value" in msg.lower() and key == "benign":
            what += " (include, exclude or only)"
        raise fail(what, key, table) from None


def _key_from_path(msg: str) -> str | None:
    if "- at `$." not in msg:
        return None
    path = msg.rsplit("- at `$.", 1)[1].rstrip("`")
    return path.split("[")[0]


def _friendly(msg: str) -> str:
    if "- at `$." in msg:
        head, path = msg.rsplit(" - at `$.", 1)
        path = path.rstrip("`")
        table = "[inspect]" if path.startswith("inspect") else "[plan]"
        key = path.split(".", 1)[1] if path.startswith("inspect.") else path
        return f"{table}.{key}: {head[0].lower()}{head[1:]}"
    return msg
