"""The parts table of ``agentprov info``: ``registry/parts.toml`` plus the installed plugins."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentprov_core.base import paths, tomlfile
from agentprov_core.errors import AgentprovError

PARTS_FORMAT = "agentprov-parts/0.1"
STATUSES = ("planned", "partial", "full")


class PartEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    label: str
    live_status: str
    caveat: str = ""
    subset: str | None = None
    distribution: str | None = None


def parts_file() -> Path:
    return paths.registry_dir() / "parts.toml"


def load(path: Path | None = None) -> dict[str, PartEntry]:
    path = path or parts_file()
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != PARTS_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{PARTS_FORMAT}"')
    out: dict[str, PartEntry] = {}
    for name, entry in (data.get("parts") or {}).items():
        try:
            part = msgspec.convert(dict(entry, name=name), type=PartEntry)
        except msgspec.ValidationError as exc:
            raise AgentprovError("cli.usage.registry_file",
                                 location=tomlfile.location(path, text, "label", f"parts.{name}"),
                                 what=f"[parts.{name}]: {exc}") from None
        if part.live_status not in STATUSES:
            raise AgentprovError(
                "cli.usage.registry_file",
                location=tomlfile.location(path, text, "live_status", f"parts.{name}"),
                what=f"[parts.{name}].live_status {part.live_status!r} is not one of "
                     + ", ".join(STATUSES))
        out[name] = part
    return out
