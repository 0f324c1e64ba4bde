"""Provisioned defences in a cell: the assets ``agentprov backends build --defence-assets``
put in this environment, as the cell's process uses them.

The worker reads its own installed defence registry (``agentprov_backend/defences.toml``,
the file T0 checked by its sha256) and its environment's marker (``AGENTPROV_ENV.json``:
the provisioned assets' digests). For the cell's defence, each asset it needs is in
``<env>/agentprov/defence-assets/<id>/``:

* a **weights** asset is a Hugging Face hub cache (``hub/``), loaded with the hub offline:
  the cell's own process sets ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``,
  ``HF_DATASETS_OFFLINE=1`` and ``HF_HUB_CACHE`` to that cache before the pipeline is
  built (declared as ``defence_weights_offline@1``); the pipeline is AgentDojo's own;
* a **code** asset is imported from ``files/`` (first on ``sys.path`` of the cell's
  process, writing no bytecode into the environment): its registry ``module``'s
  ``factory(ctx)`` builds the defended pipeline from a :class:`DefenceContext` (declared as
  ``defence_code_provisioned@1``). The pipeline is named as AgentDojo names a defended one,
  ``f"{pipeline name}-{defence}"``, which the native log's path and the live-versus-native
  check key on, and the session notes it as installed (``defence.installed``);
* a defence the registry marks ``port`` also declares ``defence_port@1``: the session ran
  agentprov's port, and must never be presented as the authors' released implementation.

Before the pipeline is built the session notes ``defence.provisioned``: each asset's id,
kind, licence and digest (the marker's), and the environment variables set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

ENV_SUBDIR = ("agentprov", "defence-assets")
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1"}


class NotProvisioned(RuntimeError):
    """The cell's defence needs an asset this environment does not hold."""


@dataclass
class DefenceContext:
    """What a provisioned factory gets: ``factory(ctx)`` returns the defended pipeline."""

    defence: str
    llm: Any
    model_id: str | None
    pipeline_name: str
    assets: dict[str, Path]
    port: bool
    _note: Callable[..., Any] | None = None

    def note(self, code: str, text: str, **fields: Any) -> None:
        """Record a note in the session's capture, as ``defence.<code>``, under the
        defence's actor."""
        if self._note is not None:
            self._note("note", f"defence.{code}", text, **fields)

    def stock(self, defense: str | None = None):
        """AgentDojo's own pipeline for this element (``defense`` a stock name, or none)."""
        from agentdojo.agent_pipeline import AgentPipeline, PipelineConfig

        return AgentPipeline.from_config(PipelineConfig(
            llm=self.llm, model_id=self.model_id, defense=defense,
            system_message_name=None, system_message=None))


def _registry() -> dict[str, Any]:
    import tomllib

    return tomllib.loads(resources.files("agentprov_backend").joinpath("defences.toml")
                         .read_text(encoding="utf-8"))


def _marker_assets() -> dict[str, Any]:
    try:
        doc = json.loads((Path(sys.prefix) / "AGENTPROV_ENV.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc.get("defence_assets") or {}


def _plan(req: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]] | None:
    """The defence's registry entry and its assets, or None for an undefended cell or a
    defence that needs no assets."""
    name = req.get("defence") or "none"
    if name == "none":
        return None
    reg = _registry()
    entry = (reg.get("defences") or {}).get(name) or {}
    ids = list(entry.get("assets") or [])
    if not ids:
        return None
    return entry, [(aid, (reg.get("assets") or {}).get(aid) or {}) for aid in ids]


def declared(req: dict[str, Any]) -> list[str]:
    """The capture header's items for the cell's provisioned defence (none otherwise)."""
    plan = _plan(req)
    if plan is None:
        return []
    entry, assets = plan
    recorded = _marker_assets()
    out = []
    for aid, a in assets:
        digest = (recorded.get(aid) or {}).get("sha256") or "not provisioned"
        if a.get("kind") == "weights":
            out.append(f"defence_weights_offline@1 asset: {aid} (sha256 {digest}; "
                       "HF_HUB_OFFLINE=1)")
        else:
            out.append(f"defence_code_provisioned@1 asset: {aid} (sha256 {digest}; "
                       f"{a.get('module')}.{a.get('factory')})")
    if entry.get("port"):
        out.append(f"defence_port@1 code: {req['defence']} is agentprov's port, not the "
                   "authors' released implementation")
    return out


def _asset_dir(aid: str) -> Path:
    return Path(sys.prefix).joinpath(*ENV_SUBDIR, aid)


def prepare(req: dict[str, Any], writer) -> None:
    """Check the assets are provisioned, set the hub offline for weights and note what the
    session uses; raise :class:`NotProvisioned` (the session ends errored) otherwise."""
    plan = _plan(req)
    if plan is None:
        return
    entry, assets = plan
    recorded = _marker_assets()
    env: dict[str, str] = {}
    noted = []
    for aid, a in assets:
        rec = recorded.get(aid)
        if not a.get("files") or rec is None or not _asset_dir(aid).is_dir():
            raise NotProvisioned(
                f"defence {req['defence']}: asset {aid} is not provisioned in this environment "
                f"(agentprov backends build agentdojo --defence-assets {aid})")
        if a.get("kind") == "weights":
            env |= OFFLINE | {"HF_HUB_CACHE": str(_asset_dir(aid) / "hub")}
        noted.append({"asset": aid, "kind": a.get("kind"), "licence": a.get("licence"),
                      "sha256": rec.get("sha256"), "origin": rec.get("origin")})
    os.environ.update(env)
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None and env:  # imported before the variables were set: set them there too
        hub.HF_HUB_OFFLINE = True
        hub.HF_HUB_CACHE = env["HF_HUB_CACHE"]
    writer.append("note", code="defence.provisioned",
                  text=f"defence {req['defence']} uses its provisioned assets "
                       + ", ".join(f"{n['asset']} ({n['kind']}, sha256 {n['sha256']})"
                                   for n in noted)
                  + ("; agentprov's port, not the authors' released implementation"
                     if entry.get("port") else ""),
                  assets=noted, environment=env, port=bool(entry.get("port")))


def pipeline(req: dict[str, Any], llm, agent: dict[str, Any], writer,
             next_call_id: Callable[[], str]):
    """The defended pipeline of a provisioned code asset's factory, or None (the caller
    builds AgentDojo's own). It is named as AgentDojo names a defended pipeline,
    ``f"{pipeline name}-{defence}"`` (the native log's directory follows it), and the
    session notes the defence as installed (``defence.installed``, under the defence's
    actor): the provisioned code's and weights' files by sha256, as the marker records
    them. The factory's own notes (``ctx.note``) name the actor too."""
    plan = _plan(req)
    if plan is None:
        return None
    entry, assets = plan
    code = [(aid, a) for aid, a in assets if a.get("kind") == "code"]
    if not code:
        return None
    aid, a = code[0]
    import importlib

    files = str(_asset_dir(aid) / "files")
    sys.dont_write_bytecode = True  # the environment is never edited, not even by a cache
    if files not in sys.path:
        sys.path.insert(0, files)
    from agentprov_dojo.defended import Recorder

    factory = getattr(importlib.import_module(a["module"]), a["factory"])
    rec = Recorder(writer, req["defence"], next_call_id)
    name = f"{agent['pipeline_name']}-{req['defence']}"
    ctx = DefenceContext(defence=req["defence"], llm=llm, model_id=agent.get("model_id"),
                         pipeline_name=name, assets={i: _asset_dir(i) for i, _ in assets},
                         port=bool(entry.get("port")),
                         _note=lambda _kind, code, text, **f: rec.note(code, text, **f))
    built = factory(ctx)
    if built is None or not callable(getattr(built, "query", None)):
        raise TypeError(f"{a['module']}.{a['factory']} returned {type(built).__name__}, not a "
                        "pipeline with a query method")
    built.name = name
    recorded = _marker_assets()

    def files(kind: str) -> list[dict[str, str]]:
        return [{"asset": i, "path": f.get("path"), "sha256": f.get("sha256")}
                for i, x in assets if x.get("kind") == kind
                for f in (recorded.get(i) or {}).get("files") or []]

    rec.installed(built, list(getattr(built, "elements", None) or [built]), {},
                  code=files("code"), weights=files("weights"))
    return built
