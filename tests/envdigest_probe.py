"""Run inside an AgentDojo-shaped backend environment (``<env>/bin/python envdigest_probe.py
VERSION``): for each suite, build its environment with the injection vectors' defaults, run
the ground truth of every user task and injection task through the suite's own tools (their
state changes), then call every one-time-password helper of the suite (a tool whose code
stores a pending action in ``verification_stack[otp]``) with arguments made from its
parameters, and digest the environment as the worker does. Prints one JSON line per suite."""

from __future__ import annotations

import inspect
import json
import sys
import typing
from typing import Any

from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suites
from agentprov_dojo import envdigest

OTP_MARK = "verification_stack[otp] = "


def argument(name: str, annotation: Any, env: Any, number: int) -> Any:
    """A value for a parameter: an e-mail address where the name asks for one, a repository
    the logged-in GitHub account owns and another account's user name (AgentDyn checks
    them before it asks for a password), ``number`` for a number, text that names nothing
    otherwise."""
    if "email" in name:
        return "agentprov-probe@example.com"
    gh = getattr(env, "github_platform", None)
    me = gh and next((a.username for a in gh.account_list
                      if a.email == gh.current_account_email), None)
    if name == "repo_name" and gh is not None:
        return next((r for r, repo in gh.repository_list.items() if repo.owner == me),
                    "agentprov-probe")
    if name.endswith("username") and gh is not None:  # another account's
        return next((a.username for a in gh.account_list if a.username != me),
                    "agentprov-probe")
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set):
        return []
    if origin is dict:
        return {}
    if origin is not None:  # a union: its first member
        return argument(name, typing.get_args(annotation)[0], env, number)
    if annotation in (int, float):
        return number
    if annotation is bool:
        return False
    return "agentprov-probe"


#: the numbers tried, in order, until a helper stores a pending action: above AgentDyn's
#: bank's approval threshold ($500), then within a shopping account's balance
NUMBERS = (501, 1)


def otp_helpers(suite) -> list:
    out = []
    for tool in suite.tools:
        try:
            source = inspect.getsource(tool.run)
        except (OSError, TypeError):
            continue
        if OTP_MARK in source:
            out.append(tool)
    return out


def pending(env) -> int:
    """The pending actions of every ``verification_stack`` in ``env``."""
    count = 0
    seen: set[int] = set()

    def walk(value: Any) -> None:
        nonlocal count
        if id(value) in seen:
            return
        seen.add(id(value))
        fields = getattr(type(value), "model_fields", None)
        if isinstance(fields, dict):
            stack = getattr(value, "verification_stack", None)
            if isinstance(stack, dict):
                count += len(stack)
            for name in fields:
                if name != "verification_stack":
                    walk(getattr(value, name, None))
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(env)
    return count


def probe(name: str, suite) -> dict[str, Any]:
    env = suite.load_and_inject_default_environment(suite.get_injection_vector_defaults())
    runtime = FunctionsRuntime(suite.tools)
    calls = errors = 0
    tasks = [*suite.user_tasks.values(), *suite.injection_tasks.values()]
    for task in tasks:
        for call in task.ground_truth(env.model_copy(deep=True)):
            _, error = runtime.run_function(env, call.function, dict(call.args))
            calls, errors = calls + 1, errors + (error is not None)
    ground = envdigest.digest(env)
    helpers = []
    for tool in otp_helpers(suite):
        for number in NUMBERS:
            before = pending(env)
            args = {k: argument(k, f.annotation, env, number)
                    for k, f in tool.parameters.model_fields.items()}
            result, error = runtime.run_function(env, tool.name, args)
            if pending(env) > before:
                break
        helpers.append({"tool": tool.name, "pushed": pending(env) - before, "error": error,
                        "result": str(result)[:200]})
    return {"suite": name, "ground_truth_calls": calls, "ground_truth_errors": errors,
            "after_ground_truth": ground, "helpers": helpers, "pending": pending(env),
            "digest": envdigest.digest(env), "again": envdigest.digest(env)}


def main() -> None:
    for name, suite in get_suites(sys.argv[1]).items():
        print(json.dumps(probe(name, suite)), flush=True)


if __name__ == "__main__":
    main()
