"""What a campaign writes into the working corpus's manifest: when it opens (the source, the
backend's identity, the producer, the plan and configuration digests, consent, caps, test
faults), what the invocation observed (``live``: caps, egress, preflight, canary, test
overrides), and when it ends (quality, partial, the stop, mapping failures)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from agentprov_core import __version__
from agentprov_core.backend import datasets, environments
from agentprov_core.corpus.working import MANIFEST_FORMAT, WorkingCorpus, now
from agentprov_core.run import gate, restricted, testfaults
from agentprov_core.run.stops import EARLY_STOPS

if TYPE_CHECKING:
    from agentprov_core.live.caps import Account
    from agentprov_core.run.live import Live
    from agentprov_core.run.prepare import Prepared
    from agentprov_core.run.summary import Tally


def manifest_of(prepared: Prepared, old: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest ``old`` (or a new one) updated with this run's source, backend identity,
    producer, plugins, plan and configuration digests, plan content and ``live`` basics."""
    from agentprov_core.plugins import manager

    plan = prepared.plan
    meta = prepared.source.meta
    scripted = prepared.request.scripted
    m = dict(old or {})
    marker = environments.read_marker(meta, plan.environment_id)
    m.update({
        "format": MANIFEST_FORMAT, "corpus_id": plan.corpus_id, "source": meta.name,
        "profile": meta.live_profile, "registry_parts": "live",
        "backend": plan.backend, "working": True, "test_only": scripted,
        "synthetic": scripted, "updated_at": now(),
        "backend_identity": {"environment_id": plan.environment_id,
                             "identity_sha256": marker.identity_sha256,
                             "lock_sha256": marker.lock_sha256,
                             "pinned_commit": marker.pinned_commit,
                             "distributions": marker.distributions},
        "producer": {"agentprov": __version__,
                     "sandbox": None if scripted else prepared.containment,
                     "python": sys.version.split()[0],
                     # where this invocation's cells ran (docs/running.md, "Executors")
                     "executor": prepared.request.options.executor or "local"},
        "plugins": sorted(({"name": r.name, "distribution": r.distribution,
                            "version": r.version, "status": r.status}
                           for r in manager().records), key=lambda r: r["name"]),
        "source_meta": msgspec.to_builtins(meta),
    })
    if prepared.preset is not None:  # a compute preset's run
        m["producer"]["preset"] = prepared.preset.preset.name
        m["producer"]["preset_plan"] = prepared.preset.record()
    if meta.restricted is not None:  # a restricted-use corpus, private
        m["restricted"] = restricted.manifest_record(meta.restricted)
    data = datasets.manifest_fields(marker.dataset)  # a fixture dataset: test_only, synthetic
    if data:
        m["backend_identity"]["dataset"] = data.pop("dataset")
        m.update(data)
    m.setdefault("created_at", now())
    m["plans"] = sorted(set(m.get("plans", [])) | {plan.plan_sha256})
    m["config_digests"] = sorted(set(m.get("config_digests", [])) | {plan.config_digest})
    # what the corpus's cells were run with, by content digest (docs/decisions.md, "Unit
    # identity"): a plan with another one is refused unless --allow-mixed-config
    m["plan_contents"] = {**(m.get("plan_contents") or {}),
                          plan.content_digest: plan.content}
    live = dict(m.get("live") or {})
    live.update({"endpoint_class": prepared.endpoint_class,  # local|api, decided before consent
                 "transport": "scripted" if scripted else "endpoint",
                 "llm_element": prepared.request.options.llm_element or "native"})
    live.setdefault("caps", None)
    live.setdefault("egress", None)
    ident = prepared.local_identity
    if ident is not None:  # step 4's identity record, under the digest the configuration
        # digest holds; the first observation of a digest is kept
        live.setdefault("local_models", {}).setdefault(ident.digest, ident.to_json())
    over = (marker.upstream or {}).get("test_override")
    if over:  # the environment was built from a fixture's commit, not the pinned one
        m["test_only"] = True
        live["test_overrides"] = sorted(set(live.get("test_overrides", [])) | {over})
    m["live"] = live
    return m


def opening(prepared: Prepared, wc: WorkingCorpus,
            consent: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest a campaign starts with (written by :func:`write_opening`):
    :func:`manifest_of` the corpus's, and this invocation's consent."""
    old = wc.manifest() if os.path.lexists(wc.root / "manifest.json") else None
    manifest = manifest_of(prepared, old)
    manifest["partial"] = bool(old and old.get("partial"))
    record_attack_cache(prepared, wc, manifest)
    if consent is not None:
        manifest["live"].setdefault("consent", []).append(consent | {"at": now()})
    return manifest


def record_attack_cache(prepared: Prepared, wc: WorkingCorpus,
                        manifest: dict[str, Any]) -> None:
    """The verified attack cache (``--attack autodojo``): its file in the raw store, its git
    origin and fallbacks under ``attack_caches[sha256]``. A cache verified against the test
    override of the pinned commit makes the corpus ``test_only`` and names the override."""
    checked = prepared.attack_cache
    if checked is None:
        return
    from agentprov_core.run import attackcache

    caches = dict(manifest.get("attack_caches") or {})
    caches.setdefault(checked.origin.sha256, attackcache.store(wc, checked))
    manifest["attack_caches"] = caches
    if checked.origin.test_only:
        live = manifest.setdefault("live", {})
        live["test_overrides"] = sorted(set(live.get("test_overrides", []))
                                        | {attackcache.PIN_OVERRIDE})
    if any(c["origin"].get("test_only") for c in caches.values()):  # sticky on resume
        manifest["test_only"] = True


def write_opening(wc: WorkingCorpus, manifest: dict[str, Any], acc: Account) -> None:
    """Write the opening manifest with the caps and the test faults set for this
    invocation."""
    manifest["live"]["caps"] = acc.record()
    faults = testfaults.fault_notes()
    if faults:
        manifest["live"]["test_overrides"] = sorted(
            set(manifest["live"].get("test_overrides", [])) | faults)
    wc.write_manifest(manifest)


def record_live(wc: WorkingCorpus, live_ctx: Live, acc: Account,
                run_state: dict[str, Any]) -> None:
    """Write what this invocation observed into ``live``: the caps (``live.caps``), the
    egress proxy's record (``live.egress``, per invocation; the last one at the top), the
    preflight, the canary and the test-only overrides."""
    manifest = wc.manifest()
    live = manifest.setdefault("live", {})
    live["caps"] = acc.record()
    egress = live_ctx.egress_record()
    if egress is not None:
        live["egress"] = egress
        live.setdefault("egress_invocations", []).append(egress)
    if run_state.get("preflight") is not None:
        live.setdefault("preflight", []).append(run_state["preflight"])
    if run_state.get("canary") is not None:
        live["canary"] = run_state["canary"]
    gate_record(live, run_state)
    if run_state.get("executor"):  # the hosts an executor ran this invocation's cells on
        manifest["producer"] |= run_state["executor"]
    if live_ctx.overrides:
        live["test_overrides"] = sorted(set(live.get("test_overrides", [])) |
                                        set(live_ctx.overrides))
    wc.write_manifest(manifest)


def gate_record(live: dict[str, Any], run_state: dict[str, Any]) -> None:
    """``live.gate``, the adaptive start gate of this invocation (its policy, trace and
    decreases), one record per invocation. Absent from a scripted run that did not ask for
    it, so such a corpus records what it always did."""
    policy = run_state.get("gate_policy")
    rec = run_state.get("gate")
    if rec is None and (policy is None or policy.why == gate.SCRIPTED):
        return
    live.setdefault("gate", []).append(rec if rec is not None else {"policy": policy.record()})


def close_manifest(wc: WorkingCorpus, tally: Tally, stop: str | None, code: int) -> None:
    """Write how the campaign ended: the quality it observed (added to the corpus's), partial
    or not, the stop and its exit code, and the mappings that failed."""
    from agentprov_core.live import quality

    manifest = wc.manifest()
    live = manifest.setdefault("live", {})
    total = live.get("quality") or {}
    quality.merge(total, tally.quality)
    live["quality"] = total
    manifest["partial"] = bool(manifest.get("partial")) or stop in (
        "limit", "interrupt", *EARLY_STOPS)
    manifest["updated_at"] = now()
    manifest.setdefault("stops", []).append({"at": now(), "stop": stop or "complete",
                                             "exit": code})
    if tally.map_failures:
        manifest.setdefault("mapping_failures", []).extend(tally.map_failures)
    wc.write_manifest(manifest)
