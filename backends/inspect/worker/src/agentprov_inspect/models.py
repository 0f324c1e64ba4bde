"""The Inspect models a cell and the preflight probe call: Inspect's OpenAI-compatible
provider (``openai-api/agentprov/<model>``) at the agent's base URL and key, over the
recording transport, so that every wire attempt is written to the session's capture log
before it leaves. Inspect retries once, the SDK never (``max_retries=0`` on the client).
"""

from __future__ import annotations

import os
from typing import Any

#: the provider's service name: ``openai-api/<service>/<model>``
SERVICE = "agentprov"


def api_key(agent: dict[str, Any]) -> str:
    """The agent's key from the variable ``agent["key_env"]`` names (T0 puts it in the
    worker's environment, never in argv or a file); a placeholder for a scripted or
    keyless endpoint."""
    key = os.environ.get(agent["key_env"]) if agent.get("key_env") else None
    return key or ("agentprov-scripted" if agent.get("scripted") else "agentprov-no-key")


def recording_model(model_id: str, agent: dict[str, Any], writer: Any,
                    role: str | None = None) -> Any:
    """An Inspect ``Model`` for ``model_id`` at the agent's endpoint, over the recording
    transport: Inspect retries once, the SDK never. A judge's ``role`` (``get_model``'s
    own argument) is stamped on each of its model events and on its usage in the log."""
    import openai
    from agentprov_backend.recording import shared_tls_context, wrap_async_client
    from inspect_ai.model import GenerateConfig, get_model

    kwargs: dict[str, Any] = {}
    if shared_tls_context() is not None:
        kwargs["verify"] = shared_tls_context()
    http_client = wrap_async_client(openai.DefaultAsyncHttpxClient(**kwargs), writer)
    return get_model(f"openai-api/{SERVICE}/{model_id}", base_url=agent["base_url"],
                     api_key=api_key(agent), config=GenerateConfig(max_retries=1),
                     memoize=False, role=role, http_client=http_client, max_retries=0)
