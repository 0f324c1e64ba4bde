"""The adaptive start gate (agentprov_core/run/gate.py): what a wire reply says about a rate
limit, the window's additive increase and multiplicative decrease, Retry-After pauses and
their bounds, the stall that closes it, the tail of a staging capture log, the scripted
transport's token bucket (a real loopback server) and the option's refusal."""

from __future__ import annotations

import json
import os
import types
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from agentprov_core.live import ratelimit
from agentprov_core.live.scripted.script import parse_script
from agentprov_core.live.scripted.server import ScriptedEndpoint
from agentprov_core.run import gate as gatemod
from agentprov_core.run import stops

NOW = 1_800_000_000.0


def reply(status=200, aid="a1", **headers):
    return {"kind": "wire_response", "attempt_id": aid, "status": status, "headers": headers}


def request(aid="a1", model="m"):
    return {"kind": "wire_request", "attempt_id": aid, "body": {"model": model}}


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def make(jobs=8, stall=60.0):
    clock = Clock()
    pol = gatemod.Policy("on", "test", start=jobs, ceiling=jobs, max_pause_s=30.0,
                         stall_s=stall)
    return gatemod.Gate(pol, clock=clock, wall=lambda: NOW), clock


# --- reading one reply ----------------------------------------------------------------------


def test_a_429_with_retry_after_is_a_signal_with_its_pause():
    s = ratelimit.read(reply(429, **{"retry-after": "2"}), NOW, 30)
    assert (s.cause, s.pause_s, s.clamped, s.ok) == ("http 429", 2.0, None, False)
    s = ratelimit.read(reply(503, **{"retry-after-ms": "1500", "retry-after": "9"}), NOW, 30)
    assert (s.cause, s.pause_s) == ("http 503", 1.5)
    ok = ratelimit.read(reply(200), NOW, 30)
    assert (ok.cause, ok.ok, ok.pause_s) == (None, True, None)
    assert ratelimit.read(request(), NOW, 30) is None


def test_a_connection_reset_is_a_signal_and_other_errors_are_not():
    reset = {"kind": "wire_error", "attempt_id": "a1", "stage": "send",
             "error_type": "httpx.RemoteProtocolError"}
    assert ratelimit.read(reset, NOW, 30).cause == "connection reset"
    timeout = dict(reset, error_type="httpx.ReadTimeout")
    assert ratelimit.read(timeout, NOW, 30).cause is None


@pytest.mark.parametrize("value,pause,why", [
    ("-5", 0.0, "negative"),
    ("999999", 30.0, "beyond"),
    ("soon", None, "unparsed"),
    ("nan", None, "unparsed"),
    (format_datetime(datetime.fromtimestamp(NOW - 3600, UTC), usegmt=True), 0.0, "past"),
    (format_datetime(datetime.fromtimestamp(NOW + 5 * 86400, UTC), usegmt=True), 30.0,
     "beyond"),
])
def test_an_absurd_retry_after_is_bounded_and_says_so(value, pause, why):
    s = ratelimit.read(reply(429, **{"retry-after": value}), NOW, 30)
    assert (s.pause_s, s.clamped, s.header, s.value) == (pause, why, "retry-after", value)


def test_an_http_date_is_measured_from_the_replys_own_date():
    date = format_datetime(datetime.fromtimestamp(NOW - 500, UTC), usegmt=True)
    after = format_datetime(datetime.fromtimestamp(NOW - 497, UTC), usegmt=True)
    s = ratelimit.read(reply(429, **{"retry-after": after, "date": date}), NOW, 30)
    assert (s.pause_s, s.clamped) == (3.0, None)


def test_an_exhausted_request_budget_pauses_without_a_signal():
    s = ratelimit.read(reply(200, **{"x-ratelimit-remaining-requests": "0",
                                     "x-ratelimit-reset-requests": "1m2.5s"}), NOW, 300)
    assert (s.cause, s.ok, s.pause_s) == (None, True, 62.5)
    s = ratelimit.read(reply(200, **{"x-ratelimit-remaining-requests": "3",
                                     "x-ratelimit-reset-requests": "20ms"}), NOW, 300)
    assert s.pause_s is None


# --- the window ---------------------------------------------------------------------------


def test_multiplicative_decrease_once_per_window_and_additive_increase():
    g, clock = make(jobs=8)
    for sid in ("s1", "s2", "s3"):
        g.started(sid)
    assert g.allows(3) and not g.allows(8)
    clock.t += 1
    g.observe("s1", request("a1", "gpt"))
    g.observe("s1", reply(429, "a1"))
    assert g.window == 4.0
    g.observe("s2", reply(429, "a1"))  # a cell started before the decrease: no second one
    g.observe("s1", reply(429, "a1"))  # the same attempt read again (tail, then ingest)
    assert g.window == 4.0 and g.n_decreases == 1 and g.signals["http 429"] == 2
    assert not g.allows(4) and g.allows(3)
    clock.t += 1
    g.started("s4")
    clock.t += 1
    g.observe("s4", reply(503, "a2"))  # started after the decrease: halves again
    assert g.window == 2.0
    g.ended("s1", None)
    g.ended("s4", None)
    assert g.window == 2.0  # cells that met a signal do not grow it
    clock.t += 1
    for i in range(60):
        g.started(f"c{i}")
        g.ended(f"c{i}", [request("a1"), reply(200, "a1")])
    assert g.window == 8.0  # grown by 1/window per clean cell, never above --jobs
    rec = g.record()
    assert rec["decreases_total"] == 2 and [d["cause"] for d in rec["decreases"]] == [
        "http 429", "http 503"]
    assert rec["decreases"][0]["from"] == 8.0 and rec["decreases"][0]["to"] == 4.0
    assert g.backoffs() == {"gpt": 1, "?": 1}


def test_a_slow_start_doubles_the_window_each_round_until_the_first_signal():
    clock = Clock()
    g = gatemod.Gate(gatemod.Policy("on", "test", start=2, ceiling=32), clock=clock)
    assert g.allows(1) and not g.allows(2)
    for rnd, want in ((2, 4.0), (4, 8.0), (8, 16.0)):
        sids = [f"r{want}-{i}" for i in range(rnd)]
        for sid in sids:
            g.started(sid)
        for sid in sids:
            g.ended(sid, [request("a1"), reply(200, "a1")])
        assert g.window == want
    clock.t += 1
    g.started("x")
    g.observe("x", reply(429, "a1"))
    assert g.window == 8.0 and not g.slow
    clock.t += 1
    g.started("y")
    g.ended("y", [reply(200, "a1")])
    assert g.window == 8.125  # additive after the first signal


def test_the_window_never_drops_below_one():
    g, clock = make(jobs=2)
    for i in range(10):
        clock.t += 1
        g.started(f"s{i}")
        g.observe(f"s{i}", reply(429, "a1"))
    assert g.window == 1.0 and g.allows(0) and not g.allows(1)


def test_retry_after_pauses_new_starts_for_that_long_bounded():
    g, clock = make(jobs=4)
    g.started("s1")
    g.observe("s1", reply(429, "a1", **{"retry-after": "5"}))
    assert not g.allows(0) and g.wait_s() == 5.0
    clock.t += 5
    assert g.allows(0)
    g.observe("s1", reply(429, "a2", **{"retry-after": str(10 * 86400)}))
    assert g.wait_s() == 30.0  # days ahead: the bound
    rec = g.record()
    assert rec["clamped"][0] | {"t_s": 0} == {
        "t_s": 0, "session": "s1", "header": "retry-after", "value": "864000",
        "why": "beyond", "pause_s": 30.0}
    assert rec["paused_s"] == 35.0


def test_only_rate_limits_for_the_cell_timeout_close_the_gate():
    g, clock = make(jobs=2, stall=20.0)
    g.started("s1")
    g.observe("s1", reply(429, "a1"))
    clock.t += 19
    g.observe("s1", reply(200, "a2"))  # a served reply: the stall starts again
    g.observe("s1", reply(429, "a3"))
    clock.t += 19
    assert g.allows(0) and g.closed is None
    clock.t += 1
    assert not g.allows(0)
    assert g.closed == "the endpoint answered nothing but rate limits for 20 s (the cell timeout)"
    assert g.record()["closed"] == g.closed


def test_the_trace_records_changes_and_stays_bounded():
    g, clock = make(jobs=4)
    g.note(0)
    g.note(0)
    g.note(1)
    assert g.trace == [[0.0, 0, 4.0], [0.0, 1, 4.0]]
    for i in range(gatemod.MAX_TRACE * 2):
        clock.t += 0.01
        g.note(i % 3)
    assert len(g.trace) <= gatemod.MAX_TRACE


def test_a_rate_limit_stop_exits_3_and_leaves_the_corpus_partial():
    from agentprov_core.errors import REGISTRY
    from agentprov_core.run.summary import Tally

    assert stops.exit_code("rate_limited", Tally()) == 3
    assert "rate_limited" in stops.EARLY_STOPS
    assert REGISTRY["run.environment.rate_limited"].exit == 3


# --- the policy ---------------------------------------------------------------------------


def prepared(scripted=False, endpoint_class="api", **options):
    from agentprov_core.run.options import RunOptions

    req = types.SimpleNamespace(scripted=scripted,
                                options=RunOptions(**{"cell_timeout": 600, **options}))
    return types.SimpleNamespace(request=req, endpoint_class=endpoint_class)


def test_on_by_default_for_an_api_endpoint_only():
    on = gatemod.policy_of(prepared(), 32)
    assert (on.mode, on.start, on.ceiling, on.stall_s, on.max_pause_s) == (
        "on", 4, 32, 600.0, 300.0)  # a slow start from four cells
    assert gatemod.policy_of(prepared(), 2).start == 2
    assert gatemod.policy_of(prepared(endpoint_class="local"), 4).mode == "off"
    assert gatemod.policy_of(prepared(scripted=True, endpoint_class=None), 4).mode == "off"
    assert gatemod.policy_of(prepared(scripted=True, adaptive_jobs="on"), 4).mode == "on"
    off = gatemod.policy_of(prepared(adaptive_jobs="off"), 4)
    assert off.record() == {"mode": "off", "why": "--adaptive-jobs off"}


def test_the_manifest_records_the_gate_only_where_it_applies():
    from agentprov_core.run.manifest import gate_record

    live: dict = {}
    gate_record(live, {"gate_policy": gatemod.policy_of(prepared(scripted=True), 4)})
    assert live == {}  # a scripted corpus records what it always did
    gate_record(live, {"gate_policy": gatemod.policy_of(prepared(adaptive_jobs="off"), 4)})
    g, _ = make()
    gate_record(live, {"gate": g.record()})
    assert [r["policy"]["mode"] for r in live["gate"]] == ["off", "on"]


# --- the tail of a staging capture log ------------------------------------------------------


def test_the_tail_reads_whole_lines_and_never_a_fifo_or_a_link(tmp_path):
    g, _ = make(jobs=4)
    tail = gatemod.Tail()
    good = tmp_path / "s1"
    good.mkdir()
    log = good / "capture.jsonl"
    line = json.dumps(reply(429, "a1"), separators=(",", ":"))
    log.write_text(json.dumps(request("a1"), separators=(",", ":")) + "\n" + line[:10])
    g.started("s1")
    fl = types.SimpleNamespace(session_id="s1", staging=good)
    tail.poll(g, [fl])
    assert g.n_decreases == 0  # the reply's line is not whole yet
    log.write_text(log.read_text() + line[10:] + "\n")
    tail.poll(g, [fl])
    assert g.n_decreases == 1
    fifo_dir, link_dir = tmp_path / "s2", tmp_path / "s3"
    fifo_dir.mkdir()
    link_dir.mkdir()
    os.mkfifo(fifo_dir / "capture.jsonl")  # opened non-blocking, refused: no hang
    (link_dir / "capture.jsonl").symlink_to(log)
    for sid, d in (("s2", fifo_dir), ("s3", link_dir)):
        g.started(sid)
        tail.poll(g, [types.SimpleNamespace(session_id=sid, staging=d)])
    assert g.signals["http 429"] == 1  # the link was not followed
    tail.poll(g, [])
    assert tail.pos == {}


# --- the scripted transport's rate limit ----------------------------------------------------


def limited_script(**limit):
    return parse_script(json.dumps({
        "format": "agentprov-llm-script/0.1", "rate_limit": limit,
        "replies": [{"content": "one"}, {"content": "two"}, {"content": "three"}]}).encode())


def chat(client, url):
    return client.post(url + "/chat/completions",
                       json={"model": "scripted", "messages": [{"role": "user", "content": "x"}]})


def test_the_scripted_bucket_answers_429_with_retry_after_and_keeps_the_reply():
    with ScriptedEndpoint(limited_script(per_minute=60, burst=2)) as ep, httpx.Client() as c:
        url = ep.base_url("s-a")
        first, second, third = (chat(c, url) for _ in range(3))
        assert [r.status_code for r in (first, second, third)] == [200, 200, 429]
        assert third.headers["retry-after"] == "1"
        assert third.headers["x-ratelimit-remaining-requests"] == "0"
        assert third.json()["error"]["code"] == "rate_limit_exceeded"
        assert ep.requests("s-a") == 2  # the refused request took no reply
        other = chat(c, ep.base_url("s-b"))  # one bucket for every session
        assert other.status_code == 429


def test_a_scripted_limit_of_zero_refuses_for_ever_with_the_header_given():
    script = limited_script(per_minute=0, status=503, retry_after="-7")
    with ScriptedEndpoint(script) as ep, httpx.Client() as c:
        r = chat(c, ep.base_url("s-a"))
        assert (r.status_code, r.headers["retry-after"]) == (503, "-7")


def test_a_malformed_rate_limit_is_a_usage_error():
    from agentprov_core.errors import AgentprovError

    with pytest.raises(AgentprovError) as exc:
        limited_script(per_minute=-1)
    assert exc.value.code == "cli.usage.llm_script" and "rate_limit.per_minute" in \
        exc.value.message


def test_an_unknown_adaptive_jobs_value_is_refused_with_exit_2(cli, corpora):
    r = cli("run", "agentdojo", "--corpus", corpora / "c", "--campaign", "c", "--suite",
            "banking", "--user-tasks", "0", "--llm-script", "x.json", "--adaptive-jobs", "maybe")
    assert r.code == 2 and "--adaptive-jobs" in r.err and "maybe" in r.err
    assert not list(corpora.iterdir())
