"""The recording transport (backends/shared/src/agentprov_backend/recording.py) writing
capture/0.1 through ``agentprov_capture``.

It needs the backend environment's openai, httpx2 and agentdojo: these tests (marked slow)
run driver scripts with the real environment's Python, with PYTHONPATH pointing at the
source trees of both libraries so the latest code is used, against a real loopback
OpenAI-style HTTP server started here.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import agentprov_capture as capture
import pytest
from test_capture_format import HEADER, lines_of

ROOT = Path(__file__).resolve().parent.parent
#: the worker library's and the capture library's sources, ahead of what the environment
#: installed
SOURCES = os.pathsep.join([str(ROOT / "backends" / "shared" / "src"),
                           str(ROOT / "packages" / "capture" / "src")])


# -- a real loopback OpenAI-style server ---------------------------------------------------

def completion(n: int, model: str = "gpt-4o-2024-05-13") -> bytes:
    return json.dumps({
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1764000000,
        "model": model, "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": f"reply {n} é"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }).encode()


class Server:
    """Scenario = first path segment: ok, gzip, flaky (500, 500, then 200), down (always
    500), bad (400), close (closes without a response), short (a cut body), hang."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.sent: list[bytes] = []
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                scenario = self.path.strip("/").split("/")[0]
                with outer.lock:
                    n = outer.counts.get(scenario, 0)
                    outer.counts[scenario] = n + 1
                    outer.requests.append({"scenario": scenario, "path": self.path,
                                           "headers": {k.lower(): v for k, v in
                                                       self.headers.items()},
                                           "body": body})
                if scenario == "close":
                    self.close_connection = True
                    return
                if scenario == "hang":
                    time.sleep(3)
                    self.close_connection = True
                    return
                status, payload, extra = 200, completion(n), {}
                if scenario == "down" or (scenario == "flaky" and n < 2):
                    status = 500
                    payload = b'{"error":{"message":"boom","type":"server_error"}}'
                    extra = {"retry-after-ms": "5"}
                elif scenario == "bad":
                    status = 400
                    payload = b'{"error":{"message":"bad request","type":"invalid"}}'
                elif scenario == "gzip":
                    payload = gzip.compress(completion(n), mtime=0)
                    extra = {"content-encoding": "gzip"}
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("x-request-id", f"req-{scenario}-{n}")
                self.send_header("set-cookie", "__cf_bm=server-cookie; path=/")
                for k, v in extra.items():
                    self.send_header(k, v)
                if scenario == "short":
                    self.send_header("content-length", str(len(payload) + 50))
                    self.end_headers()
                    self.wfile.write(payload[:10])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                with outer.lock:
                    outer.sent.append(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, scenario: str) -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/v1"


@pytest.fixture
def server():
    s = Server()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


# The driver: run inside the backend environment with the source trees on PYTHONPATH.
DRIVER = r'''
import base64, contextlib, json, sys
cfg = json.loads(sys.argv[1])
from agentprov_capture import CaptureWriter
from agentprov_backend.recording import current_call, model_call, recording_http_client
import openai

w = CaptureWriter(cfg["capture"], cfg["header"])
out = {"openai": openai.__version__}
http_client = recording_http_client(w, library=cfg.get("library", "httpx2"),
                                    **cfg.get("client_kwargs", {}))
def _names(obj):
    return [c.__module__.split(".")[0] + "." + c.__qualname__ for c in type(obj).__mro__]
out["client"] = _names(http_client)
out["transport"] = _names(http_client._transport.inner)[0]
client = openai.OpenAI(base_url=cfg["base_url"], api_key=cfg["api_key"],
                       http_client=http_client, default_headers=cfg.get("default_headers"),
                       default_query=cfg.get("default_query"),
                       max_retries=cfg.get("max_retries", 2))
mode = cfg["mode"]
try:
    if mode == "sdk":
        with current_call(cfg["call_id"]) if cfg.get("call_id") else contextlib.nullcontext():
            raw = client.chat.completions.with_raw_response.create(
                model="gpt-4o-2024-05-13", temperature=0.7,
                messages=[{"role": "user", "content": "hello"}])
        out["content_b64"] = base64.b64encode(raw.http_response.content).decode()
        out["status"] = raw.http_response.status_code
        out["headers"] = dict(raw.http_response.headers)
        out["completion"] = raw.parse().model_dump(mode="json")
    elif mode == "element":
        from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM
        from agentdojo.functions_runtime import FunctionsRuntime
        llm = OpenAILLM(client, "gpt-4o-2024-05-13")
        with model_call(w, cfg["call_id"], element="OpenAILLM", model=llm.model):
            llm.query("hello", FunctionsRuntime([]))
    elif mode == "raw":
        with current_call(cfg["call_id"]):
            http_client.post(cfg["base_url"] + "/chat/completions", json={"x": 1})
except Exception as exc:
    out["error"] = type(exc).__module__ + "." + type(exc).__qualname__
w.end("complete" if "error" not in out else "errored", reason=out.get("error"))
print(json.dumps(out))
'''


def drive(env, tmp_path: Path, **cfg) -> tuple[dict, list[dict], bytes]:
    cap = tmp_path / f"capture-{uuid.uuid4().hex[:8]}.jsonl"
    cfg = {"capture": str(cap), "header": HEADER, "api_key": "sk-unused", **cfg}
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("AGENTPROV_", "OPENAI_")) and "proxy" not in k.lower()}
    e["PYTHONPATH"] = SOURCES
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run([str(env.env_dir / "bin" / "python"), "-c", DRIVER, json.dumps(cfg)],
                       capture_output=True, text=True, env=e, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    ok, _, _, problems = capture.verify(cap)
    assert ok, problems
    return json.loads(p.stdout.strip().splitlines()[-1]), lines_of(cap), cap.read_bytes()


def wire(recs: list[dict]) -> list[dict]:
    return [r for r in recs if r["kind"].startswith("wire_")]


# -- (a) a chat completion through openai.OpenAI, recorded, and no secret in any byte ----

@pytest.mark.slow
@pytest.mark.req("R-2.7")
@pytest.mark.parametrize("library", ["httpx2", "httpx"])
def test_chat_completion_recorded_without_secrets(agentdojo_env, tmp_path, server, library):
    key, hdr, cookie, query = (f"sk-SENTINEL-{what}-{uuid.uuid4().hex}"
                               for what in ("key", "hdr", "cookie", "query"))
    out, recs, data = drive(agentdojo_env, tmp_path, mode="sdk", library=library,
                            base_url=server.url("ok"), api_key=key,
                            default_headers={"X-Api-Key": hdr, "Cookie": f"c={cookie}",
                                             "OpenAI-Organization": "org-test"},
                            default_query={"key": query})
    assert out["openai"] == "3.26.0" and "error" not in out, out
    # openai 3.26.0 takes an httpx2.Client (its stock DefaultHttpxClient is one) or a
    # legacy httpx.Client; the transport wrapped is that library's HTTPTransport
    assert out["client"][:2] == {"httpx2": ["openai._DefaultHttpxClient", "httpx2.Client"],
                                 "httpx": ["httpx.Client", "httpx.BaseClient"]}[library]
    assert out["transport"] == f"{library}.HTTPTransport"
    # the server really got the secrets: the transport stripped nothing on the wire
    got = server.requests[0]
    assert got["headers"]["authorization"] == f"Bearer {key}"
    assert got["headers"]["x-api-key"] == hdr and query in got["path"]
    for secret in (key, hdr, cookie, query):
        assert secret.encode() not in data
    req, resp = wire(recs)
    assert (req["kind"], resp["kind"]) == ("wire_request", "wire_response")
    assert req["call_id"] == "call-a1" and req["first_attempt_id"] == req["attempt_id"] == "a1"
    assert req["method"] == "POST"
    assert req["url"] == f"http://127.0.0.1:{server.port}/ok/v1/chat/completions"
    assert req["query_keys"] == ["key"]
    assert {"authorization", "x-api-key", "cookie"} <= set(req["headers_dropped"])
    assert req["headers"]["content-type"] == "application/json"
    assert req["headers"]["openai-organization"] == "org-test"
    assert req["headers"]["x-stainless-retry-count"] == "0"
    assert req["headers"]["user-agent"].startswith("OpenAI/Python 3.26.0")
    assert not [h for h in req["headers"] if h not in ("accept", "accept-encoding", "host",
                "connection", "content-length", "content-type", "user-agent",
                "openai-organization")
                and not h.startswith("x-stainless-")]
    # the body as sent: parsed, and its digest is of the exact bytes the server received
    assert req["body"]["temperature"] == 0.7 and req["body"]["model"] == "gpt-4o-2024-05-13"
    assert req["body_sha256"] == hashlib.sha256(got["body"]).hexdigest()
    assert resp["status"] == 200 and resp["headers_dropped"] == ["set-cookie"]
    assert resp["headers"]["x-request-id"] == "req-ok-0"
    assert resp["body"] == json.loads(server.sent[0])
    assert resp["body_sha256"] == hashlib.sha256(server.sent[0]).hexdigest()
    assert isinstance(resp["elapsed_ms"], int)
    # the SDK got the server's bytes unchanged
    assert base64.b64decode(out["content_b64"]) == server.sent[0]
    assert out["completion"]["choices"][0]["message"]["content"] == "reply 0 é"
    assert recs[-1]["kind"] == "end" and recs[-1]["status"] == "complete"


@pytest.mark.slow
@pytest.mark.req("R-2.7")
def test_gzip_response_recorded_decoded_and_served_encoded(agentdojo_env, tmp_path, server):
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="sdk", base_url=server.url("gzip"))
    assert "error" not in out, out
    resp = wire(recs)[1]
    assert resp["headers"]["content-encoding"] == "gzip"
    assert resp["body"] == json.loads(completion(0))
    assert resp["body_sha256"] == hashlib.sha256(completion(0)).hexdigest()
    assert resp["wire_sha256"] == hashlib.sha256(server.sent[0]).hexdigest()
    assert base64.b64decode(out["content_b64"]) == completion(0)  # httpx2 decoded it
    assert out["headers"]["content-length"] == str(len(server.sent[0]))


# -- (b) 500, 500, 200: three attempts linked to the first; the SDK gets the 200 ---------

@pytest.mark.slow
@pytest.mark.req("R-2.7", "R-21.13")
def test_sdk_retries_are_recorded_and_linked(agentdojo_env, tmp_path, server):
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="sdk", base_url=server.url("flaky"),
                         call_id="c-flaky")
    assert "error" not in out and out["status"] == 200, out
    w = wire(recs)
    assert [r["kind"] for r in w] == ["wire_request", "wire_response"] * 3
    assert [r["status"] for r in w if r["kind"] == "wire_response"] == [500, 500, 200]
    reqs = [r for r in w if r["kind"] == "wire_request"]
    assert [r["attempt_id"] for r in reqs] == ["a1", "a2", "a3"]
    assert {r["first_attempt_id"] for r in reqs} == {"a1"}
    assert {r["call_id"] for r in w} == {"c-flaky"}
    assert [r["attempt_index"] for r in reqs] == [0, 1, 2]
    assert [r["headers"]["x-stainless-retry-count"] for r in reqs] == ["0", "1", "2"]
    assert server.counts["flaky"] == 3
    assert base64.b64decode(out["content_b64"]) == server.sent[-1] == completion(2)
    assert out["completion"]["id"] == "chatcmpl-2"
    assert w[-1]["body"] == json.loads(completion(2))


# -- (c) AgentDojo's OpenAILLM against a persistent 500: 3 tenacity x 3 SDK = 9 ----------

@pytest.mark.slow
@pytest.mark.req("R-2.7", "R-21.12", "R-21.13")
def test_agentdojo_element_nine_attempts_linked_to_the_first(agentdojo_env, tmp_path, server):
    t = time.monotonic()
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="element", base_url=server.url("down"),
                         call_id="c-down")
    assert out["error"] == "openai.InternalServerError"
    assert server.counts["down"] == 9
    w = wire(recs)
    reqs = [r for r in w if r["kind"] == "wire_request"]
    resps = [r for r in w if r["kind"] == "wire_response"]
    assert len(reqs) == len(resps) == 9
    assert {r["status"] for r in resps} == {500}
    assert {r["first_attempt_id"] for r in reqs} == {"a1"}
    assert {r["call_id"] for r in w} == {"c-down"}
    assert [r["attempt_index"] for r in reqs] == list(range(9))
    assert [r["headers"]["x-stainless-retry-count"] for r in reqs] == ["0", "1", "2"] * 3
    start, end = (r for r in recs if r["kind"].startswith("model_call"))
    assert start == {**start, "kind": "model_call_start", "call_id": "c-down",
                     "element": "OpenAILLM", "model": "gpt-4o-2024-05-13"}
    assert end["status"] == "error" and end["wire_attempts"] == 9
    assert end["error_type"] == "openai.InternalServerError" and end["first_attempt_id"] == "a1"
    assert time.monotonic() - t < 120


@pytest.mark.slow
@pytest.mark.req("R-21.14")
def test_agentdojo_element_does_not_retry_a_400(agentdojo_env, tmp_path, server):
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="element", base_url=server.url("bad"),
                         call_id="c-bad")
    assert out["error"] == "openai.BadRequestError"
    assert server.counts["bad"] == 1
    assert [(r["kind"], r.get("status")) for r in wire(recs)] == [
        ("wire_request", None), ("wire_response", 400)]


# -- (d) a closed connection, a cut body and a timeout: wire_error -------------------------

@pytest.mark.slow
@pytest.mark.req("R-2.7", "R-21.13")
def test_closed_connection_is_a_wire_error_per_attempt(agentdojo_env, tmp_path, server):
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="sdk", base_url=server.url("close"),
                         call_id="c-close")
    assert out["error"] == "openai.APIConnectionError"
    w = wire(recs)
    assert [r["kind"] for r in w] == ["wire_request", "wire_error"] * 3
    errs = [r for r in w if r["kind"] == "wire_error"]
    assert {r["error_type"] for r in errs} == {"httpx2.RemoteProtocolError"}
    assert {r["stage"] for r in errs} == {"send"}
    assert {r["first_attempt_id"] for r in w if r["kind"] == "wire_request"} == {"a1"}
    assert [r["attempt_id"] for r in errs] == ["a1", "a2", "a3"]
    assert server.counts["close"] == 3


@pytest.mark.slow
@pytest.mark.req("R-2.7")
def test_cut_body_and_timeout_are_wire_errors(agentdojo_env, tmp_path, server):
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="raw", base_url=server.url("short"),
                         call_id="c-short")
    assert out["error"] == "httpx2.RemoteProtocolError"
    req, err = wire(recs)
    assert err["kind"] == "wire_error" and err["stage"] == "receive"
    assert err["status"] == 200 and err["received_bytes"] == 10
    assert err["headers"]["x-request-id"] == "req-short-0"
    out, recs, _ = drive(agentdojo_env, tmp_path, mode="sdk", base_url=server.url("hang"),
                         max_retries=0, client_kwargs={"timeout": 0.5})
    assert out["error"] == "openai.APITimeoutError"
    req, err = wire(recs)
    assert err["error_type"] == "httpx2.ReadTimeout" and 400 <= err["elapsed_ms"] < 3000


TLS_DRIVER = r'''
import json, ssl, sys
from agentprov_backend import recording
from agentprov_capture import CaptureWriter
from httpx2._config import create_ssl_context
cfg = json.loads(sys.argv[1])
w = CaptureWriter(cfg["capture"], cfg["header"])
before = recording.recording_http_client(w)._transport.inner._pool._ssl_context
recording.warm_tls_context()
shared = recording.shared_tls_context()
a = recording.recording_http_client(w)._transport.inner._pool._ssl_context
b = recording.recording_http_client(w)._transport.inner._pool._ssl_context
stock = create_ssl_context(verify=True)
def facts(c):
    return [type(c).__module__ + "." + type(c).__qualname__, int(c.verify_mode),
            c.check_hostname, int(c.minimum_version), c.options & ssl.OP_NO_COMPRESSION > 0]
w.end("complete")
print(json.dumps({"own_before": before is not shared, "shared": a is shared and b is shared,
                  "same_settings": facts(a) == facts(stock) == facts(before),
                  "facts": facts(a)}))
'''


@pytest.mark.slow
def test_the_forkserver_tls_context_is_the_stock_one_built_once(agentdojo_env, tmp_path):
    """The worker's preload builds the client's TLS context once, the way httpx2 does for
    verify=True; every recording client then uses it, with the stock settings."""
    cap = tmp_path / "c.jsonl"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPROV_", "SSL_"))}
    e["PYTHONPATH"] = SOURCES
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    p = subprocess.run([str(agentdojo_env.env_dir / "bin" / "python"), "-c", TLS_DRIVER,
                        json.dumps({"capture": str(cap), "header": HEADER})],
                       capture_output=True, text=True, env=e, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["own_before"] and out["shared"] and out["same_settings"], out
    assert out["facts"][1] == 2 and out["facts"][2] is True  # CERT_REQUIRED, hostname checked


ASYNC_DRIVER = r'''
import asyncio, json, sys
import httpx2
from agentprov_capture import CaptureWriter
from agentprov_backend.recording import current_call, wrap_async_client
cfg = json.loads(sys.argv[1])
w = CaptureWriter(cfg["capture"], cfg["header"])
out = {}
async def main():
    async with wrap_async_client(httpx2.AsyncClient(), w) as client:
        with current_call("c1"):
            r = await client.post(cfg["ok"], json={"x": 1})
            out["ok"] = [r.status_code, r.json()["id"]]
            r = await client.post(cfg["gzip"], json={"x": 2})
            out["gzip"] = r.json()["id"]
        try:
            await client.post(cfg["close"], json={"x": 3})
        except Exception as exc:
            out["close"] = type(exc).__module__ + "." + type(exc).__qualname__
asyncio.run(main())
w.end("complete")
print(json.dumps(out))
'''


@pytest.mark.slow
def test_the_async_transport_records_like_the_sync_one(agentdojo_env, tmp_path, server):
    """AgentDojo's AnthropicLLM talks through an async client: the async twin of the
    recording transport writes the same records and hands back the same bytes."""
    cap = tmp_path / "async.jsonl"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTPROV_", "OPENAI_"))
         and "proxy" not in k.lower()}
    e["PYTHONPATH"] = SOURCES
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    cfg = {"capture": str(cap), "header": HEADER, "ok": server.url("ok") + "/x",
           "gzip": server.url("gzip") + "/x", "close": server.url("close") + "/x"}
    p = subprocess.run([str(agentdojo_env.env_dir / "bin" / "python"), "-c", ASYNC_DRIVER,
                        json.dumps(cfg)], capture_output=True, text=True, env=e, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ok"][0] == 200 and out["ok"][1].startswith("chatcmpl-")
    assert out["gzip"].startswith("chatcmpl-") and out["close"].startswith("httpx2.")
    ok, _, _, problems = capture.verify(cap)
    assert ok, problems
    recs = wire(lines_of(cap))
    assert [r["kind"] for r in recs] == ["wire_request", "wire_response", "wire_request",
                                         "wire_response", "wire_request", "wire_error"]
    assert recs[0]["call_id"] == recs[2]["call_id"] == "c1"
    assert recs[2]["first_attempt_id"] == recs[0]["attempt_id"]
    assert recs[3]["content_encoding"] == "gzip" and recs[3]["body"]["id"] == out["gzip"]
    assert recs[5]["stage"] == "send"
