"""Which sources the contract suite checks, and how its failures name them (the source,
the field by its JSON path, the distribution that contributed it).

Shared by the suite's sides (:mod:`agentprov_core.testing.contract` and
:mod:`agentprov_core.testing.contract_worker`); the selection is made once, when the suite
is collected.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import msgspec
import pytest

from agentprov_core.catalogue import Catalogue
from agentprov_core.plan.plandoc import PlanDoc
from agentprov_core.plugins import PluginRecord, SourceEntry, manager
from agentprov_core.source import RunContext, Source, SourceMeta

ENV = "AGENTPROV_CONTRACT_SOURCE"


def req(*rids: str):
    """Mark a check with the R-ids it proves, where the ``req`` marker is registered (as
    in agentprov's own pyproject); elsewhere the check runs unmarked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        try:
            return pytest.mark.req(*rids)
        except pytest.fail.Exception:  # --strict-markers and no such marker
            return lambda f: f


# -------------------------------------------------------------------- which sources
def installed() -> dict[str, SourceEntry]:
    return manager().sources()


def selected() -> list[str]:
    """The named source, else every installed source and every plugin that failed to load
    (by its entry-point name, which by convention is its source's name)."""
    only = os.environ.get(ENV, "").strip()
    if only:
        return [only]
    return sorted(set(installed()) | {r.name for r in manager().failed()})


def where(predicate) -> list[str]:
    """The selected installed sources whose metadata is a SourceMeta and satisfies
    ``predicate`` (a malformed one fails :func:`test_metadata`, and only that)."""
    found = installed()
    out = []
    for n in selected():
        meta = getattr(found[n].source, "meta", None) if n in found else None
        if isinstance(meta, SourceMeta) and predicate(meta):
            out.append(n)
    return out


SELECTED = selected()
INSTALLED = [n for n in SELECTED if n in installed()]
WITH_BACKEND = where(lambda m: m.backend is not None)
SUITES = where(lambda m: m.backend is not None and m.kind == "suites")
INSPECT = where(lambda m: m.backend is not None and m.kind == "inspect")
NO_BACKEND = where(lambda m: m.backend is None)


def entry(name: str) -> SourceEntry:
    found = installed().get(name)
    if found is None:
        pytest.fail(not_installed(name))
    return found


def source(name: str) -> Source:
    return entry(name).source


def not_installed(name: str) -> str:
    plugins = manager()
    plugins.sources()  # records a plugin whose entry point is not named as its source
    rec = plugins.record(name) or plugins.misnamed.get(name)
    if rec is not None and rec.status == "failed":
        return (f"source {name!r}: its plugin {rec.distribution} {rec.version} failed to load: "
                f"{rec.error}")
    if rec is not None:
        return f"source {name!r}: its plugin is {rec.status} (AGENTPROV_* variables)"
    return (f"source {name!r} is not installed; installed sources: "
            + (", ".join(sorted(installed())) or "none"))


# ------------------------------------------------------------------ plans and cells
def plan(name: str, **fields: Any) -> PlanDoc:
    return msgspec.convert(dict(fields, backend=name), type=PlanDoc)


def expand(src: Source, doc: PlanDoc, cat: Catalogue) -> list[Any]:
    """The source's cells for ``doc``, checked to be a list of :class:`Cell`."""
    from agentprov_core.plan.plans import Cell

    cells = src.expand(doc, cat, RunContext())
    name = src.meta.name
    assert isinstance(cells, list), (
        f"source {name!r}: expand() returned a {type(cells).__name__}, not a list of Cell")
    for i, c in enumerate(cells):
        assert isinstance(c, Cell), (
            f"source {name!r}: expand()[{i}] is a {type(c).__name__}, not a "
            "agentprov_core.plan.plans.Cell")
    return cells


# ------------------------------------------------------------------------ naming
def converted(doc: Any, type_: type, what: str) -> Any:
    """``doc`` converted to ``type_``, or a failure naming ``what`` and the JSON path of the
    first field that does not convert (msgspec's ``at $.suites[0].name``)."""
    try:
        return msgspec.convert(doc, type=type_)
    except msgspec.ValidationError as exc:
        pytest.fail(f"{what}: {exc}", pytrace=False)


def revalidated(value: Any, type_: type, what: str) -> Any:
    """A struct the plugin built (msgspec does not check types on construction) checked
    field by field: it must be a ``type_`` and survive conversion from its builtins."""
    assert type(value) is type_, (
        f"{what} is a {type(value).__name__}, not a {type_.__module__}.{type_.__name__}")
    try:
        builtins = msgspec.to_builtins(value)
    except TypeError as exc:
        pytest.fail(f"{what} holds a value that is not JSON data: {exc}", pytrace=False)
    return converted(builtins, type_, what)



def origin(rec: PluginRecord) -> str:
    """The contributing distribution, as the failures name it."""
    return f"{rec.distribution} {rec.version}" if rec.distribution else f"plugin {rec.name}"
