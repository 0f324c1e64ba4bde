"""The hooks through which agentprov is extended.

agentprov is a small host: benchmark sources, their backend projects, defences, endpoint
kinds, containment providers, executors and evidence mappers are all contributed through
these hooks, by third-party distributions and by the core itself
(``agentprov_core.builtin`` registers the built-in endpoint kinds, containment providers and
the ``local`` executor exactly as a plugin would).

A plugin is a module (or object) registered under the entry-point group ``agentprov``; the
entry point's name is the plugin's name, and for a source plugin, by convention, the name
of the source it adds. Implement a hook by defining a function of the same name decorated
with :data:`agentprov_core.api.hookimpl` (the public plugin API). Every hook returns what it
contributes; the host decides what a duplicate means (the first registered plugin wins, and
the duplicate is reported by ``agentprov plugins``).

The plugin author's guide (docs/plugins.md) walks through a complete source plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.backend.containment import ContainmentProvider
    from agentprov_core.backend.executor import ExecutorMeta
    from agentprov_core.backendproject import BackendProject
    from agentprov_core.live.endpoints import EndpointKind
    from agentprov_core.mapping import Mapper
    from agentprov_core.registries.defences import DefenceEntry
    from agentprov_core.source import Source

hookspec = pluggy.HookspecMarker("agentprov")
#: marks a plugin's hook implementation (also importable as ``agentprov_core.plugins.hookimpl``)
hookimpl = pluggy.HookimplMarker("agentprov")

__all__ = [
    "agentprov_sources",
    "agentprov_backends",
    "agentprov_defences",
    "agentprov_endpoint_kinds",
    "agentprov_containment_providers",
    "agentprov_executors",
    "agentprov_mappers",
    "agentprov_mapper_for",
]


# -------------------------------------------------------------------------------- sources
@hookspec
def agentprov_sources() -> Sequence[Source]:
    """Return the benchmark sources this plugin adds.

    A source is what ``agentprov run SOURCE`` names: a part of ``agentprov info`` with a
    live status, a backend, a catalogue, a plan expansion and its refusal rules. Subclass
    :class:`agentprov_core.source.SuiteSource` for an AgentDojo-shaped benchmark (suites,
    user and injection tasks, attacks) or :class:`agentprov_core.source.InspectSource` for
    an Inspect task; both give the expansion and refusals the specification requires, and
    the contract suite (``agentprov_core.testing.contract``) checks them.

    :returns: a sequence of :class:`agentprov_core.source.Source` objects. A source whose
        name is already registered is ignored and reported as a duplicate.

    .. versionadded:: 0.1
    """


# ------------------------------------------------------------------------------- backends
@hookspec
def agentprov_backends() -> Sequence[BackendProject]:
    """Return the backend projects this distribution ships.

    A backend project is the uv project (``pyproject.toml`` and its ``uv.lock``) that
    ``agentprov backends build NAME`` turns into the environment a source's worker runs in.
    Ship it as package data and name the package and the directory inside it; the host
    finds it with :mod:`importlib.resources`, so a normal (non-editable) install builds it.
    ``agentprov plugins`` lists which distribution contributes each backend, and names a
    project whose directory is missing, whose lock does not match its ``pyproject.toml``,
    or whose name another distribution contributes too; ``backends build`` refuses each.

    :returns: a sequence of :class:`agentprov_core.backendproject.BackendProject`, one per
        backend (its ``name`` is what a source's ``SourceMeta.backend`` names).

    .. versionadded:: 0.1
    """


# ------------------------------------------------------------------------------- defences
@hookspec
def agentprov_defences() -> Sequence[DefenceEntry]:
    """Return defence registry entries.

    The core contributes the entries of the defence registry
    (``backends/shared/src/agentprov_backend/defences.toml``). A plugin may add entries for
    a backend it ships; a name that is already registered is ignored and reported.
    T0 checks every ``--defence`` against the union before any worker starts.

    :returns: a sequence of :class:`agentprov_core.registries.defences.DefenceEntry`.

    .. versionadded:: 0.1
    """


# ------------------------------------------------------------------------------ endpoints
@hookspec
def agentprov_endpoint_kinds() -> Sequence[EndpointKind]:
    """Return the endpoint kinds this plugin can talk to.

    An endpoint kind is a wire protocol and, for a local server, how to recognise it
    (its listing path and fingerprint). ``registry/endpoints.toml`` names endpoints and
    says which kind each one is; the core registers ``openai``, ``anthropic`` and the
    local server kinds (``ollama``, ``omlx``, ``lmstudio``, ``mlx_lm``, ``llamacpp``,
    ``vllm``, and the generic ``openai_compat``, which has no fingerprint) through this
    hook.

    :returns: a sequence of :class:`agentprov_core.live.endpoints.EndpointKind`.

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------- containment
@hookspec
def agentprov_containment_providers() -> Sequence[ContainmentProvider]:
    """Return the containment providers this plugin offers for ``--containment``.

    A provider has a name (the option's value), the platforms it applies to, how it is
    recorded in ``producer.sandbox`` and who vouches for it (a probe or the operator).
    The core registers ``sandbox-exec``, ``dedicated-user`` and ``vm``.

    :returns: a sequence of :class:`agentprov_core.backend.containment.ContainmentProvider`.

    .. versionadded:: 0.1
    """


# ------------------------------------------------------------------------------ executors
@hookspec
def agentprov_executors() -> Sequence[ExecutorMeta]:
    """Return the executors this plugin offers for ``agentprov run --executor NAME``.

    An executor is where a campaign's cells run. T0 gives it the worker's ``run-cell``
    request of each attempt and ingests the session the worker staged, with the rules it
    applies to every session; the executor only runs the cell and returns the worker's
    result (:class:`agentprov_core.backend.executor.Executor`). Evidence, caps, the canary,
    stops and resume stay with T0. The core registers ``local``: one worker subprocess on
    this machine, the default.

    :returns: a sequence of :class:`agentprov_core.backend.executor.ExecutorMeta`; its
        ``start`` (``module:function``) is imported only when a run names the executor,
        and called with a :class:`agentprov_core.backend.executor.Launch`. A name already
        registered is ignored.

    .. versionadded:: 0.1
    """


# -------------------------------------------------------------------------------- mappers
@hookspec
def agentprov_mappers() -> Sequence[Mapper]:
    """Return the mappers this plugin adds: raw evidence in one format to an AER.

    The agentdojo plugin brings the shared capture mapper (``agentdojo.capture``, for
    AgentDojo, AutoDojo and AgentDyn); a plugin that brings a new evidence format (an
    Inspect log, ``inspect.eval``) brings its mapper here. A source names the mapper of its
    live evidence by its ``name`` (``SourceMeta.mapper``); a name already registered is
    ignored and reported as a duplicate. ``agentprov plugins`` and ``agentprov --version``
    list which distribution contributes each mapper.

    :returns: a sequence of :class:`agentprov_core.mapping.Mapper`.

    .. versionadded:: 0.1
    """


@hookspec(firstresult=True)
def agentprov_mapper_for(evidence_format: str) -> Mapper | None:
    """Return the mapper that reads ``evidence_format``, or ``None`` to pass.

    Called with the ``format`` string of a stored piece of raw evidence (for example
    ``capture/0.1``); the first non-``None`` answer wins. The default implementation in
    the core answers from :func:`agentprov_mappers`, with the first registered mapper that
    reads the format. It is asked only for a source that names no mapper.

    :param evidence_format: the evidence's versioned format string.

    .. versionadded:: 0.1
    """
