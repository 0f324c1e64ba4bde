"""What a plugin may use of agentprov: one module, for sources, backends, mappers, defences,
endpoint kinds, containment providers and executors.

A plugin imports agentprov only from here (``from agentprov_core.api import hookimpl,
SourceMeta, SuiteSource``); every other module of ``agentprov_core`` is the core's inside
and may change without notice. The bundled plugins and the worked example keep to it, and
``tox -e lint`` holds them to it (import-linter's ``public-api`` contract, pyproject.toml).

A name is imported when it is first used (:pep:`562`): loading a plugin for
``agentprov info`` imports the metadata types it needs, never the mapping or the worker
client, which a run imports when it maps or starts a cell.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: name -> the module it is defined in
_NAMES = {
    "__version__": "agentprov_core",
    # hooks
    "hookimpl": "agentprov_core.hookspecs",
    # sources and their catalogues
    "Source": "agentprov_core.source",
    "SourceMeta": "agentprov_core.source",
    "SuiteSource": "agentprov_core.source",
    "InspectSource": "agentprov_core.source",
    "InspectCellBound": "agentprov_core.source",
    "Restricted": "agentprov_core.source",
    "Catalogue": "agentprov_core.catalogue",
    "Suite": "agentprov_core.catalogue",
    "Attack": "agentprov_core.catalogue",
    "Defence": "agentprov_core.catalogue",
    "Split": "agentprov_core.catalogue",
    "TaskParameter": "agentprov_core.catalogue",
    "InspectTask": "agentprov_core.catalogue",
    "Provenance": "agentprov_core.catalogue",
    # backends
    "BackendProject": "agentprov_core.backendproject",
    "BackendDataset": "agentprov_core.backendproject",
    "DatasetFile": "agentprov_core.backendproject",
    "environment_id": "agentprov_core.backend.environments",
    "environment_dir": "agentprov_core.backend.environments",
    # mappers, the AER and the capture log's reader
    "Mapper": "agentprov_core.mapping",
    "MapperRef": "agentprov_core.mapping",
    "LiveEvidence": "agentprov_core.mapping",
    "ImportCell": "agentprov_core.mapping",
    "ImportEvidence": "agentprov_core.mapping",
    "ImportRefused": "agentprov_core.mapping",
    "CAPTURE_FORMAT": "agentprov_core.mapping",
    "AER": "agentprov_core.evidence.aer",
    "NOT_RECORDED": "agentprov_core.evidence.aer",
    "LiveVsNative": "agentprov_core.evidence.aer",
    "ModelCall": "agentprov_core.evidence.aer",
    "ToolCall": "agentprov_core.evidence.aer",
    "encode": "agentprov_core.evidence.aer",
    "CaptureView": "agentprov_core.evidence.capture_view",
    "DojoCaptureMapper": "agentprov_core.evidence.dojo_mapper",
    "Pending": "agentprov_core.evidence.dojo_mapper",
    "reply_body": "agentprov_core.live.sse",
    "check_json_depth": "agentprov_core.base.inputfile",
    # defences, endpoints, containment, executors
    "DefenceEntry": "agentprov_core.registries.defences",
    "EndpointKind": "agentprov_core.live.endpoints",
    "ContainmentProvider": "agentprov_core.backend.containment",
    "ExecutorMeta": "agentprov_core.backend.executor",
    "Executor": "agentprov_core.backend.executor",
    "Launch": "agentprov_core.backend.executor",
    "LocalExecutor": "agentprov_core.backend.executor",
    "NODE_LOST": "agentprov_core.backend.executor",
    "Worker": "agentprov_core.backend.workerclient",
    "Target": "agentprov_core.backend.executor",
    # what a host that runs cells must agree on with T0; a staged session carried to T0
    "node_facts": "agentprov_core.backend.nodes",
    "node_differences": "agentprov_core.backend.nodes",
    "carry_session": "agentprov_core.corpus.staged",
    "land_session": "agentprov_core.corpus.staged",
    # what an executor raises when a cell cannot be run to an answer
    "AgentprovError": "agentprov_core.errors",
}
#: modules a plugin uses whole: the AER's record types and builders (``aer.Header``,
#: ``aer.Outcome``, …), the capture view's readers, the AgentDojo-shaped mapper's parts
#: (``dojo_mapper.parse_reply``, …), the AutoDojo fork's pin
_MODULES = {
    "aer": "agentprov_core.evidence.aer",
    "capture_view": "agentprov_core.evidence.capture_view",
    "dojo_mapper": "agentprov_core.evidence.dojo_mapper",
    "autodojofork": "agentprov_core.backend.autodojofork",
}

__all__ = sorted([*_NAMES, *_MODULES])


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    else:
        raise AttributeError(f"agentprov_core.api has no {name!r}: a plugin may use "
                             + ", ".join(__all__))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from agentprov_core import __version__  # noqa: F401
    from agentprov_core.backend import autodojofork  # noqa: F401
    from agentprov_core.backend.containment import ContainmentProvider  # noqa: F401
    from agentprov_core.backend.environments import environment_dir, environment_id  # noqa: F401
    from agentprov_core.backend.executor import (  # noqa: F401
        NODE_LOST,
        Executor,
        ExecutorMeta,
        Launch,
        LocalExecutor,
        Target,
    )
    from agentprov_core.backend.nodes import node_differences, node_facts  # noqa: F401
    from agentprov_core.backend.workerclient import Worker  # noqa: F401
    from agentprov_core.backendproject import (  # noqa: F401
        BackendDataset,
        BackendProject,
        DatasetFile,
    )
    from agentprov_core.base.inputfile import check_json_depth  # noqa: F401
    from agentprov_core.catalogue import (  # noqa: F401
        Attack,
        Catalogue,
        Defence,
        InspectTask,
        Provenance,
        Split,
        Suite,
        TaskParameter,
    )
    from agentprov_core.corpus.staged import carry_session, land_session  # noqa: F401
    from agentprov_core.errors import AgentprovError  # noqa: F401
    from agentprov_core.evidence import aer, capture_view, dojo_mapper  # noqa: F401
    from agentprov_core.evidence.aer import (  # noqa: F401
        AER,
        NOT_RECORDED,
        LiveVsNative,
        ModelCall,
        ToolCall,
        encode,
    )
    from agentprov_core.evidence.capture_view import CaptureView  # noqa: F401
    from agentprov_core.evidence.dojo_mapper import DojoCaptureMapper, Pending  # noqa: F401
    from agentprov_core.hookspecs import hookimpl  # noqa: F401
    from agentprov_core.live.endpoints import EndpointKind  # noqa: F401
    from agentprov_core.live.sse import reply_body  # noqa: F401
    from agentprov_core.mapping import (  # noqa: F401
        CAPTURE_FORMAT,
        ImportCell,
        ImportEvidence,
        ImportRefused,
        LiveEvidence,
        Mapper,
        MapperRef,
    )
    from agentprov_core.registries.defences import DefenceEntry  # noqa: F401
    from agentprov_core.source import (  # noqa: F401
        InspectCellBound,
        InspectSource,
        Restricted,
        Source,
        SourceMeta,
        SuiteSource,
    )
