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


class DatasetFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One file of a backend's dataset that the build counts."""

    #: its path inside the dataset copy, e.g. ``"benchmark/harmful_behaviors_validation.json"``
    path: str
    #: how many records it must hold (the list under :attr:`BackendDataset.records_key`)
    records: int
    #: the catalogue task and split it is the data of (the worker's catalogue must count
    #: the same), or ``None``
    task: str | None = None
    split: str | None = None


class BackendDataset(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A dataset a backend's tasks read, copied into its environment by
    ``agentprov backends build NAME --dataset DIR`` and never downloaded at run time."""

    #: its name: the environment holds it under ``agentprov/datasets/<name>/``
    name: str
    #: where the pinned dataset is published, e.g. ``"huggingface:org/name"``
    origin: str
    #: the pinned revision
    revision: str
    #: where the copy goes below ``agentprov/datasets/<name>/`` (the task's cache layout)
    target: str
    #: the files copied from ``DIR`` (``**/*.json``: what the task's loader downloads)
    pattern: str = "**/*.json"
    #: the key of each counted file's list of records
    records_key: str = "records"
    #: the files that must be present, with their counts
    files: tuple[DatasetFile, ...] = ()
    #: the revision's published sha256 of each file, when there is one; ``None``: no
    #: per-file digest list is published, so a copy cannot be verified against the revision
    digests: dict[str, str] | None = None


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
    #: lock's digest), else the git commit of the benchmark it builds (the id is the commit's
    #: first 8 hex); a project with :attr:`upstream` names the full 40-hex commit
    pinned_commit: str | None = None
    #: the git URL of the benchmark's repository, for a project that builds the benchmark
    #: from its pinned commit: ``backends build`` ensures the commit in the fetch cache
    #: (``agentprov_core.backend.fetchcache``; ``--source-repo URL``, or ``--allow-network``
    #: from this URL), extracts :attr:`upstream_paths` of it with ``git archive`` into
    #: :attr:`upstream_dir` of a copy of the project outside the checkout, and installs from
    #: there. ``None``: the project's lock names everything it installs
    upstream: str | None = None
    #: the pinned commit's tree id: a commit of another tree is refused (``None``: not checked)
    tree: str | None = None
    #: why the upstream has no URL, for a repository that is not public (then
    #: :attr:`upstream` is ``""``: only ``--source-repo`` provides the commit, and ``agentprov
    #: info`` says so, with whether an environment of it is built), e.g. ``"the AutoDojo fork
    #: is not public"``
    unpublished: str | None = None
    #: tests only: an environment variable whose value, when set, replaces
    #: :attr:`pinned_commit` with a fixture repository's full commit id. The environment is
    #: named from that commit, and its marker and ``agentprov/upstream.json`` name the
    #: variable (``test_override``): it is never taken for the pinned commit
    pin_override: str | None = None
    #: the paths of the commit the build extracts (what building the benchmark's
    #: distribution needs); empty: the whole tree
    upstream_paths: tuple[str, ...] = ()
    #: where in the project the lock's path source of the benchmark points (relative to
    #: the project's directory), filled with the extracted commit at build time
    upstream_dir: str = "upstream"
    #: the upstream's licence as the backend states it (e.g. ``"MIT as declared; not legally
    #: settled"``), recorded with the pin in the environment and in every capture header
    licence: str | None = None
    #: the distribution of the worker package that serves the backend's sources inside the
    #: environment (it registers them under the entry-point group ``agentprov.worker``);
    #: ``backends build`` refuses an environment whose sources another distribution serves,
    #: or none does. ``None``: any distribution may serve them.
    worker: str | None = None
    #: the task files the backend's sources run, as globs below the environment's
    #: ``site-packages`` (e.g. ``"inspect_evals/agentharm/**"``): the marker records the
    #: sha256 of each and ``--offline-check`` re-hashes them
    task_files: tuple[str, ...] = ()
    #: the dataset ``--dataset DIR`` provisions, or ``None`` when the backend takes none
    dataset: BackendDataset | None = None
