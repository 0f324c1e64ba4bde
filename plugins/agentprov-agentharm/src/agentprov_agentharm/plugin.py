"""AgentHarm through Inspect (inspect-ai 0.3.263, inspect-evals 0.20.0) as a source."""

from pathlib import Path

from agentprov_core.api import (
    BackendDataset,
    BackendProject,
    DatasetFile,
    InspectCellBound,
    InspectSource,
    Restricted,
    SourceMeta,
    hookimpl,
)


class AgentHarm(InspectSource):
    meta = SourceMeta(
        name="agentharm",
        label="agentharm · live",
        summary="Inspect's AgentHarm tasks through inspect eval (a different harness)",
        kind="inspect",
        backend="inspect-agentharm",
        backend_project="inspect/envs/agentharm",
        environment_prefix="inspect-agentharm",
        live_status="partial",
        caveat="OpenRouter, a 4-sample probe (2026-10-23)",
        llm_elements=("native",),
        mapper="inspect.eval",
        evidence_format="inspect-eval",
        restricted=Restricted(
            why="a live AgentHarm corpus is its own restricted-use corpus, private",
            licence="MIT with an additional clause: use only to improve AI safety and "
                    "security (ai-safety-institute/AgentHarm)",
            holds="AgentHarm's harmful prompts and any compliant completions, verbatim"),
    )
    # what T0 shows before the environment is built; the built environment's worker serves
    # the catalogue read from the installed code (provenance "worker")
    catalogue_file = Path(__file__).with_name("catalogue.declared.json")
    #: D-740: the refusal judge reads each assistant message (a = 1); each grading
    #: function makes at most three semantic-judge calls, none in a loop (j = 3); the
    #: harness fixes Inspect's retries at one per model call (K = 1). Valid for the task
    #: files of inspect-evals 0.20.0 recorded in the environment's identity.
    cell_bound = InspectCellBound(judge_calls_per_agent_call=1, judge_calls_per_sample=3,
                                  retries_per_call=1)


#: the files of the dataset the build counts: each task's split, as the catalogue counts it
#: (test_public 176 = 44 behaviours x 4, validation 32 = 8 x 4)
DATASET_FILES = tuple(
    DatasetFile(path=f"benchmark/{stem}_behaviors_{suffix}.json", records=n, task=task,
                split=split)
    for task, stem in (("inspect_evals/agentharm", "harmful"),
                       ("inspect_evals/agentharm_benign", "benign"))
    for split, suffix, n in (("test_public", "test_public", 176), ("val", "validation", 32)))

#: ai-safety-institute/AgentHarm at the revision inspect_evals 0.20.0 pins
#: (inspect_evals/agentharm/utils.py, AGENTHARM_DATASET_REVISION), laid out as its loader
#: expects below INSPECT_EVALS_CACHE_DIR; the hub publishes no per-file sha256 list for it
DATASET = BackendDataset(
    name="agentharm", origin="huggingface:ai-safety-institute/AgentHarm",
    revision="e23b3fe60a0da9037314b88e5ee3a0c054970dad",
    target="agentharm_dataset/AgentHarm", pattern="**/*.json", records_key="behaviors",
    files=DATASET_FILES, digests=None)


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/inspect/envs/agentharm`` of the agentprov checkout
    (locked by its uv.lock), served by the worker package
    ``backends/inspect/envs/agentharm/worker`` over ``backends/inspect/worker``; built with
    the dataset (``--dataset DIR``); the task files of inspect_evals' agentharm hashed."""
    return [BackendProject(name="inspect-agentharm", path="inspect/envs/agentharm",
                           worker="agentprov-worker-agentharm",
                           task_files=("inspect_evals/agentharm/**/*",), dataset=DATASET)]


@hookimpl
def agentprov_sources():
    return [AgentHarm()]
