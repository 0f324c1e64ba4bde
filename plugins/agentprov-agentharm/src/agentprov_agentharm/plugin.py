"""AgentHarm through Inspect (inspect-ai 0.3.263, inspect-evals 0.20.0) as a source."""

from pathlib import Path

from agentprov_core.backendproject import BackendProject
from agentprov_core.plugins import hookimpl
from agentprov_core.source import InspectCellBound, InspectSource, SourceMeta


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
    )
    catalogue_file = Path(__file__).with_name("catalogue.declared.json")
    #: D-740: the refusal judge reads each assistant message (a = 1); each grading
    #: function makes at most three semantic-judge calls, none in a loop (j = 3); the
    #: harness fixes Inspect's retries at one per model call (K = 1). Valid for the task
    #: files of inspect-evals 0.20.0 recorded in the environment's identity.
    cell_bound = InspectCellBound(judge_calls_per_agent_call=1, judge_calls_per_sample=3,
                                  retries_per_call=1)


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/inspect/envs/agentharm`` of the agentprov checkout (a slot: its README says what it will pin)."""
    return [BackendProject(name="inspect-agentharm", path="inspect/envs/agentharm")]


@hookimpl
def agentprov_sources():
    return [AgentHarm()]
