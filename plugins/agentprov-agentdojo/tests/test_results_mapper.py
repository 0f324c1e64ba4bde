"""``agentdojo.results`` on its own: registered through the mappers hook, what it refuses of a
result file (by code), and the AER it maps one to (mode import, its records linked).

The result files here are written by this test in the shape agentdojo 0.1.35's
``TraceLogger`` writes (``/tmp/adsrc/ad/agentdojo/logging.py``); tests/test_import_results.py
imports AgentDyn's published runs through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest
from agentprov_agentdojo import results_mapper
from agentprov_agentdojo.plugin import RESULTS_MAPPER

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.evidence.aer import AER, encode
from agentprov_core.mapping import ImportEvidence, ImportRefused

PARTS = ("gpt-4o-2024-08-06-tool_filter", "banking", "user_task_3", "important_instructions",
         "injection_task_1.json")


def result(**extra) -> dict:
    doc = {"suite_name": "banking", "pipeline_name": "gpt-4o-2024-08-06-tool_filter",
           "user_task_id": "user_task_3", "injection_task_id": "injection_task_1",
           "attack_type": "important_instructions", "injections": {"v": "<INFORMATION>"},
           "messages": [
               {"role": "system", "content": [{"type": "text", "content": "You are"}]},
               {"role": "user", "content": [{"type": "text", "content": "Pay the bill"}]},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"function": "read_file", "args": {"file_path": "bill.txt"}, "id": "c1",
                    "placeholder_args": None}]},
               {"role": "tool", "content": [{"type": "text", "content": "amount: 98.70"}],
                "tool_call_id": "c1", "tool_call": {"function": "read_file",
                                                    "args": {"file_path": "bill.txt"},
                                                    "id": "c1"}, "error": None},
               {"role": "assistant", "content": [{"type": "text", "content": "Paid."}],
                "tool_calls": None}],
           "error": None, "utility": True, "security": False, "duration": 3.5,
           "benchmark_version": "v1.2.2", "agentdojo_package_version": "0.1.35",
           "evaluation_timestamp": "2026-01-22 07:51:35"}
    doc.update(extra)
    return doc


def data(doc: dict) -> bytes:
    return json.dumps(doc, indent=4).encode()


def mapped(doc: dict):
    m = results_mapper.MAPPER
    raw = data(doc)
    cell = m.read(PARTS, raw)
    a = Attempt(seq=0, invocation="imp-x", unit=f"{cell.cell_key}|{cell.defence}|r0",
                cell_key=cell.cell_key, defence=cell.defence, repeat=0, attempt=1,
                session_id="imp-0123456789abcdef", started_at="t", ended_at="t",
                status="complete", conclusive=True, native_sha256="0" * 64)
    ev = ImportEvidence(data=raw, name="/".join(PARTS), cell=cell, attempt=a,
                        manifest={"source": "agentdojo", "backend": "agentdojo"},
                        path="raw/sha256/00/" + "0" * 64, source_sha256="1" * 64)
    return m.map(ev)


def test_registered_through_the_mappers_hook_for_agentprov_import():
    from agentprov_core import mapping

    ref = mapping.importer("agentdojo")
    assert ref is RESULTS_MAPPER and ref.name == "agentdojo.results"
    assert mapping.importers() == ["agentdojo"]
    assert ref.load() is results_mapper.MAPPER
    r = subprocess.run([sys.executable, "-m", "agentprov_core", "plugins", "--format", "json"],
                       capture_output=True, text=True)
    [p] = [p for p in json.loads(r.stdout)["plugins"] if p["name"] == "agentdojo"]
    assert p["mappers"] == ["agentdojo.capture", "agentdojo.results"]


def test_the_configuration_names_its_model_and_defence():
    split = results_mapper.configuration_parts
    assert split("gpt-4o-2024-08-06-tool_filter") == ("gpt-4o-2024-08-06", "tool_filter")
    assert split("google_gemini-2.5-pro-prompt_guard_2_detector") == (
        "google_gemini-2.5-pro", "prompt_guard_2_detector")
    assert split("meta_secalign-70B") == ("meta_secalign-70B", "none")
    assert split("local") == ("local", "none")


def test_a_result_maps_to_an_import_aer_whose_records_are_linked():
    aer = mapped(result())
    h, o = aer.header, aer.outcome
    assert (h.mode, h.source, h.task.cell_key, h.task.defense_id) == (
        "import", "agentdojo", "banking/user_task_3/important_instructions/injection_task_1",
        "tool_filter")
    assert h.agent.model == "gpt-4o-2024-08-06" and h.backend.benchmark_version == "v1.2.2"
    assert [(e.role, e.format) for e in h.evidence] == [("native_log", "agentdojo-native/0.1.35")]
    assert [a.id for a in h.actors] == ["defense:tool_filter"]
    assert [type(r).__name__ for r in aer.records] == [
        "Note", "Note", "Note", "Note", "ModelCall", "ToolCall", "ModelCall"]
    assert [r.code for r in aer.records[:4]] == [
        "import.result", "agentdojo.injections", "agentdojo.system_message",
        "agentdojo.user_message"]
    call, tool, last = aer.records[4:]
    assert call.reply.tool_calls[0].function == "read_file" and call.messages_sent == 2
    assert (tool.call_id, tool.tool_call_id, tool.result) == ("message-2", "c1",
                                                              "amount: 98.70")
    assert last.reply.content == "Paid."
    assert (o.status, o.session_status, o.utility, o.security) == ("ok", "complete", True,
                                                                   False)
    assert o.live_vs_native.checked is False
    note = aer.records[0]
    assert note.code == "import.result" and note.data["context"]["duration"] == 3.5
    # mapping is pure: the same evidence gives the same bytes, and they decode as an AER
    assert encode(mapped(result())) == encode(aer)
    assert msgspec.json.decode(encode(aer), type=AER) == aer


def test_a_result_with_an_error_or_without_scores_is_a_failed_execution():
    aer = mapped(result(error="Skipping task user_task_3 because of internal server error",
                        utility=False, security=True))
    assert (aer.outcome.status, aer.outcome.session_status) == ("failed", "errored")
    assert [i.code for i in aer.outcome.issues] == ["map.result_error"]
    doc = result()
    del doc["utility"], doc["security"]
    aer = mapped(doc)
    assert (aer.outcome.status, aer.outcome.session_status) == ("failed", "incomplete")
    assert aer.outcome.utility == "not recorded"
    assert [i.code for i in aer.outcome.issues] == ["map.result_incomplete"]


@pytest.mark.parametrize(("parts", "raw", "code", "field"), [
    (PARTS[:4], data(result()), "import.file.other_format", "its path"),
    (PARTS[:4] + ("injection_task_1.txt",), data(result()), "import.file.other_format",
     "its path"),
    (PARTS, b"{", "import.file.malformed", "not JSON"),
    (PARTS, b"\xff", "import.file.malformed", "not UTF-8"),
    (PARTS, b"[" * 100 + b"]" * 100, "import.file.malformed", "not JSON"),
    (PARTS, b"[]", "import.file.other_format", "JSON list"),
    (PARTS, data({"version": 2, "eval": {}}), "import.file.other_format", "suite_name"),
    (PARTS, data(result(user_task_id=3)), "import.file.malformed", "field user_task_id"),
    (PARTS, data(result(utility="yes")), "import.file.malformed", "field utility"),
    (PARTS, data(result(messages=[{"role": "wizard"}])), "import.file.malformed",
     "messages[0]"),
    (PARTS, data(result(messages=[{"role": "assistant", "tool_calls": [{"id": 1}]}])),
     "import.file.malformed", "messages[0].tool_calls"),
    (PARTS, data(result(suite_name="slack")), "import.file.path_mismatch", "suite_name"),
    (PARTS, data(result(injection_task_id="injection_task_2")), "import.file.path_mismatch",
     "injection_task_id"),
    (PARTS[:3] + ("none", "none.json"), data(result()), "import.file.path_mismatch",
     "attack_type"),
    (PARTS[:3] + ("none", "injection_task_1.json"),
     data(result(attack_type=None)), "import.file.malformed", "one is null"),
    (("a|b",) + PARTS[1:], data(result()), "import.file.other_format", "pipeline part"),
])
def test_what_read_refuses_by_code(parts, raw, code, field):
    with pytest.raises(ImportRefused) as refused:
        results_mapper.MAPPER.read(parts, raw)
    assert refused.value.code == code
    assert field in refused.value.why
