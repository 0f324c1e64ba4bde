"""The generic local endpoint ``openai_compat``: any server whose ``GET <base_url>/models``
is an OpenAI-style listing (SGLang, TGI, LocalAI, llamafile, a test server), its kind
recorded as unverified. Real loopback HTTP servers (``FakeServer`` of
tests/test_local_models.py, with an SGLang-like listing) answer it; the run path's
refusals go through the real CLI, with proof that nothing was written."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentprov_core.errors import AgentprovError
from tests import test_local_models as lm
from tests.conftest import make_marker, snapshot

serve = lm.serve  # the fixtures of tests/test_local_models.py, shared
prepare_local = lm.prepare_local

MODEL = "Qwen/Qwen3-8B"
BANKING = ("--suite", "banking", "--user-tasks", "0-1")
ZERO_CAPS = ("--max-calls", "10", "--max-cost-usd", "0", "--price-in", "0", "--price-out", "0")
SENTINEL = f"AGENTPROV-TEST-SENTINEL-{uuid.uuid4().hex}"  # unique per run, not key-shaped


def generic(s: lm.FakeServer) -> lm.Ep:
    return lm.Ep("openai_compat", "openai_compat", s.base_url)


def entry(mid: str, **extra) -> dict:
    return {"id": mid, "object": "model", "created": 1, "owned_by": "sglang", "root": mid,
            "max_model_len": 32768, **extra}


@pytest.fixture
def built(home):
    """A marker for the agentdojo environment: steps 1-3 pass the environment check."""
    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    make_marker(home, environments.environment_id(source_entry("agentdojo").source.meta))
    return home


@pytest.fixture
def run_(cli, corpora):
    """``agentprov run agentdojo --dry-run`` with a corpus and the generic endpoint."""

    def go(*args, env=None):
        return cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign",
                   "c", *BANKING, "--endpoint", "openai_compat", *args, env=env)

    return go


# --- the registry ---------------------------------------------------------------------------


@pytest.mark.req("R-10.6", "R-11.1")
def test_the_registry_entry_has_no_default_url_and_an_optional_key():
    from agentprov_core.live import endpoints as epmod
    from agentprov_core.live import keys
    from agentprov_core.plugins import manager

    ep = epmod.load()["openai_compat"]
    assert (ep.kind, ep.local, ep.base_url, ep.base_url_variable, ep.fingerprint) == (
        "openai_compat", True, None, None, None)
    assert (ep.key, ep.optional_key) == (None, "OPENAI_COMPAT_API_KEY")
    assert epmod.wire_of(ep) == "openai"
    kinds = {k.name: k for g in manager().hook.agentprov_endpoint_kinds() for k in g}
    assert kinds["openai_compat"].local and kinds["openai_compat"].fingerprint is None
    assert keys.check_key_name("OPENAI_COMPAT_API_KEY") == ["openai_compat"]


def test_only_a_local_entry_may_leave_out_its_base_url(tmp_path):
    from agentprov_core.live import endpoints as epmod

    for body, what in (('kind = "openai"\nkey = "K"', "base_url is required"),
                       ('kind = "openai_compat"\nlocal = true\nbase_url_variable = "X_URL"',
                        "takes no base_url_variable")):
        f = tmp_path / "endpoints.toml"
        f.write_text(f'format = "agentprov-endpoints/0.1"\n[endpoints.mine]\n{body}\n')
        with pytest.raises(AgentprovError) as e:
            epmod.load(f)
        assert (e.value.code, e.value.exit_code) == ("cli.usage.registry_file", 2)
        assert "[endpoints.mine]" in e.value.message and what in e.value.message


# --- agentprov models -----------------------------------------------------------------------


@pytest.mark.req("R-11.3", "R-11.4", "R-11.6")
def test_models_lists_a_generic_server_and_records_it_unverified(serve, cli, tmp_path):
    s = serve("openai_compat", server="sglang-standin/0.5.0")
    r = cli("models", "--endpoint", "openai_compat", "--base-url", s.base_url,
            env=lm.sub_env(tmp_path))
    assert r.code == 0, r.err
    assert (f"openai_compat: OpenAI-compatible server at {s.base_url} (kind not verified: "
            "any OpenAI-style listing is accepted; Server: sglang-standin/0.5.0)") in r.out
    assert "serves 2 model(s):" in r.out and "  tiny" in r.out
    assert [(m, p) for m, p, _ in s.requests] == [("GET", "/v1/models")]  # nothing else
    r = cli("models", "--endpoint", "openai_compat", "--base-url", s.base_url, "--model-id",
            MODEL, "--format", "json", env=lm.sub_env(tmp_path))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["class"], doc["kind"], doc["version"]) == ("local", "openai_compat", None)
    ident = doc["identity"]
    assert ident["format"] == "agentprov-local-model/0.2"
    assert ident["server"] == {"kind": "openai_compat", "base_url": s.base_url,
                               "version": None, "fingerprint": {
                                   "verified": False, "GET /v1/models": "data[].id",
                                   "Server": "sglang-standin/0.5.0"}}
    # the entry without its per-request stamp; its serving state and the served ids outside
    assert ident["listing_entry"] == {"id": MODEL, "object": "model", "owned_by": "sglang",
                                      "root": MODEL}
    assert ident["observed_state"] == {"listing": {"max_model_len": 32768},
                                       "server": {"served": [MODEL, "tiny"]}}
    assert ident["server_identity"] == {} and ident["files"] is None
    assert "--model-dir" in ident["files_note"]
    from agentprov_core.base.digests import digest

    part = {k: v for k, v in ident.items() if k not in ("digest", "observed_state",
                                                        "observed_at")}
    assert ident["digest"] == digest(part)
    assert {m for m, _, _ in s.requests} == {"GET"}
    assert {p for _, p, _ in s.requests} == {"/v1/models"}  # no inference, no other probe


@pytest.mark.req("R-11.9")
def test_model_dir_gives_a_generic_server_its_weight_files(serve, tmp_path):
    from agentprov_core.live.local import identity as li

    folder = lm.make_weights(tmp_path / "qwen3", {"model.safetensors": b"Q" * 4000,
                                                  "config.json": b"{}"})
    a = li.observe(generic(serve("openai_compat")), MODEL,
                   li.ObserveOptions(model_dir=str(folder)))
    assert a.files_source == "model-dir" and a.weights_hashed
    assert [(Path(f.path).name, f.role, len(f.sha256)) for f in a.files] == [
        ("model.safetensors", "weights", 64), ("config.json", "config", 64)]


@pytest.mark.req("R-11.34", "R-11.32", "R-11.33", "R-29.7")
def test_not_served_unreachable_and_a_bad_listing_exit_3(serve, cli, tmp_path):
    s = serve("openai_compat")
    r = cli("models", "--endpoint", "openai_compat", "--base-url", s.base_url, "--model-id",
            "llama-9", env=lm.sub_env(tmp_path))
    assert (r.code, r.error["error"]) == (3, "run.local.model_not_served")
    assert f"serves: {MODEL}, tiny" in r.error["message"]
    port = lm.closed_port()
    r = cli("models", "--endpoint", "openai_compat", "--base-url",
            f"http://127.0.0.1:{port}/v1", env=lm.sub_env(tmp_path))
    assert (r.code, r.error["error"]) == (3, "run.local.unreachable")
    assert f"127.0.0.1:{port}" in r.error["message"]
    for answer in ((200, b"<html>hello</html>"), (200, {"models": []}), (404, b"Not Found"),
                   (200, {"object": "list", "data": [{"name": "no id"}]})):
        bad = serve("x", routes={("GET", "/v1/models"): answer})
        r = cli("models", "--endpoint", "openai_compat", "--base-url", bad.base_url,
                env=lm.sub_env(tmp_path))
        assert (r.code, r.error["error"]) == (3, "run.local.bad_listing"), answer


@pytest.mark.req("R-11.36")
def test_without_a_base_url_the_endpoint_is_a_usage_error(cli, run_, home, corpora, serve):
    r = cli("models", "--endpoint", "openai_compat")
    assert (r.code, r.error["error"]) == (2, "cli.usage.base_url_required")
    r = run_("--model-id", "m", "--containment", "vm")
    assert (r.code, r.error["error"]) == (2, "cli.usage.base_url_required")
    assert "--base-url http://127.0.0.1:PORT/v1" in r.error["message"]
    assert "endpoints.openai_compat.base_url" in r.error["message"]
    assert snapshot(home) == {} and list(corpora.iterdir()) == []
    # the setting endpoints.openai_compat.base_url names it instead
    s = serve("openai_compat")
    (home / "settings.toml").write_text(f'[endpoints.openai_compat]\nbase_url = "{s.base_url}"\n')
    r = cli("models", "--endpoint", "openai_compat")
    assert r.code == 0, r.err
    assert f"at {s.base_url}" in r.out


@pytest.mark.req("R-11.3")
def test_models_never_asks_a_lan_address(cli, tmp_path):
    r = cli("models", "--endpoint", "openai_compat", "--base-url",
            "http://192.168.1.20:30000/v1", env=lm.sub_env(tmp_path))
    assert (r.code, r.error["error"]) == (4, "cli.refused.endpoint")


@pytest.mark.req("R-11.26", "R-11.29")
def test_its_optional_key_goes_to_loopback_only_and_is_never_written(serve, cli, tmp_path):
    key = f"sk-{SENTINEL}"
    s = serve("openai_compat", require_key=key)
    r = cli("models", "--endpoint", "openai_compat", "--base-url", s.base_url,
            env=lm.sub_env(tmp_path), cwd=tmp_path)
    assert (r.code, r.error["error"]) == (3, "run.local.unauthorized")
    assert "OPENAI_COMPAT_API_KEY is not set" in r.error["message"]
    assert "Authorization" not in s.requests[0][2]  # without a key, nothing is sent
    envf = tmp_path / "k.env"
    envf.write_text(f"OPENAI_COMPAT_API_KEY={key}\n")
    r = cli("models", "--endpoint", "openai_compat", "--base-url", s.base_url, "--env-file",
            envf, "--model-id", MODEL, "--format", "json", env=lm.sub_env(tmp_path))
    assert r.code == 0, r.err
    assert SENTINEL not in r.out + r.err
    assert s.requests[-1][2]["Authorization"] == f"Bearer {key}"


# --- the run path: steps 1 to 4 ----------------------------------------------------------------


@pytest.mark.req("R-16.4", "R-11.11", "R-11.27", "R-10.9")
def test_step_4_observes_a_generic_server_into_the_configuration(prepare_local, serve,
                                                                 tmp_path):
    key = f"sk-{SENTINEL}"
    s = serve("openai_compat", require_key=key, server="sglang-standin/0.5.0")
    envf = tmp_path / "k.env"
    envf.write_text(f"OPENAI_COMPAT_API_KEY={key}\n")
    p = prepare_local("openai_compat", s, model_id=MODEL, env_file=str(envf))
    assert p.endpoint_class == "local" and p.resolved.base_url_source == "flag"
    assert p.resolved.key_variable == "OPENAI_COMPAT_API_KEY"  # by name: it was set
    assert p.local_identity.server.fingerprint["verified"] is False
    assert p.local_record["local_model"]["server"]["kind"] == "openai_compat"
    assert all(h.get("Authorization") == f"Bearer {key}" for _, _, h in s.requests)
    recorded = json.dumps([p.local_record, p.local_identity.to_json(), p.plan.config_digest])
    assert SENTINEL not in recorded
    # another Server header is another observation, so another configuration
    s.server = "sglang-standin/0.5.1"
    other = prepare_local("openai_compat", s, model_id=MODEL, env_file=str(envf))
    assert other.plan.config_digest != p.plan.config_digest
    with pytest.raises(AgentprovError) as e:
        prepare_local("openai_compat", s, env_file=str(envf))  # no model id, no terminal
    assert (e.value.code, e.value.exit_code) == ("run.local.no_model_id", 3)
    assert f"{MODEL}, tiny" in e.value.message


@pytest.mark.req("R-11.57", "R-11.59", "R-16.3")
def test_a_lan_address_needs_allow_lan_endpoint(run_, built, corpora):
    before = snapshot(built)
    lan = ("--model-id", "m", "--base-url", "http://192.168.1.20:30000/v1", "--containment",
           "vm")
    r = run_(*lan)  # class api: its caps first
    assert (r.code, r.error["error"]) == (4, "cli.refused.api_caps")
    r = run_(*lan, *ZERO_CAPS)
    assert (r.code, r.error["error"]) == (4, "cli.refused.endpoint")
    assert "needs --allow-lan-endpoint" in r.error["message"]
    r = run_("--model-id", "m", "--base-url", "http://nas.local:30000/v1",
             "--allow-lan-endpoint", "--containment", "vm", *ZERO_CAPS)
    assert (r.code, r.error["error"]) == (4, "cli.refused.endpoint")
    assert "no host names" in r.error["message"]
    assert snapshot(built) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-11.28", "R-11.58")
def test_a_key_with_a_lan_url_is_refused(run_, built, tmp_path, corpora):
    envf = tmp_path / "k.env"
    envf.write_text(f"OPENAI_COMPAT_API_KEY={SENTINEL}\n")
    before = snapshot(built)
    r = run_("--model-id", "m", "--base-url", "http://192.168.1.20:30000/v1",
             "--allow-lan-endpoint", "--containment", "vm", *ZERO_CAPS, "--env-file", envf)
    assert (r.code, r.error["error"]) == (4, "cli.refused.lan_key")
    assert "OPENAI_COMPAT_API_KEY" in r.error["message"]
    assert SENTINEL not in r.out + r.err
    assert snapshot(built) == before and list(corpora.iterdir()) == []


# --- the other kinds keep refusing a server that is not theirs --------------------------------


@pytest.mark.req("R-11.2")
def test_the_other_kinds_refuse_a_generic_server_and_point_at_openai_compat(serve, cli,
                                                                            tmp_path):
    from agentprov_core.live.local import identity as li

    s = serve("openai_compat")
    for kind in ("ollama", "lmstudio", "llamacpp", "vllm", "omlx", "mlx_lm"):
        with pytest.raises(AgentprovError) as e:
            li.served(lm.Ep(kind, kind, s.base_url))
        assert (e.value.code, e.value.exit_code) == ("run.local.wrong_server", 4), kind
        assert "a server whose kind agentprov does not recognise" in e.value.message
        assert f"--endpoint openai_compat --base-url {s.base_url}" in e.value.message
    # entries naming no owner look like mlx_lm's (recognised by absence only): pointed too
    bare = serve("x", routes={("GET", "/v1/models"): {"object": "list",
                                                      "data": [{"id": "m"}]}})
    r = cli("models", "--endpoint", "vllm", "--base-url", bare.base_url,
            env=lm.sub_env(tmp_path))
    assert (r.code, r.error["error"]) == (4, "run.local.wrong_server")
    assert "(mlx_lm)" in r.error["message"] and "--endpoint openai_compat" in r.error["message"]
    # a server of a known kind is named, without the pointer
    with pytest.raises(AgentprovError) as e:
        li.served(lm.Ep("vllm", "vllm", serve("omlx").base_url))
    assert "(omlx)" in e.value.message and "openai_compat" not in e.value.message


# --- A14 -----------------------------------------------------------------------------------------


@pytest.mark.req("R-11.15", "R-11.10")
def test_a14_on_a_generic_server_is_one_listing_request(serve, tmp_path):
    """What A14 can see of a generic server: the model's listing entry, the Server header,
    whether the model is served and the server answers, and the weight files --model-dir
    names. Serving state (another model loaded, max_model_len, the created stamp) is not
    drift. What it cannot see: other weights served under the same id without
    --model-dir."""
    from agentprov_core.live.local import identity as li

    routes = lm.openai_compat_routes(tmp_path)
    s = serve("openai_compat", routes=routes, server="sglang-standin/0.5.0")
    e = generic(s)
    a = li.observe(e, MODEL)

    def again(*entries):
        routes[("GET", "/v1/models")] = lm.listing(*entries)
        n = len(s.requests)
        out = li.reobserve(a, e)
        assert [(m, p) for m, p, _ in s.requests[n:]] == [("GET", "/v1/models")]
        return out

    same, changed, seen = again(entry(MODEL, max_model_len=8192), entry("tiny"),
                                entry("new-model"))
    assert (same, changed) == (True, [])
    assert seen.observed_state == {"listing": {"max_model_len": 8192},
                                   "server": {"served": [MODEL, "tiny", "new-model"]}}
    assert li.session_note(a, seen)["matches"] is True
    same, changed, _ = again(entry(MODEL, root="Qwen/Qwen3-8B-AWQ"))
    assert not same and changed == ["listing_entry.root: Qwen/Qwen3-8B -> Qwen/Qwen3-8B-AWQ"]
    s.server = "sglang-standin/0.5.1"
    same, changed, _ = again(entry(MODEL))
    assert not same and changed == [
        "server.fingerprint.Server: sglang-standin/0.5.0 -> sglang-standin/0.5.1"]
    s.server = "sglang-standin/0.5.0"
    same, changed, seen = again(entry("tiny"))
    assert not same and seen is None and "run.local.model_not_served" in changed[0]
    # its limit: the same listing with other weights behind it is the same observation...
    assert again(entry(MODEL))[:2] == (True, [])
    # ...unless --model-dir names the files, which A14 then re-checks
    folder = lm.make_weights(tmp_path / "w", {"model.safetensors": b"1" * 100})
    b = li.observe(e, MODEL, li.ObserveOptions(model_dir=str(folder)))
    (folder / "model.safetensors").write_bytes(b"2" * 100)
    same, changed, _ = li.reobserve(b, e)
    assert not same and any("model.safetensors" in c and "sha256" in c for c in changed)
    s.close()
    same, changed, _ = li.reobserve(a, e)
    assert not same and "run.local.unreachable" in changed[0]


# --- a campaign (slow: the real worker) -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.req("R-11.4", "R-11.11", "R-11.15", "R-16.4")
def test_a_campaign_against_a_generic_openai_compatible_server(e2e_cli, serve, tmp_path):
    """A scripted-style campaign against a loopback server agentprov has no kind for: it
    lists like SGLang and answers chat completions like a model that follows instructions
    (the stand-in of tests/test_real_campaign.py). Exit 0, strict validation passes, the
    manifest keeps the identity record marked unverified, every session notes A14's
    observation, and the only thing asked of the server besides the chats is its listing."""
    from tests.test_real_campaign import answer

    routes = lm.openai_compat_routes(tmp_path)
    routes[("POST", "/v1/chat/completions")] = lambda body: (200, answer(json.loads(body)))
    s = serve("openai_compat", routes=routes, server="sglang-standin/0.5.0")
    corpus = tmp_path / "generic"
    r = e2e_cli("run", "agentdojo", "--endpoint", "openai_compat", "--base-url", s.base_url,
                "--model-id", MODEL, "--containment", "vm", "--i-consent-to-local-run",
                "--corpus", str(corpus), "--campaign", "generic", *BANKING, json_errors=False)
    assert r.code == 0, r.out + r.err
    target = corpus if corpus.exists() else corpus.with_name("generic.partial")
    v = e2e_cli("validate", "--corpus", str(target), "--strict", json_errors=False)
    assert v.code == 0, v.out + v.err
    live = json.loads((target / "manifest.json").read_text())["live"]
    assert live["endpoint_class"] == "local"
    (digest, record), = live["local_models"].items()
    assert record["digest"] == digest and record["model_id"] == MODEL
    assert record["server"]["kind"] == "openai_compat"
    assert record["server"]["fingerprint"] == {"verified": False,
                                               "GET /v1/models": "data[].id",
                                               "Server": "sglang-standin/0.5.0"}
    assert live["quality"][MODEL]["served_models"] == {MODEL: 4}  # A12: as requested
    assert live["canary"]["findings"] == []
    rows = [json.loads(x) for x in (target / "ledger.jsonl").read_text().splitlines()]
    assert [x["status"] for x in rows] == ["complete", "complete"]
    for row in rows:
        h = row["capture_sha256"]
        recs = [json.loads(x) for x in
                (target / "raw" / "sha256" / h[:2] / h).read_text().splitlines()]
        assert recs[0]["agent"]["endpoint_kind"] == "openai_compat"
        note, = [x for x in recs if x.get("code") == "agentdojo/local_model"]
        assert note["local_model"]["matches"] is True
        assert note["local_model"]["observed_digest"] == digest
    gets = [p for m, p, _ in s.requests if m == "GET"]
    assert set(gets) == {"/v1/models"}
    assert len(gets) == 1 + len(rows)  # step 4, then one re-observation before each cell
    posts = {p for m, p, _ in s.requests if m == "POST"}
    assert posts == {"/v1/chat/completions"}
