"""What the app knows about a local model (D-828): the weights' size, the active
parameters, the context length and the KV cache of one trace, each with where it came from.

Per fact, the first that has it: the run's flag (``source=flag``), the setting
``local_models.<endpoint>.<model id>.<fact>`` (``source=settings``), the model's folder
given with ``--model-dir`` (``source=folder``), then the preset (:func:`from_preset`).

From the folder: ``size_gb`` is the weight files' total size (the ``*.safetensors``, else the
``*.gguf`` shards including oMLX's ``split/`` folder, as the identity record lists them),
in GB of 10^9 bytes; from ``config.json`` (a nested ``text_config`` is read too), the context
length (``max_position_embeddings``), the KV cache of one trace at that length (keys and
values of every layer at 2 bytes an element: 2 x layers x KV heads x head size x tokens x
2 bytes) and the active parameters of a Llama-style decoder (embeddings, attention, the MLP
or, for a mixture of experts, the experts routed per token and the shared one). A folder
that does not state a fact leaves it to the next source.

Nothing here contacts a server; reading a folder reads ``config.json`` and the weight
files' sizes only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: fact -> its run flag (the option name of ``agentprov run``)
FLAGS = {"size_gb": "--model-size-gb", "active_params_b": "--active-params-b",
         "context_tokens": "--context-tokens", "kv_gb_per_trace": "--kv-gb-per-trace"}
OPTION = {fact: flag[2:].replace("-", "_") for fact, flag in FLAGS.items()}


@dataclass(frozen=True)
class Fact:
    value: float | int | None
    source: str  # flag | settings | folder | preset | none
    detail: str = ""

    def line(self, name: str) -> str:
        if self.value is None:
            return f"{name} unknown ({self.detail})"
        shown = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        return f"{name}={shown} (source={self.source}" + (f": {self.detail})" if self.detail
                                                           else ")")


def flag_values(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The facts the run's flags give (``flags``: the fact flags' values by option name),
    checked as their settings are (exit 2 naming the flag)."""
    from agentprov_core import settings
    from agentprov_core.errors import AgentprovError

    out: dict[str, Any] = {}
    for fact, flag in FLAGS.items():
        raw = flags.get(OPTION[fact])
        if raw is None:
            continue
        key = settings.Key(("local_models", "-", "-", fact))
        try:
            out[fact] = settings.parse_value(key, str(raw))
        except AgentprovError as exc:
            raise AgentprovError("cli.usage.option_value", option=flag, value=str(raw),
                                 what=f"it must be {exc.params['what']}") from None
    return out


def check_flags(flags: Mapping[str, Any], scripted: bool, endpoint: Any) -> None:
    """Step 1: the fact flags are checked, and belong to a local endpoint (exit 2)."""
    from agentprov_core.errors import AgentprovError

    given = [FLAGS[f] for f in flag_values(flags)]
    if not given:
        return
    if scripted:
        raise AgentprovError("cli.usage.exclusive", first=given[0], second="--llm-script")
    if endpoint is not None and not endpoint.local:
        raise AgentprovError("cli.usage.local_only_option", option=given[0],
                             endpoint=endpoint.name)


def _config(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    inner = data.get("text_config")
    return {**data, **inner} if isinstance(inner, dict) else data


def _int(cfg: dict[str, Any], *names: str) -> int | None:
    for n in names:
        v = cfg.get(n)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def active_params(cfg: dict[str, Any]) -> int | None:
    """The parameters a token passes through, for a Llama-style decoder described by
    ``cfg`` (None when a field it needs is missing)."""
    hidden, layers = _int(cfg, "hidden_size"), _int(cfg, "num_hidden_layers")
    heads, vocab = _int(cfg, "num_attention_heads"), _int(cfg, "vocab_size")
    if None in (hidden, layers, heads, vocab):
        return None
    kv = _int(cfg, "num_key_value_heads") or heads
    head = _int(cfg, "head_dim") or hidden // heads
    attention = hidden * heads * head * 2 + hidden * kv * head * 2  # q, o; k, v
    experts_per_token = _int(cfg, "num_experts_per_tok")
    moe = _int(cfg, "moe_intermediate_size")
    if experts_per_token and moe:
        mlp = 3 * hidden * moe * experts_per_token
        shared = _int(cfg, "shared_expert_intermediate_size")
        if shared:
            mlp += 3 * hidden * shared
    else:
        inter = _int(cfg, "intermediate_size")
        if inter is None:
            return None
        mlp = 3 * hidden * inter
    embeddings = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return embeddings + layers * (attention + mlp)


def kv_bytes_per_trace(cfg: dict[str, Any], tokens: int) -> int | None:
    hidden, layers = _int(cfg, "hidden_size"), _int(cfg, "num_hidden_layers")
    heads = _int(cfg, "num_attention_heads")
    if None in (hidden, layers, heads):
        return None
    kv = _int(cfg, "num_key_value_heads") or heads
    head = _int(cfg, "head_dim") or hidden // heads
    return 2 * layers * kv * head * tokens * 2


def from_folder(folder: Path) -> dict[str, Fact]:
    """The facts a model folder states (see the module's text)."""
    from agentprov_core.live.local.weights import folder_files

    out: dict[str, Fact] = {}
    weights, _ = folder_files(folder)
    if weights:
        total = sum(p.stat().st_size for p in weights)
        kinds = sorted({p.suffix for p in weights})
        out["size_gb"] = Fact(total / 1e9, "folder",
                              f"{len(weights)} {'/'.join(k.lstrip('.') for k in kinds)} file(s)")
    cfg = _config(folder)
    tokens = _int(cfg, "max_position_embeddings")
    if tokens:
        out["context_tokens"] = Fact(tokens, "folder", "config.json max_position_embeddings")
    params = active_params(cfg)
    if params:
        out["active_params_b"] = Fact(round(params / 1e9, 3), "folder",
                                      "config.json, estimated from the architecture")
    if tokens:
        kv = kv_bytes_per_trace(cfg, tokens)
        if kv:
            out["kv_gb_per_trace"] = Fact(round(kv / 1e9, 3), "folder",
                                          f"config.json, 16-bit cache at {tokens} tokens")
    return out


def from_preset(fact: str, preset: Any = None) -> Fact:
    """The preset's value of ``fact`` (its ``[model_defaults]``,
    :mod:`agentprov_core.registries.presets`), else unknown, saying why."""
    if preset is None:
        return Fact(None, "none", "no preset")
    value = getattr(preset.model_defaults, fact, None)
    if value is None:
        return Fact(None, "none", f"not in the preset {preset.name}")
    return Fact(value, "preset", f"{preset.name} v{preset.version} model_defaults")


def resolve(flags: Mapping[str, Any], endpoint: str, model_id: str | None,
            preset: Any = None) -> dict[str, Fact]:
    """Every fact with its source, in the precedence flag, settings, folder, preset
    (``flags``: the fact flags' and ``model_dir``'s values by option name)."""
    from agentprov_core import settings

    given = flag_values(flags)
    stored = settings.model_facts(endpoint, model_id) if model_id else {}
    folder = flags.get("model_dir")
    found = from_folder(Path(folder).expanduser()) if folder else {}
    out: dict[str, Fact] = {}
    for fact in FLAGS:
        if fact in given:
            out[fact] = Fact(given[fact], "flag", FLAGS[fact])
        elif fact in stored:
            key = settings.Key(("local_models", endpoint, model_id, fact))
            out[fact] = Fact(stored[fact], "settings", key.text)
        elif fact in found:
            out[fact] = found[fact]
        else:
            out[fact] = from_preset(fact, preset)
    return out


def summary(facts: dict[str, Fact]) -> str:
    """The dry run's line of model facts."""
    return "  model facts: " + "; ".join(f.line(name) for name, f in facts.items())
