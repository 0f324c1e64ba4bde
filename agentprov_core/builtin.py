"""The core's own contributions, registered through the same hooks a plugin uses."""

from __future__ import annotations

from agentprov_core.hookspecs import hookimpl
from agentprov_core.live.endpoints import EndpointKind

NAME = "agentprov.builtin"


@hookimpl
def agentprov_defences():
    from agentprov_core.registries.defences import load_registry

    return load_registry()


@hookimpl
def agentprov_endpoint_kinds():
    local = [
        ("ollama", "/api/tags", "Ollama"), ("omlx", "/v1/models", "oMLX"),
        ("lmstudio", "/api/v0/models", "LM Studio"), ("mlx_lm", "/v1/models", "mlx_lm.server"),
        ("llamacpp", "/props", "llama.cpp server"), ("vllm", "/version", "vLLM"),
    ]
    return [
        EndpointKind(name="openai", wire="openai", summary="an OpenAI-style chat API"),
        EndpointKind(name="anthropic", wire="anthropic", summary="Anthropic's Messages API"),
        *[EndpointKind(name=n, wire="openai", local=True, listing_path=p, fingerprint=f,
                       summary=f"a {f} server on loopback") for n, p, f in local],
        EndpointKind(name="openai_compat", wire="openai", local=True,
                     listing_path="/v1/models",
                     summary="any OpenAI-compatible server on loopback (kind not verified)"),
    ]


@hookimpl
def agentprov_containment_providers():
    from agentprov_core.backend.containment import builtin_providers

    return builtin_providers()


@hookimpl
def agentprov_executors():
    from agentprov_core.backend.executor import ExecutorMeta

    return [ExecutorMeta(name="local", start="agentprov_core.backend.executor:LocalExecutor",
                         summary="one worker subprocess on this machine")]


@hookimpl
def agentprov_mapper_for(evidence_format):
    from agentprov_core.plugins import manager

    for entry in manager().mappers().values():  # registration order: the first one wins
        if evidence_format in getattr(entry.mapper, "evidence_formats", ()):
            return entry.mapper
    return None
