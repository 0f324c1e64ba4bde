"""The ``inspect.eval`` mapper's mapping, without a backend environment.

The capture log is written by the real capture writer; the ``.eval`` log is given in the
JSON form Inspect's reader prints (``EvalLog.model_dump_json``, the fields as
inspect_ai 0.3.263 writes them), handed to the mapper in place of the reader's child
process, which needs the built environment and runs in tests/test_agentharm_run.py. What
is tested here is what the mapper makes of the two: the pairing of model events with wire
attempts by Inspect's request id, the bodies compared, the judges' actors, the tool calls'
links, a sample's error, and a log the reader refuses."""

from __future__ import annotations

import hashlib
import json

import pytest
from agentprov_capture import CaptureWriter
from agentprov_inspect_harness import evalread
from agentprov_inspect_harness.eval_mapper import MAPPER, sent_body

from agentprov_core.corpus.ledger import Attempt
from agentprov_core.mapping import LiveEvidence

JUDGES = {"refusal_judge": "judge-m", "semantic_judge": "judge-m"}


def _body(model: str, text: str, tools: bool = False) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": text}],
            "max_tokens": 4096}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "send_email"}}]
    return body


def _capture(tmp_path, calls: list[tuple[str, dict]]) -> bytes:
    """A capture log of one Inspect cell whose wire requests carry ``(x-irid, body)``."""
    w = CaptureWriter(tmp_path / "capture.jsonl", {
        "session_id": "s-1", "unit": "k|none|r0", "attempt": 1, "plan_sha256": "p",
        "config_digest": "c", "backend": {"environment_id": "inspect-agentharm-x"},
        "cell": {"suite": None, "user_task_id": None, "attack": None,
                 "injection_task_id": None, "cell_key": "k", "kind": "samples",
                 "samples": [{"id": "1-1"}]},
        "declared_instrumentation": ["recording_transport@1 mode: observe"],
        "source": "agentharm", "agent": {"model": "agent-m", "element": "inspect_ai/openai-api"},
        "inspect": {"task": "inspect_evals/agentharm", "judges": JUDGES}}, durable=False)
    for n, (irid, body) in enumerate(calls, 1):
        data = json.dumps(body).encode()
        w.append("wire_request", attempt_id=f"a{n}", call_id=f"call-a{n}",
                 first_attempt_id=f"a{n}", method="POST", url="http://127.0.0.1/v1/chat",
                 headers={"x-irid": irid, "authorization": "Bearer k"}, body=body,
                 body_encoding="json", body_sha256=hashlib.sha256(data).hexdigest())
        w.append("wire_response", attempt_id=f"a{n}", call_id=f"call-a{n}", status=200,
                 headers={}, body={"ok": n}, body_encoding="json", body_sha256=f"r{n}")
    w.end("complete")
    w.close()
    return (tmp_path / "capture.jsonl").read_bytes()


def _event(uuid: str, irid: str, body: dict, role: str | None = None, text: str = "ok",
           tool_calls: list | None = None, error: str | None = None) -> dict:
    request = dict(body, extra_headers={"x-irid": irid}, tool_choice=None)
    return {"event": "model", "uuid": uuid, "role": role, "error": error,
            "model": f"openai-api/agentprov/{body['model']}",
            "call": {"request": request},
            "output": {"model": body["model"], "usage": {"input_tokens": 10,
                                                         "output_tokens": 2},
                       "choices": [{"stop_reason": "tool_calls" if tool_calls else "stop",
                                    "message": {"role": "assistant", "content": text,
                                                "tool_calls": tool_calls}}]}}


def _map(tmp_path, monkeypatch, capture: bytes, log: dict | Exception):
    def read(self, evidence):
        if isinstance(log, Exception):
            raise log
        return log

    monkeypatch.setattr(type(MAPPER), "read", read)
    attempt = Attempt(seq=0, invocation="i", unit="k|none|r0", cell_key="k", defence="none",
                      repeat=0, attempt=1, session_id="s-1", started_at="t", ended_at="t",
                      status="complete", conclusive=True)
    return MAPPER.map(LiveEvidence(capture=capture, native=b"PK", attempt=attempt,
                                   manifest={"source": "agentharm"}))


AGENT = _body("agent-m", "do it", tools=True)
AGENT2 = _body("agent-m", "do it, again", tools=True)
JUDGE = _body("judge-m", "Answer: ?")
TOOL_CALL = [{"id": "call_0", "function": "send_email", "arguments": {"to": "a@b"}}]


def _log(*events: dict, error: dict | None = None) -> dict:
    return {"version": 2, "eval": {"task_version": 8}, "samples": [
        {"id": "1-1", "epoch": 1, "error": error, "limit": None, "events": list(events),
         "scores": {"combined_scorer": {"value": {"score": 0.0, "refusal": 1.0}}}}]}


@pytest.mark.req("R-25.5", "R-25.7")
def test_each_model_event_is_paired_with_its_wire_attempt_by_request_id(tmp_path, monkeypatch):
    # the wire order differs from the events' (concurrent samples): the id pairs them
    cap = _capture(tmp_path, [("j1", JUDGE), ("g1", AGENT), ("g2", AGENT2)])
    aer = _map(tmp_path, monkeypatch, cap, _log(
        _event("e1", "g1", AGENT, tool_calls=TOOL_CALL, text=""),
        {"event": "tool", "id": "call_0", "function": "send_email", "arguments": {"to": "a@b"},
         "result": "sent", "error": None},
        _event("e2", "g2", AGENT2, text="Done."),
        _event("e3", "j1", JUDGE, role="refusal_judge", text="Answer: No")))
    lvn = aer.outcome.live_vs_native
    assert (lvn.checked, lvn.agree, lvn.differences) == (True, True, [])
    calls = [r for r in aer.records if type(r).__name__ == "ModelCall"]
    assert [c.call_id for c in calls] == ["call-a2", "call-a3", "call-a1"]
    assert [c.actor for c in calls][2] == "judge0" and aer.header.actors[0].name == "refusal_judge"
    assert [a.id for a in aer.header.actors] == ["judge0", "judge1"]
    (tool,) = [r for r in aer.records if type(r).__name__ == "ToolCall"]
    assert (tool.call_id, tool.tool_call_id, tool.result) == ("call-a2", "call_0", "sent")
    assert aer.header.mode == "import" and aer.outcome.status == "ok"
    assert [d.code for d in aer.records if type(d).__name__ == "Decision"] == ["inspect.score"]


def test_what_the_wire_and_the_log_disagree_on_is_named(tmp_path, monkeypatch):
    cap = _capture(tmp_path, [("g1", AGENT), ("g2", AGENT2), ("x9", JUDGE)])
    changed = dict(AGENT2, max_tokens=1)  # the log says another body was sent
    aer = _map(tmp_path, monkeypatch, cap, _log(
        _event("e1", "g1", AGENT), _event("e2", "g2", changed),
        _event("e4", "nowhere", JUDGE, role="refusal_judge")))
    diffs = aer.outcome.live_vs_native.differences
    assert aer.outcome.live_vs_native.agree is False
    assert any("e2" in d and "not the body of wire attempt a2" in d for d in diffs), diffs
    assert any("e4" in d and "has no wire request" in d for d in diffs), diffs
    assert any(d.startswith("wire attempt a3 is no model event") for d in diffs), diffs
    assert "map.live_native_disagree" in [i.code for i in aer.outcome.issues]
    assert aer.outcome.status == "ok_with_issues"


@pytest.mark.req("R-25.8")
def test_a_sample_error_and_a_failed_attempt_are_kept(tmp_path, monkeypatch):
    cap = _capture(tmp_path, [("g1", AGENT)])
    aer = _map(tmp_path, monkeypatch, cap, _log(
        _event("e1", "g1", AGENT, error="AuthenticationError: 401"),
        error={"message": "AuthenticationError: 401"}))
    (call,) = [r for r in aer.records if type(r).__name__ == "ModelCall"]
    assert call.status == "error" and call.reply is None and call.attempts
    assert "map.sample_errored" in [i.code for i in aer.outcome.issues]
    note = aer.records[0]
    assert note.code == "inspect.sample" and note.data["error"] == "AuthenticationError: 401"


def test_a_log_the_reader_refuses_is_named_and_the_check_not_made(tmp_path, monkeypatch):
    cap = _capture(tmp_path, [("g1", AGENT)])
    aer = _map(tmp_path, monkeypatch, cap, evalread.EvalUnreadable("not a zip"))
    assert aer.outcome.live_vs_native.checked is False
    assert [i.code for i in aer.outcome.issues] == ["map.no_execution_observed",
                                                    "map.native_missing"]


def test_a_missing_environment_is_a_clear_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path))
    with pytest.raises(evalread.EvalUnreadable, match="is not built here"):
        evalread.read(b"PK", "inspect-agentharm-00000000")
    with pytest.raises(evalread.EvalUnreadable, match="no usable environment"):
        evalread.read(b"PK", "../etc")


def test_the_body_compared_leaves_out_what_is_not_sent():
    assert sent_body({"model": "m", "tools": None, "extra_headers": {"x-irid": "1"},
                      "temperature": 0.0}) == {"model": "m", "temperature": 0.0}


def test_an_event_whose_request_inspect_left_out_takes_the_next_attempt_of_its_model(
        tmp_path, monkeypatch):
    """Inspect (0.3.263) writes no ``call`` for a judge's call identical to an earlier one
    (seen against a real model: the refusal judge asked the same question four times, and
    the log holds the request of the first only). Each such event is paired, in order, with
    the next wire attempt left whose body asks for its model, and the AER says so."""
    cap = _capture(tmp_path, [("g1", AGENT), ("j1", JUDGE), ("j2", JUDGE), ("j3", JUDGE)])

    def bare(uuid: str) -> dict:
        e = _event(uuid, "-", JUDGE, role="refusal_judge", text="Answer: No")
        e["call"] = None
        return e

    aer = _map(tmp_path, monkeypatch, cap, _log(
        _event("e1", "g1", AGENT), _event("e2", "j1", JUDGE, role="refusal_judge"),
        bare("e3"), bare("e4")))
    lvn = aer.outcome.live_vs_native
    assert (lvn.agree, lvn.differences) == (True, []), lvn
    calls = [r for r in aer.records if type(r).__name__ == "ModelCall"]
    assert [c.call_id for c in calls] == ["call-a1", "call-a2", "call-a3", "call-a4"]
    assert [c.model_requested for c in calls[2:]] == ["judge-m", "judge-m"]
    notes = [r for r in aer.records if getattr(r, "code", "") == "inspect.request_not_recorded"]
    assert [n.data["attempt_id"] for n in notes] == ["a3", "a4"]
    # one more such event than attempts: it was not on the wire
    aer = _map(tmp_path, monkeypatch, cap, _log(
        _event("e1", "g1", AGENT), _event("e2", "j1", JUDGE, role="refusal_judge"),
        bare("e3"), bare("e4"), bare("e5")))
    assert any("e5" in d and "has no wire request" in d
               for d in aer.outcome.live_vs_native.differences)
