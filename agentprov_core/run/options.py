"""``agentprov run``'s options, parsed once at the command line into one frozen value.

:class:`RunOptions` holds exactly the options of ``agentprov run`` (and ``agentprov
estimate``, which takes the same), each with its type and the value click gives when it is
not given: None, False for a flag, ``()`` for a repeatable option. The command line builds
it (:meth:`RunOptions.from_click`); every later stage reads its attributes, and a stage that
settles a default (a preset's jobs, the sweep's sample) makes a new one with
:func:`msgspec.structs.replace`.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from agentprov_core.live.caps import Caps
from agentprov_core.live.keys import KeySource


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    # what to do
    catalogue: bool = False
    dry_run: bool = False
    plan_json: bool = False
    preflight_only: bool = False
    # corpus
    corpus: str | None = None
    campaign: str | None = None
    # cells
    plan: str | None = None
    suite: tuple[str, ...] = ()
    benchmark_version: str | None = None
    user_tasks: str | None = None
    injection_tasks: str | None = None
    attack: tuple[str, ...] = ()
    benign: str | None = None
    repeats: int | None = None
    defence: str | None = None
    autodojo_cache: str | None = None
    autodojo_variant: int | None = None
    # inspect
    task: str | None = None
    task_param: tuple[str, ...] = ()
    samples: str | None = None
    split: str | None = None
    epochs: int | None = None
    message_limit: int | None = None
    token_limit: int | None = None
    time_limit: int | None = None
    max_connections: int | None = None
    cell_size: int | None = None
    judge: tuple[str, ...] = ()
    # model
    model: str | None = None
    endpoint: str | None = None
    model_id: str | None = None
    llm_script: str | None = None
    model_display_name: str | None = None
    llm_element: str | None = None
    temperature: str | None = None
    temperature_policy: str | None = None
    max_tokens: str | None = None
    reasoning_effort: str | None = None
    base_url: str | None = None
    allow_lan_endpoint: bool = False
    allow_custom_endpoint: bool = False
    allow_text_tool_calls: bool = False
    no_hash_weights: bool = False
    model_dir: str | None = None
    model_size_gb: str | None = None
    active_params_b: str | None = None
    context_tokens: str | None = None
    kv_gb_per_trace: str | None = None
    accept_served_model: tuple[str, ...] = ()
    defence_endpoint: str | None = None
    # keys
    keychain: bool = False
    env_file: str | None = None
    env_stdin: bool = False
    # consent, caps, containment
    i_consent_to_api_costs: bool = False
    i_consent_to_local_run: bool = False
    max_calls: int | None = None
    max_cost_usd: float | None = None
    price_in: float | None = None
    price_out: float | None = None
    containment: str | None = None
    # campaign control and resume
    max_attempts: int | None = None
    retry_inconsistent: bool = False
    allow_mixed_config: bool = False
    canary: int | None = None
    cell_timeout: int | None = None
    executor: str | None = None
    ray_address: str | None = None
    skip_refused_nodes: bool = False
    jobs: int | None = None
    adaptive_jobs: str | None = None
    start_stagger: float | None = None
    preset: str | None = None
    m5ultra: bool = False
    tune_jobs: str | None = None
    tune_out: str | None = None
    keep_staging: bool = False
    limit: int | None = None
    control_file: str | None = None
    allow_network: bool = False

    @classmethod
    def from_click(cls, options: Mapping[str, object]) -> RunOptions:
        """The options click parsed (its types already checked: nothing here refuses)."""
        return msgspec.convert(dict(options), cls)

    def by_name(self) -> Mapping[str, object]:
        """The options as a read-only mapping by option name, for an executor: a plugin
        reads its own options (``ray_address``) by name, not through this struct's
        attributes, so that an executor built against one agentprov reads another's."""
        from types import MappingProxyType

        return MappingProxyType(msgspec.structs.asdict(self))

    @property
    def element(self) -> str:
        """The LLM element (``--llm-element``, else ``native``)."""
        return self.llm_element or "native"

    @property
    def caps(self) -> Caps:
        return Caps(self.max_calls, self.max_cost_usd, self.price_in, self.price_out)

    @property
    def keys(self) -> KeySource:
        """Where a key is read from (``--keychain``, ``--env-file``, ``--env-stdin``)."""
        return KeySource(keychain=self.keychain, env_file=self.env_file,
                         env_stdin=self.env_stdin, scripted=self.llm_script is not None)

    def fact_flags(self) -> dict[str, str | None]:
        """The local model's fact flags (``--model-size-gb`` …) and ``--model-dir``, by
        option name (:func:`agentprov_core.live.local.facts.resolve`)."""
        return {"model_size_gb": self.model_size_gb, "active_params_b": self.active_params_b,
                "context_tokens": self.context_tokens, "kv_gb_per_trace": self.kv_gb_per_trace,
                "model_dir": self.model_dir}

    def asdict(self) -> dict[str, object]:
        return msgspec.structs.asdict(self)
