"""AgentDyn (SaFo-Lab/AgentDyn at 5353cf76) as an agentprov source."""

from pathlib import Path

from agentprov_core.api import BackendProject, SourceMeta, SuiteSource, hookimpl


class AgentDyn(SuiteSource):
    meta = SourceMeta(
        name="agentdyn",
        label="agentdyn · live",
        summary="AgentDyn's 7 suites on AgentDyn's own pinned code",
        kind="suites",
        backend="agentdyn",
        backend_project="agentdyn",
        environment_prefix="agentdyn",
        pinned_commit="5353cf7615b135cace8d07c8f12dac53a16b6db3",
        homepage="https://github.com/SaFo-Lab/AgentDyn",
        live_status="partial",
        caveat="local",
        llm_elements=("native",),
        # the shared capture mapper, which agentprov-agentdojo registers
        mapper="agentdojo.capture",
    )
    # what `--catalogue` answers before the environment is built: the worker's catalogue of
    # agentdyn-5353cf76, generated from the installed code (`python -m
    # agentprov_backend.catalogue agentdyn` in the environment); once built, the worker serves
    # it (tests/test_agentdyn_backend.py checks that the two agree)
    catalogue_file = Path(__file__).with_name("catalogue.snapshot.json")


#: AgentDyn's pinned commit, its tree and its repository (the fetch cache verifies both ids)
UPSTREAM = "https://github.com/SaFo-Lab/AgentDyn"
COMMIT = "5353cf7615b135cace8d07c8f12dac53a16b6db3"
TREE = "08c04b47c307bba017a19f641111ffa4946c193a"
#: what of the commit building its ``agentdojo`` distribution needs (the tree's ``runs/``,
#: 47,723 published result files, is not extracted)
UPSTREAM_PATHS = ("src", "pyproject.toml", "LICENSE", "README.md")
#: the code is MIT; AgentDyn's own suites and logs carry no licence statement (the spec's
#: words: releasing a live AgentDyn corpus is a decision for the project owner)
LICENCE = "MIT as declared; not legally settled"


@hookimpl
def agentprov_backends():
    """The backend project: ``backends/agentdyn`` of the agentprov checkout, whose uv.lock
    installs AgentDyn's code from the pinned commit (extracted from the fetch cache at build
    time) and the worker package ``backends/agentdyn/worker``."""
    return [BackendProject(name="agentdyn", path="agentdyn", pinned_commit=COMMIT,
                           upstream=UPSTREAM, tree=TREE, upstream_paths=UPSTREAM_PATHS,
                           licence=LICENCE, worker="agentprov-worker-agentdyn")]


@hookimpl
def agentprov_sources():
    return [AgentDyn()]
