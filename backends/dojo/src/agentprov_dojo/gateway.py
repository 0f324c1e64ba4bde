"""``gateway_compat`` (D-829): AgentDojo's OpenAI element as the AgentDojo-PROV baseline's
request path sent it to an OpenAI-compatible gateway, for runs against a local model server.

It differs from the stock ``OpenAILLM`` in two ways, both declared in the capture header:

- **retries**: the SDK's own retries are off (``max_retries=0``) and tenacity's are not
  used; a connection error or a timeout (``openai.APIConnectionError``, of which
  ``APITimeoutError`` is one) is asked again after a wait drawn uniformly from 10 to 20 s,
  up to 8 attempts in all. Any other error (an HTTP status, a reply that does not parse)
  is raised at once. Each attempt is one wire attempt of the same model call, recorded by
  the recording transport and linked to the call's first attempt.
- **roles**: the system message goes out as role ``system``, not the stock ``developer``
  (which llama.cpp's, LM Studio's and older vLLM chat templates do not know: they reject
  it or drop it). Every other message is built by AgentDojo's own converters.

A request timeout the configuration holds (``params.timeout_s``) is sent with every
attempt; without one the SDK's own timeout applies. The temperature and the reasoning
effort are sent as the stock element sends them (a temperature of 0 is dropped).
"""

from __future__ import annotations

import random
import time
from typing import Any

NAME = "GatewayCompatLLM"
ATTEMPTS = 8
WAIT_S = (10.0, 20.0)
#: what the capture header declares instead of ``http_backoff@1 policy: stock_sdk``
DECLARED = [
    f"http_backoff@1 policy: gateway_compat (connection and timeout errors, up to {ATTEMPTS} "
    f"attempts, {WAIT_S[0]:g}-{WAIT_S[1]:g} s apart; no SDK retries)",
    # it changes what the stock element would send: flagged request-modifying in the AER
    "role_rewrite@1 mode: modify (the system message is sent as role system, not developer)",
]
#: the roles the element rewrites, as sent by AgentDojo's converter -> as sent here
ROLES = {"developer": "system"}


def rewrite_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each role of :data:`ROLES` rewritten (copies; the rest as given)."""
    return [dict(m, role=ROLES[m["role"]]) if m.get("role") in ROLES else m for m in messages]


def element_class():
    """The element: a subclass of AgentDojo's ``OpenAILLM`` (so a defence that reads its
    client, model or temperature sees the stock attributes), built on AgentDojo's private
    converters of the installed version."""
    import openai
    from agentdojo.agent_pipeline.llms import openai_llm as stock
    from openai._types import NOT_GIVEN

    class GatewayCompatLLM(stock.OpenAILLM):
        def __init__(self, client, model: str, *, timeout_s: float | None = None,
                     sleep=time.sleep, **kwargs: Any) -> None:
            super().__init__(client, model, **kwargs)
            self.timeout_s = timeout_s
            self.attempts = ATTEMPTS  # the preflight probe sends one attempt only
            self._sleep = sleep

        def _create(self, messages, tools):
            extra = {"timeout": self.timeout_s} if self.timeout_s is not None else {}
            for attempt in range(1, self.attempts + 1):
                try:
                    return self.client.chat.completions.create(
                        model=self.model, messages=messages, tools=tools or NOT_GIVEN,
                        tool_choice="auto" if tools else NOT_GIVEN,
                        temperature=self.temperature or NOT_GIVEN,
                        reasoning_effort=self.reasoning_effort or NOT_GIVEN, **extra)
                except openai.APIConnectionError:  # a timeout is one too
                    if attempt == self.attempts:
                        raise
                    self._sleep(random.uniform(*WAIT_S))
            raise AssertionError("unreachable")  # pragma: no cover

        def query(self, query, runtime, env=None, messages=(), extra_args=None):
            env = stock.EmptyEnv() if env is None else env
            extra_args = {} if extra_args is None else extra_args
            sent = rewrite_roles([stock._message_to_openai(m, self.model) for m in messages])
            tools = [stock._function_to_openai(t) for t in runtime.functions.values()]
            completion = self._create(sent, tools)
            output = stock._openai_to_assistant_message(completion.choices[0].message)
            return query, runtime, env, [*messages, output], extra_args

    GatewayCompatLLM.__name__ = GatewayCompatLLM.__qualname__ = NAME
    return GatewayCompatLLM
