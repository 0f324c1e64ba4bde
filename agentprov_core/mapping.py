"""Mappers: raw evidence in one versioned format to an AER (the evidence issue adds the
built-in ``agentdojo.capture`` and ``inspect.eval`` mappers)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Mapper(Protocol):
    name: str
    evidence_formats: tuple[str, ...]

    def map(self, evidence: Any) -> Any:  # pragma: no cover - protocol
        ...
