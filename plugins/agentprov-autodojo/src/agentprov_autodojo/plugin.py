"""AutoDojo (the fork at aa458794) as an agentprov source."""

from pathlib import Path

from agentprov_core.api import BackendProject, SourceMeta, SuiteSource, autodojofork, hookimpl


class AutoDojo(SuiteSource):
    meta = SourceMeta(
        name="autodojo",
        label="autodojo · live",
        summary="AutoDojo's 17 suites and its cached attacks; AgentDyn's three suites also run here",
        kind="suites",
        backend="autodojo",
        backend_project="autodojo",
        environment_prefix="autodojo",
        pinned_commit=autodojofork.PINNED_COMMIT,
        live_status="partial",
        caveat="local",
        # gateway_compat binds to private helpers whose versions differ in the fork
        llm_elements=("native",),
        # the shared capture mapper, which agentprov-agentdojo registers
        mapper="agentdojo.capture",
    )
    # what `--catalogue` answers while no environment is built: the fork is not public, so
    # these are the spec's declared counts, not verified (provenance "declared"); once
    # built, the worker serves the catalogue of the installed fork
    catalogue_file = Path(__file__).with_name("catalogue.declared.json")


#: what of the fork's commit building its ``agentdojo`` distribution needs
UPSTREAM_PATHS = ("src", "pyproject.toml", "LICENSE", "README.md")


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/autodojo`` of the agentprov checkout, whose uv.lock
    installs the fork's code from its pinned commit (extracted from the fetch cache at build
    time, where only ``--source-repo`` can put it: the fork is not public) and the worker
    package ``backends/autodojo/worker``."""
    return [BackendProject(name="autodojo", path="autodojo",
                           pinned_commit=autodojofork.PINNED_COMMIT,
                           upstream=autodojofork.UPSTREAM, unpublished=autodojofork.UNPUBLISHED,
                           upstream_paths=UPSTREAM_PATHS,
                           licence="not stated: the fork is not public",
                           worker="agentprov-worker-autodojo",
                           pin_override=autodojofork.PIN_OVERRIDE)]


@hookimpl
def agentprov_sources():
    return [AutoDojo()]
