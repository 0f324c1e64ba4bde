"""AgentDyn (SaFo-Lab/AgentDyn at 5353cf76) as an agentprov source."""

from pathlib import Path

from agentprov_core.backendproject import BackendProject
from agentprov_core.plugins import hookimpl
from agentprov_core.source import SourceMeta, SuiteSource


class AgentDyn(SuiteSource):
    meta = SourceMeta(
        name="agentdyn",
        label="agentdyn · live",
        summary="AgentDyn's 7 suites on AgentDyn's own pinned code",
        kind="suites",
        backend="agentdyn",
        backend_project="agentdyn",
        environment_prefix="agentdyn",
        pinned_commit="5353cf76",
        live_status="partial",
        caveat="local",
        llm_elements=("native",),
        # the shared capture mapper, which agentprov-agentdojo registers
        mapper="agentdojo.capture",
    )
    # the repository is not reachable from these machines: declared counts, not verified
    catalogue_file = Path(__file__).with_name("catalogue.declared.json")


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/agentdyn`` of the agentprov checkout (a slot: its README says what it will pin)."""
    return [BackendProject(name="agentdyn", path="agentdyn", pinned_commit="5353cf76")]


@hookimpl
def agentprov_sources():
    return [AgentDyn()]
