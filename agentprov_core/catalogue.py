"""A backend's catalogue: its suites and tasks, attacks, defences and versions.

``agentprov run SOURCE --catalogue`` prints one :class:`Catalogue` as JSON. Until a backend's
worker serves its catalogue, a source plugin serves a committed snapshot: ``provenance.kind``
says which (``snapshot`` generated from the real package by a script in the repository,
``declared`` copied from the specification's declared counts and not verified, or
``worker`` served live by the backend environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec

FORMAT = "agentprov-catalogue/0.1"


class Provenance(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Literal["snapshot", "declared", "worker"]
    packages: dict[str, str] = {}
    generator: str | None = None
    note: str = ""


class Suite(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    benchmark_version: str
    user_tasks: list[str]
    injection_tasks: list[str]
    tools: int | None = None
    tool_definitions_bytes: int | None = None


class Attack(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    dos: bool = False
    refused: bool = False
    refused_reason: str | None = None
    needs: list[str] = []
    names_model: bool = False


class Defence(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    enabled: bool
    summary: str = ""
    backends: list[str] = []
    suites: list[str] | None = None
    assets: list[str] = []
    #: it calls a model of its own, named with ``--defence-endpoint``
    endpoint: bool = False
    needs: list[str] = []
    replaces_pipeline: bool = False
    port: bool = False
    licence: str | None = None


class Split(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    samples: int
    #: the split's sample ids in dataset order, when the catalogue lists them: an explicit
    #: ``--samples ID,…`` naming another is refused at step 1 (None: the worker's plan
    #: check is the first to see the dataset)
    sample_ids: list[str] | None = None


class TaskParameter(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    type: Literal["str", "bool", "int"]
    choices: list[str] | None = None
    minimum: int | None = None
    maximum: int | None = None
    default: str | bool | int | None = None


class InspectTask(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    splits: list[Split]
    default_split: str
    parameters: list[TaskParameter] = []
    fixed: dict[str, str | int | float] = {}
    judge_roles: list[str] = []


class Catalogue(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    format: str
    source: str
    backend: str
    provenance: Provenance
    benchmark_versions: list[str] = []
    default_benchmark_version: str | None = None
    suites: list[Suite] = []
    attacks: list[Attack] = []
    defences: list[Defence] = []
    tasks: list[InspectTask] = []

    # ---- views used by planning
    def suites_of(self, version: str) -> list[Suite]:
        return [s for s in self.suites if s.benchmark_version == version]

    def suite(self, version: str, name: str) -> Suite | None:
        for s in self.suites:
            if s.benchmark_version == version and s.name == name:
                return s
        return None

    def attack(self, name: str) -> Attack | None:
        for a in self.attacks:
            if a.name == name:
                return a
        return None

    def task(self, name: str) -> InspectTask | None:
        for t in self.tasks:
            if t.name == name:
                return t
        return None


def load(path: Path) -> Catalogue:
    """The catalogue in ``path``; :class:`CatalogueProblems` listing every bad field (not
    the first only) when it is JSON that is not a catalogue."""
    data = path.read_bytes()
    try:
        return msgspec.json.decode(data, type=Catalogue)
    except msgspec.ValidationError:
        found = problems(msgspec.json.decode(data), Catalogue, "$")
        raise CatalogueProblems(found) from None


class CatalogueProblems(msgspec.ValidationError):
    """Every field of a catalogue document that does not fit the format, each as
    ``what - at `$.path```, as msgspec words them."""

    def __init__(self, found: list[str]) -> None:
        super().__init__("; ".join(found))
        self.problems = found


def problems(doc: object, kind: object, at: str) -> list[str]:
    """What is wrong with ``doc`` as a ``kind`` (a struct of this module, a list of one, or
    any type msgspec converts), every field and list item on its own."""
    import typing

    try:
        msgspec.convert(doc, type=kind)
        return []
    except msgspec.ValidationError as exc:
        text = str(exc)
        first = text.replace("`$", f"`{at}", 1) if " - at `$" in text else \
            f"{text} - at `{at}`"
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct) and isinstance(doc, dict):
        out = []
        fields = {f.encode_name: f for f in msgspec.structs.fields(kind)}
        out += [f"Object contains unknown field `{k}` - at `{at}`" for k in doc
                if k not in fields]
        for name, f in fields.items():
            if name in doc:
                out += problems(doc[name], f.type, f"{at}.{name}")
            elif f.required:
                out.append(f"Object missing required field `{name}` - at `{at}`")
        return out or [first]
    if typing.get_origin(kind) is list and isinstance(doc, list):
        (item,) = typing.get_args(kind)
        return [p for i, x in enumerate(doc) for p in problems(x, item, f"{at}[{i}]")] or \
            [first]
    return [first]


def dumps(cat: Catalogue) -> str:
    """Canonical pretty JSON: sorted keys, one-space indent, trailing newline."""
    import json

    return json.dumps(msgspec.to_builtins(cat), sort_keys=True, indent=1, ensure_ascii=False) + "\n"
