"""examplebench: a tiny mail benchmark, added to agentprov by a third-party distribution.

The plugin contributes the source (what T0 plans), its backend project (where the worker
package runs its cells) and the mapper of the evidence those cells leave.
"""

from pathlib import Path

from agentprov_core.api import BackendProject, MapperRef, SourceMeta, SuiteSource, hookimpl


class Examplebench(SuiteSource):
    meta = SourceMeta(
        name="examplebench",  # the entry-point name in pyproject.toml
        label="examplebench · example",
        summary="One mail suite of three user tasks: the plugin guide's worked example",
        kind="suites",
        backend="examplebench",  # the backend project below
        live_status="planned",  # scripted runs only: no real model has run it
        caveat="scripted runs only; an example benchmark of three benign mail tasks",
        llm_elements=("native",),
        mapper="examplebench.capture",  # the mapper below maps its sessions' capture logs
    )
    # the catalogue the worker serves (backend/worker), committed so that T0 can plan
    # before the environment is built; a test holds the two equal
    catalogue_file = Path(__file__).with_name("catalogue.json")


@hookimpl
def agentprov_sources():
    return [Examplebench()]


@hookimpl
def agentprov_backends():
    # backend/: pyproject.toml, uv.lock and the worker package, shipped as package data
    return [BackendProject(name="examplebench", package="agentprov_example_source",
                           path="backend", worker="examplebench-worker")]


#: the mapper, by reference: agentprov imports mapper.py only when it first maps (listing the
#: plugins imports nothing more), and refuses it if its name or version differs from these
MAPPER = MapperRef(name="examplebench.capture", version="0.2.0",
                   evidence_formats=("capture/0.1",),
                   target="agentprov_example_source.mapper:MAPPER")


@hookimpl
def agentprov_mappers():
    return [MAPPER]
