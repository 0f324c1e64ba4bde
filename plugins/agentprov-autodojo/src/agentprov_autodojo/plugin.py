"""AutoDojo (the fork at aa458794) as an agentprov source."""

from pathlib import Path

from agentprov_core.backendproject import BackendProject
from agentprov_core.plugins import hookimpl
from agentprov_core.source import SourceMeta, SuiteSource


class AutoDojo(SuiteSource):
    meta = SourceMeta(
        name="autodojo",
        label="autodojo · live",
        summary="AutoDojo's 17 suites and its cached attacks; AgentDyn's three suites also run here",
        kind="suites",
        backend="autodojo",
        backend_project="autodojo",
        environment_prefix="autodojo",
        pinned_commit="aa458794",
        live_status="partial",
        caveat="local",
        # gateway_compat binds to private helpers whose versions differ in the fork
        llm_elements=("native",),
        # the shared capture mapper, which agentprov-agentdojo registers
        mapper="agentdojo.capture",
    )
    # the fork is not public: the spec's declared counts, not verified
    catalogue_file = Path(__file__).with_name("catalogue.declared.json")


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/autodojo`` of the agentprov checkout (a slot: its README says what it will pin)."""
    return [BackendProject(name="autodojo", path="autodojo", pinned_commit="aa458794")]


@hookimpl
def agentprov_sources():
    return [AutoDojo()]
