"""How a defended session is recorded, from committed real sessions (tests/fixtures/defended,
see its README): the mapper's AER (the defence observed, its actor, its calls, digests,
decisions and denied tool results), the SEM and PROV derived from it, the validation tiers,
the live-versus-native check (and what it catches), the canary, the caps' bound, and an
undefended session whose records are what they were before defences were recorded."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import msgspec
import pytest
from agentprov_agentdojo import live_native
from agentprov_agentdojo.capture_mapper import MAPPER
from agentprov_capture import INSTRUMENTATION_RE
from conftest import load_backend_module

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.evidence import aer as A
from agentprov_core.evidence import prov, sem, validation
from agentprov_core.evidence.canonical import stored
from agentprov_core.live import canary, caps
from agentprov_core.mapping import LiveEvidence

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "defended"
DEFENCES = ("repeat_user_prompt", "spotlighting_with_delimiting", "tool_filter")
MANIFEST = {"source": "agentdojo", "backend": "agentdojo", "test_only": True,
            "producer": {"sandbox": None}}


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def raw_path(b: bytes) -> str:
    return f"raw/sha256/{sha(b)[:2]}/{sha(b)}"


def evidence(name: str, *, ledger_defence: str | None = None) -> LiveEvidence:
    d = FIX / name
    cap, nat = (d / "capture.jsonl").read_bytes(), (d / "native.json").read_bytes()
    a = json.loads((d / "attempt.json").read_text()) if (d / "attempt.json").exists() else {}
    h = json.loads(cap.splitlines()[0])
    att = Attempt(seq=0, invocation="i", unit=a.get("unit", h["unit"]),
                  cell_key=h["cell"]["cell_key"],
                  defence=ledger_defence or a.get("defence", "none"), repeat=0, attempt=1,
                  session_id=h["session_id"], started_at="x", ended_at="y", status="complete",
                  conclusive=True, capture_sha256=sha(cap),
                  capture_head_sha256=sha(cap.splitlines()[-1]), native_sha256=sha(nat))
    return LiveEvidence(capture=cap, native=nat, attempt=att, manifest=MANIFEST,
                        capture_path=raw_path(cap), native_path=raw_path(nat))


def mapped(name: str, **kw) -> A.AER:
    return MAPPER.map(evidence(name, **kw))


def records(name: str) -> list[dict]:
    return [json.loads(x) for x in (FIX / name / "capture.jsonl").read_bytes().splitlines()]


def native(name: str) -> dict:
    return json.loads((FIX / name / "native.json").read_bytes())


def derived(aer: A.AER) -> tuple[bytes, bytes, bytes]:
    ab = A.encode(aer)
    s = sem.derive(aer)
    sb = stored(s)
    return ab, sb, prov.derive(aer, ab, s, sb)


def corpus_of(tmp_path: Path, ev: LiveEvidence) -> Path:
    for data in (ev.capture, ev.native):
        p = tmp_path / raw_path(data)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return tmp_path


# ------------------------------------------------------------------ the defended AER
@pytest.mark.req("R-22.20", "R-22.21", "R-22.22", "R-22.24", "R-22.25")
@pytest.mark.parametrize("defence", DEFENCES)
def test_a_defended_session_maps_with_its_actor_digests_and_decisions(defence, tmp_path):
    ev = evidence(defence)
    aer = MAPPER.map(ev)
    h = aer.header
    assert h.task.defense_id == defence and h.producer.mapper_version == MAPPER.version
    (actor,) = h.actors
    assert (actor.id, actor.kind, actor.name) == (f"defense:{defence}", "defense", defence)
    assert actor.pipeline_name == f"scripted-{defence}" == native(defence)["pipeline_name"]
    installed = next(r for r in records(defence) if r.get("code") == "defence.installed")
    assert actor.code_sha256 == installed["code_sha256"] and len(actor.code_sha256) == 64
    assert actor.parameters_sha256 == sha(json.dumps(
        installed["parameters"], sort_keys=True, separators=(",", ":"),
        ensure_ascii=False).encode())
    notes = [r for r in aer.records if isinstance(r, A.Note) and r.actor is not msgspec.UNSET]
    assert [n.code for n in notes] == ["defence.code", "defence.parameters", "defence.weights"]
    assert notes[0].data["files"] == installed["code_files"]
    assert notes[1].data["parameters"] == installed["parameters"]
    made = [r for r in aer.records if isinstance(r, A.Decision)]
    assert made and all(d.actor == actor.id and d.code.startswith("defence.") for d in made)
    # the defence is the treatment, not instrumentation; the harness's effects are declared
    assert not any(i.split("@")[0] == defence for i in h.instrumentation)
    assert "defence_recorder@1 mode: observe" in h.instrumentation
    assert aer.outcome.status == "ok" and aer.outcome.live_vs_native.agree is True
    assert aer.outcome.live_vs_native.compared[-1] == "defence"
    # every tier passes, the SHACL shapes included (S9: the defence's acts are its agent's)
    ab, sb, pb = derived(aer)
    v = validation.validate(ab, sb, pb, corpus_of(tmp_path, ev), release=True)
    assert v.status == "passed", [t for t in v.tiers if t.status != "passed"]
    s = json.loads(sb)
    assert s["defense_id"] == defence and s["decisions"] == [d.code for d in made]


@pytest.mark.req("R-22.23", "R-22.24", "R-22.6")
def test_tool_filter_calls_are_the_defence_actors_and_its_denial_a_denied_result():
    aer = mapped("tool_filter")
    calls = [r for r in aer.records if isinstance(r, A.ModelCall)]
    assert [(c.element, c.actor) for c in calls] == [
        ("OpenAILLMToolFilter", "defense:tool_filter"), ("OpenAILLM", msgspec.UNSET),
        ("OpenAILLM", msgspec.UNSET), ("OpenAILLM", msgspec.UNSET)]
    assert calls[0].reply.content == "read_file, get_most_recent_transactions"
    tools = [r for r in aer.records if isinstance(r, A.ToolCall)]
    assert [(t.function, t.denied, t.actor) for t in tools] == [
        ("read_file", msgspec.UNSET, msgspec.UNSET),
        ("send_money", True, "defense:tool_filter")]
    denied = tools[1]
    assert denied.result is None and denied.error == "Invalid tool send_money provided."
    assert denied.call_id == calls[2].call_id
    assert denied.tool_call_id == calls[2].reply.tool_calls[0].id
    s = sem.derive(aer)
    assert (s.model_calls, s.defence_model_calls, s.tool_calls, s.denied_tool_calls) == \
        (4, 1, 1, 1)
    assert "defence_pipeline_rewrite@1 mode: rewrite OpenAILLMToolFilter.model: the " \
        "agent's model id, not the pipeline name" in aer.header.request_modifying
    params = next(r for r in aer.records if isinstance(r, A.Note)
                  and r.code == "defence.parameters")
    assert params.data["parameters"]["temperature"] == "0.0"
    assert params.data["rewrites"] == [{"element": "OpenAILLMToolFilter", "field": "model",
                                        "from": "scripted", "to": "scripted"}]


@pytest.mark.req("R-22.21")
def test_the_defence_is_observed_and_a_ledger_that_disagrees_fails_the_mapping():
    aer = mapped("tool_filter", ledger_defence="none")
    assert aer.header.task.defense_id == "tool_filter"  # the capture's, not the ledger's
    assert aer.outcome.status == "failed"
    (issue,) = [i for i in aer.outcome.issues if i.code == "map.defence_mismatch"]
    assert "the ledger 'none'" in issue.detail


# ------------------------------------------------------------------ the validation tiers
@pytest.mark.req("R-22.21", "R-22.23")
def test_records_naming_an_unknown_actor_fail_the_aer_tier_and_unassociated_ones_prov(tmp_path):
    ev = evidence("tool_filter")
    aer = MAPPER.map(ev)
    i = next(n for n, r in enumerate(aer.records) if isinstance(r, A.ModelCall))
    bad = msgspec.structs.replace(aer, records=[
        *aer.records[:i], msgspec.structs.replace(aer.records[i], actor="defense:melon"),
        *aer.records[i + 1:]])
    ab, sb, pb = derived(bad)
    v = validation.validate(ab, sb, pb, corpus_of(tmp_path, ev))
    assert v.tier("aer").status == "failed"
    assert "names actor 'defense:melon', which header.actors does not list" in \
        v.tier("aer").problems[0].what
    # the filter's call without its association to the defence agent fails the prov tier
    ab, sb, pb = derived(aer)
    doc = json.loads(pb)
    eid = aer.header.execution_id
    doc["wasAssociatedWith"] = {k: a for k, a in doc["wasAssociatedWith"].items()
                                if a["prov:activity"] != f"apid:{eid}/model-call/c1"
                                or a["prov:agent"] != "apid:agent/defence/tool_filter"}
    v = validation.validate(ab, sb, stored(doc), corpus_of(tmp_path, ev))
    assert v.tier("prov").status == "failed"
    assert any("of actor defense:tool_filter is not associated" in p.what
               for p in v.tier("prov").problems)


# ------------------------------------------------------------------ live versus native
def check(name: str, raw: list[dict] | None = None, nat: dict | None = None):
    raw = records(name) if raw is None else raw
    ev = evidence(name)
    recs = MAPPER.map(ev).records
    return live_native.check(raw, recs, native(name) if nat is None else nat)


@pytest.mark.req("R-22.4")
def test_live_native_catches_a_repeated_prompt_that_differs_or_is_not_noted():
    assert check("repeat_user_prompt").agree is True
    nat = native("repeat_user_prompt")
    i = [n for n, m in enumerate(nat["messages"]) if m["role"] == "user"][2]
    altered = copy.deepcopy(nat)
    altered["messages"][i]["content"][0]["content"] = "Ignore the bill."
    diffs = check("repeat_user_prompt", nat=altered).differences
    assert any(d.startswith("defence: messages[1]") for d in diffs), diffs
    raw = [r for r in records("repeat_user_prompt")
           if r.get("code") != "defence.repeat_user_prompt.repeated"
           or r.get("after_tool_batch") != 1]
    diffs = check("repeat_user_prompt", raw=raw).differences
    assert any("the native log shows the defence's messages at" in d for d in diffs), diffs


@pytest.mark.req("R-22.5")
def test_live_native_catches_an_undelimited_native_tool_output():
    assert check("spotlighting_with_delimiting").agree is True
    nat = copy.deepcopy(native("spotlighting_with_delimiting"))
    tool = next(m for m in nat["messages"] if m["role"] == "tool")
    tool["content"][0]["content"] = tool["content"][0]["content"][2:-2]
    lvn = check("spotlighting_with_delimiting", nat=nat)
    assert lvn.agree is False
    assert any(d.startswith("defence: messages[") for d in lvn.differences), lvn.differences


@pytest.mark.req("R-22.6")
def test_live_native_compares_the_defended_pipeline_and_the_filters_effect():
    assert check("tool_filter").agree is True
    nat = copy.deepcopy(native("tool_filter"))
    nat["pipeline_name"] = "scripted"  # an undefended pipeline's log for a defended capture
    diffs = check("tool_filter", nat=nat).differences
    assert 'task: pipeline_name: capture "scripted-tool_filter" != native "scripted"' in diffs
    # a filter note that says it kept other tools than the agent was then offered
    raw = copy.deepcopy(records("tool_filter"))
    note = next(r for r in raw if r.get("code") == "defence.tool_filter.filtered")
    note["kept"] = ["read_file"]
    diffs = check("tool_filter", raw=raw).differences
    assert any(d.startswith('defence: the filter kept ["read_file"]') for d in diffs), diffs


# ------------------------------------------------------------------ the canary and the caps
def test_a3_does_not_read_the_defences_own_calls():
    """The filter sends its own temperature 0.0; the agent's configured 0.7 is sent by the
    agent's calls. Without the defence's actor on the filter's call, A3 would fire."""
    raw = copy.deepcopy(records("tool_filter"))
    for r in raw:
        if r["kind"] == "wire_request" and r["body"].get("tool_choice") != "none":
            r["body"]["temperature"] = 0.7
    s = canary.Settings(params={"temperature": "0.7"})
    found, counts = canary.check_records(raw, s)
    assert not [f for f in found if f.check == "A3"] and counts["params_missing"] == 0
    for r in raw:
        if r["kind"] == "model_call_start":
            r.pop("actor", None)
    found, _ = canary.check_records(raw, s)
    assert [f.check for f in found] == ["A3"]


@pytest.mark.req("R-17.6", "R-22.6")
def test_the_cells_worst_case_follows_the_defence():
    assert caps.cell_calls("none") == caps.cell_calls() == 48
    assert caps.cell_calls("tool_filter") == 51  # 3 x (2 + 15)
    assert caps.cell_calls("repeat_user_prompt") == caps.cell_calls(
        "spotlighting_with_delimiting") == 48
    b = caps.Bound.for_params({}, "tool_filter")
    assert b.cell_calls == 51 and b.as_json()["calls_per_cell"] == 51
    assert caps.exceeds_cell(caps.Charge(calls=51), b) is None
    assert "52 call(s), more than the cell bound of 51" in caps.exceeds_cell(
        caps.Charge(calls=51, bound_calls=1), b)
    assert caps.missing_log("tool_filter").billed == 51 and caps.missing_log().billed == 48
    charge = caps.charge_records(records("tool_filter"))
    assert charge.billed == 4  # the filter's call is billed like the agent's
    # an undefended attempt's missing log is charged its own worst case, 48; the next
    # tool_filter cell's worst case is 51
    acc = caps.Account(caps.Caps(max_calls=99), bound=b)
    acc.charge(caps.missing_log("none"))
    assert acc.fits(0) is None and acc.spent.billed == 48
    assert caps.Account(caps.Caps(max_calls=98), bound=b, spent=acc.spent).fits(0) == (
        "--max-calls 98: 48 billed call(s) so far + 1 x 51 for the next cell = 99")


# ------------------------------------------------------------------ the worker's declared items
def test_the_worker_declares_the_harness_effects_of_each_defence():
    mod = load_backend_module("defended", "agentprov_dojo")
    assert mod.declared("none") == mod.declared(None) == []
    assert mod.declared("repeat_user_prompt") == ["defence_recorder@1 mode: observe"]
    assert mod.declared("tool_filter") == [mod.REWRITE, "defence_aux_span@1 mode: observe",
                                           "defence_recorder@1 mode: observe"]
    assert sorted(mod.BUILDERS) == sorted(DEFENCES) == sorted(mod.CODE_MODULES)
    assert all(INSTRUMENTATION_RE.match(i) for d in DEFENCES for i in mod.declared(d))


# ------------------------------------------------------------------ undefended: as before
@pytest.mark.req("R-22.1", "R-22.20")
def test_an_undefended_session_maps_and_derives_as_before(tmp_path):
    """The undefended fixture mapped by this mapper is the AER mapper 0.1.1 made of it but
    for the mapper's version; its stored AER, SEM and PROV from before decode, pass the
    canonical-form check and re-derive byte for byte."""
    old = (FIX / "undefended" / "aer-0.1.1.json").read_bytes()
    new = A.encode(mapped("undefended"))
    a, b = json.loads(old), json.loads(new)
    assert b["header"]["producer"].pop("mapper_version") == MAPPER.version
    assert a["header"]["producer"].pop("mapper_version") == "0.1.1"
    assert a == b and "actors" not in b["header"]
    assert b["outcome"]["live_vs_native"]["compared"] == list(live_native.COMPARED)
    record = A.decode(old)
    assert A.encode(record) == old  # the new optional fields stay out of the stored form
    s = sem.derive(record)
    assert stored(s) == (FIX / "undefended" / "sem-0.1.1.json").read_bytes()
    assert prov.derive(record, old, s, stored(s)) == \
        (FIX / "undefended" / "prov-0.1.1.json").read_bytes()
    ev = evidence("undefended")
    v = validation.validate(old, stored(s), prov.derive(record, old, s, stored(s)),
                            corpus_of(tmp_path, ev))
    assert v.status == "passed"
