"""The stand-in server's policy for the agreement check (``agreement_dojo.py``), computed in
an AgentDojo-shaped backend environment by its own Python:

    <env>/bin/python benchmarks/agreement_policy.py SPEC.json > POLICY.json

SPEC: ``{"benchmark_version": V, "suites": {SUITE: {"user_tasks": [...],
"injection_tasks": [...]}}, "otp": {SUITE: [TOOL, ARGUMENTS]}}``, the tasks as indexes
over the suite's tasks sorted by number (as ``agentprov run --user-tasks`` takes them). For each user task the
policy answers with its ground truth's tool calls (computed from the suite's default
environment, as AgentDojo computes the injection candidates: so the tool results the model
sees carry the attack's injections), one call a reply, preceded by the suite's
one-time-password tool when SPEC names one (AgentDyn's GitHub, shopping and daily-life
suites: the pending action it stores is what the environment digest cannot serialise), then
a final text. Once a tool result holds an injection task's goal, the policy follows it: the
injection task's ground-truth calls, then the final text, so that attacked cells can
succeed. Printed: ``{"prompts": {PROMPT: [replies]}, "injections": {GOAL: [replies]},
"cells": {"SUITE/USER_TASK": PROMPT}, "ids": {SUITE: {"user_tasks": [...],
"injection_tasks": [...]}}}`` (replies as ``agentprov-llm-script/0.1`` message
replies).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FINAL = {"content": "I have done what you asked."}


def calls(task: Any, env: Any) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": c.function,
                             "arguments": json.loads(json.dumps(dict(c.args), default=str))}]}
            for c in task.ground_truth(env.model_copy(deep=True))]


def number(task_id: str) -> int:
    """A task's number (``user_task_12`` is 12), as ``--user-tasks`` sorts them."""
    return int(task_id.rsplit("_", 1)[1])


def main() -> None:
    from agentdojo.task_suite.load_suites import get_suite

    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    out: dict[str, Any] = {"prompts": {}, "injections": {}, "cells": {}, "ids": {}}
    for name, chosen in spec["suites"].items():
        suite = get_suite(spec["benchmark_version"], name)
        env = suite.load_and_inject_default_environment(suite.get_injection_vector_defaults())
        otp = spec.get("otp", {}).get(name)
        first = [{"tool_calls": [{"name": otp[0], "arguments": otp[1]}]}] if otp else []
        uids = [sorted(suite.user_tasks, key=number)[i] for i in chosen["user_tasks"]]
        iids = [sorted(suite.injection_tasks, key=number)[i] for i in chosen["injection_tasks"]]
        out["ids"][name] = {"user_tasks": uids, "injection_tasks": iids}
        for uid in uids:
            task = suite.get_user_task_by_id(uid)
            out["prompts"][task.PROMPT] = [*first, *calls(task, env), FINAL]
            out["cells"][f"{name}/{uid}"] = task.PROMPT
        for iid in iids:
            task = suite.get_injection_task_by_id(iid)
            out["injections"][task.GOAL] = [*calls(task, env), FINAL]
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
