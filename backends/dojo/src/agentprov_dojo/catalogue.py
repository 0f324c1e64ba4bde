"""The catalogue of an AgentDojo-shaped backend, read from the installed ``agentdojo``.

Everything in it is read from the installed package (agentdojo's suite and attack
registries, its CLI default, the tool schemas its OpenAI element sends) and from the defence
registry shipped with the worker library; nothing is hard-coded except the per-source
policy a worker package states in its :class:`SourceProfile` (which attacks the backend
refuses and which options an attack needs). Backends built on forks of agentdojo 0.1.35
(same import package, same registries) reuse it with their own profile.

The benchmark package is imported only inside functions, so importing this module is cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentprov_backend.catalogue import (
    FORMAT,
    CatalogueError,
    load_defences,
    package_versions,
    task_sort_key,
)

GENERATOR = "python -m agentprov_backend.catalogue {source}"
SNAPSHOT_NOTE = "generated from the installed package by scripts/snapshot_catalogue.py"

# A pipeline name that contains no key of agentdojo's MODEL_NAMES: loading an attack that
# addresses the model by name fails with it (checked at run time, see _probe_names_model).
_UNKNOWN_PIPELINE_NAME = "agentprov-catalogue-probe"


@dataclass(frozen=True)
class SourceProfile:
    """Per-source policy that the installed package cannot tell us.

    ``distribution`` is the distribution whose version is the benchmark's version (forks of
    agentdojo install as ``agentdojo`` too). ``refused`` maps an attack name to the reason the
    backend refuses it; ``attack_needs`` maps an attack name to the options it needs;
    ``declared`` is the backend's own declared instrumentation.
    """

    name: str
    backend: str
    distribution: str = "agentdojo"
    provenance_packages: tuple[str, ...] = ("agentdojo", "openai", "pydantic")
    refused: dict[str, str] = field(default_factory=dict)
    attack_needs: dict[str, list[str]] = field(default_factory=dict)
    #: the backend's own behaviour declared in every cell's capture header, after the
    #: harness's items (``name@version detail``): what the benchmark's code does on the wire
    #: or to the tools that a reader must know (a fork's differences from stock AgentDojo)
    declared: tuple[str, ...] = ()


def tool_definitions_bytes(tools: list[Any]) -> int:
    """Bytes of a suite's tool definitions as the model receives them.

    The ``tools`` array of agentdojo's OpenAI element (``_function_to_openai``: type
    "function", name, description, the pydantic JSON schema of the parameters), serialised
    as compact JSON (separators ``,`` and ``:``, UTF-8), as httpx puts it on the wire.
    """
    try:
        from agentdojo.agent_pipeline.llms.openai_llm import _function_to_openai
    except ImportError:  # a fork without the private helper: the same shape, built here

        def _function_to_openai(f: Any) -> dict[str, Any]:
            return {
                "type": "function",
                "function": {
                    "name": f.name,
                    "description": f.description,
                    "parameters": f.parameters.model_json_schema(),
                },
            }

    payload = [_function_to_openai(f) for f in tools]
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _default_benchmark_version(versions: list[str]) -> str:
    """The default of agentdojo's own CLI (``--benchmark-version``)."""
    from agentdojo.scripts.benchmark import main as benchmark_cli

    for param in benchmark_cli.params:
        if param.name == "benchmark_version":
            default = param.default
            if default not in versions:
                raise CatalogueError(
                    f"CLI default benchmark version {default!r} is not registered: {versions}"
                )
            return default
    raise CatalogueError("agentdojo's CLI has no --benchmark-version option")


def _probe_pipeline(name: str) -> Any:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement

    class _CatalogueProbe(BasePipelineElement):
        def query(self, query, runtime, env=None, messages=(), extra_args=None):  # pragma: no cover
            raise RuntimeError("the catalogue probe pipeline never runs")

    probe = _CatalogueProbe()
    probe.name = name
    return probe


def _probe_names_model(attack_name: str, suite: Any) -> bool:
    """True when the attack addresses the model by name.

    Such an attack loads for a pipeline named after a stock model and fails (ValueError from
    get_model_name_from_pipeline) for a pipeline whose name matches no MODEL_NAMES key.
    """
    from agentdojo.attacks.attack_registry import load_attack
    from agentdojo.models import MODEL_NAMES

    if any(key in _UNKNOWN_PIPELINE_NAME for key in MODEL_NAMES):
        raise CatalogueError(f"probe name {_UNKNOWN_PIPELINE_NAME!r} matches a MODEL_NAMES key")
    stock = "local" if "local" in MODEL_NAMES else next(iter(MODEL_NAMES))
    try:
        load_attack(attack_name, suite, _probe_pipeline(_UNKNOWN_PIPELINE_NAME))
    except ValueError as unknown_error:
        try:
            load_attack(attack_name, suite, _probe_pipeline(stock))
        except Exception as stock_error:
            raise CatalogueError(
                f"attack {attack_name!r} loads neither for an unknown model ({unknown_error}) "
                f"nor for the stock model {stock!r} ({stock_error})"
            ) from stock_error
        return True
    return False


def agentdojo_shaped_catalogue(source: str, profile: SourceProfile) -> dict[str, Any]:
    """The catalogue of an agentdojo-shaped backend, read from the installed ``agentdojo``."""
    from agentdojo.attacks.attack_registry import ATTACKS
    from agentdojo.task_suite.load_suites import _SUITES, get_suites

    versions = list(_SUITES.keys())
    default_version = _default_benchmark_version(versions)

    suites = []
    for version in versions:
        for name, suite in get_suites(version).items():
            suites.append(
                {
                    "name": name,
                    "benchmark_version": version,
                    "user_tasks": sorted(suite.user_tasks, key=task_sort_key),
                    "injection_tasks": sorted(suite.injection_tasks, key=task_sort_key),
                    "tools": len(suite.tools),
                    "tool_definitions_bytes": tool_definitions_bytes(list(suite.tools)),
                }
            )

    unknown = sorted((set(profile.refused) | set(profile.attack_needs)) - set(ATTACKS))
    if unknown:
        raise CatalogueError(f"profile {source!r} names attacks that are not registered: {unknown}")
    probe_suite = next(iter(get_suites(default_version).values()))
    attacks = []
    for name in sorted(ATTACKS):
        cls = ATTACKS[name]
        attacks.append(
            {
                "name": name,
                "dos": bool(getattr(cls, "is_dos_attack", False)),
                "refused": name in profile.refused,
                "refused_reason": profile.refused.get(name),
                "needs": list(profile.attack_needs.get(name, [])),
                "names_model": _probe_names_model(name, probe_suite),
            }
        )

    return {
        "format": FORMAT,
        "source": source,
        "backend": profile.backend,
        "provenance": {
            "kind": "snapshot",
            "packages": package_versions(profile.provenance_packages),
            "generator": GENERATOR.format(source=source),
            "note": SNAPSHOT_NOTE,
        },
        "benchmark_versions": versions,
        "default_benchmark_version": default_version,
        "suites": suites,
        "attacks": attacks,
        "defences": load_defences(),
        "tasks": [],
    }
