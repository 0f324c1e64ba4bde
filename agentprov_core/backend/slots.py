"""Whether a source's backend can be built in this build, and if not, why.

A backend is built from its uv project under ``backends/`` (``pyproject.toml`` and the
committed ``uv.lock``). A project directory that holds neither is a *slot*: the place where
a later build puts the project, with a ``README.md`` and a ``slot.toml`` saying why this
build has none (``why = "…"``). The answer is read from the files, so it turns true by
itself when a build adds the project; ``agentprov info``, ``agentprov run`` and
``agentprov backends build`` all ask here.

When no ``backends/`` directory is at hand (agentprov installed without its checkout, and
no ``AGENTPROV_BACKENDS``), nothing is judged: the build command names that case itself.
"""

from __future__ import annotations

from pathlib import Path

from agentprov_core.backend import projects
from agentprov_core.base import paths, tomlfile
from agentprov_core.errors import AgentprovError
from agentprov_core.source import SourceMeta

#: what a backend project holds before it can be built
PROJECT_FILES = ("pyproject.toml", "uv.lock")
SLOT_FILE = "slot.toml"
SLOT_FORMAT = "agentprov-backend-slot/0.1"


def slot_why(project: Path) -> str | None:
    """The ``why`` of the slot file in ``project``, or None when it has none."""
    path = project / SLOT_FILE
    if not path.is_file():
        return None
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    if data.get("format") != SLOT_FORMAT:
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "format"),
                             what=f'format must be "{SLOT_FORMAT}"')
    why = data.get("why")
    if not isinstance(why, str) or not why.strip():
        raise AgentprovError("cli.usage.registry_file",
                             location=tomlfile.location(path, text, "why"),
                             what="why must be a non-empty string: why this build has no "
                                  "project here")
    return why.strip()


def project_dir(meta: SourceMeta) -> Path | None:
    """The directory of the backend project contributed for ``meta``'s backend (the
    ``agentprov_backends`` hook), or None when none is contributed, its directory cannot be
    known here, or two distributions contribute it (the build names that refusal)."""
    if meta.backend is None:
        return None
    try:
        loc = projects.locate(meta.backend)
    except AgentprovError:
        return None
    return loc.directory if loc is not None else None


def unbuildable(meta: SourceMeta) -> str | None:
    """Why the backend of ``meta`` cannot be built in this build, or None when it can, or
    when nothing here can tell: no project contributed, or its directory missing (the
    environment check and the build say what is missing, exit 3). A source
    without a backend is :func:`agentprov_core.run.prepare.gate_capability`'s case."""
    return unbuildable_at(project_dir(meta))


def unbuildable_at(project: Path | None) -> str | None:
    """Why the backend project at ``project`` cannot be built, or None (see
    :func:`unbuildable`); for a caller that has located the project already."""
    if project is None or not project.is_dir():  # a missing project: the build refuses it
        return None
    missing = [f for f in PROJECT_FILES if not (project / f).is_file()]
    if not missing:
        return None
    where = paths.display(project)
    what = f"{where}/ holds no {' and no '.join(missing)}"
    why = slot_why(project)
    return f"{why}, so {what}" if why else what
