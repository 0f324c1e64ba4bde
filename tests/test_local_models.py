"""Local model servers without a real model: small loopback HTTP servers that speak each
kind's listing and fingerprint shape (as docs/local-models.md records them), the refusals,
the numbered pick on a real pseudo-terminal, the identity record and its digest, the
digest cache, and an API endpoint's cached model list."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentprov_core.errors import AgentprovError
from tests.conftest import ROOT, child_env

# --- fake servers --------------------------------------------------------------------------


#: a route's answer that closes the connection without a response
CLOSE = object()


class FakeServer:
    """A loopback HTTP server answering ``routes[(METHOD, path)]``: a JSON-able object,
    ``(status, body)``, :data:`CLOSE`, or a callable ``(body) -> `` one of them. Unknown paths are
    404 ``Not Found`` (as mlx_lm.server answers). Every request is recorded. ``server``
    is the ``Server`` header it sends (``self.server`` may change while it runs);
    without one, http.server's own ``BaseHTTP/… Python/…``."""

    def __init__(self, routes: dict, require_key: str | None = None,
                 server: str | None = None) -> None:
        self.routes = routes
        self.require_key = require_key
        self.server = server
        self.requests: list[tuple[str, str, dict]] = []
        fake = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def version_string(self) -> str:
                return fake.server or super().version_string()

            def _answer(self, method: str) -> None:
                body_in = b""
                if method == "POST":
                    body_in = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests.append((method, self.path, dict(self.headers.items())))
                if fake.require_key and self.headers.get("Authorization") != \
                        f"Bearer {fake.require_key}":
                    return self._send(401, {"error": "unauthorized"})
                route = fake.routes.get((method, self.path))
                if route is None:
                    return self._send(404, b"Not Found")
                if callable(route):
                    route = route(body_in)
                if route is CLOSE:  # no response at all: the client sees a connection error
                    self.close_connection = True
                    return None
                if isinstance(route, tuple):
                    return self._send(*route)
                return self._send(200, route)

            def _send(self, status: int, body: Any) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def now() -> int:
    return int(time.time() * 1000)  # stamped per request, as vLLM and llama.cpp do


def listing(*entries: dict) -> Any:
    return lambda _b: (200, {"object": "list",
                             "data": [dict(e, created=now()) if "created" in e else e
                                      for e in entries]})


def make_weights(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def ollama_routes(tmp: Path) -> dict:
    blob = make_weights(tmp / "ollama" / "blobs", {"sha256-aa": b"G" * 4096}) / "sha256-aa"
    tags = {"models": [
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "size": 4096,
         "digest": "a80c4f17acd5" + "0" * 52, "modified_at": "2026-10-01T00:00:00Z",
         "details": {"format": "gguf", "family": "llama", "parameter_size": "3.2B",
                     "quantization_level": "Q4_K_M"}},
        {"name": "qwen3:8b", "model": "qwen3:8b", "size": 10, "digest": "b" * 64,
         "details": {"family": "qwen3"}},
        {"name": "gpt-oss:120b-cloud", "model": "gpt-oss:120b-cloud", "size": 384,
         "digest": "c" * 64, "remote_model": "gpt-oss:120b",
         "remote_host": "https://ollama.com:443", "details": {"family": "gptoss"}},
    ]}
    show = {"modelfile": f"# Modelfile\nFROM {blob}\nTEMPLATE x\n",
            "details": {"family": "llama"}, "capabilities": ["completion", "tools"],
            "template": "{{ .Prompt }}", "parameters": "stop <|eot_id|>",
            "model_info": {"general.architecture": "llama", "llama.context_length": 131072,
                           "llama.rope.freq_base": 500000.0,
                           "tokenizer.ggml.tokens": None}}
    return {
        ("GET", "/api/version"): {"version": "0.9.6"},
        ("GET", "/api/tags"): tags,
        ("GET", "/api/ps"): {"models": [{"name": "llama3.2:latest", "model": "llama3.2:latest",
                                         "size_vram": 123, "context_length": 4096,
                                         "expires_at": "2026-12-01T00:00:00Z"}]},
        ("POST", "/api/show"): lambda body: (200, show),
        ("GET", "/v1/models"): listing(*[{"id": m["name"], "object": "model",
                                          "created": 1, "owned_by": "library"}
                                         for m in tags["models"]]),
    }


def llamacpp_routes(tmp: Path) -> dict:
    folder = make_weights(tmp / "gguf", {"m-00001-of-00002.gguf": b"A" * 3000,
                                         "m-00002-of-00002.gguf": b"B" * 2000})
    return {
        ("GET", "/v1/models"): listing({"id": "m", "object": "model", "created": 1,
                                        "owned_by": "llamacpp",
                                        "meta": {"n_params": 3_000_000, "n_ctx_train": 8192}}),
        ("GET", "/props"): {"default_generation_settings": {"n_ctx": 4096,
                                                            "params": {"temperature": 0.8}},
                            "total_slots": 4, "model_alias": "m",
                            "model_path": str(folder / "m-00001-of-00002.gguf"),
                            "modalities": {"vision": False}, "chat_template": "{{x}}",
                            "build_info": "b6000-abcdef0"},
        ("GET", "/health"): {"status": "ok"},
    }


def lmstudio_routes(tmp: Path) -> dict:
    v0 = {"object": "list", "data": [
        {"id": "qwen3-8b", "object": "model", "type": "llm", "publisher": "qwen",
         "arch": "qwen3", "compatibility_type": "gguf", "quantization": "Q4_K_M",
         "state": "loaded", "max_context_length": 32768, "loaded_context_length": 4096,
         "capabilities": ["tool_use"]},
        {"id": "gemma-3-4b", "object": "model", "type": "vlm", "publisher": "google",
         "arch": "gemma3", "compatibility_type": "mlx", "quantization": "4bit",
         "state": "not-loaded", "max_context_length": 131072},
    ]}
    return {
        ("GET", "/v1/models"): {"object": "list", "data": [
            {"id": d["id"], "object": "model", "owned_by": "organization_owner"}
            for d in v0["data"]]},
        ("GET", "/api/v0/models"): v0,
    }


def vllm_routes(tmp: Path) -> dict:
    hub = tmp / "hub"
    snap = make_weights(hub / "models--Qwen--Qwen2.5-0.5B" / "snapshots" / "abc123",
                        {"model.safetensors": b"S" * 5000, "config.json": b"{}"})
    (hub / "models--Qwen--Qwen2.5-0.5B" / "refs").mkdir()
    (hub / "models--Qwen--Qwen2.5-0.5B" / "refs" / "main").write_text("abc123")
    assert snap.is_dir()
    return {
        ("GET", "/version"): {"version": "0.10.1"},
        ("GET", "/v1/models"): listing({"id": "Qwen/Qwen2.5-0.5B", "object": "model",
                                        "created": 1, "owned_by": "vllm",
                                        "root": "Qwen/Qwen2.5-0.5B", "parent": None,
                                        "max_model_len": 32768,
                                        "permission": [{"id": "modelperm-x", "created": 1}]}),
    }


def omlx_routes(tmp: Path) -> dict:
    return {
        ("GET", "/v1/models"): listing({"id": "Qwen3.5-4B-MLX-4bit", "object": "model",
                                        "created": 1, "owned_by": "omlx",
                                        "max_model_len": 32768}),
        ("GET", "/v1/models/status"): {"models": [{"id": "Qwen3.5-4B-MLX-4bit",
                                                   "loaded": True, "is_loading": False}]},
    }


def mlx_lm_routes(tmp: Path) -> dict:
    folder = make_weights(tmp / "mlx-model", {"model.safetensors": b"M" * 7000,
                                              "config.json": b'{"model_type": "qwen3"}',
                                              "tokenizer.json": b"{}"})
    return {
        ("GET", "/v1/models"): listing({"id": str(folder), "object": "model", "created": 1}),
        ("GET", "/health"): {"status": "ok"},
    }


def openai_compat_routes(tmp: Path) -> dict:
    """A server of no kind agentprov knows (an SGLang-like listing: ``owned_by`` names it,
    ``created`` is stamped per request, ``max_model_len`` is serving state); the chat
    route is added by the tests that run cells."""
    return {
        ("GET", "/v1/models"): listing(
            {"id": "Qwen/Qwen3-8B", "object": "model", "created": 1, "owned_by": "sglang",
             "root": "Qwen/Qwen3-8B", "max_model_len": 32768},
            {"id": "tiny", "object": "model", "created": 1, "owned_by": "sglang",
             "root": "tiny", "max_model_len": 2048}),
        ("GET", "/health"): {"status": "ok"},
    }


ROUTES = {"ollama": ollama_routes, "llamacpp": llamacpp_routes, "lmstudio": lmstudio_routes,
          "vllm": vllm_routes, "omlx": omlx_routes, "mlx_lm": mlx_lm_routes,
          "openai_compat": openai_compat_routes}


@pytest.fixture
def serve(tmp_path: Path, monkeypatch):
    """``serve(kind)`` starts a fake server of that kind; all are closed after the test."""
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    started: list[FakeServer] = []

    def start(kind: str, require_key: str | None = None, routes: dict | None = None,
              server: str | None = None) -> FakeServer:
        s = FakeServer(routes if routes is not None else ROUTES[kind](tmp_path),
                       require_key=require_key, server=server)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


class Ep:
    def __init__(self, name: str, kind: str, base_url: str) -> None:
        self.name, self.kind, self.base_url = name, kind, base_url


def ep(kind: str, server: FakeServer) -> Ep:
    return Ep(kind, kind, server.base_url)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sub_env(tmp_path: Path) -> dict[str, str]:
    return {"HF_HUB_CACHE": str(tmp_path / "hub"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


# --- kinds and fingerprints ------------------------------------------------------------------

EXPECT = {
    "ollama": (["llama3.2:latest", "qwen3:8b", "gpt-oss:120b-cloud"], "0.9.6"),
    "llamacpp": (["m"], "b6000-abcdef0"),
    "lmstudio": (["qwen3-8b", "gemma-3-4b"], None),
    "vllm": (["Qwen/Qwen2.5-0.5B"], "0.10.1"),
    "omlx": (["Qwen3.5-4B-MLX-4bit"], None),
    "openai_compat": (["Qwen/Qwen3-8B", "tiny"], None),
}


@pytest.mark.req("R-11.1", "R-11.3")
@pytest.mark.parametrize("kind", sorted(ROUTES))
def test_each_kind_recognises_itself_and_lists_what_it_serves(serve, kind):
    from agentprov_core.live.local import identity as li

    s = serve(kind)
    srv = li.served(ep(kind, s))
    assert srv.kind == kind
    if kind == "mlx_lm":
        assert len(srv.ids) == 1 and srv.ids[0].endswith("mlx-model")
        assert srv.fingerprint == {"owned_by": "absent", "GET /props": "not served"}
    if kind == "openai_compat":  # nothing verified; only the listing was asked
        assert srv.fingerprint["verified"] is False and not srv.verified
        assert [p for _, p, _ in s.requests] == ["/v1/models"]
    else:
        assert srv.verified and "verified" not in srv.fingerprint
    if kind != "mlx_lm":
        assert (srv.ids, srv.version) == EXPECT[kind]
    # read-only: GET requests only (no inference path was ever asked)
    assert {m for m, _, _ in s.requests} == {"GET"}
    assert not any("completions" in p for _, p, _ in s.requests)


WRONG = [("llamacpp", "mlx_lm", "mlx_lm"), ("mlx_lm", "llamacpp", "llamacpp"),
         ("vllm", "omlx", "omlx"), ("omlx", "vllm", "vllm"), ("ollama", "lmstudio", "lmstudio"),
         ("lmstudio", "ollama", "ollama")]


@pytest.mark.req("R-11.2")
@pytest.mark.parametrize("expected,actual,named", WRONG)
def test_a_different_server_kind_on_the_port_is_refused(serve, expected, actual, named):
    from agentprov_core.live.local import identity as li

    s = serve(actual)
    with pytest.raises(AgentprovError) as e:
        li.served(Ep(expected, expected, s.base_url))
    assert (e.value.code, e.value.exit_code) == ("run.local.wrong_server", 4)
    assert f"({named})" in e.value.message


@pytest.mark.req("R-11.2")
def test_wrong_server_through_the_cli(serve, cli, tmp_path):
    s = serve("llamacpp")
    r = cli("models", "--endpoint", "mlx_lm", "--base-url", s.base_url, env=sub_env(tmp_path))
    assert r.code == 4 and r.error["error"] == "run.local.wrong_server"
    assert "a llama.cpp server (llamacpp)" in r.error["message"]


@pytest.mark.req("R-11.32", "R-29.7")
def test_an_unreachable_server_exits_3(cli, tmp_path):
    port = closed_port()
    r = cli("models", "--endpoint", "ollama", "--base-url", f"http://127.0.0.1:{port}/v1",
            env=sub_env(tmp_path))
    assert r.code == 3 and r.error["error"] == "run.local.unreachable"
    assert f"127.0.0.1:{port}" in r.error["message"]


@pytest.mark.req("R-11.33")
@pytest.mark.parametrize("answer", [
    (200, b"<html>hello</html>"), (200, {"models": []}), (404, b"Not Found"),
    (200, {"object": "list", "data": [{"name": "no id"}]}), (500, {"error": "x"}),
])
def test_not_an_openai_style_listing_exits_3(serve, answer):
    from agentprov_core.live.local import identity as li

    s = serve("x", routes={("GET", "/v1/models"): answer})
    with pytest.raises(AgentprovError) as e:
        li.served(Ep("vllm", "vllm", s.base_url))
    assert (e.value.code, e.value.exit_code) == ("run.local.bad_listing", 3)


@pytest.mark.req("R-11.26")
def test_a_server_that_wants_a_key(serve, cli, tmp_path):
    s = serve("omlx", require_key="sk-local-sentinel-7f3a")
    r = cli("models", "--endpoint", "omlx", "--base-url", s.base_url, env=sub_env(tmp_path),
            cwd=tmp_path)
    assert r.code == 3 and r.error["error"] == "run.local.unauthorized"
    assert "OMLX_API_KEY" in r.error["message"]
    assert "Authorization" not in s.requests[0][2]  # without a key, nothing is sent
    envf = tmp_path / "k.env"
    envf.write_text("OMLX_API_KEY=sk-local-sentinel-7f3a\n")
    r = cli("models", "--endpoint", "omlx", "--base-url", s.base_url, "--env-file", envf,
            "--model-id", "Qwen3.5-4B-MLX-4bit", "--format", "json", env=sub_env(tmp_path))
    assert r.code == 0, r.err
    assert "sk-local-sentinel-7f3a" not in r.out + r.err
    doc = json.loads(r.out)
    assert "sk-local" not in json.dumps(doc)
    assert doc["served"] == ["Qwen3.5-4B-MLX-4bit"]
    wrong = tmp_path / "w.env"
    wrong.write_text("OMLX_API_KEY=sk-wrong\n")
    r = cli("models", "--endpoint", "omlx", "--base-url", s.base_url, "--env-file", wrong,
            env=sub_env(tmp_path))
    assert r.code == 3 and "was refused" in r.error["message"]


@pytest.mark.req("R-11.35")
def test_an_ollama_cloud_model_is_refused(serve):
    from agentprov_core.live.local import identity as li

    s = serve("ollama")
    with pytest.raises(AgentprovError) as e:
        li.observe(ep("ollama", s), "gpt-oss:120b-cloud")
    assert (e.value.code, e.value.exit_code) == ("run.local.remote_model", 4)
    assert "ollama.com" in e.value.message


@pytest.mark.req("R-11.34", "R-29.7")
def test_a_model_not_served_names_the_served_ids(serve, cli, tmp_path):
    s = serve("lmstudio")
    r = cli("models", "--endpoint", "lmstudio", "--base-url", s.base_url, "--model-id",
            "llama-9", env=sub_env(tmp_path))
    assert r.code == 3 and r.error["error"] == "run.local.model_not_served"
    assert "qwen3-8b, gemma-3-4b" in r.error["message"]


@pytest.mark.req("R-11.3")
def test_loopback_only(cli, tmp_path):
    r = cli("models", "--endpoint", "ollama", "--base-url", "http://10.0.0.5:11434/v1",
            env=sub_env(tmp_path))
    assert r.code == 4 and r.error["error"] == "cli.refused.endpoint"
    from agentprov_core.live.local.kinds import Probe

    with pytest.raises(AgentprovError) as e:
        Probe("http://192.168.1.20:8080/v1")
    assert e.value.code == "cli.refused.endpoint"


# --- the numbered pick ---------------------------------------------------------------------


def _pty_run(args: list[str], answer: bytes, env: dict[str, str], timeout: float = 60
             ) -> tuple[int, str]:
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "agentprov_core", *args], stdin=slave,
                         stdout=slave, stderr=slave, env=env, cwd=ROOT, close_fds=True)
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not sent and b"Pick a model" in out:
                os.write(master, answer)
                sent = True
        elif p.poll() is not None:
            break
    p.wait(timeout=10)
    os.close(master)
    return p.returncode, out.decode(errors="replace")


@pytest.mark.req("R-11.5")
def test_numbered_pick_on_a_real_terminal(serve, tmp_path, home):
    s = serve("lmstudio")
    env = child_env()
    env.update(sub_env(tmp_path), AGENTPROV_HOME=str(home))
    code, out = _pty_run(["models", "--endpoint", "lmstudio", "--base-url", s.base_url,
                          "--pick", "--no-hash-weights"], b"2\n", env)
    assert code == 0, out
    assert "1  qwen3-8b" in out and "2  gemma-3-4b" in out
    assert "identity agentprov-local-model/0.2 of gemma-3-4b" in out


@pytest.mark.req("R-11.5")
def test_without_a_terminal_the_pick_exits_3_listing_the_ids(serve, cli, tmp_path):
    s = serve("lmstudio")
    r = cli("models", "--endpoint", "lmstudio", "--base-url", s.base_url, "--pick",
            env=sub_env(tmp_path))
    assert r.code == 3 and r.error["error"] == "run.local.no_model_id"
    assert "qwen3-8b, gemma-3-4b" in r.error["message"]


# --- the identity record -------------------------------------------------------------------


@pytest.mark.req("R-11.4", "R-11.6", "R-11.10")
@pytest.mark.parametrize("kind,model", [
    ("ollama", "llama3.2:latest"), ("llamacpp", "m"), ("lmstudio", "qwen3-8b"),
    ("vllm", "Qwen/Qwen2.5-0.5B"), ("omlx", "Qwen3.5-4B-MLX-4bit"), ("mlx_lm", None),
    ("openai_compat", "Qwen/Qwen3-8B")])
def test_identity_record_of_each_kind(serve, kind, model):
    from agentprov_core.base.digests import digest
    from agentprov_core.live.local import identity as li

    s = serve(kind)
    e = ep(kind, s)
    model = model or li.served(e).ids[0]
    a = li.observe(e, model)
    assert a.format == "agentprov-local-model/0.2"
    assert a.digest == digest(a.identity_part())
    assert "created" not in a.listing_entry and "permission" not in a.listing_entry
    time.sleep(0.002)
    b = li.observe(e, model)  # "created" is stamped per request: the digest does not move
    assert b.digest == a.digest
    assert set(a.to_json()) - set(a.identity_part()) == {"digest", "observed_state",
                                                         "observed_at"}
    expect_files = {"ollama": 1, "llamacpp": 2, "lmstudio": None, "vllm": 2, "omlx": None,
                    "mlx_lm": 3, "openai_compat": None}[kind]
    assert (len(a.files) if a.files is not None else None) == expect_files
    if a.files:
        assert all(len(f.sha256) == 64 for f in a.files)
        assert a.files_source == ("hf-cache" if kind == "vllm" else "server")
    else:
        assert "--model-dir" in a.files_note
    if kind == "ollama":
        assert a.server.version == "0.9.6"
        assert a.server_identity["digest"].startswith("a80c4f17acd5")
        assert a.server_identity["model_info"]["llama.rope.freq_base"] == "500000.0"
        assert a.observed_state["server"]["context_length"] == 4096
    if kind == "llamacpp":
        assert a.observed_state["server"] == {"n_ctx": 4096, "total_slots": 4}
        assert a.server.version == "b6000-abcdef0"
    if kind == "vllm":
        assert a.observed_state["listing"] == {"max_model_len": 32768}
        assert a.server_identity["root"] == "Qwen/Qwen2.5-0.5B"
    if kind == "lmstudio":
        assert a.observed_state["server"] == {"state": "loaded", "loaded_context_length": 4096}


@pytest.mark.req("R-11.10")
def test_serving_state_is_outside_the_digest_and_weights_inside(serve, tmp_path):
    from agentprov_core.live.local import identity as li

    routes = llamacpp_routes(tmp_path)
    s = serve("llamacpp", routes=routes)
    e = ep("llamacpp", s)
    a = li.observe(e, "m")
    routes[("GET", "/props")]["default_generation_settings"]["n_ctx"] = 8192
    routes[("GET", "/props")]["total_slots"] = 1
    same, changed, _ = li.reobserve(a, e)
    assert (same, changed) == (True, [])
    shard = Path(routes[("GET", "/props")]["model_path"])
    shard.write_bytes(b"Z" * 3000)  # same size, other bytes
    os.utime(shard, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    same, changed, _ = li.reobserve(a, e)
    assert not same
    assert any(str(shard) in c and "sha256" in c for c in changed), changed
    routes[("GET", "/props")]["build_info"] = "b6001-1234567"
    same, changed, new = li.reobserve(a, e)
    assert not same and "server.version: b6000-abcdef0 -> b6001-1234567" in changed
    s.close()
    same, changed, _ = li.reobserve(a, e)
    assert not same and "run.local.unreachable" in changed[0]


@pytest.mark.req("R-11.10")
def test_a_llamacpp_servers_generation_defaults_are_part_of_the_identity(serve, cli, tmp_path):
    """What a request that names no sampling parameter gets (llama-server's --temp,
    --seed) shapes every reply of AgentDojo's element: the same model served with another
    default is another identity, and A14 names the field."""
    from agentprov_core.live.local import identity as li

    routes = llamacpp_routes(tmp_path)
    e = ep("llamacpp", serve("llamacpp", routes=routes))
    a = li.observe(e, "m")
    assert a.server_identity["generation_defaults"] == {"temperature": "0.8"}
    routes[("GET", "/props")]["default_generation_settings"]["params"]["temperature"] = 0.2
    same, changed, new = li.reobserve(a, e)
    assert not same and new.digest != a.digest
    assert changed == ["server_identity.generation_defaults.temperature: 0.8 -> 0.2"], changed
    # the listing shows the sampling ones, shortened; the record keeps them all as reported
    props = routes[("GET", "/props")]["default_generation_settings"]["params"]
    props.update(temperature=0.800000011920929, seed=1129, n_predict=512, dry_base=1.75)
    r = cli("models", "--endpoint", "llamacpp", "--base-url", e.base_url, "--model-id", "m",
            env=sub_env(tmp_path))
    assert r.code == 0, r.err
    assert ("generation_defaults   n_predict=512 temperature=0.8 seed=1129 (+1 more: "
            "--format json)") in r.out, r.out
    assert li.observe(e, "m").server_identity["generation_defaults"]["temperature"] == \
        "0.800000011920929"


@pytest.mark.req("R-11.7")
def test_digest_cache_hit_reads_no_weight_byte(serve, tmp_path, monkeypatch):
    from agentprov_core.live.local import identity as li
    from agentprov_core.live.local import weights

    s = serve("mlx_lm")
    e = ep("mlx_lm", s)
    mid = li.served(e).ids[0]
    opened: list[str] = []
    real_sha = weights.sha256_file

    def counting(path, chunk=weights.CHUNK):
        opened.append(str(path))
        return real_sha(path, chunk)

    monkeypatch.setattr(weights, "sha256_file", counting)
    a = li.observe(e, mid)
    assert len(opened) == 3
    cache = tmp_path / "home" / "cache" / "model-digests.jsonl"
    lines = cache.read_text().splitlines()
    assert len(lines) == 3
    rec = json.loads(lines[0])
    assert set(rec) == {"path", "size", "mtime_ns", "inode", "sha256", "hashed_at"}
    opened.clear()
    b = li.observe(e, mid)
    assert opened == [] and b.digest == a.digest  # every file from the cache
    assert cache.read_text().splitlines() == lines  # the cache lines were reused
    # a touched file (same bytes, new mtime) is hashed again, and only that one
    f = Path(mid) / "config.json"
    os.utime(f, ns=(time.time_ns(), f.stat().st_mtime_ns + 1_000_000))
    c = li.observe(e, mid)
    assert opened == [os.path.realpath(f)] and c.digest == a.digest
    assert len(cache.read_text().splitlines()) == 4


def test_a_torn_cache_line_is_skipped(tmp_path):
    from agentprov_core.live.local import weights

    f = tmp_path / "w.bin"
    f.write_bytes(b"x" * 100)
    cache = tmp_path / "c.jsonl"
    cache.write_text('{"path": "/x", "size": 1\n')
    got = weights.digest_files([f], weights.DigestCache(cache))
    import hashlib

    assert got[str(f)] == hashlib.sha256(b"x" * 100).hexdigest()


@pytest.mark.req("R-11.8")
def test_no_hash_weights_records_sizes_only(serve, cli, tmp_path):
    s = serve("vllm")
    r = cli("models", "--endpoint", "vllm", "--base-url", s.base_url, "--model-id",
            "Qwen/Qwen2.5-0.5B", "--no-hash-weights", "--format", "json", env=sub_env(tmp_path))
    assert r.code == 0, r.err
    ident = json.loads(r.out)["identity"]
    assert ident["weights_hashed"] is False
    assert [(Path(f["path"]).name, f["size"], f["sha256"]) for f in ident["files"]] == [
        ("model.safetensors", 5000, None), ("config.json", 2, None)]
    assert not (tmp_path / "home" / "cache" / "model-digests.jsonl").exists()
    r2 = cli("models", "--endpoint", "vllm", "--base-url", s.base_url, "--model-id",
             "Qwen/Qwen2.5-0.5B", "--format", "json", env=sub_env(tmp_path))
    assert json.loads(r2.out)["identity"]["digest"] != ident["digest"]


@pytest.mark.req("R-11.9")
def test_model_dir_names_a_folder_the_server_does_not(serve, tmp_path):
    from agentprov_core.live.local import identity as li

    folder = make_weights(tmp_path / "lms" / "gemma", {
        "model-00001-of-00002.safetensors": b"1" * 10,
        "model-00002-of-00002.safetensors": b"2" * 10, "config.json": b"{}", "README.md": b"x"})
    s = serve("lmstudio")
    a = li.observe(ep("lmstudio", s), "gemma-3-4b", li.ObserveOptions(model_dir=str(folder)))
    assert a.files_source == "model-dir" and a.model_dir == str(folder)
    assert [(Path(f.path).name, f.role) for f in a.files] == [
        ("model-00001-of-00002.safetensors", "weights"),
        ("model-00002-of-00002.safetensors", "weights"), ("config.json", "config")]
    gg = make_weights(tmp_path / "omlx-model", {"split/a-00001-of-00002.gguf": b"a",
                                                 "split/a-00002-of-00002.gguf": b"b"})
    b = li.observe(ep("lmstudio", s), "gemma-3-4b", li.ObserveOptions(model_dir=str(gg)))
    assert [Path(f.path).name for f in b.files] == ["a-00001-of-00002.gguf",
                                                    "a-00002-of-00002.gguf"]
    with pytest.raises(AgentprovError) as e:
        li.observe(ep("lmstudio", s), "gemma-3-4b",
                   li.ObserveOptions(model_dir=str(tmp_path / "nope")))
    assert (e.value.code, e.value.exit_code) == ("cli.usage.model_dir", 2)


@pytest.mark.req("R-11.16", "R-11.17", "R-29.8")
def test_lm_studio_without_native_tool_use_is_refused(serve):
    from agentprov_core.live.local import identity as li

    s = serve("lmstudio")
    native = li.observe(ep("lmstudio", s), "qwen3-8b")
    assert li.check_tool_use(native) == {"native_tool_use": True}
    text = li.observe(ep("lmstudio", s), "gemma-3-4b")
    with pytest.raises(AgentprovError) as e:
        li.check_tool_use(text)
    assert (e.value.code, e.value.exit_code) == ("cli.refused.local_tool_prompt", 4)
    assert li.check_tool_use(text, allow_text_tool_calls=True)["accepted"] == \
        "--allow-text-tool-calls"
    other = li.observe(ep("omlx", serve("omlx")), "Qwen3.5-4B-MLX-4bit")
    assert li.check_tool_use(other) is None


@pytest.mark.req("R-11.4", "R-11.6")
def test_models_text_output(serve, cli, tmp_path):
    s = serve("ollama")
    r = cli("models", "--endpoint", "local", "--base-url", s.base_url, env=sub_env(tmp_path))
    assert r.code == 0, r.err
    assert "Ollama 0.9.6" in r.out and "llama3.2:latest" in r.out
    r = cli("models", "--endpoint", "ollama", "--base-url", s.base_url, "--model-id",
            "llama3.2:latest", env=sub_env(tmp_path))
    assert r.code == 0, r.err
    assert "identity agentprov-local-model/0.2 of llama3.2:latest" in r.out
    assert "(outside the digest)" in r.out
    methods = {(m, p) for m, p, _ in s.requests if m == "POST"}
    assert methods == {("POST", "/api/show")}  # the one read-only POST


# --- API endpoints: the dated cache ----------------------------------------------------------


@pytest.mark.req("R-12.11", "R-12.13")
def test_api_models_from_the_cache_without_network(cli, home, tmp_path):
    r = cli("models", "--endpoint", "openrouter", env=sub_env(tmp_path))
    assert r.code == 3 and r.error["error"] == "cli.environment.models_cache"
    (home / "cache").mkdir()
    (home / "cache" / "models-openrouter.json").write_text(json.dumps({
        "format": "agentprov-model-list/0.1", "endpoint": "openrouter",
        "fetched_at": "2026-11-01T00:00:00Z", "url": "https://openrouter.ai/api/v1/models",
        "models": ["a/one", "b/two"]}))
    r = cli("models", "--endpoint", "openrouter", env=sub_env(tmp_path))
    assert r.code == 0 and "2 model(s) as of 2026-11-01" in r.out and "b/two" in r.out
    r = cli("models", "--endpoint", "openrouter", "--model-id", "c/three", env=sub_env(tmp_path))
    assert r.code == 0 and "warning" in r.err and "not listed" in r.out


@pytest.mark.req("R-12.12")
def test_api_refresh_makes_list_calls_only(tmp_path, monkeypatch):
    import httpx

    from agentprov_core.live import endpoints
    from agentprov_core.live.local import apimodels

    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        if req.url.params.get("after_id") == "m2":
            return httpx.Response(200, json={"data": [{"id": "m3"}], "has_more": False})
        return httpx.Response(200, json={"data": [{"id": "m1"}, {"id": "m2"}],
                                         "has_more": True, "last_id": "m2"})

    reg = endpoints.load()
    lst = apimodels.refresh(reg["anthropic"], reg["anthropic"].base_url, "sk-ant-sentinel",
                            transport=httpx.MockTransport(handler))
    assert lst.models == ["m1", "m2", "m3"]
    assert all(r.method == "GET" and r.url.path == "/v1/models" for r in seen)
    assert seen[0].headers["x-api-key"] == "sk-ant-sentinel"
    cached = apimodels.read_cache("anthropic")
    assert cached is not None and cached.models == ["m1", "m2", "m3"]
    assert "sk-ant" not in apimodels.cache_file("anthropic").read_text()


# --- step 4 of a run: prepare() lists, fingerprints and observes the local server --------

@pytest.fixture
def prepare_local(serve, tmp_path, monkeypatch):
    """``planning.prepare`` in-process for a local endpoint, against a fake server (the
    environment id and the containment, steps 2 and 3, answer fixed values: their own
    tests are elsewhere)."""
    from agentprov_core.backend import environments
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest
    from tests.conftest import fake_identity

    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setattr(environments, "read_marker", lambda meta, env_id: None)
    monkeypatch.setattr("agentprov_core.backend.containment.resolve", lambda *a, **k: type(
        "R", (), {"as_json": lambda self: {"kind": "vm", "declared_by": "operator"}})())
    (tmp_path / "none.env").write_text("")

    def prepare(endpoint: str, server: FakeServer, **options):
        o = dict(corpus=str(tmp_path / "c"), campaign="c", suite=("banking",),
                 user_tasks="0", endpoint=endpoint, base_url=server.base_url,
                 containment="vm", env_file=str(tmp_path / "none.env"))
        o.update(options)
        return planning.prepare(RunRequest.of("agentdojo", o, set(o)))

    return prepare


@pytest.mark.req("R-16.4", "R-11.11")
def test_step_4_observes_the_model_and_its_identity_enters_the_configuration(
        prepare_local, serve, tmp_path):
    s = serve("llamacpp")
    p = prepare_local("llamacpp", s, model_id="m")
    assert p.local_identity is not None and p.local_identity.server.kind == "llamacpp"
    assert p.plan.config_digest == prepare_local("llamacpp", s, model_id="m").plan.config_digest
    (tmp_path / "gguf" / "m-00002-of-00002.gguf").write_bytes(b"C" * 2000)  # other weights
    other = prepare_local("llamacpp", s, model_id="m")
    assert other.local_identity.digest != p.local_identity.digest
    assert other.plan.config_digest != p.plan.config_digest  # another model: another config
    assert p.plan.plan_sha256 != other.plan.plan_sha256


@pytest.mark.req("R-11.25", "R-11.29", "R-11.31")
def test_step_4_takes_the_model_variable_and_sends_the_local_key_to_loopback(
        prepare_local, serve, tmp_path):
    """Without --model-id, oMLX's OMLX_MODEL (and Ollama's LOCAL_MODEL_ID) names the model;
    OMLX_API_KEY, read like any key, goes to the loopback server with every request of the
    observation, and nothing the run records holds its value."""
    key = "sk-local-sentinel-91c2"
    s = serve("omlx", require_key=key)
    envf = tmp_path / "omlx.env"
    envf.write_text(f"OMLX_API_KEY={key}\nOMLX_MODEL=Qwen3.5-4B-MLX-4bit\n")
    p = prepare_local("omlx", s, env_file=str(envf))
    assert p.local_identity.model_id == "Qwen3.5-4B-MLX-4bit"
    assert s.requests and all(h.get("Authorization") == f"Bearer {key}"
                              for _, _, h in s.requests)
    recorded = json.dumps([p.local_record, p.local_identity.to_json(), p.plan.config_digest])
    assert key not in recorded and p.resolved.key_variable == "OMLX_API_KEY"
    o = serve("ollama")
    envo = tmp_path / "ollama.env"
    envo.write_text("LOCAL_MODEL_ID=llama3.2:latest\n")
    assert prepare_local("ollama", o, env_file=str(envo)).local_identity.model_id == \
        "llama3.2:latest"


@pytest.mark.req("R-16.4", "R-11.5", "R-11.8")
def test_step_4_refuses_the_wrong_server_and_a_missing_model_id(prepare_local, serve):
    s = serve("ollama")
    with pytest.raises(AgentprovError) as e:
        prepare_local("llamacpp", s, model_id="m")  # an ollama server on llamacpp's port
    assert (e.value.code, e.value.exit_code) == ("run.local.wrong_server", 4)
    with pytest.raises(AgentprovError) as e:
        prepare_local("ollama", s)  # no --model-id and no terminal: the served ids
    assert (e.value.code, e.value.exit_code) == ("run.local.no_model_id", 3)
    assert "llama3.2:latest" in e.value.message
    with pytest.raises(AgentprovError) as e:
        prepare_local("ollama", s, model_id="gpt-oss:120b-cloud")
    assert (e.value.code, e.value.exit_code) == ("run.local.remote_model", 4)


# --- the run path against a loopback llama.cpp stand-in (slow: the real worker) -------------


@pytest.mark.slow
@pytest.mark.req("R-11.4", "R-11.11", "R-11.15")
def test_a_local_run_records_the_identity_notes_each_session_and_stops_on_drift(
        e2e_cli, serve, tmp_path):
    """A run against a llama.cpp stand-in (listing, /props, weight shards on disk, and chat
    completions answered like a model that follows instructions) keeps the identity record in
    the manifest under its digest and notes A14's observation in every session. The server
    changes after the first cell (another build): A14 stops the campaign before the second
    (exit 1, no cell runs against the changed server), and the same command is then another
    configuration (exit 4). Put back, the same command resumes and completes."""
    from tests.test_real_campaign import answer

    routes = llamacpp_routes(tmp_path)
    props = routes[("GET", "/props")]
    chats: list[int] = []

    def chat(body: bytes):
        chats.append(1)
        if len(chats) == 3:  # the probe, then the first cell's two calls: then a new build
            props["build_info"] = "b6001-1234567"
        return 200, answer(json.loads(body))

    routes[("POST", "/v1/chat/completions")] = chat
    s = serve("llamacpp", routes=routes)
    corpus = tmp_path / "local"
    args = ["run", "agentdojo", "--endpoint", "llamacpp", "--base-url", s.base_url,
            "--model-id", "m", "--containment", "vm", "--i-consent-to-local-run",
            "--corpus", str(corpus), "--campaign", "local", "--suite", "banking",
            "--user-tasks", "0-1"]
    work = corpus.with_name("local.partial")

    r = e2e_cli(*args)
    assert r.code == 1, r.out + r.err
    assert "A14" in r.out + r.err
    m = json.loads((work / "manifest.json").read_text())
    (digest, record), = m["live"]["local_models"].items()
    assert record["format"] == "agentprov-local-model/0.2" and record["digest"] == digest
    assert record["server"]["version"] == "b6000-abcdef0"
    shards = sorted((tmp_path / "gguf").glob("*.gguf"))
    import hashlib

    assert sorted(f["sha256"] for f in record["files"]) == sorted(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in shards)
    a14 = [f for f in m["live"]["canary"]["findings"] if f["check"] == "A14"]
    assert a14 and "server.version: b6000-abcdef0 -> b6001-1234567" in json.dumps(a14)
    rows = [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["status"] == "complete"  # the second never started

    def local_notes(row: dict) -> list[dict]:
        h = row["capture_sha256"]
        recs = [json.loads(x) for x in
                (work / "raw" / "sha256" / h[:2] / h).read_text().splitlines()]
        return [x for x in recs if x.get("kind") == "note"
                and x.get("code") == "agentdojo/local_model"]

    note, = local_notes(rows[0])
    assert note["local_model"]["matches"] is True
    assert note["local_model"]["digest"] == digest == note["local_model"]["observed_digest"]
    assert note["local_model"]["observed_state"] == {"listing": {},
                                                     "server": {"n_ctx": 4096, "total_slots": 4}}
    aer = json.loads((work / "executions" / rows[0]["session_id"] / "aer.json").read_text())
    assert any(x.get("code") == "agentdojo/local_model" for x in aer["records"]), aer["records"]

    r = e2e_cli(*args)  # the server is another build now: another configuration
    assert (r.code, r.error["error"]) == (4, "cli.refused.mixed_config"), r.out + r.err
    props["build_info"] = "b6000-abcdef0"
    r = e2e_cli(*args)
    assert r.code == 0, r.out + r.err
    assert "1 of 2 unit(s) done before" in r.out
    rows = [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]
    assert [len(local_notes(x)) for x in rows] == [1, 1]
    assert list(json.loads((work / "manifest.json").read_text())["live"]["local_models"]) == [
        digest]
