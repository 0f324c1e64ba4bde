"""Containment providers: what ``--containment`` may name and how it is recorded."""

from __future__ import annotations

import sys
from typing import Literal

import msgspec


class ContainmentProvider(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A way to confine the worker. ``declared_by`` says who vouches for it: ``probe``
    (enforced, accepted only with a passed build-time probe) or ``operator`` (declared,
    recorded, not checked)."""

    name: str
    recorded_as: str
    platforms: tuple[str, ...]
    declared_by: Literal["probe", "operator"]
    summary: str = ""

    def applies_here(self, platform: str | None = None) -> bool:
        platform = platform or sys.platform
        return "any" in self.platforms or platform in self.platforms
