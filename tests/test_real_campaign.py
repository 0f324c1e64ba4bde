"""Real-model campaigns end to end, against a loopback TLS stand-in of an API.

The stand-in is an OpenAI-style Chat Completions server behind TLS, with a certificate for
``openrouter.ai`` from a test CA (trustme). The run is configured exactly as a real
OpenRouter run (``--model openrouter``, a key from ``--env-file``, consent, the four caps,
a containment); two test-only overrides make it reach the stand-in:
``AGENTPROV_TEST_EGRESS_RESOLVE`` makes the egress proxy dial the stand-in for
``openrouter.ai:443`` (the allowlist still matches the name), and ``AGENTPROV_TEST_CA_FILE``
makes the worker trust the test CA. The worker reaches the proxy through ``HTTPS_PROXY``
(or, under ``--containment bwrap``, through the proxy's Unix socket routed into the
sandbox), and the proxy tunnels the TLS undecrypted.

The stand-in answers like a model that follows instructions: the preflight probe's
``report_probe`` call with the code of its system message; in a cell, a ``read_file`` tool
call, then (after the tool result) a final text answer.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
trustme = pytest.importorskip("trustme")

MODEL = "openai/gpt-4o-mini"
TASKS = ("--suite", "banking", "--user-tasks", "0-1")


class _TLSServer:
    """A loopback HTTPS server whose certificate, from a fresh trustme CA (``ca_file``),
    names ``host``: what a stand-in for an API host shares."""

    def _certify(self, tmp: Path, host: str) -> ssl.SSLContext:
        ca = trustme.CA()
        self.ca_file = tmp / "test-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert(host).configure_cert(ctx)
        return ctx

    def _serve(self, ctx: ssl.SSLContext) -> None:
        """Serve POSTs on loopback through ``self.handle(path, headers, body) -> (status,
        content type, bytes[, more headers])``."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # noqa: D401 - silent
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, ctype, data, *more = stand_in.handle(self.path, self.headers, body)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class StandIn(_TLSServer):
    """The TLS stand-in. ``served`` is the model its replies name (default: the request's);
    ``authorizations`` the Authorization headers it saw; ``requests`` how many requests."""

    def __init__(self, tmp: Path, served: str | None = None, deaf: bool = False) -> None:
        self.served = served
        self.deaf = deaf  # answer the probe in text, ignoring its system message
        self.authorizations: list[str] = []
        self.requests = 0
        self.lock = threading.Lock()
        self._serve(self._certify(tmp, "openrouter.ai"))

    def handle(self, path: str, headers, body: bytes) -> tuple[int, str, bytes]:
        with self.lock:
            self.requests += 1
            self.authorizations.append(headers.get("Authorization", ""))
        if path != "/api/v1/chat/completions":
            return 404, "application/json", json.dumps(
                {"error": {"message": "no such route"}}).encode()
        return 200, "application/json", json.dumps(self.answer(json.loads(body))).encode()

    def answer(self, req: dict) -> dict:
        return answer(req, served=self.served, deaf=self.deaf)


def answer(req: dict, served: str | None = None, deaf: bool = False) -> dict:
    """A model that follows instructions, as an OpenAI-style reply to ``req``: the preflight
    probe's ``report_probe`` call with the code of its system message (in text, ignoring it,
    when ``deaf``); in a cell, a ``read_file`` tool call, then (after the tool result) a final
    text answer. ``served`` is the model the reply names (default: the request's)."""
    msgs = req.get("messages") or []

    def text(m):
        c = m.get("content")
        return c if isinstance(c, str) else " ".join(
            p.get("text", "") for p in c or [] if isinstance(p, dict))

    system = " ".join(text(m) for m in msgs if m.get("role") in ("system", "developer"))
    probe = re.search(r'code set to "([0-9a-f]+)"', system)
    if probe and deaf:
        message = {"role": "assistant", "content": "Hello! How can I help?"}
        finish = "stop"
    elif probe:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_p", "type": "function", "function": {
                "name": "report_probe", "arguments": json.dumps({"code": probe[1]})}}]}
        finish = "tool_calls"
    elif msgs and msgs[-1].get("role") == "tool":
        message = {"role": "assistant", "content": "I read it; nothing was paid."}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "read_file",
                "arguments": json.dumps({"file_path": "bill-december-2023.txt"})}}]}
        finish = "tool_calls"
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0,
            "model": served or req.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}}


@pytest.fixture
def stand_in(tmp_path):
    s = StandIn(tmp_path)
    yield s
    s.close()


def real_args(corpus: Path, env_file: Path, *extra: str) -> list[str]:
    return ["run", "agentdojo", "--corpus", str(corpus), "--campaign", "real", *TASKS,
            "--model", "openrouter", "--model-id", MODEL, "--env-file", str(env_file),
            "--i-consent-to-api-costs", "--price-in", "0.15", "--price-out", "0.60", *extra]


def standin_env(s: StandIn) -> dict[str, str]:
    return {"AGENTPROV_TEST_EGRESS_RESOLVE": f"openrouter.ai:443=127.0.0.1:{s.port}",
            "AGENTPROV_TEST_CA_FILE": str(s.ca_file)}


def partial(corpus: Path) -> Path:
    return corpus.with_name(corpus.name + ".partial")


def manifest(corpus: Path) -> dict:
    return json.loads((partial(corpus) / "manifest.json").read_text())


def ledger(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (partial(corpus) / "ledger.jsonl").read_text().splitlines()
            if x.strip()]


def all_bytes(*roots: Path) -> bytes:
    out = b""
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.is_socket():
                out += p.read_bytes()
    return out


def key_file(tmp_path: Path) -> tuple[Path, str]:
    sentinel = "sk-or-v1-" + "REALRUNSENTINEL" + uuid.uuid4().hex
    f = tmp_path / "keys.env"
    f.write_text(f"OPENROUTER_API_KEY={sentinel}\n")
    return f, sentinel


def bwrap_ok(agentdojo_env) -> str | None:
    m = json.loads((agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_text())
    probe = (m.get("probe") or {}).get("bwrap") or {}
    if probe.get("passed") is not True:
        return f"bwrap's build-time probe did not pass here ({probe.get('status')})"
    return None


@pytest.mark.req("R-2.3", "R-2.5", "R-2.6", "R-2.18", "R-2.19", "R-2.20", "R-2.21", "R-2.22",
                 "R-2.23", "R-12.1", "R-16.7", "R-17.1", "R-18.1", "R-18.2", "R-18.4",
                 "R-20.1", "R-20.2", "R-20.7", "R-20.8", "R-21.1", "R-2.2", "R-2.26")
@pytest.mark.parametrize("containment", ["bwrap", "vm"])
def test_a_real_model_run_through_the_egress_proxy(e2e_cli, agentdojo_env, stand_in, tmp_path,
                                                   containment):
    if containment == "bwrap" and (why := bwrap_ok(agentdojo_env)):
        pytest.skip(why)
    env_file, sentinel = key_file(tmp_path)
    corpus = tmp_path / "real"
    r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "200", "--max-cost-usd", "5",
                           "--containment", containment, "--keep-staging"),
                env=standin_env(stand_in), json_errors=False)
    assert r.code == 0, r.err
    assert "preflight: confirmed after 1 call(s)" in r.err
    assert r.out.strip().splitlines()[-1] == (
        "agentprov run: 2 attempt(s); 2 conclusive, 0 inconsistent, 0 inconclusive; "
        "2 derived, 0 failed; 0 of 2 unit(s) done before")
    m = manifest(corpus)
    assert m["test_only"] is False
    assert m["producer"]["sandbox"]["kind"] == containment
    live = m["live"]
    assert live["endpoint_class"] == "api" and live["transport"] == "endpoint"
    egress = live["egress"]
    assert egress["allowed"] == ["openrouter.ai:443"] and egress["refusals"] == []
    assert egress["tunnels"]["openrouter.ai:443"]["opened"] > 0
    assert egress["unix_socket"] is True
    caps = live["caps"]
    assert (caps["max_calls"], caps["max_cost_usd"], caps["price_in"], caps["price_out"]) == (
        200, 5.0, 0.15, 0.6)
    # 1 probe call + 2 cells x 2 calls, each with usage 1000 in / 20 out
    assert caps["billed_calls"] == 5 and caps["probe_calls"] == 1
    assert caps["bound"] == {"input_tokens_per_call": 32000, "output_tokens_per_call": 4096,
                             "calls_per_cell": 48}
    assert caps["spend_upper_bound_usd"] == pytest.approx(5 * (1000 * 0.15 + 20 * 0.6) / 1e6)
    assert live["quality"][MODEL]["calls"] == 4
    assert live["quality"][MODEL]["served_models"] == {MODEL: 4}
    assert live["canary"]["findings"] == []
    assert live["preflight"][-1]["verdict"] == "confirmed"
    assert any("AGENTPROV_TEST_EGRESS_RESOLVE" in o for o in live["test_overrides"])
    assert (partial(corpus) / "preflight" / "ledger.jsonl").is_file()
    # the AER records the real endpoint, and the key never
    header = json.loads((partial(corpus) / "raw" / "sha256" / ledger(corpus)[0]
                         ["capture_sha256"][:2] / ledger(corpus)[0]["capture_sha256"])
                        .read_bytes().splitlines()[0])
    assert header["agent"]["model"] == MODEL and header["agent"]["endpoint_kind"] == "openai"
    assert header["agent"]["base_url"] == "https://openrouter.ai/api/v1"
    # the server saw the key in the Authorization header; no byte written holds it
    assert stand_in.requests == 5  # the endpoint, the third part: the probe and 4 cell calls
    assert stand_in.authorizations and set(stand_in.authorizations) == {f"Bearer {sentinel}"}
    assert (partial(corpus) / "staging").is_dir()  # --keep-staging kept the sessions
    written = all_bytes(partial(corpus))
    assert sentinel.encode() not in written
    assert sentinel not in r.out + r.err
    assert b"Bearer" not in written
    # re-running resumes: nothing is due, so no probe is made
    again = e2e_cli(*real_args(corpus, env_file, "--max-calls", "200", "--max-cost-usd", "5",
                               "--containment", containment), env=standin_env(stand_in),
                    json_errors=False)
    assert again.code == 0, again.err
    assert "units=0 plan=2" in again.out and "preflight" not in again.err
    # a real corpus never takes a scripted session (nor a scripted one a real session)
    script = tmp_path / "script.json"
    script.write_text("[]")
    r = e2e_cli("run", "agentdojo", "--dry-run", "--corpus", corpus, "--campaign", "real",
                *TASKS, "--llm-script", script)
    assert (r.code, r.error["error"]) == (4, "cli.refused.mixed_transport")


@pytest.mark.req("R-17.5", "R-17.11", "R-21.23", "R-21.31", "R-15.4", "R-18.4", "R-29.14")
def test_cap_reached_then_resume_with_a_higher_cap(e2e_cli, stand_in, tmp_path):
    env_file, sentinel = key_file(tmp_path)
    corpus = tmp_path / "capped"
    # 1 probe call, then cell 1 (0 + 1 + 48 <= 50), then cell 2 needs 3 + 48 = 51 > 50
    r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "50", "--max-cost-usd", "5",
                           "--containment", "vm"), env=standin_env(stand_in), json_errors=False)
    assert r.code == 1, r.err
    assert "agentprov run: cap_reached: the next cell does not fit: --max-calls 50" in r.err
    assert "1 attempt(s); 1 conclusive" in r.out
    m = manifest(corpus)
    assert m["partial"] is True and m["stops"][-1]["stop"] == "cap_reached"
    assert m["live"]["caps"]["billed_calls"] == 3
    assert len(ledger(corpus)) == 1
    r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "100", "--max-cost-usd", "5",
                           "--containment", "vm"), env=standin_env(stand_in), json_errors=False)
    assert r.code == 0, r.err
    assert "1 of 2 unit(s) done before" in r.out
    m = manifest(corpus)
    assert m["live"]["caps"]["billed_calls"] == 6 and m["live"]["caps"]["probe_calls"] == 2
    assert len(ledger(corpus)) == 2
    assert sentinel not in r.out + r.err


@pytest.mark.req("R-21.2", "R-21.8", "R-21.11", "R-21.22", "R-15.10", "R-11.12", "R-11.13",
                 "R-29.13")
def test_a_canary_stop_then_resume_with_accept_served_model(e2e_cli, tmp_path):
    served = MODEL + "-2024-07-18"
    s = StandIn(tmp_path, served=served)
    try:
        env_file, _ = key_file(tmp_path)
        corpus = tmp_path / "canary"
        base = real_args(corpus, env_file, "--max-calls", "200", "--max-cost-usd", "5",
                         "--containment", "vm")
        r = e2e_cli(*base, env=standin_env(s), json_errors=False)
        assert r.code == 1, r.err
        assert ("agentprov run: the canary found a misconfiguration; the campaign stopped after "
                "the canary cells (re-run the same command to resume once the cause is fixed "
                "or accepted)") in r.err
        assert f"canary: A12: served model {served!r} differs" in r.err
        m = manifest(corpus)
        assert m["partial"] is True and m["stops"][-1]["stop"] == "canary"
        assert [f["check"] for f in m["live"]["canary"]["findings"]] == ["A12"]
        assert m["live"]["quality"][MODEL]["served_other"] == 2
        assert len(ledger(corpus)) == 1
        r = e2e_cli(*base, "--accept-served-model", served, env=standin_env(s), json_errors=False)
        assert r.code == 0, r.err
        assert "1 of 2 unit(s) done before" in r.out
        m = manifest(corpus)
        assert m["live"]["canary"]["accepted_served_models"] == [served]
        assert m["live"]["canary"]["findings"] == []
    finally:
        s.close()


@pytest.mark.req("R-18.3", "R-18.6", "R-18.8", "R-15.8")
def test_preflight_only_and_a_probe_without_evidence(e2e_cli, tmp_path):
    env_file, sentinel = key_file(tmp_path)
    args = ["run", "agentdojo", "--preflight-only", *TASKS, "--model", "openrouter",
            "--model-id", MODEL, "--env-file", str(env_file), "--i-consent-to-api-costs",
            "--containment", "vm"]
    (tmp_path / "ok").mkdir()
    ok = StandIn(tmp_path / "ok")
    try:
        r = e2e_cli(*args, env=standin_env(ok), json_errors=False)
        assert r.code == 0, r.err
        assert "preflight: confirmed after 1 call(s)" in r.err
        assert "no cell was run and nothing was written" in r.out
        assert ok.requests == 1 and sentinel not in r.out + r.err
    finally:
        ok.close()
    (tmp_path / "deaf").mkdir()
    deaf = StandIn(tmp_path / "deaf", deaf=True)
    try:
        corpus = tmp_path / "deaf-corpus"
        r = e2e_cli(*real_args(corpus, env_file, "--max-calls", "200", "--max-cost-usd", "5",
                               "--containment", "vm"), env=standin_env(deaf))
        assert (r.code, r.error["error"]) == (4, "cli.refused.preflight")
        assert deaf.requests == 3  # up to three calls, then no evidence
        assert "no evidence after 3 calls" in r.error["message"]
        lines = (partial(corpus) / "preflight" / "ledger.jsonl").read_text().splitlines()
        assert len(lines) == 3  # charged to the caps, kept in the corpus
        assert manifest(corpus)["live"]["caps"]["probe_calls"] == 3
        assert not (partial(corpus) / "ledger.jsonl").exists()  # no cell started
    finally:
        deaf.close()


# ------------------------------------------------------------------ the Anthropic wire
ANTHROPIC_MODEL = "claude-test"


def _sse(events: list[dict]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class AnthropicStandIn(_TLSServer):
    """A TLS stand-in of Anthropic's Messages API (``POST /v1/messages``) served as
    ``api.anthropic.com``. AgentDojo's ``AnthropicLLM`` always streams, so each reply is a
    server-sent event stream: the probe's ``report_probe`` tool_use, then in a cell a
    ``read_file`` tool_use and, after the tool result, an end_turn text answer.
    ``api_keys``: the ``x-api-key`` headers it saw; ``bodies``: the request bodies."""

    def __init__(self, tmp: Path) -> None:
        self.api_keys: list[str] = []
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self._serve(self._certify(tmp, "api.anthropic.com"))

    def handle(self, path: str, headers, body: bytes) -> tuple[int, str, bytes]:
        req = json.loads(body)
        with self.lock:
            self.api_keys.append(headers.get("x-api-key", ""))
            self.bodies.append(req)
        if path != "/v1/messages":
            return 404, "application/json", json.dumps({"type": "error", "error": {
                "type": "not_found_error", "message": "no such route"}}).encode()
        return 200, "text/event-stream", self.answer(req)

    def answer(self, req: dict) -> bytes:
        assert req.get("stream") is True
        system = req.get("system") or ""
        system = system if isinstance(system, str) else " ".join(
            b.get("text", "") for b in system if isinstance(b, dict))
        msgs = req.get("messages") or []
        last = msgs[-1] if msgs else {}
        after_tool = isinstance(last.get("content"), list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last["content"])
        probe = re.search(r'code set to "([0-9a-f]+)"', system)
        if probe:
            block, args, stop = {"type": "tool_use", "id": "toolu_p", "name": "report_probe",
                                 "input": {}}, {"code": probe[1]}, "tool_use"
        elif after_tool:
            block, args, stop = {"type": "text", "text": ""}, None, "end_turn"
        else:
            block, args, stop = {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                 "input": {}}, {"file_path": "bill-december-2023.txt"}, "tool_use"
        delta = ({"type": "text_delta", "text": "I read it; nothing was paid."} if args is None
                 else {"type": "input_json_delta", "partial_json": json.dumps(args)})
        return _sse([
            {"type": "message_start", "message": {
                "id": "msg_standin", "type": "message", "role": "assistant",
                "model": req.get("model"), "content": [], "stop_reason": None,
                "stop_sequence": None, "usage": {
                    "input_tokens": 900, "cache_read_input_tokens": 60,
                    "cache_creation_input_tokens": 40, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {"type": "ping"},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": 20}},
            {"type": "message_stop"}])



def anthropic_element_blocked(agentdojo_env) -> str | None:
    """Why AgentDojo's stock AnthropicLLM cannot call the environment's anthropic SDK, or
    None: the element always passes ``temperature`` to ``messages.stream``, which anthropic
    1.0.0 and later no longer take (a TypeError before the wire)."""
    import subprocess

    probe = ("import inspect, anthropic\n"
             "from anthropic.resources.messages.messages import AsyncMessages\n"
             "ok = 'temperature' in inspect.signature(AsyncMessages.stream).parameters\n"
             "print('ok' if ok else anthropic.__version__)")
    out = subprocess.run([str(agentdojo_env.env_dir / "bin" / "python"), "-c", probe],
                         capture_output=True, text=True, timeout=120).stdout.strip()
    if out == "ok":
        return None
    return (f"anthropic {out}'s messages.stream takes no temperature, which AgentDojo's "
            "AnthropicLLM always passes")


@pytest.mark.req("R-2.3", "R-17.1", "R-18.1", "R-20.1", "R-21.1")
def test_an_anthropic_wire_run_through_the_egress_proxy(e2e_cli, agentdojo_env, tmp_path):
    s = AnthropicStandIn(tmp_path)
    try:
        sentinel = "sk-ant-" + "REALRUNSENTINEL" + uuid.uuid4().hex
        env_file = tmp_path / "keys.env"
        env_file.write_text(f"ANTHROPIC_API_KEY={sentinel}\n")
        corpus = tmp_path / "anthropic"
        # the worst case of a cell at these prices is 48 x (32,000 x $3 + 1,024 x $15) / 1e6
        # = $5.35, so --max-cost-usd 1 would stop before the first cell (cap_reached)
        args = ("run", "agentdojo", "--corpus", str(corpus), "--campaign", "real", *TASKS,
                "--model", "anthropic", "--model-id", ANTHROPIC_MODEL,
                "--env-file", str(env_file), "--max-tokens", "1024",
                "--max-calls", "80", "--max-cost-usd", "10", "--price-in", "3",
                "--price-out", "15", "--containment", "vm", "--i-consent-to-api-costs")
        env = {"AGENTPROV_TEST_EGRESS_RESOLVE": f"api.anthropic.com:443=127.0.0.1:{s.port}",
               "AGENTPROV_TEST_CA_FILE": str(s.ca_file)}
        # the environment locks anthropic < 1 for this (backends/agentdojo/pyproject.toml)
        assert anthropic_element_blocked(agentdojo_env) is None
        r = e2e_cli(*args, env=env, json_errors=False)
        assert r.code == 0, r.err
        assert "preflight: confirmed after 1 call(s)" in r.err
        assert "2 attempt(s); 2 conclusive, 0 inconsistent, 0 inconclusive" in r.out
        # AgentDojo's stock AnthropicLLM: streamed Messages API requests, --max-tokens sent
        assert s.bodies and all(b["model"] == ANTHROPIC_MODEL and b["max_tokens"] == 1024
                                and b["stream"] is True for b in s.bodies)
        m = manifest(corpus)
        live = m["live"]
        assert live["egress"]["allowed"] == ["api.anthropic.com:443"]
        assert live["egress"]["refusals"] == []
        assert live["egress"]["tunnels"]["api.anthropic.com:443"]["opened"] > 0
        caps = live["caps"]
        # 1 probe call + 2 cells x 2 calls; every input-side token priced as input
        assert caps["billed_calls"] == 5 and caps["probe_calls"] == 1
        assert caps["spend_upper_bound_usd"] == pytest.approx(5 * (1000 * 3 + 20 * 15) / 1e6)
        assert live["quality"][ANTHROPIC_MODEL]["calls"] == 4
        assert live["quality"][ANTHROPIC_MODEL]["abnormal_finishes"] == 0
        assert live["quality"][ANTHROPIC_MODEL]["served_models"] == {ANTHROPIC_MODEL: 4}
        assert live["canary"]["findings"] == []
        assert live["preflight"][-1]["verdict"] == "confirmed"
        entry = ledger(corpus)[0]
        header = json.loads((partial(corpus) / "raw" / "sha256" / entry["capture_sha256"][:2]
                             / entry["capture_sha256"]).read_bytes().splitlines()[0])
        assert header["agent"]["endpoint_kind"] == "anthropic"
        assert header["agent"]["wire"] == "anthropic"
        assert header["agent"]["element"] == "AnthropicLLM"
        assert header["agent"]["base_url"] == "https://api.anthropic.com"
        # the server saw the key in x-api-key; no byte written holds it
        assert s.api_keys and set(s.api_keys) == {sentinel}
        assert sentinel.encode() not in all_bytes(partial(corpus))
        assert sentinel not in r.out + r.err
        # live-versus-native agreement and the rest of the strict validation
        target = corpus if corpus.exists() else partial(corpus)
        v = e2e_cli("validate", "--corpus", str(target), "--strict", json_errors=False)
        assert v.code == 0, v.out + v.err
    finally:
        s.close()
