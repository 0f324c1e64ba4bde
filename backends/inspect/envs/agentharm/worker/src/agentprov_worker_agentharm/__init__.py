"""AgentHarm's worker package: the ``agentharm`` source, served in its backend environment.

Registered under the entry-point group ``agentprov.worker`` (``agentprov_backend.host``).
The catalogue is read from the installed inspect_evals (the ``@task`` functions
``agentharm`` and ``agentharm_benign``, the default agent's arguments, the settings
``run_agent_benchmark`` fixes, the task version of ``eval.yaml``) and from the dataset the
build copied into the environment (each split's samples). What the code cannot tell is
this package's policy, stated here: which parameters are offered, the range of
``n_irrelevant_tools`` and which splits (``test_private`` is not public).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from agentprov_inspect import dataset, taskcode
from agentprov_inspect.source import InspectWorkerSource, fixed_value, parameter

TASK_MODULE = "inspect_evals.agentharm.agentharm"
AGENTS_MODULE = "inspect_evals.agentharm.agents.agent"
DEFAULT_AGENT_MODULE = "inspect_evals.agentharm.agents.default_agent"
#: catalogue task -> (its @task function, the dataset's file stem)
TASKS = {"inspect_evals/agentharm": ("agentharm", "harmful"),
         "inspect_evals/agentharm_benign": ("agentharm_benign", "benign")}
#: the splits offered, and each one's file suffix in the dataset
SPLITS = {"test_public": "test_public", "val": "validation"}
#: the task function's parameters offered (the judges are roles, behavior_ids is
#: --samples, force_redownload never: the dataset is never downloaded)
TASK_PARAMS = ("split", "agent", "detailed_behaviors", "hint_included", "n_irrelevant_tools")
#: the default agent's arguments offered (passed through agent_kwargs)
AGENT_PARAMS = ("tool_choice", "prompt_technique")
#: offered on ``agentharm`` only, where the function takes it
OPTIONAL_PARAMS = ("chat_dataset",)
RANGES = {"n_irrelevant_tools": (0, 64)}
#: the fixed settings read from run_agent_benchmark: Task keywords, then GenerateConfig's
TASK_FIXED = ("max_messages",)
CONFIG_FIXED = ("max_tokens", "temperature", "seed")
DATASET = "agentharm"
ROOT = "agentharm_dataset/AgentHarm"


def _task_version() -> int | None:
    """The comparability version of ``eval.yaml``'s ``version: "8-B"`` (8)."""
    path = taskcode.module_file(TASK_MODULE).with_name("eval.yaml")
    m = re.search(r'^version:\s*"?(\d+)-', path.read_text(encoding="utf-8"), re.M)
    return int(m.group(1)) if m else None


def dataset_file(stem: str, split: str):
    return dataset.root(DATASET) / ROOT / "benchmark" / f"{stem}_behaviors_{SPLITS[split]}.json"


class AgentHarmSource(InspectWorkerSource):
    name = "agentharm"
    backend = "inspect-agentharm"
    packages = ("inspect-ai", "inspect-evals")

    def provenance_note(self) -> str:
        return ("read from the installed inspect_evals (the @task functions, the default "
                "agent, run_agent_benchmark, eval.yaml) and the dataset in the environment "
                f"({dataset.root(DATASET).name}: sample counts per split)")

    def tasks(self) -> list[dict[str, Any]]:
        agents = taskcode.dict_keys(AGENTS_MODULE, "AGENT_DICT")
        agent_args = taskcode.parameters(DEFAULT_AGENT_MODULE, "default_agent")
        fixed: dict[str, Any] = {k: v for k, v in taskcode.call_keywords(
            TASK_MODULE, "run_agent_benchmark", "Task").items() if k in TASK_FIXED}
        fixed |= {k: v for k, v in taskcode.nested_call_keywords(
            TASK_MODULE, "run_agent_benchmark", "Task", "config", "GenerateConfig").items()
            if k in CONFIG_FIXED}
        if (version := _task_version()) is not None:
            fixed["task_version"] = version
        out = []
        for name, (function, stem) in TASKS.items():
            params = taskcode.parameters(TASK_MODULE, function)
            missing = [p for p in TASK_PARAMS if p not in params]
            if missing:
                raise taskcode.TaskCodeError(f"{TASK_MODULE}.{function} takes no "
                                             + ", ".join(missing))
            rows = []
            for p in TASK_PARAMS:
                lo, hi = RANGES.get(p, (None, None))
                rows.append(parameter(params[p], minimum=lo, maximum=hi,
                                      choices=list(SPLITS) if p == "split" else
                                      agents if p == "agent" else None))
            rows += [parameter(agent_args[p]) for p in AGENT_PARAMS]
            rows += [parameter(params[p]) for p in OPTIONAL_PARAMS if p in params]
            out.append({
                "name": name, "default_split": params["split"].default,
                "splits": [{"name": s, "samples": len(self._records(stem, s))} for s in SPLITS],
                "parameters": rows, "fixed": {k: fixed_value(v) for k, v in sorted(fixed.items())},
                "judge_roles": [p for p in params if p.endswith("_judge")],
            })
        return out

    def _records(self, stem: str, split: str) -> list[dict[str, Any]]:
        return dataset.records(dataset_file(stem, split), "behaviors")

    def sample_ids(self, task: str, split: str | None) -> list[str]:
        return [str(r.get("id")) for r in self._records(TASKS[task][1], self._split(task, split))]

    def _split(self, task: str, split: str | None) -> str:
        if split is not None:
            return split
        return str(taskcode.parameters(TASK_MODULE, TASKS[task][0])["split"].default)

    def stage_dataset(self, inspect: dict[str, Any], cache: Path) -> None:
        """The one file the task reads (its stem's file of the split), copied to where
        inspect_evals looks below ``cache``; the loader writes its ``.jsonl`` beside it."""
        task = inspect["task"]
        src = dataset_file(TASKS[task][1], self._split(task, inspect.get("split")))
        dest = cache / ROOT / src.relative_to(dataset.root(DATASET) / ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)

    def build_task(self, inspect: dict[str, Any], judges: dict[str, Any]) -> Any:
        """The task function called with the plan's parameters (the default agent's go in
        ``agent_kwargs``) and the judges as ``Model`` objects (the functions take
        ``str | Model``)."""
        import importlib

        task = inspect["task"]
        fn = getattr(importlib.import_module(TASK_MODULE), TASKS[task][0])
        params = dict(inspect.get("params") or {})
        agent_kwargs = {k: params.pop(k) for k in AGENT_PARAMS if k in params}
        params["split"] = self._split(task, inspect.get("split") or params.get("split"))
        return fn(**params, **judges, **({"agent_kwargs": agent_kwargs} if agent_kwargs else {}))


SOURCE = AgentHarmSource()
