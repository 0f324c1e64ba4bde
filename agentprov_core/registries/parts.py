"""The parts table of ``agentprov info``: ``registry/parts.toml`` plus the installed plugins."""

from __future__ import annotations

from pathlib import Path

import msgspec

from agentprov_core.base import paths, tomlfile
from agentprov_core.errors import AgentprovError
from agentprov_core.registries import fields
from agentprov_core.registries import overlay as overlaymod

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


def _status(value) -> str | None:
    return None if value in STATUSES else "use one of " + ", ".join(STATUSES)


def read_file(path: Path) -> tuple[dict[str, PartEntry], str]:
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != PARTS_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{PARTS_FORMAT}"')
    fields.check_top(path, text, data, ["format", "parts"], "the parts registry")
    out: dict[str, PartEntry] = {}
    for name, entry in (data.get("parts") or {}).items():
        table = f"parts.{name}"
        part = fields.convert(path, text, table, entry, PartEntry, "a part", name=name)
        problem = _status(part.live_status)
        if problem:
            raise fields.refuse(path, text, table, "live_status",
                                f"is {part.live_status!r}", problem)
        out[name] = part
    return out, text


def check_names(path: Path, text: str, parts: dict[str, PartEntry], sources: set[str],
                provided: dict[str, list[str]]) -> None:
    """Every part names a source: an installed one, or one of a distribution that is not
    installed (``info`` says to install it).

    :param sources: the installed sources.
    :param provided: the sources of each distribution whose plugin is loaded."""
    for name, part in parts.items():
        if name in sources:
            continue
        dist = part.distribution
        if dist is not None and dist not in provided:
            continue  # not installed: nothing to check the name against
        if dist is not None:
            what = f"is not a source of {dist}"
            fix = "rename the table to one of its sources: " + (
                ", ".join(sorted(provided[dist])) or "none")
        else:
            what = "is not an installed source and names no distribution"
            fix = ("rename the table to one of " + (", ".join(sorted(sources)) or "none")
                   + ', or add distribution = "…" (the plugin that provides it)')
        raise fields.refuse(path, text, f"parts.{name}", None, what, fix)


def load(path: Path | None = None, overlay: Path | None = None,
         installed: dict[str, PartEntry] | None = None) -> dict[str, PartEntry]:
    """The parts, each checked, with the overlay's live statuses when ``path`` is the
    default (``$AGENTPROV_HOME/registry/parts.toml``, :mod:`.overlay`).

    :param installed: the parts of installed sources (their plugin's label, live status and
        caveat, :func:`agentprov_core.plugins.parts`), for those the file does not hold:
        the overlay may set their live status too."""
    if path is None:
        path = parts_file()
        overlay = overlay or overlaymod.path_of(path)
    out, _ = read_file(path)
    out |= {n: p for n, p in (installed or {}).items() if n not in out}
    if overlay is not None:
        for name, status in read_overlay(overlay, None, out).items():
            out[name] = msgspec.structs.replace(out[name], live_status=status)
    return out


def read_overlay(overlay: Path, text: str | None, parts: dict[str, PartEntry]) -> dict[str, str]:
    return overlaymod.read(overlay, text, PARTS_FORMAT, "parts", "live_status", list(parts),
                           _status)
