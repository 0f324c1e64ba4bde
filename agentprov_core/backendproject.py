"""What a plugin returns from the ``agentprov_backends`` hook: a backend project.

A backend project is the uv project (``pyproject.toml`` and ``uv.lock``) that
``agentprov backends build NAME`` turns into a backend environment, where the worker runs.
A distribution ships it as package data inside one of its packages (found with
:mod:`importlib.resources`); the built-in plugins name a directory of the checkout's
``backends/``. The host finds the directory (``agentprov_core.backend.projects``) and
records which distribution contributed it.
"""

from __future__ import annotations

import msgspec


class BackendProject(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One backend project, as its distribution declares it."""

    #: the backend's name: what ``agentprov backends build`` takes and a source's
    #: ``SourceMeta.backend`` names
    name: str
    #: the project's directory: inside :attr:`package` when it is set (package data), else
    #: relative to the checkout's ``backends/`` directory (``$AGENTPROV_BACKENDS`` overrides
    #: that directory while developing)
    path: str
    #: the importable package whose files hold the project, e.g. ``"mybench_plugin"``
    package: str | None = None
    #: how the backend is pinned: ``None`` by its ``uv.lock`` (the environment id is the
    #: lock's digest), else the git commit of the benchmark it builds (the id is the commit)
    pinned_commit: str | None = None
    #: the distribution of the worker package that serves the backend's sources inside the
    #: environment (it registers them under the entry-point group ``agentprov.worker``);
    #: ``backends build`` refuses an environment whose sources another distribution serves,
    #: or none does. ``None``: any distribution may serve them.
    worker: str | None = None
