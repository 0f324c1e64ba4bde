"""AgentDojo (agentdojo==0.1.35 from PyPI) as an agentprov source."""

from pathlib import Path

from agentprov_core.api import BackendProject, MapperRef, SourceMeta, SuiteSource, hookimpl


class AgentDojo(SuiteSource):
    meta = SourceMeta(
        name="agentdojo",
        label="agentdojo · live",
        summary="AgentDojo's 4 suites, the stock LLM element with a recording transport",
        kind="suites",
        backend="agentdojo",
        backend_project="agentdojo",
        environment_prefix="agentdojo",
        live_status="partial",
        caveat="local, OpenRouter and Anthropic (the 2026-10-22 pilot)",
        takes_defences=True,
        llm_elements=("native", "gateway_compat"),
        homepage="https://pypi.org/project/agentdojo/0.1.35/",
        live_profile="agentdojo-live@3",
        mapper="agentdojo.capture",
    )
    # generated from the real package by scripts/snapshot_catalogue.py
    catalogue_file = Path(__file__).with_name("catalogue.snapshot.json")


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/agentdojo`` of the agentprov checkout (locked by its
    uv.lock), served by the worker package ``backends/agentdojo/worker``."""
    return [BackendProject(name="agentdojo", path="agentdojo",
                           worker="agentprov-worker-agentdojo")]


@hookimpl
def agentprov_sources():
    return [AgentDojo()]


#: The shared capture mapper (capture/0.1 and the native log), used by every AgentDojo-shaped
#: backend; ``capture_mapper.CaptureMapper`` reads its name and version from here.
CAPTURE_MAPPER = MapperRef(name="agentdojo.capture", version="0.2.1",
                           evidence_formats=("capture/0.1",),
                           target="agentprov_agentdojo.capture_mapper:MAPPER")


#: The mapper of the result files AgentDojo's own runner writes (``agentprov import
#: agentdojo``; docs/importing.md); ``results_mapper.ResultsMapper`` reads its name and
#: version from here.
RESULTS_MAPPER = MapperRef(name="agentdojo.results", version="0.1.0",
                           evidence_formats=("agentdojo-results",),
                           target="agentprov_agentdojo.results_mapper:MAPPER",
                           imports="agentdojo")


@hookimpl
def agentprov_mappers():
    """``agentdojo.capture`` and ``agentdojo.results``, by reference: their code is imported
    when they first map."""
    return [CAPTURE_MAPPER, RESULTS_MAPPER]
