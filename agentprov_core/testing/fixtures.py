"""A pytest plugin for plugin authors: register a plugin for one test, run the CLI against it.

Name it in a ``conftest.py`` or a test module::

    pytest_plugins = ["agentprov_core.testing.fixtures"]

Fixtures:

``agentprov_plugin``
    A function ``agentprov_plugin(plugin, name=None)`` that registers ``plugin`` (a module
    or object with ``agentprov_*`` hook implementations) into a fresh plugin manager, which
    holds only the core's built-ins and the plugins this test registered; for the rest of
    the test, :func:`agentprov_core.plugins.manager` returns that manager, so in-process
    CLI code sees it. Installed entry points are not loaded. Returns the
    :class:`~agentprov_core.plugins.Plugins`.
``agentprov_cli``
    A function ``agentprov_cli(*args, env=None)`` that runs ``agentprov ARGS`` in-process
    and returns a :class:`CliResult` (exit code, stdout, stderr).
``agentprov_home``
    A private, empty ``$AGENTPROV_HOME`` for the test (a refusal must leave it empty).

Outside pytest, :func:`build_plugins`, :func:`use_plugins` and :func:`run_cli` do the same.

:func:`landed_backends` copies the ``backends/`` tree with every slot (a backend project
this build lacks, :mod:`agentprov_core.backend.slots`) given a placeholder project, for
checks of what a source refuses once its backend lands; :func:`slotted_backends` copies it
with one project made a slot, for checks of what a part whose backend a build lacks says:
point ``AGENTPROV_BACKENDS`` at either.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentprov_core import plugins as plugins_mod
from agentprov_core.plugins import PluginRecord, Plugins

__all__ = ["CliResult", "build_plugins", "register", "run_cli", "use_plugins",
           "agentprov_plugin", "agentprov_cli", "agentprov_home"]


# ----------------------------------------------------------------------- plugin managers
def register(plugins: Plugins, plugin: Any, name: str | None = None, *,
             distribution: str | None = None, version: str | None = None) -> PluginRecord:
    """Register ``plugin`` into ``plugins`` as an entry point named ``name`` would be.

    ``name`` defaults to the name of the one source the plugin adds (the entry-point
    convention), else to the module's or class's name. A misspelled ``agentprov_*`` hook is
    an error here, as it is when the entry point is loaded.
    """
    if name is None:
        name = _default_name(plugin)
    plugins.pm.register(plugin, name=name)
    try:
        plugins.pm.check_pending()
    except Exception:
        plugins.pm.unregister(plugin)
        raise
    rec = PluginRecord(name, distribution, version, "loaded",
                       hooks=sorted(c.name for c in plugins.pm.get_hookcallers(plugin) or ()))
    plugins.records.append(rec)
    plugins._sources = None  # recomputed, with the new plugin, on next use
    plugins._backends = plugins._mappers = None
    plugins.duplicates.clear()
    plugins.misnamed.clear()
    return rec


def _default_name(plugin: Any) -> str:
    hook = getattr(plugin, "agentprov_sources", None)
    if callable(hook):
        names = [s.meta.name for s in hook() or ()]
        if len(names) == 1:
            return names[0]
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def build_plugins(*plugins: Any) -> Plugins:
    """A fresh plugin manager: the core's built-ins and ``plugins``, no entry points."""
    pm = plugins_mod.build(entry_points=[])
    for plugin in plugins:
        register(pm, plugin)
    return pm


@contextmanager
def use_plugins(plugins: Plugins) -> Iterator[Plugins]:
    """Make :func:`agentprov_core.plugins.manager` return ``plugins`` inside the block.

    ``manager`` is a cached function that the CLI looks up on the module each time it is
    needed; the block swaps that attribute and restores the original (and its cache)
    afterwards, so blocks nest.
    """
    original = plugins_mod.manager

    def manager() -> Plugins:
        return plugins

    manager.cache_clear = lambda: None  # type: ignore[attr-defined]
    plugins_mod.manager = manager  # type: ignore[assignment]
    try:
        yield plugins
    finally:
        plugins_mod.manager = original


# ----------------------------------------------------------------------- the CLI in-process
@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as JSON (``--format json``, ``--catalogue``, ``--plan-json``)."""
        return json.loads(self.stdout)

    @property
    def error(self) -> dict[str, Any] | None:
        """The error object printed under ``--error-format json``, else ``None``."""
        lines = self.stderr.strip().splitlines()
        if not lines:
            return None
        try:
            obj = json.loads(lines[-1])
        except ValueError:
            return None
        return obj if isinstance(obj, dict) and "error" in obj else None


@contextmanager
def _environ(env: Mapping[str, str | None] | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in env or {}}
    try:
        for k, v in (env or {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_cli(*args: str | os.PathLike[str], env: Mapping[str, str | None] | None = None
            ) -> CliResult:
    """Run ``agentprov ARGS`` in this process, as ``python -m agentprov_core`` would.

    ``env`` sets (or, with ``None``, removes) environment variables for the call only.
    The plugin manager is whatever :func:`agentprov_core.plugins.manager` returns: the
    installed entry points, or the one of an enclosing :func:`use_plugins`.
    """
    from agentprov_core.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with _environ(env), redirect_stdout(out), redirect_stderr(err):
        try:
            main([str(a) for a in args])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture
def agentprov_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, empty ``$AGENTPROV_HOME``."""
    home = tmp_path / "agentprov-home"
    home.mkdir()
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    return home


@pytest.fixture
def agentprov_plugin() -> Iterator[Callable[..., Plugins]]:
    """``agentprov_plugin(plugin, name=None)``: register ``plugin`` for this test only."""
    plugins = plugins_mod.build(entry_points=[])
    with use_plugins(plugins):

        def add(plugin: Any, name: str | None = None, *, distribution: str | None = None,
                version: str | None = None) -> Plugins:
            register(plugins, plugin, name, distribution=distribution, version=version)
            return plugins

        yield add


@pytest.fixture
def agentprov_cli() -> Callable[..., CliResult]:
    """``agentprov_cli(*args, env=None)``: run the CLI in-process (see :func:`run_cli`)."""
    return run_cli


#: the placeholder project :func:`landed_backends` puts in a slot: enough for T0's checks
#: before the environment (usage, live status, backend and defence refusals); nothing can
#: be built from it
PLACEHOLDER_PYPROJECT = """\
[project]
name = "agentprov-landed-placeholder"
version = "0"
requires-python = ">=3.12"
"""
PLACEHOLDER_LOCK = "version = 1\nrequires-python = \">=3.12\"\n"


def landed_backends(dest: Path) -> Path:
    """A copy of this build's ``backends/`` at ``dest`` in which every slot holds a
    placeholder ``pyproject.toml`` and ``uv.lock`` (and no ``slot.toml``): the tree of a
    build that has added every backend, as far as T0's checks before the environment can
    tell. Returns ``dest``."""
    import shutil

    from agentprov_core.backend.slots import PROJECT_FILES, SLOT_FILE
    from agentprov_core.base import paths

    src = paths.backends_dir()
    if src is None:
        raise RuntimeError("no backends/ directory to copy (set AGENTPROV_BACKENDS)")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    for slot in dest.rglob(SLOT_FILE):
        slot.unlink()
        project = slot.parent
        if not all((project / f).is_file() for f in PROJECT_FILES):
            (project / "pyproject.toml").write_text(PLACEHOLDER_PYPROJECT, encoding="utf-8")
            (project / "uv.lock").write_text(PLACEHOLDER_LOCK, encoding="utf-8")
    return dest


def slotted_backends(dest: Path, name: str, why: str) -> Path:
    """A copy of this build's ``backends/`` at ``dest`` in which the project ``name`` is a
    slot (:mod:`agentprov_core.backend.slots`): its ``pyproject.toml`` and ``uv.lock``
    removed, and a ``slot.toml`` saying ``why``; for checks of what a part whose backend a
    build lacks says. Returns ``dest``."""
    import shutil

    from agentprov_core.backend.slots import PROJECT_FILES, SLOT_FILE, SLOT_FORMAT
    from agentprov_core.base import paths

    src = paths.backends_dir()
    if src is None:
        raise RuntimeError("no backends/ directory to copy (set AGENTPROV_BACKENDS)")
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    for f in PROJECT_FILES:
        (dest / name / f).unlink()
    (dest / name / SLOT_FILE).write_text(f'format = "{SLOT_FORMAT}"\nwhy = {json.dumps(why)}\n',
                                         encoding="utf-8")
    return dest
