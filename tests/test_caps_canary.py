"""The caps arithmetic (R-17), the canary's conditions (R-21) and the preflight probe's
verdicts (R-18), over synthetic capture records; and (slow) the canary of a scripted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentprov_core.errors import AgentprovError
from agentprov_core.live import canary, caps, preflight, replies

PRICES = caps.Caps(max_calls=None, max_cost_usd=10.0, price_in=0.15, price_out=0.60)


def req(aid: str, call: str | None = None, first: str | None = None, **body) -> dict:
    b = {"model": "m", "messages": [], "tools": [
        {"type": "function", "function": {"name": "read_file", "parameters": {}}}]} | body
    return {"kind": "wire_request", "attempt_id": aid, "call_id": call or f"c-{aid}",
            "first_attempt_id": first or aid, "body": b}


def resp(aid: str, status: int = 200, usage=(100, 10), model="m", finish="stop",
         content="done", tool_calls=None) -> dict:
    body = {"choices": [{"message": {"content": content, "tool_calls": tool_calls},
                         "finish_reason": finish}]}
    if model is not None:
        body["model"] = model
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1]}
    return {"kind": "wire_response", "attempt_id": aid, "status": status, "body": body}


END = {"kind": "end", "status": "complete"}


# ------------------------------------------------------------------ caps
@pytest.mark.req("R-17.6", "R-17.7", "R-17.9")
def test_the_bound_per_call_and_per_cell():
    b = caps.Bound()
    assert (b.in_tokens, b.out_tokens, b.cell_calls) == (32_000, 4_096, 48)
    assert b.call_usd(PRICES) == pytest.approx(0.0072576)
    assert round(b.call_usd(PRICES), 4) == 0.0073
    assert round(b.cell_usd(PRICES), 3) == 0.348
    assert caps.Bound.for_params({"max_tokens": 512}).out_tokens == 512
    assert caps.Bound.for_params({"max_tokens": "harness-default"}).out_tokens == 4_096


@pytest.mark.req("R-17.1", "R-17.2", "R-17.3", "R-17.4", "R-17.8", "R-21.15")
def test_what_a_capture_bills():
    recs = [req("a1"), resp("a1", usage=(1000, 50)),
            req("a2"), resp("a2", usage=None),                       # billed, no usage
            req("a3"), {"kind": "wire_error", "attempt_id": "a3", "stage": "send"},  # not billed
            req("a4"), {"kind": "wire_error", "attempt_id": "a4", "stage": "receive",
                        "status": 200},                              # billed at the bound
            req("a5"), resp("a5", status=500, usage=None), END]
    c = caps.charge_records(recs)
    assert (c.calls, c.bound_calls, c.in_tokens, c.out_tokens) == (1, 3, 1000, 50)
    assert c.billed == 4
    # a parent-ended attempt: one extra call at the bound; a log with no end likewise
    sealed = caps.charge_records([req("a1"), resp("a1"), dict(END, status="aborted",
                                                               sealed_by="parent")])
    assert (sealed.calls, sealed.bound_calls) == (1, 1)
    assert caps.charge_records([req("a1")]).bound_calls == 1
    assert caps.missing_log().billed == 48
    # Anthropic usage: every input-side token is priced at --price-in
    anth = {"kind": "wire_response", "attempt_id": "x", "status": 200, "body": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 2,
        "output_tokens": 7}}}
    assert caps.usage_tokens(anth["body"]) == (17, 7)


@pytest.mark.req("R-17.5", "R-17.11", "R-15.4", "R-15.5")
def test_a_cell_starts_only_if_its_worst_case_fits():
    acc = caps.Account(caps.Caps(max_calls=100))
    assert acc.fits(0) is None and acc.fits(1) is None      # 0 + 2 x 48 <= 100
    assert "--max-calls 100" in acc.fits(2)                   # 0 + 3 x 48 > 100
    acc.charge(caps.Charge(calls=4))                          # 4 + 2 x 48 = 100
    assert acc.fits(1) is None
    assert acc.fits(0, new_cells=0, new_calls=96) is None    # probe calls at the bound
    acc.charge(caps.Charge(calls=1))                          # 5 + 2 x 48 = 101
    assert acc.fits(1) is not None
    money = caps.Account(caps.Caps(max_cost_usd=0.40, price_in=0.15, price_out=0.60))
    assert money.fits(0) is None                              # $0.348 <= $0.40
    money.charge(caps.Charge(calls=1, in_tokens=400_000, out_tokens=0))   # $0.06 spent
    assert "--max-cost-usd 0.4" in money.fits(0)
    rec = money.record()
    assert rec["spend_upper_bound_usd"] == pytest.approx(0.06)
    assert rec["billed_calls"] == 1 and rec["bound"]["calls_per_cell"] == 48
    assert rec["prices_unit"] == "USD per million tokens"


@pytest.mark.req("R-17.7", "R-17.10", "R-17.2")
def test_the_largest_seen_raises_the_bound_and_a_cell_over_its_bound():
    acc = caps.Account(PRICES)
    acc.charge(caps.Charge(calls=1, in_tokens=50_000, out_tokens=9_000, largest_in=50_000,
                           largest_out=9_000))
    assert (acc.bound.in_tokens, acc.bound.out_tokens) == (50_000, 9_000)
    # calls at the bound are priced with the bound in force
    acc.charge(caps.Charge(bound_calls=1))
    assert acc.spend_usd == pytest.approx(2 * (50_000 * 0.15 + 9_000 * 0.60) / 1e6)
    assert caps.exceeds_cell(caps.Charge(calls=48), caps.Bound()) is None
    assert "49 call(s)" in caps.exceeds_cell(caps.Charge(calls=48, bound_calls=1), caps.Bound())
    assert "input token" in caps.exceeds_cell(caps.Charge(calls=2, in_tokens=48 * 32_000 + 1),
                                              caps.Bound())


# ------------------------------------------------------------------ canary
S = canary.Settings()


@pytest.mark.req("R-21.3")
def test_a3_a_configured_parameter_not_transmitted():
    s = canary.Settings(params={"temperature": "0.7"})
    found, counts = canary.check_records([req("a1"), resp("a1")], s, "u")
    assert [f.check for f in found] == ["A3"] and counts["params_missing"] == 1
    found, _ = canary.check_records([req("a1", temperature=0.7), resp("a1")], s, "u")
    assert found == []
    accepted = canary.Settings(params={"temperature": "0"}, as_benchmark=True)
    assert canary.check_records([req("a1"), resp("a1")], accepted)[0] == []


@pytest.mark.req("R-21.4", "R-15.10")
def test_a4_a_text_encoded_tool_call():
    text = '<tool_call>{"name": "read_file", "arguments": {"file_path": "x"}}</tool_call>'
    found, counts = canary.check_records([req("a1"), resp("a1", content=text)], S)
    assert [f.check for f in found] == ["A4"] and counts["text_tool_calls"] == 1
    assert replies.text_tool_call("read_file(file_path='x')", ["read_file"])
    assert not replies.text_tool_call("I have read the bill.", ["read_file"])
    structured = resp("a1", content=None, finish="tool_calls", tool_calls=[
        {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}])
    assert canary.check_records([req("a1"), structured], S)[0] == []
    allow = canary.Settings(allow_text_tool_calls=True)
    assert canary.check_records([req("a1"), resp("a1", content=text)], allow)[0] == []


@pytest.mark.req("R-21.5", "R-21.6")
def test_a6_abnormal_finishes_above_a_fifth_of_kept_calls():
    c = canary.Canary(10, ["u0", "u1"], S)
    # 1 abnormal of 5 kept calls: 20 %, not more
    recs = [x for i in range(5) for x in (req(f"a{i}"), resp(
        f"a{i}", finish="length" if i == 0 else "stop"))]
    assert c.observe("u0", "complete", recs) == []
    # a retry is not a kept call: only the final attempt of a call counts
    more = [req("b0", call="k"), resp("b0", status=500, usage=None),
            req("b1", call="k", first="b0"), resp("b1", finish="length")]
    found = c.observe("u1", "complete", more)
    assert [f.check for f in found] == ["A6"] and (c.kept, c.abnormal) == (6, 2)
    anth = canary.Settings(wire="anthropic")
    body = {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "model": "m",
            "usage": {"input_tokens": 1, "output_tokens": 1}}
    ok = [req("a"), {"kind": "wire_response", "attempt_id": "a", "status": 200, "body": body}]
    assert canary.check_records(ok, anth)[1]["abnormal"] == 0


@pytest.mark.req("R-21.7", "R-21.8", "R-21.9", "R-21.1")
def test_a11_a12_a14_and_the_window():
    c = canary.Canary(1, ["u0", "u1"], S)
    assert [f.check for f in c.observe("u0", "errored", [])] == ["A11"]
    assert c.observe("u1", "errored", []) == []          # outside the window of 1
    assert canary.Canary(0, ["u0"], S).observe("u0", "aborted", []) == []
    absent = canary.check_records([req("a1"), resp("a1", model=None)], S)
    assert [f.check for f in absent[0]] == ["A12"] and absent[1]["served_absent"] == 1
    other = canary.check_records([req("a1"), resp("a1", model="m-2024")], S)[0]
    assert "--accept-served-model m-2024" in other[0].what
    ok = canary.Settings(accepted_served=("m-2024",))
    assert canary.check_records([req("a1"), resp("a1", model="m-2024")], ok)[0] == []
    f = c.local_model_changed("u1", ["the digest"])
    assert f.check == "A14" and c.record()["findings"][-1]["check"] == "A14"
    assert canary.STOP_LINE.startswith("the canary found a misconfiguration; the campaign "
                                       "stopped after the canary cells")


# ------------------------------------------------------------------ the preflight probe
def probe_reply(code: str | None = None, text: str | None = None, status: int = 200):
    calls = ([{"id": "p", "type": "function", "function": {
        "name": "report_probe", "arguments": json.dumps({"code": code})}}] if code else None)
    body = ({"error": {"message": "role developer is not supported"}} if status != 200 else
            {"model": "m", "choices": [{"message": {"content": text, "tool_calls": calls},
                                        "finish_reason": "tool_calls" if calls else "stop"}],
             "usage": {"prompt_tokens": 50, "completion_tokens": 5}})
    return [req("a1"), {"kind": "wire_response", "attempt_id": "a1", "status": status,
                        "body": body}]


@pytest.mark.req("R-18.2", "R-18.3", "R-18.6", "R-18.7")
def test_the_probe_verdicts():
    j = preflight.judge
    assert j(probe_reply(code="abc"), "abc", S).verdict == "confirmed"
    assert j(probe_reply(code="zzz"), "abc", S).verdict == "unconfirmed"
    assert j(probe_reply(text="hello"), "abc", S).verdict == "unconfirmed"
    a4 = j(probe_reply(text='report_probe({"code": "abc"})'), "abc", S)
    assert a4.verdict == "refused" and a4.why.startswith("A4")
    allow = canary.Settings(allow_text_tool_calls=True)
    assert j(probe_reply(text='report_probe(code="abc")'), "abc", allow).verdict == "confirmed"
    assert j(probe_reply(status=400), "abc", S).verdict == "refused"
    assert j(probe_reply(status=401), "abc", S).verdict == "unreachable"
    assert j(probe_reply(status=503), "abc", S).verdict == "unconfirmed"
    a3 = j(probe_reply(code="abc"), "abc", canary.Settings(params={"temperature": "0.5"}))
    assert a3.verdict == "refused" and a3.why.startswith("A3")
    down = [req("a1"), {"kind": "wire_error", "attempt_id": "a1", "stage": "send",
                        "error_type": "ConnectError", "error_message": "refused"}]
    assert j(down, "abc", S).verdict == "unreachable"


@pytest.mark.req("R-18.3", "R-18.6", "R-18.7")
def test_the_probe_makes_at_most_three_calls():
    calls = []

    def never(n, code, text):
        calls.append(n)
        return probe_reply(text="I cannot help with that."), None

    with pytest.raises(AgentprovError) as e:
        preflight.Probe("ep", "https://x", S).run(never)
    assert e.value.code == "cli.refused.preflight" and calls == [1, 2, 3]

    def second(n, code, text):
        assert f'code set to "{code}"' in text
        return (probe_reply(text="hm") if n == 1 else probe_reply(code=code)), None

    p = preflight.Probe("ep", "https://x", S)
    assert p.run(second).verdict == "confirmed" and len(p.calls) == 2

    def busy(n, code, text):
        return probe_reply(status=503), None

    with pytest.raises(AgentprovError) as e:
        preflight.Probe("ep", "https://x", S).run(busy)
    assert (e.value.code, e.value.exit_code) == ("cli.environment.preflight", 3)


# ------------------------------------------------------------------ scripted runs (slow)
READ = {"tool_calls": [{"name": "read_file", "arguments": {"file_path": "bill-december-2023.txt"}}]}


def _script(tmp_path: Path, replies: list[dict]) -> Path:
    p = tmp_path / "script.json"
    p.write_text(json.dumps(replies))
    return p


@pytest.mark.slow
@pytest.mark.req("R-21.2", "R-21.8", "R-21.11", "R-2.21")
def test_a_scripted_canary_stop_and_a_notice(e2e_cli, tmp_path):
    script = _script(tmp_path, [dict(READ, served_model=None),
                                {"content": "Done.", "finish_reason": "length"}])
    corpus = tmp_path / "c"
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "c", "--suite", "banking",
            "--llm-script", script)
    r = e2e_cli(*base, "--user-tasks", "0-1", json_errors=False)
    assert r.code == 1, r.err
    assert "agentprov run: " + canary.STOP_LINE in r.err
    assert "canary: A12: a reply to 'scripted' names no served model" in r.err
    assert "canary: A6:" in r.err
    m = json.loads((tmp_path / "c.partial" / "manifest.json").read_text())
    assert m["stops"][-1]["stop"] == "canary" and m["partial"] is True
    assert m["live"]["quality"]["scripted"]["served_absent"] == 1
    # the last unit: the same conditions are only a notice
    r = e2e_cli(*base, "--user-tasks", "0-1", json_errors=False)
    assert "notice: canary: A12" in r.err and canary.STOP_LINE not in r.err


@pytest.mark.slow
@pytest.mark.req("R-17.5", "R-17.11", "R-21.23")
def test_a_scripted_run_under_caps(e2e_cli, tmp_path):
    script = _script(tmp_path, [READ, {"content": "Done."}])
    corpus = tmp_path / "k"
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "k", "--suite", "banking",
            "--user-tasks", "0-2", "--llm-script", script)
    r = e2e_cli(*base, "--max-calls", "49", json_errors=False)
    assert r.code == 1 and "cap_reached" in r.err, r.err
    assert "1 attempt(s)" in r.out
    r = e2e_cli(*base, "--max-calls", "200", json_errors=False)
    assert r.code == 0, r.err
    m = json.loads((tmp_path / "k.partial" / "manifest.json").read_text())
    assert m["live"]["caps"]["billed_calls"] == 6 and m["live"]["caps"]["probe_calls"] == 0


# ------------------------------------------------------------------ the Anthropic wire
def anthropic_stream(stop: str, block: dict, delta: dict | None = None, model: str = "m",
                     usage: dict | None = None) -> str:
    """A recorded reply of AgentDojo's streaming AnthropicLLM: the event-stream text."""
    events = [
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": usage or {"input_tokens": 10, "cache_read_input_tokens": 5,
                               "cache_creation_input_tokens": 2, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "ping"},
        *([{"type": "content_block_delta", "index": 0, "delta": delta}] if delta else []),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
         "usage": {"output_tokens": 7}},
        {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def anth_req(aid: str, **body) -> dict:
    b = {"model": "m", "max_tokens": 1024, "temperature": 0.0, "stream": True,
         "messages": [], "tools": [{"name": "report_probe", "input_schema": {}}]} | body
    return {"kind": "wire_request", "attempt_id": aid, "call_id": f"c-{aid}",
            "first_attempt_id": aid, "body": b}


def anth_resp(aid: str, body, status: int = 200) -> dict:
    return {"kind": "wire_response", "attempt_id": aid, "status": status, "body": body,
            "body_encoding": "json" if isinstance(body, dict) else "text"}


@pytest.mark.req("R-17.1", "R-17.2")
def test_anthropic_usage_from_a_message_and_from_an_event_stream():
    from agentprov_core.live.sse import assemble

    text = anthropic_stream("tool_use", {"type": "tool_use", "id": "t1", "name": "read_file",
                                         "input": {}},
                            {"type": "input_json_delta", "partial_json": '{"file_path": "a"}'})
    msg = assemble(text)
    assert msg["stop_reason"] == "tool_use" and msg["model"] == "m"
    assert msg["content"] == [{"type": "tool_use", "id": "t1", "name": "read_file",
                               "input": {"file_path": "a"}}]
    # message_start's usage, with message_delta's cumulative output_tokens
    assert msg["usage"]["output_tokens"] == 7 and msg["usage"]["input_tokens"] == 10
    # input, cache reads and cache writes are all input-side tokens
    assert caps.usage_tokens(text) == (17, 7)
    assert caps.usage_tokens(msg) == (17, 7)
    assert caps.usage_tokens("not an event stream") is None
    c = caps.charge_records([anth_req("a1"), anth_resp("a1", text), anth_req("a2"),
                             anth_resp("a2", "data: {\"type\": \"message_start\"}\n\n"), END])
    assert (c.calls, c.bound_calls, c.in_tokens, c.out_tokens) == (1, 1, 17, 7)
    assert caps.spend_usd(c, caps.Bound.for_params({"max_tokens": 1024}),
                          caps.Caps(max_calls=None, max_cost_usd=1.0, price_in=3.0,
                                    price_out=15.0)) == pytest.approx(
        (17 * 3 + 7 * 15 + 32000 * 3 + 1024 * 15) / 1e6)


@pytest.mark.req("R-21.5", "R-21.6", "R-21.3")
def test_a6_on_the_anthropic_wire():
    anth = canary.Settings(wire="anthropic", params={"max_tokens": 1024})
    text_block = ({"type": "text", "text": ""}, {"type": "text_delta", "text": "ok"})
    normal = [("end_turn", *text_block),
              ("tool_use", {"type": "tool_use", "id": "t", "name": "report_probe",
                            "input": {}}, {"type": "input_json_delta", "partial_json": "{}"}),
              ("stop_sequence", *text_block), ("stop", *text_block)]
    recs = [x for i, (stop, block, delta) in enumerate(normal)
            for x in (anth_req(f"a{i}"), anth_resp(f"a{i}", anthropic_stream(stop, block, delta)))]
    found, counts = canary.check_records(recs, anth)
    assert found == [] and counts["kept"] == 4 and counts["abnormal"] == 0
    assert counts["served_absent"] == 0 and counts["params_missing"] == 0
    # max_tokens and refusal are abnormal finishes on the Anthropic wire; so is "tool_calls"
    bad = [x for i, stop in enumerate(("max_tokens", "refusal", "tool_calls"))
           for x in (anth_req(f"b{i}"), anth_resp(f"b{i}", anthropic_stream(stop, *text_block)))]
    assert canary.check_records(bad, anth)[1]["abnormal"] == 3
    c = canary.Canary(10, ["u0", "u1"], anth)
    assert c.observe("u0", "complete", recs) == []
    assert [f.check for f in c.observe("u1", "complete", bad)] == ["A6"]
    # a non-streamed Anthropic message reads the same
    body = {"type": "message", "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn", "model": "m", "usage": {"input_tokens": 1,
                                                                "output_tokens": 1}}
    assert canary.check_records([anth_req("m"), anth_resp("m", body)], anth)[1]["abnormal"] == 0
    # the configured max_tokens not transmitted: A3
    a3 = canary.check_records([anth_req("n", max_tokens=4096),
                               anth_resp("n", anthropic_stream("end_turn", *text_block))], anth)
    assert [f.check for f in a3[0]] == ["A3"]


@pytest.mark.req("R-18.2", "R-18.3")
def test_the_probe_verdicts_on_the_anthropic_wire():
    anth = canary.Settings(wire="anthropic", params={"max_tokens": 1024})

    def probe(block, delta, stop):
        return [anth_req("p"), anth_resp("p", anthropic_stream(stop, block, delta))]

    tool = {"type": "tool_use", "id": "t", "name": "report_probe", "input": {}}
    ok = probe(tool, {"type": "input_json_delta", "partial_json": '{"code": "abc"}'}, "tool_use")
    assert preflight.judge(ok, "abc", anth).verdict == "confirmed"
    assert preflight.judge(ok, "zzz", anth).verdict == "unconfirmed"
    text = probe({"type": "text", "text": ""},
                 {"type": "text_delta", "text": 'report_probe({"code": "abc"})'}, "end_turn")
    a4 = preflight.judge(text, "abc", anth)
    assert a4.verdict == "refused" and a4.why.startswith("A4")
    err = [anth_req("p"), anth_resp("p", {"type": "error", "error": {
        "type": "invalid_request_error", "message": "bad"}}, status=400)]
    assert preflight.judge(err, "abc", anth).verdict == "refused"


@pytest.mark.req("R-21.1")
def test_quality_and_the_mapper_read_anthropic_event_streams():
    from agentprov_agentdojo import capture_mapper, live_native

    from agentprov_core.live import quality

    text = anthropic_stream("tool_use", {"type": "tool_use", "id": "t1", "name": "read_file",
                                         "input": {}},
                            {"type": "input_json_delta", "partial_json": '{"file_path": "a"}'})
    q = quality.from_records([anth_req("a1"), anth_resp("a1", text)], "anthropic")["m"]
    assert (q["calls"], q["abnormal_finishes"], q["served_absent"]) == (1, 0, 0)
    msg, served, finish, usage = capture_mapper.parse_reply(text)
    assert (served, finish, usage.input_tokens, usage.output_tokens) == ("m", "tool_use", 10, 7)
    assert msg.content is None and msg.tool_calls[0].arguments == {"file_path": "a"}
    # the tool results the model saw: tool_result blocks of user messages
    sent = anth_req("a2", messages=[{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": False,
         "content": [{"type": "text", "text": "the bill"}]}]}])
    sent["call_id"] = "c1"
    assert live_native._wire_tool_messages([sent], "c1") == [("t1", "the bill")]
