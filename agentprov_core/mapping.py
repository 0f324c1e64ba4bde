"""Mappers: raw evidence in one versioned format to an AER.

A mapper is contributed through the ``agentprov_mappers`` hook and found by evidence format
through ``agentprov_mapper_for`` (the first answer wins), or by name: a source whose
``SourceMeta.mapper`` names one has its live evidence mapped by that mapper
(:func:`mapper_for_source`), since two sources may write the same format (``capture/0.1``)
and need different mappers. The agentdojo plugin brings
``agentdojo.capture`` (capture/0.1 plus the native log, for AgentDojo, AutoDojo and
AgentDyn); ``inspect.eval`` reads an Inspect log.

A mapper is pure: it gets the evidence's bytes and the context T0 knows (the ledger entry,
the manifest, where the evidence is stored) and returns an AER. It never reads a clock or
the network, so mapping the same evidence twice gives the same AER. Whatever the evidence
lacks is ``"not recorded"``; a session that failed is mapped all the same (a failed
execution, with its register codes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from agentprov_core.corpus.ledger import Attempt
    from agentprov_core.evidence.aer import AER


@dataclass(frozen=True)
class LiveEvidence:
    """What a live session left, as a mapper of live evidence receives it.

    :param capture: the capture log's bytes (``None`` when it is missing from the store).
    :param native: the native log's bytes, or ``None``.
    :param attempt: the ledger entry of the attempt.
    :param manifest: the corpus manifest (backend, producer, ``test_only``, …).
    :param capture_path: the capture log's path relative to the corpus root.
    :param native_path: the native log's path relative to the corpus root, or ``None``.
    """

    capture: bytes | None
    native: bytes | None
    attempt: Attempt
    manifest: dict[str, Any] = field(default_factory=dict)
    capture_path: str | None = None
    native_path: str | None = None


@runtime_checkable
class Mapper(Protocol):
    """Raw evidence in one of ``evidence_formats`` to an AER.

    ``name`` is what the AER's ``producer.mapper`` records (``agentdojo.capture``);
    ``version`` is the mapping's own version (``producer.mapper_version``): a change in what
    the mapper writes is a new version."""

    name: str
    version: str
    evidence_formats: tuple[str, ...]

    def map(self, evidence: Any) -> AER:  # pragma: no cover - protocol
        ...


#: the evidence format of a live session's wire log (docs/formats/capture-0.1.md)
CAPTURE_FORMAT = "capture/0.1"


@dataclass(frozen=True)
class MapperRef:
    """A mapper named by where it lives, for ``agentprov_mappers`` to return: listing the
    mappers (``info``, ``plugins``, ``--version``) then imports no mapping code.

    :param name: what the mapper's ``name`` is (``producer.mapper``).
    :param version: what its ``version`` is (``producer.mapper_version``).
    :param evidence_formats: the formats it reads.
    :param target: ``"module:attribute"``, the mapper itself, imported by the first
        :meth:`load` (or :meth:`map`); a mapper there whose name, version or formats differ
        from the reference's is refused (``MapperUnavailable``), so the two cannot drift.
    """

    name: str
    version: str
    evidence_formats: tuple[str, ...]
    target: str

    def load(self) -> Mapper:
        mapper = _LOADED.get(self.target)
        if mapper is None:
            import importlib

            module, _, attr = self.target.partition(":")
            mapper = _LOADED[self.target] = getattr(importlib.import_module(module), attr)
        got = (mapper.name, mapper.version, tuple(mapper.evidence_formats))
        if got != (self.name, self.version, tuple(self.evidence_formats)):
            raise MapperUnavailable(
                f"{self.target} is the mapper {got[0]} {got[1]} reading {', '.join(got[2])}; "
                f"its plugin declares {self.name} {self.version} reading "
                f"{', '.join(self.evidence_formats)}")
        return mapper

    def map(self, evidence: Any) -> AER:
        return self.load().map(evidence)


#: the mappers :class:`MapperRef` loaded, by target
_LOADED: dict[str, Any] = {}


class MapperUnavailable(LookupError):
    """No registered mapper reads an evidence format."""


def registered(name: str) -> Mapper | None:
    """The registered mapper called ``name`` (the first plugin that registers it), or
    ``None``."""
    from agentprov_core.plugins import manager

    entry = manager().mappers().get(name)
    return entry.mapper if entry is not None else None


def named_problem(mapper: str | None, evidence_format: str | None = None) -> str | None:
    """Why the mapper called ``mapper`` (the one a source names) cannot map that source's
    evidence (of ``evidence_format``, when given), or ``None`` when it can (or none is
    named)."""
    if mapper is None:
        return None
    m = registered(mapper)
    if m is None:
        from agentprov_core.plugins import manager

        known = ", ".join(manager().mappers()) or "none"
        return f"no installed plugin registers a mapper of that name (registered: {known})"
    formats = tuple(getattr(m, "evidence_formats", ()))
    if evidence_format is not None and evidence_format not in formats:
        return f"it reads {', '.join(formats) or 'no format'}, not {evidence_format}"
    return None


def mapper_for_source(source: str | None, evidence_format: str | None = None) -> Mapper:
    """The mapper of the live evidence (of ``evidence_format``; by default the one the
    source declares, ``SourceMeta.evidence_format``, or capture/0.1 for a source that is not
    installed) of the source ``source`` (the corpus manifest's ``source``): the one its
    ``SourceMeta.mapper`` names, else the first registered mapper that reads the format
    (:func:`mapper_for`). A run, its resumption and the checks before it choose with this
    function, so every execution of a corpus is mapped by the same mapper.

    :raises AgentprovError: ``cli.environment.mapper_missing`` (exit 3) when the named mapper
        is not registered or does not read ``evidence_format``.
    """
    from agentprov_core.plugins import manager

    entry = manager().sources().get(source) if source else None
    name = entry.source.meta.mapper if entry is not None else None
    if evidence_format is None:
        evidence_format = entry.source.meta.evidence_format if entry is not None \
            else CAPTURE_FORMAT
    if name is None:
        return mapper_for(evidence_format)
    why = named_problem(name, evidence_format)
    if why is not None:
        from agentprov_core.errors import AgentprovError

        raise AgentprovError("cli.environment.mapper_missing", source=source, mapper=name,
                             format=evidence_format, why=why,
                             plugin=entry.plugin.origin)
    m = registered(name)
    assert m is not None
    return m


def mapper_for(evidence_format: str) -> Mapper:
    """The registered mapper for ``evidence_format`` (``capture/0.1``, …)."""
    from agentprov_core.plugins import manager

    m = manager().hook.agentprov_mapper_for(evidence_format=evidence_format)
    if m is None:
        raise MapperUnavailable(f"no mapper reads {evidence_format} (is the plugin that brings "
                                "it installed and enabled? see agentprov plugins)")
    return m
