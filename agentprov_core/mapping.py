"""Mappers: raw evidence in one versioned format to an AER.

A mapper is contributed through the ``agentprov_mappers`` hook and found by evidence format
through ``agentprov_mapper_for`` (the first answer wins), or by name: a source whose
``SourceMeta.mapper`` names one has its live evidence mapped by that mapper
(:func:`mapper_for_source`), since two sources may write the same format (``capture/0.1``)
and need different mappers. The agentdojo plugin brings
``agentdojo.capture`` (capture/0.1 plus the native log, for AgentDojo, AutoDojo and
AgentDyn) and ``agentdojo.results`` (the result files AgentDojo's own runner writes, for
``agentprov import agentdojo``); ``inspect.eval`` reads an Inspect log.

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


@dataclass(frozen=True)
class ImportCell:
    """The unit an imported file records, as a mapper of imported files reads it from the
    file's name and its content (``agentprov import``).

    :param configuration: the configuration the file belongs to, as its directory names it
        (AgentDojo's pipeline directory, ``gpt-4o-2024-08-06-tool_filter``).
    :param model: the configuration's model, as the name records it.
    :param defence: the defence (``none`` when undefended).
    :param suite: the suite.
    :param user_task_id: the user task.
    :param attack: the attack, or ``None`` for a benign cell.
    :param injection_task_id: the injection task, or ``None`` for a benign cell.
    """

    configuration: str
    model: str
    defence: str
    suite: str
    user_task_id: str
    attack: str | None
    injection_task_id: str | None

    @property
    def cell_key(self) -> str:
        """The cell key a live run gives the same cell (``suite/user/attack/injection``)."""
        return (f"{self.suite}/{self.user_task_id}/{self.attack or 'none'}/"
                f"{self.injection_task_id or 'none'}")


class ImportRefused(ValueError):
    """A file an import keeps out of the corpus: ``code`` (one of
    :data:`agentprov_core.errors.IMPORT_FINDINGS`) and ``why`` (the field and what is wrong, never a value that may hold a key)."""

    def __init__(self, code: str, why: str) -> None:
        super().__init__(why)
        self.code = code
        self.why = why


@dataclass(frozen=True)
class ImportEvidence:
    """One imported file, as a mapper of imported files receives it.

    :param data: the bytes stored as raw evidence (the file, with key-shaped strings
        redacted: ``redacted`` says what was replaced).
    :param name: the file's path in the import directory (POSIX, relative).
    :param cell: what :meth:`read` made of it.
    :param attempt: its ledger entry.
    :param manifest: the corpus manifest.
    :param path: where the raw store holds ``data``, relative to the corpus root.
    :param source_sha256: the sha256 of the file as it was read, before redaction.
    :param redacted: what the redaction replaced: the kind of each key shape, counted.
    """

    data: bytes
    name: str
    cell: ImportCell
    attempt: Attempt
    manifest: dict[str, Any]
    path: str
    source_sha256: str
    redacted: dict[str, int] = field(default_factory=dict)


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
    :param imports: the name ``agentprov import NAME`` selects it by, for a mapper of
        imported files (it then also has ``read(parts, data) -> ImportCell``).
    :param target: ``"module:attribute"``, the mapper itself, imported by the first
        :meth:`load` (or :meth:`map`); a mapper there whose name, version or formats differ
        from the reference's is refused (``MapperUnavailable``), so the two cannot drift.
    """

    name: str
    version: str
    evidence_formats: tuple[str, ...]
    target: str
    #: the name ``agentprov import`` knows a mapper of imported files by (``agentdojo``);
    #: ``None`` for a mapper of live evidence
    imports: str | None = None

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


def importer(name: str) -> MapperRef | None:
    """The registered mapper of imported files that ``agentprov import NAME`` selects (its
    reference's ``imports`` is ``name``), or ``None``."""
    from agentprov_core.plugins import manager

    for entry in manager().mappers().values():
        ref = entry.mapper
        if isinstance(ref, MapperRef) and ref.imports == name:
            return ref
    return None


def importers() -> list[str]:
    """The names ``agentprov import`` accepts, sorted."""
    from agentprov_core.plugins import manager

    return sorted(e.mapper.imports for e in manager().mappers().values()
                  if isinstance(e.mapper, MapperRef) and e.mapper.imports)


def mapper_for(evidence_format: str) -> Mapper:
    """The registered mapper for ``evidence_format`` (``capture/0.1``, …)."""
    from agentprov_core.plugins import manager

    m = manager().hook.agentprov_mapper_for(evidence_format=evidence_format)
    if m is None:
        raise MapperUnavailable(f"no mapper reads {evidence_format} (is the plugin that brings "
                                "it installed and enabled? see agentprov plugins)")
    return m
