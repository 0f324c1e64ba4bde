"""The scripted transport: the script format (agentprov-llm-script/0.1) and the loopback
OpenAI-style server that replays it. Real server, real sockets, httpx as the client (and the
openai SDK where it is importable; the benchmark's own SDK in its built environment in the
slow tests)."""

from __future__ import annotations

import json
import math
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import ROOT

from agentprov_core.errors import AgentprovError
from agentprov_core.live.scripted.script import FORMAT, load_script, parse_script
from agentprov_core.live.scripted.server import ScriptedEndpoint

DEMO = ROOT / "examples" / "scripts" / "live-demo.json"
REQUEST = {"model": "example-model", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture
def serve(tmp_path):
    """Start an endpoint on a script written from ``doc``; stopped after the test."""
    started = []

    def start(doc) -> ScriptedEndpoint:
        f = tmp_path / f"script{len(started)}.json"
        f.write_text(json.dumps(doc))
        ep = ScriptedEndpoint(load_script(f)).start()
        started.append(ep)
        return ep

    yield start
    for ep in started:
        ep.stop()


def chat(ep: ScriptedEndpoint, session: str = "s1", body: dict | None = None,
         timeout: float = 10) -> httpx.Response:
    return httpx.post(ep.base_url(session) + "/chat/completions", json=body or REQUEST,
                      timeout=timeout)


# --- reply shapes


@pytest.mark.req("R-8.14")
def test_a_text_reply_is_a_chat_completion(serve):
    ep = serve([{"content": "Hello there."}])
    r = chat(ep)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    doc = r.json()
    assert doc["object"] == "chat.completion" and doc["created"] == 0
    assert doc["id"] == "chatcmpl-scripted-0"
    assert doc["model"] == "example-model"  # the request's model, echoed
    (choice,) = doc["choices"]
    assert choice["index"] == 0 and choice["finish_reason"] == "stop"
    assert choice["message"] == {"role": "assistant", "content": "Hello there."}
    assert set(doc["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_tool_calls_carry_json_string_arguments(serve):
    ep = serve([{"tool_calls": [
        {"name": "read_file", "arguments": {"file_path": "bill-december-2023.txt"}},
        {"name": "get_balance"},
        {"name": "send_money", "raw_arguments": "{not json", "id": "call_custom"}]},
        {"content": "done", "tool_calls": [{"name": "get_iban", "arguments": {}}]}])
    msg = chat(ep).json()["choices"][0]
    assert msg["finish_reason"] == "tool_calls"
    calls = msg["message"]["tool_calls"]
    assert msg["message"]["content"] is None
    assert [c["id"] for c in calls] == ["call_0_0", "call_0_1", "call_custom"]
    assert all(c["type"] == "function" for c in calls)
    assert [c["function"]["name"] for c in calls] == ["read_file", "get_balance", "send_money"]
    args = [c["function"]["arguments"] for c in calls]
    assert all(isinstance(a, str) for a in args)
    assert json.loads(args[0]) == {"file_path": "bill-december-2023.txt"}
    assert args[1] == "{}" and args[2] == "{not json"  # raw_arguments go out verbatim
    second = chat(ep).json()["choices"][0]
    assert second["message"]["content"] == "done"
    assert second["message"]["tool_calls"][0]["id"] == "call_1_0"


def test_finish_reasons(serve):
    ep = serve([{"content": "a"}, {"tool_calls": [{"name": "get_balance"}]},
                {"content": "cut", "finish_reason": "length"},
                {"tool_calls": [{"name": "get_balance"}], "finish_reason": "stop"},
                {"content": None, "finish_reason": "content_filter"}])
    got = [chat(ep).json()["choices"][0]["finish_reason"] for _ in range(5)]
    assert got == ["stop", "tool_calls", "length", "stop", "content_filter"]


def _tokens(n: int) -> int:
    return max(1, math.ceil(n / 4))


def test_usage_default_is_a_deterministic_size_count(serve):
    ep = serve([{"content": "Hello there."},
                {"tool_calls": [{"name": "get_most_recent_transactions",
                                 "arguments": {"n": 100}}]}])
    canonical = json.dumps(REQUEST, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False).encode()
    u = chat(ep).json()["usage"]
    assert u == {"prompt_tokens": _tokens(len(canonical)),
                 "completion_tokens": _tokens(len("Hello there.")),
                 "total_tokens": _tokens(len(canonical)) + _tokens(len("Hello there."))}
    u = chat(ep).json()["usage"]
    assert u["completion_tokens"] == _tokens(len("get_most_recent_transactions") +
                                             len('{"n":100}'))
    # the same request in another session counts the same
    assert chat(ep, "s2").json()["usage"]["prompt_tokens"] == _tokens(len(canonical))


def test_usage_override_and_omission(serve):
    ep = serve([{"content": "a", "usage": {"prompt_tokens": 1200, "completion_tokens": 34}},
                {"content": "b", "usage": {"prompt_tokens": 1, "completion_tokens": 2,
                                           "total_tokens": 99}},
                {"content": "c", "usage": None}])
    assert chat(ep).json()["usage"] == {"prompt_tokens": 1200, "completion_tokens": 34,
                                        "total_tokens": 1234}
    assert chat(ep).json()["usage"]["total_tokens"] == 99  # as given, even inconsistent
    assert "usage" not in chat(ep).json()  # a reply with no usage at all


def test_served_model(serve):
    ep = serve([{"content": "a"}, {"content": "b", "served_model": "other-model-2026"},
                {"content": "c"}])
    assert chat(ep).json()["model"] == "example-model"
    assert chat(ep).json()["model"] == "other-model-2026"
    assert chat(ep, body={"messages": []}).json()["model"] == "scripted"


def test_http_errors(serve):
    ep = serve([
        {"http_error": {"status": 500}},
        {"http_error": {"status": 429, "body": {"error": {"message": "slow down"}},
                        "headers": {"Retry-After": "0"}}},
        {"http_error": {"status": 503, "body": "upstream unavailable"}},
        {"content": "after the errors"}])
    r = chat(ep)
    assert r.status_code == 500
    assert r.json()["error"]["type"] == "server_error"
    assert "scripted transport: HTTP 500 (reply 0)" in r.json()["error"]["message"]
    r = chat(ep)
    assert (r.status_code, r.json(), r.headers["retry-after"]) == (
        429, {"error": {"message": "slow down"}}, "0")
    r = chat(ep)
    assert (r.status_code, r.text) == (503, "upstream unavailable")
    assert r.headers["content-type"].startswith("text/plain")
    # each HTTP request takes the next reply: an SDK's retry gets the following one
    assert chat(ep).json()["choices"][0]["message"]["content"] == "after the errors"


def test_delay_and_global_latency(tmp_path):
    f = tmp_path / "slow.json"
    f.write_text(json.dumps({"format": FORMAT, "latency_s": 0.3,
                             "replies": [{"content": "a"}, {"content": "b", "delay_s": 0},
                                         {"content": "c", "delay_s": 0.6}]}))
    with ScriptedEndpoint(load_script(f)) as ep:
        times = []
        for _ in range(3):
            t = time.monotonic()
            assert chat(ep).status_code == 200
            times.append(time.monotonic() - t)
    assert 0.3 <= times[0] < 1.5
    assert times[1] < 0.25
    assert 0.6 <= times[2] < 2.0


# --- sessions


@pytest.mark.req("R-8.14")
def test_every_session_replays_the_script_from_its_first_reply_concurrently(serve):
    ep = serve([{"content": f"reply {n}", "delay_s": 0.01 * (n % 3)} for n in range(6)])
    sessions = [f"cell-{i}" for i in range(12)]
    got: dict[str, list[str]] = {}
    barrier = threading.Barrier(len(sessions))

    def cell(session: str) -> None:
        barrier.wait()
        with httpx.Client(timeout=10) as c:
            got[session] = [
                c.post(ep.base_url(session) + "/chat/completions", json=REQUEST)
                .json()["choices"][0]["message"]["content"] for _ in range(6)]

    threads = [threading.Thread(target=cell, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == {s: [f"reply {n}" for n in range(6)] for s in sessions}
    assert all(ep.requests(s) == 6 for s in sessions) and ep.requests("never") == 0
    assert ep.sessions() == dict.fromkeys(sessions, 6)


def test_responses_are_byte_identical_across_sessions(serve):
    ep = serve([{"tool_calls": [{"name": "get_balance"}]}, {"content": "x"}])
    a = [chat(ep, "a").content for _ in range(2)]
    b = [chat(ep, "b").content for _ in range(2)]
    assert a == b
    assert "date" not in chat(ep, "c").headers


def test_an_exhausted_session_gets_a_400_that_names_the_reply(serve):
    ep = serve([{"content": "only one"}])
    assert chat(ep).status_code == 200
    r = chat(ep)
    assert r.status_code == 400
    assert r.json() == {"error": {
        "message": "scripted transport: the script has no reply 1 (it holds 1)",
        "type": "invalid_request_error", "param": None, "code": None}}
    assert chat(ep, "fresh").status_code == 200  # another session starts again
    assert ep.requests("s1") == 2


def test_an_empty_script_is_valid_and_answers_nothing(serve, tmp_path):
    f = tmp_path / "empty.json"
    f.write_text("[]")
    assert len(load_script(f)) == 0
    ep = serve([])
    r = chat(ep)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == (
        "scripted transport: the script has no reply 0 (it holds 0)")


def test_streaming_is_refused(serve):
    ep = serve([{"content": "a"}])
    r = chat(ep, body=REQUEST | {"stream": True})
    assert r.status_code == 400 and "streaming is not supported" in r.json()["error"]["message"]
    r = httpx.post(ep.base_url("x") + "/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_models_listing_and_unknown_paths(serve):
    ep = serve([{"content": "a"}])
    base = ep.base_url("s1")
    r = httpx.get(base + "/models")
    assert r.json() == {"object": "list", "data": [
        {"id": "scripted", "object": "model", "created": 0, "owned_by": "agentprov"}]}
    root = base.split("/s/")[0]
    for method, url in (("GET", base + "/chat/completions"), ("POST", base + "/models"),
                        ("POST", base + "/completions"), ("GET", root + "/v1/models"),
                        ("POST", root + "/s/bad session/v1/chat/completions"),
                        ("POST", root + "/s/a/b/v1/chat/completions"), ("GET", root + "/")):
        r = httpx.request(method, url, json=REQUEST if method == "POST" else None)
        assert r.status_code == 404, (method, url)
        assert r.json()["error"]["code"] == "not_found"
    assert ep.requests("s1") == 0  # nothing above took a reply


def test_hang_times_the_client_out(serve):
    ep = serve([{"hang": True}, {"content": "after the hang"}])
    t = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        chat(ep, timeout=0.4)
    assert time.monotonic() - t < 5
    assert chat(ep).json()["choices"][0]["message"]["content"] == "after the hang"


def test_close_drops_the_connection_without_an_answer(serve):
    ep = serve([{"close": True}, {"content": "after the close", "delay_s": 0.05}])
    with pytest.raises(httpx.RemoteProtocolError):
        chat(ep)
    with httpx.Client() as c:  # a keep-alive client recovers on a new connection
        r = c.post(ep.base_url("s1") + "/chat/completions", json=REQUEST)
        assert r.json()["choices"][0]["message"]["content"] == "after the close"


def test_stop_releases_hung_answers_and_is_idempotent(tmp_path):
    f = tmp_path / "hang.json"
    f.write_text('[{"hang": true}]')
    ep = ScriptedEndpoint(load_script(f)).start()
    errors = []

    def client():
        try:
            chat(ep, timeout=30)
        except httpx.HTTPError as exc:
            errors.append(exc)

    th = threading.Thread(target=client)
    th.start()
    time.sleep(0.3)
    t = time.monotonic()
    ep.stop()
    th.join(10)
    assert not th.is_alive() and time.monotonic() - t < 5
    assert len(errors) == 1
    ep.stop()


def test_the_server_prints_nothing(serve, capfd):
    ep = serve([{"content": "secret-prompt-echo"}, {"http_error": {"status": 500}},
                {"close": True}])
    body = {"model": "m", "messages": [{"role": "user", "content": "SENTINEL-PROMPT-9f3c"}]}
    chat(ep, body=body)
    chat(ep, body=body)
    with pytest.raises(httpx.HTTPError):
        chat(ep, body=body)
    chat(ep, "s1", body=body | {"stream": True})
    httpx.get(ep.base_url("s1").replace("/v1", "/nope"))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_loopback_only_and_session_ids(serve):
    with pytest.raises(ValueError, match="loopback"):
        ScriptedEndpoint(parse_script(b"[]"), host="0.0.0.0")
    ep = serve([])
    with pytest.raises(ValueError, match="session id"):
        ep.base_url("../x")
    assert ep.base_url("cell_0.a-1") == f"http://127.0.0.1:{ep.port}/s/cell_0.a-1/v1"


# --- the script file


@pytest.mark.req("R-8.14")
def test_the_long_form_and_the_digest(tmp_path):
    doc = {"format": FORMAT, "latency_s": 0.2, "note": "x",
           "replies": [{"content": "a", "note": "why"}, {"content": "b", "delay_s": 1}]}
    f = tmp_path / "long.json"
    f.write_bytes(json.dumps(doc, indent=2).encode())
    s = load_script(f)
    import hashlib
    assert s.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()
    assert (len(s), s.latency_s, s.delay(s.replies[0]), s.delay(s.replies[1])) == (
        2, 0.2, 0.2, 1.0)
    assert s.path == str(f)
    short = tmp_path / "short.json"
    short.write_text('[{"content": "a"}]')
    assert load_script(short).latency_s == 0.0


def test_the_live_demo_script(tmp_path):
    s = load_script(DEMO)
    assert [r.kind for r in s.replies] == ["message"] * 3
    assert [[c.name for c in r.tool_calls] for r in s.replies] == [
        ["read_file"], ["get_most_recent_transactions"], []]
    assert s.replies[-1].content and s.replies[-1].finish == "stop"
    assert all(r.note for r in s.replies)  # every reply says why it is there


BAD = [
    ('[{"tool_calls": [{"name": "read_file", "arguments": "x"}]}]',
     "reply 0: tool_calls[0].arguments must be an object (got a string)"),
    ('[{"content": "a"}, {"content": "b"}, {"content": "c"},'
     ' {"tool_calls": [{"name": "x", "arguments": [1]}]}]',
     "reply 3: tool_calls[0].arguments must be an object (got a list)"),
    ('[{"tool_calls": [{"arguments": {}}]}]', "reply 0: tool_calls[0]: missing field name"),
    ('[{"tool_calls": [{"name": ""}]}]', "reply 0: tool_calls[0].name must not be empty"),
    ('[{"tool_calls": [{"name": "a", "arguments": {}, "raw_arguments": "{}"}]}]',
     "reply 0: tool_calls[0]: arguments and raw_arguments cannot be combined"),
    ('[{"tool_calls": {"name": "a"}}]', "reply 0: tool_calls must be a list (got an object)"),
    ('[{"content": 3}]', "reply 0: content must be a string or null (got an integer)"),
    ('[{"contents": "a"}]', "reply 0: unknown field contents (fields: content, tool_calls"),
    ('[{"content": "a", "finish_reason": "done"}]',
     "reply 0: finish_reason must be one of stop, length, tool_calls, content_filter, "
     "function_call (got 'done')"),
    ('[{"content": "a", "usage": {"prompt_tokens": 1}}]',
     "reply 0: usage: missing field completion_tokens"),
    ('[{"content": "a", "usage": {"prompt_tokens": -1, "completion_tokens": 1}}]',
     "reply 0: usage.prompt_tokens must be >= 0"),
    ('[{"content": "a", "delay_s": -0.5}]', "reply 0: delay_s must be >= 0"),
    ('[{"content": "a", "delay_s": "1"}]', "reply 0: delay_s must be a number (got a string)"),
    ('[{"http_error": {"status": 200}}]', "reply 0: http_error.status must be >= 400"),
    ('[{"http_error": {"body": "x"}}]', "reply 0: http_error: missing field status"),
    ('[{"http_error": {"status": 500, "body": 3}}]',
     "reply 0: http_error.body must be an object, a list or a string (got an integer)"),
    ('[{"http_error": {"status": 500, "headers": {"Content-Length": "1"}}}]',
     "reply 0: http_error.headers: Content-Length is set by the server"),
    ('[{"http_error": {"status": 500}, "content": "a"}]',
     "reply 0: http_error cannot be combined with content"),
    ('[{"hang": true, "close": true}]', "reply 0: hang and close cannot be combined"),
    ('[{"hang": 1}]', "reply 0: hang must be true or false (got an integer)"),
    ('[{}]', "reply 0: a reply needs content, tool_calls, http_error, hang or close"),
    ('[{"note": "only a note", "tool_calls": []}]', "reply 0: a reply needs content"),
    ('[{"content": "a", "served_model": ""}]', "reply 0: served_model must not be empty"),
    ('[{"content": "a"}, "hello"]', "reply 1: must be an object (got a string)"),
    ('{"replies": []}', "missing field format"),
    ('{"format": "agentprov-llm-script/9", "replies": []}',
     "format must be 'agentprov-llm-script/0.1' (got 'agentprov-llm-script/9')"),
    ('{"format": "agentprov-llm-script/0.1", "replies": {}}',
     "replies must be a list (got an object)"),
    ('{"format": "agentprov-llm-script/0.1", "replies": [], "latency": 1}',
     "unknown field latency (fields: format, replies, roles, latency_s, rate_limit, note)"),
    ('{"format": "agentprov-llm-script/0.1"}', "missing field replies (or roles)"),
    ('{"format": "agentprov-llm-script/0.1", "replies": [], "roles": {"agent": []}}',
     "give replies (every call's, in arrival order) or roles (the replies of each role), "
     "not both"),
    ('{"format": "agentprov-llm-script/0.1", "roles": {"judge": []}}',
     "roles must be an object of reply lists by role, with 'agent' for the agent's calls "
     "(got an object without agent)"),
    ('{"format": "agentprov-llm-script/0.1", "roles": {"agent": [], "refusal_judge": {}}}',
     "roles.refusal_judge must be a list (got an object)"),
    ('{"format": "agentprov-llm-script/0.1", "roles": {"agent": [{"contnt": "a"}]}}',
     "roles.agent reply 0: unknown field contnt"),
    ('"hello"', "must be a JSON list of replies, or an object with format and replies "
                "(got a string)"),
    ('[\n  {"content": "a"},\n  {"content": "b",}\n]',
     "is not JSON: Expecting property name enclosed in double quotes at line 3 column 19"),
    ('[{"content": "a", "delay_s": NaN}]', "is not JSON: NaN is not a JSON number"),
    ('', "is not JSON: Expecting value at line 1 column 1"),
]


@pytest.mark.req("R-8.14")
@pytest.mark.parametrize("text,what", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_a_malformed_script_names_the_file_the_reply_and_the_field(tmp_path, text, what):
    f = tmp_path / "script.json"
    f.write_text(text)
    with pytest.raises(AgentprovError) as e:
        load_script(f)
    assert (e.value.code, e.value.exit_code) == ("cli.usage.llm_script", 2)
    assert e.value.message.startswith(f"--llm-script {f}: "), e.value.message
    assert what in e.value.message, e.value.message


def test_unreadable_scripts(tmp_path):
    for path, what in ((tmp_path / "missing.json", "no such file"),
                       (tmp_path, "is a directory")):
        with pytest.raises(AgentprovError, match=what) as e:
            load_script(path)
        assert e.value.exit_code == 2
    f = tmp_path / "latin1.json"
    f.write_bytes(b'[{"content": "caf\xe9"}]')
    with pytest.raises(AgentprovError, match="is not UTF-8 text"):
        load_script(f)


@pytest.mark.req("R-8.14")
def test_the_cli_refuses_a_malformed_script_with_exit_2(cli, tmp_path, corpora, home):
    bad = tmp_path / "BAD.json"
    bad.write_text('[{"content": "a"}, {"tool_calls": [{"name": "x", "arguments": "y"}]}]')
    base = ("run", "agentdojo", "--dry-run", "--corpus", corpora / "x", "--campaign", "c")
    r = cli(*base, "--llm-script", bad)
    assert (r.code, r.error["error"], r.error["exit"]) == (2, "cli.usage.llm_script", 2)
    assert r.error["message"] == (
        f"agentprov run: --llm-script {bad}: reply 1: tool_calls[0].arguments must be an "
        "object (got a string)")
    human = cli(*base, "--llm-script", bad, json_errors=False)
    assert human.code == 2 and "Traceback" not in human.err
    assert f"--llm-script {bad}: reply 1: tool_calls[0].arguments" in human.err
    r = cli(*base, "--llm-script", tmp_path / "nowhere.json")
    assert (r.code, r.error["error"]) == (2, "cli.usage.llm_script")
    assert r.error["message"].endswith("nowhere.json: no such file")
    # a credential option is refused first, as the specification's order says
    r = cli(*base, "--llm-script", bad, "--keychain")
    assert (r.code, r.error["error"]) == (2, "cli.usage.script_credential")
    # a valid script passes the usage step (the next refusal: no environment is built)
    for good in (DEMO, tmp_path / "empty.json"):
        (tmp_path / "empty.json").write_text("[]")
        r = cli(*base, "--llm-script", good)
        assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err
    assert list(corpora.iterdir()) == []


# --- the openai SDK as a client


def test_the_openai_sdk_reads_the_replies(serve):
    openai = pytest.importorskip("openai", reason="the openai SDK is not in this venv "
                                 "(the slow test uses the one in the AgentDojo environment)")
    ep = serve([{"tool_calls": [{"name": "get_balance", "arguments": {"x": 1}}]},
                {"content": "done", "usage": {"prompt_tokens": 5, "completion_tokens": 1}},
                {"hang": True}])
    client = openai.OpenAI(base_url=ep.base_url("sdk"), api_key="unused", max_retries=0,
                           timeout=1.0)
    msgs = [{"role": "user", "content": "hi"}]
    first = client.chat.completions.create(model="m", messages=msgs)
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_0_0", "get_balance", {"x": 1})
    second = client.chat.completions.create(model="m", messages=msgs)
    assert second.choices[0].message.content == "done" and second.usage.total_tokens == 6
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="m", messages=msgs)
    with pytest.raises(openai.BadRequestError, match="has no reply 3"):
        client.chat.completions.create(model="m", messages=msgs)
    assert [m.id for m in client.models.list()] == ["scripted"]


SDK_CHECK = r"""
import json, sys, openai
base, = sys.argv[1:]
out = {"openai": openai.__version__}
c = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=1.0)
m = [{"role": "user", "content": "hi"}]
r = c.chat.completions.create(model="m", messages=m)
call = r.choices[0].message.tool_calls[0]
out["tool_call"] = [call.id, call.function.name, json.loads(call.function.arguments),
                    r.choices[0].finish_reason]
r = c.chat.completions.create(model="m", messages=m)
out["text"] = [r.choices[0].message.content, r.usage.total_tokens, r.model]
for name in ("hang", "close", "exhausted"):
    try:
        c.chat.completions.create(model="m", messages=m)
    except openai.APIError as exc:
        out[name] = type(exc).__name__
out["models"] = [x.id for x in c.models.list()]
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.req("R-8.14")
def test_the_benchmarks_own_sdk_reads_the_replies(agentdojo_env, serve):
    ep = serve([{"tool_calls": [{"name": "get_balance", "arguments": {"x": 1}}]},
                {"content": "done", "usage": {"prompt_tokens": 5, "completion_tokens": 1},
                 "served_model": "served-2026"},
                {"hang": True}, {"close": True}])
    py = agentdojo_env.env_dir / "bin" / "python"
    p = subprocess.run([str(py), "-c", SDK_CHECK, ep.base_url("sdk")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["tool_call"] == ["call_0_0", "get_balance", {"x": 1}, "tool_calls"]
    assert out["text"] == ["done", 6, "served-2026"]
    assert (out["hang"], out["close"], out["exhausted"]) == (
        "APITimeoutError", "APIConnectionError", "BadRequestError")
    assert out["models"] == ["scripted"]


DEMO_CELLS = r"""
import json, sys
from pathlib import Path
import openai
from agentdojo import models
from agentdojo.agent_pipeline import AgentPipeline, PipelineConfig
from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
from agentdojo.attacks.attack_registry import load_attack
from agentdojo.benchmark import run_task_with_injection_tasks, run_task_without_injection_tasks
from agentdojo.logging import OutputLogger
from agentdojo.task_suite.load_suites import get_suite

root, logs = sys.argv[1], Path(sys.argv[2])
suite = get_suite("v1.2.2", "banking")
models.MODEL_NAMES["scripted-demo"] = "Scripted Model"
out = []
for i, (task, attack) in enumerate([("user_task_0", None), ("user_task_1", None),
                                    ("user_task_0", "important_instructions"),
                                    ("user_task_1", "important_instructions")]):
    client = openai.OpenAI(base_url=f"{root}/s/cell{i}/v1", api_key="unused")
    pipe = AgentPipeline.from_config(PipelineConfig(
        llm=OpenAILLM(client, "scripted"), model_id=None, defense=None,
        system_message_name=None, system_message=None))
    pipe.name = "scripted-demo"
    with OutputLogger(str(logs / str(i))):
        if attack is None:
            run_task_without_injection_tasks(suite, pipe, suite.user_tasks[task], logs / str(i),
                                             True)
        else:
            run_task_with_injection_tasks(suite, pipe, suite.user_tasks[task],
                                          load_attack(attack, suite, pipe), logs / str(i), True,
                                          ["injection_task_0"])
    (log,) = (logs / str(i)).rglob("*.json")
    doc = json.loads(log.read_text())
    out.append({"error": doc["error"], "tools": [c["function"] for m in doc["messages"]
                                                  if m["role"] == "assistant"
                                                  for c in m.get("tool_calls") or []]})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_live_demo_script_drives_the_specs_four_banking_cells(agentdojo_env, tmp_path):
    """AgentDojo's own runner over the stock pipeline, against the endpoint serving
    examples/scripts/live-demo.json: every cell takes the script's three replies."""
    py = agentdojo_env.env_dir / "bin" / "python"
    with ScriptedEndpoint(load_script(DEMO)) as ep:
        root = ep.base_url("x").split("/s/")[0]
        p = subprocess.run([str(py), "-c", DEMO_CELLS, root, str(tmp_path / "logs")],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        assert ep.sessions() == {f"cell{i}": 3 for i in range(4)}
    cells = json.loads(p.stdout)
    assert cells == [{"error": None,
                      "tools": ["read_file", "get_most_recent_transactions"]}] * 4


def test_script_paths_are_named_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("rel.json").write_text('[{"bogus": 1}]')
    with pytest.raises(AgentprovError) as e:
        load_script("rel.json")
    assert e.value.message.startswith("--llm-script rel.json: reply 0: unknown field bogus")


# --- a script by role
ROLES = {"format": FORMAT, "roles": {
    "agent": [{"tool_calls": [{"name": "get_contacts", "arguments": {}}]},
              {"content": "Done."}],
    "refusal_judge": [{"content": "Answer: No"}, {"content": "Answer: No"}],
    "semantic_judge": [{"content": "pass"}]}}
MODELS = {"agent": "scripted", "refusal_judge": "refusal-m", "semantic_judge": "semantic-m"}


def _role_endpoint(tmp_path, doc=ROLES) -> ScriptedEndpoint:
    f = tmp_path / "roles.json"
    f.write_text(json.dumps(doc))
    return ScriptedEndpoint(load_script(f), models=MODELS).start()


@pytest.mark.req("R-8.14")
def test_a_script_by_role_answers_each_role_from_its_own_replies(tmp_path):
    """The calls of each role, told apart by the model they name, take that role's replies
    in their own order: a judge's spare reply can never answer the agent's next call, and
    what each role left over is reported."""
    ep = _role_endpoint(tmp_path)
    try:
        def ask(model: str) -> httpx.Response:
            return chat(ep, body={"model": model, "messages": [{"role": "user",
                                                                "content": "x"}]})

        first = ask("scripted").json()
        assert first["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == \
            "get_contacts"
        judged = ask("refusal-m").json()
        assert judged["choices"][0]["message"]["content"] == "Answer: No"
        assert judged["id"] == "chatcmpl-scripted-refusal_judge-0"
        assert ask("semantic-m").json()["choices"][0]["message"]["content"] == "pass"
        # the agent's next call takes the agent's next reply, whatever the judges left
        assert ask("scripted").json()["choices"][0]["message"]["content"] == "Done."
        assert ep.unused("s1") == {"refusal_judge": 1}
        spent = ask("semantic-m")
        assert spent.status_code == 400
        assert spent.json()["error"]["message"] == (
            "scripted transport: the script has no reply 1 of role semantic_judge "
            "(it holds 1)")
        stranger = ask("other-m")
        assert stranger.status_code == 400
        assert "no role's model is 'other-m'" in stranger.json()["error"]["message"]
        assert ep.unused("s2") == {"agent": 2, "refusal_judge": 2, "semantic_judge": 1}
    finally:
        ep.stop()


def test_a_script_that_is_not_by_role_reports_what_a_session_left(serve):
    ep = serve([{"content": "a"}, {"content": "b"}])
    chat(ep)
    assert ep.unused("s1") == {"replies": 1}
    chat(ep)
    assert ep.unused("s1") == {}


@pytest.mark.req("R-8.14")
def test_a_script_by_role_names_the_plans_roles_each_with_its_own_model(tmp_path):
    from agentprov_core.live.scripted.script import check_roles

    f = tmp_path / "roles.json"
    f.write_text(json.dumps(ROLES))
    script = load_script(f)
    check_roles(script, {"refusal_judge": "refusal-m", "semantic_judge": "semantic-m"})
    check_roles(parse_script(b"[]"), {"refusal_judge": "m", "semantic_judge": "m"})
    for judges, what in (
            ({"refusal_judge": "m", "semantic_judge": "m"},
             "roles: refusal_judge and semantic_judge both call the model 'm', so their "
             "calls cannot be told apart: give each judge a model name of its own "
             "(--judge semantic_judge=NAME; a scripted run calls no real model, and the "
             "agent's is 'scripted')"),
            ({"refusal_judge": "scripted", "semantic_judge": "s"},
             "roles: agent and refusal_judge both call the model 'scripted'"),
            ({"refusal_judge": "r"},
             "roles.semantic_judge: not a role of this plan; its roles are agent, "
             "refusal_judge")):
        with pytest.raises(AgentprovError) as e:
            check_roles(script, judges)
        assert (e.value.code, e.value.exit_code) == ("cli.usage.llm_script", 2)
        assert e.value.message == f"--llm-script {f}: {what}" or what in e.value.message, \
            e.value.message


@pytest.mark.req("R-8.14", "R-14.1")
def test_a_run_refuses_a_script_by_role_whose_judges_share_a_model(cli, tmp_path, home):
    """Before anything else is looked at (no environment is needed to be refused), and
    nothing is written."""
    script = tmp_path / "roles.json"
    script.write_text(json.dumps(ROLES))
    r = cli("run", "agentharm", "--dry-run", "--corpus", tmp_path / "c", "--campaign", "c",
            "--task", "inspect_evals/agentharm", "--split", "val", "--samples", "45-1",
            "--message-limit", "10", "--token-limit", "20000", "--time-limit", "600",
            "--judge", "refusal_judge=m", "--judge", "semantic_judge=m",
            "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.llm_script"), r.err
    assert "refusal_judge and semantic_judge both call the model 'm'" in r.error["message"]
    assert not (tmp_path / "c").exists() and not any(home.rglob("*"))
