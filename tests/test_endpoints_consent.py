"""Real endpoints before a campaign: the endpoint registry and class, the model options, the
T0 checks of step 3 in the specification's order (API caps, the key, the endpoint URL, the
containment), the plan, and consent (step 7), with proof that a refusal at one step touched
nothing of the later ones (R-16.8).

Subprocess tests run the real CLI against a marker written by ``make_marker`` (steps 1-3 and
consent read nothing of the environment's files); in-process tests call ``prepare``."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, child_env, fake_identity, make_marker, snapshot

from agentprov_core.backend import environments
from agentprov_core.errors import AgentprovError
from agentprov_core.live import endpoints as epmod
from agentprov_core.run import prepare as planning
from agentprov_core.run.runrequest import RunRequest

BANKING = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
           "--injection-tasks", "0")
OPENROUTER = ("--model", "openrouter", "--model-id", "example-model")
CAPS = ("--max-calls", "80", "--max-cost-usd", "1.00", "--price-in", "0.15",
        "--price-out", "0.60")
SENTINEL = f"AGENTPROV-TEST-SENTINEL-{uuid.uuid4().hex}"  # unique per run, not key-shaped


def env_id() -> str:
    from agentprov_core.plugins import source_entry

    return environments.environment_id(source_entry("agentdojo").source.meta)


@pytest.fixture
def built(home):
    """A marker for the agentdojo environment: steps 1-3 pass the environment check."""
    make_marker(home, env_id())
    return home


@pytest.fixture
def env_file(tmp_path):
    p = tmp_path / "keys.env"
    p.write_text(f"OPENROUTER_API_KEY={SENTINEL}\nANTHROPIC_API_KEY={SENTINEL}\n")
    return p


@pytest.fixture
def run_(cli, corpora):
    """``agentprov run agentdojo`` with a corpus; ``dry=True`` adds --dry-run."""

    def go(*args, dry=True, env=None, json_errors=True):
        extra = ("--dry-run",) if dry else ()
        return cli("run", "agentdojo", *extra, "--corpus", corpora / "c", "--campaign", "c",
                   *BANKING, *args, env=env, json_errors=json_errors)

    return go


def no_secret(r):
    assert SENTINEL not in r.out + r.err


# ------------------------------------------------------------------ the endpoint registry
@pytest.mark.req("R-10.5", "R-10.6", "R-10.7", "R-11.1")
def test_the_registry_holds_the_specs_endpoints():
    from agentprov_core.plugins import manager

    reg = epmod.load()
    api = ["openrouter", "anthropic", "openai", "deepseek", "gemini", "llama", "qwen", "glm"]
    local = ["ollama", "omlx", "lmstudio", "mlx_lm", "llamacpp", "vllm"]
    # the specification's fourteen, and the one this build adds: the generic local
    # openai_compat (docs/decisions.md, "A generic OpenAI-compatible server"; its own
    # tests are tests/test_openai_compat.py)
    assert sorted(reg) == sorted(api + local + ["openai_compat"])
    assert reg["openai_compat"].local and reg["openai_compat"].base_url is None
    kinds = {k.name: k for group in manager().hook.agentprov_endpoint_kinds() for k in group}
    for name in api:
        ep = reg[name]
        assert not ep.local and ep.key and ep.base_url.startswith("https://")
        assert ep.registered_host == ep.host and ep.host in ep.base_url
        assert ep.kind in ("openai", "anthropic") and ep.kind in kinds
        assert ep.endpoint_class == "api"
    assert epmod.wire_of(reg["anthropic"]) == "anthropic"
    for name in local:
        ep = reg[name]
        assert ep.local and ep.key is None and ep.kind == name and kinds[name].local
        assert ep.fingerprint is not None and ep.fingerprint.path.startswith("/")
        assert epmod.is_loopback(ep.base_url) and ep.endpoint_class == "local"
        assert epmod.wire_of(ep) == "openai"
    assert epmod.resolve("local", "--endpoint", reg).name == "ollama"
    assert (reg["omlx"].optional_key, reg["omlx"].model_variable) == ("OMLX_API_KEY",
                                                                      "OMLX_MODEL")
    assert reg["ollama"].model_variable == "LOCAL_MODEL_ID"
    # several defaults share ports 8000 and 8080: their fingerprints tell them apart
    by_port: dict[str, list] = {}
    for name in local:
        by_port.setdefault(reg[name].base_url.split(":")[2].split("/")[0], []).append(reg[name])
    for eps in by_port.values():
        prints = {(e.fingerprint.path, tuple(e.fingerprint.keys), e.fingerprint.owned_by,
                   e.fingerprint.absent) for e in eps}
        assert len(prints) == len(eps)


@pytest.mark.req("R-10.1", "R-10.2", "R-10.3", "R-10.4")
def test_model_options_are_exclusive_and_have_no_default_model(run_, script, home, corpora):
    r = run_("--model", "openrouter", "--endpoint", "openrouter", "--model-id", "m")
    assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive")
    for flag in (("--model", "openrouter"), ("--endpoint", "ollama"), ("--model-id", "m"),
                 ("--base-url", "http://127.0.0.1:1/v1"), ("--allow-lan-endpoint",),
                 ("--allow-custom-endpoint",)):
        r = run_("--llm-script", script, *flag)
        assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive"), flag
    for sel in (("--model", "anthropic"), ("--endpoint", "openrouter")):
        r = run_(*sel)
        assert (r.code, r.error["error"]) == (2, "cli.usage.model_id_missing")
        assert "there are no default model ids" in r.error["message"]
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


# ------------------------------------------------------------------ the model options (2, 5)
@pytest.mark.req("R-12.14", "R-12.15", "R-15.11", "R-15.12")
def test_model_option_refusals(run_, home, corpora):
    r = run_(*OPENROUTER, "--max-tokens", "512")
    assert (r.code, r.error["error"]) == (2, "cli.usage.max_tokens_openai")
    r = run_("--endpoint", "ollama", "--model-id", "m", "--max-tokens", "512")
    assert (r.code, r.error["error"]) == (2, "cli.usage.max_tokens_openai")
    r = run_("--model", "anthropic", "--model-id", "claude-x")
    assert (r.code, r.error["error"]) == (2, "cli.usage.max_tokens_required")
    assert "AgentDojo's own 1,024 is never used silently" in r.error["message"]
    r = run_("--model", "anthropic", "--model-id", "claude-x", "--max-tokens", "0")
    assert (r.code, r.error["error"]) == (2, "cli.usage.option_value")
    r = run_("--model", "anthropic", "--model-id", "claude-x", "--max-tokens", "1024",
             "--reasoning-effort", "high")
    assert (r.code, r.error["error"]) == (2, "cli.usage.reasoning_effort_anthropic")
    r = run_(*OPENROUTER, "--reasoning-effort", "extreme")
    assert (r.code, r.error["error"]) == (2, "cli.usage.option_value")
    r = run_(*OPENROUTER, "--temperature", "0")
    assert (r.code, r.error["error"]) == (2, "cli.usage.parameter_not_transmitted")
    assert "--temperature-policy as-benchmark" in r.error["message"]
    r = run_(*OPENROUTER, "--temperature", "0", "--temperature-policy", "inject")
    assert (r.code, r.error["error"]) == (5, "run.unsupported.temperature_policy")
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.fixture
def inproc(monkeypatch, tmp_path):
    """``prepare`` in-process with a fixed environment id and a key in an --env-file."""
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setattr(environments, "read_marker",
                        lambda meta, env_id: SimpleNamespace(probe={}))
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    keys_env = tmp_path / "k.env"
    keys_env.write_text(f"OPENROUTER_API_KEY={SENTINEL}\nANTHROPIC_API_KEY={SENTINEL}\n")
    # Step 4 (listing, fingerprinting and observing a local server) needs a server; these
    # tests are about steps 1-3 and 7, so it answers a fixed observation here. Step 4 itself
    # runs against real loopback servers in tests/test_local_models.py.
    monkeypatch.setattr(planning, "observe_local", lambda req, ep, resolved: (
        None, {"model_id": req.options.model_id, "local_model": {"digest": "0" * 64}},
        None))

    def prepare(**options):
        o = dict(corpus=str(tmp_path / "c"), campaign="c", suite=("banking",),
                 user_tasks="0-1", containment="vm", env_file=str(keys_env))
        o.update(options)
        o = {k: v for k, v in o.items() if v is not None}
        return planning.prepare(RunRequest.of("agentdojo", o, set(o)))

    return prepare


API = dict(model="openrouter", model_id="example-model", max_calls=80, max_cost_usd=1.0,
           price_in=0.15, price_out=0.6)


@pytest.mark.req("R-12.14", "R-12.16", "R-15.11", "R-11.27", "R-8.11")
def test_model_options_go_into_the_agent_configuration(inproc):
    base = inproc(**API)
    assert base.endpoint_class == "api"
    agent = planning.agent_config(base.request, base.endpoint, base.resolved,
                                  planning.model_params(base.request, base.source,
                                                        base.endpoint))
    assert agent["key_variables"] == ["OPENROUTER_API_KEY"]
    assert SENTINEL not in json.dumps(agent)
    t0 = inproc(**API, temperature="0", temperature_policy="as-benchmark")
    t7 = inproc(**API, temperature="0.7")
    effort = inproc(**API, reasoning_effort="low")
    digests = {p.plan.config_digest for p in (base, t0, t7, effort)}
    assert len(digests) == 4
    # the display name is an attack parameter: adding it resumes the same configuration
    named = inproc(**API, model_display_name="Example Model")
    assert named.plan.config_digest == base.plan.config_digest
    anth = dict(API, model="anthropic")
    a1 = inproc(**anth, max_tokens="harness-default")
    a2 = inproc(**anth, max_tokens="1024")
    assert a1.plan.config_digest != a2.plan.config_digest
    assert a1.resolved.wire == "anthropic" and a1.resolved.key_variable == "ANTHROPIC_API_KEY"


@pytest.mark.req("R-25.37", "R-15.11")
def test_inspect_transmits_no_sampling_parameter(inproc, monkeypatch):
    src = __import__("agentprov_core.plugins", fromlist=["x"]).source_entry("agentharm")
    ep = epmod.load()["openrouter"]
    req = RunRequest.of("agentharm", {"temperature": "0.5", "model_id": "m"}, set())
    with pytest.raises(AgentprovError) as e:
        planning.model_params(req, src.source, ep)
    assert e.value.code == "cli.usage.parameter_not_transmitted"
    req = req.replace(temperature_policy="as-benchmark")
    assert planning.model_params(req, src.source, ep)["temperature_policy"] == "as-benchmark"


# ------------------------------------------------------------------ endpoint class
@pytest.mark.req("R-10.8", "R-10.9", "R-11.59", "R-11.36", "R-11.58")
def test_the_class_is_decided_before_consent_and_recorded(inproc, tmp_path):
    local = inproc(endpoint="ollama", model_id="m")
    assert local.endpoint_class == "local"
    assert local.resolved.base_url_source == "registry"
    moved = inproc(endpoint="ollama", model_id="m", base_url="http://localhost:11500/v1")
    assert (moved.endpoint_class, moved.resolved.base_url_source) == ("local", "flag")
    assert moved.plan.config_digest != local.plan.config_digest
    lan = inproc(endpoint="ollama", model_id="m", base_url="http://192.168.1.20:11434/v1",
                 allow_lan_endpoint=True, max_calls=10, max_cost_usd=1.0, price_in=0,
                 price_out=0)
    assert lan.endpoint_class == "api" and lan.resolved.lan
    assert lan.resolved.base_url == "http://192.168.1.20:11434/v1"  # recorded as given
    # precedence: the flag, then .env, then the setting, then the registry
    home = Path(os.environ["AGENTPROV_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.toml").write_text(
        '[endpoints.ollama]\nbase_url = "http://127.0.0.1:1111/v1"\n')
    assert inproc(endpoint="ollama", model_id="m").resolved.base_url_source == "setting"
    dotenv = tmp_path / "local.env"
    dotenv.write_text("OLLAMA_BASE_URL=http://127.0.0.1:2222/v1\n")
    r = inproc(endpoint="ollama", model_id="m", env_file=str(dotenv)).resolved
    assert (r.base_url, r.base_url_source) == ("http://127.0.0.1:2222/v1", "env")
    r = inproc(endpoint="ollama", model_id="m", env_file=str(dotenv),
               base_url="http://127.0.0.1:3333/v1").resolved
    assert (r.base_url, r.base_url_source) == ("http://127.0.0.1:3333/v1", "flag")


@pytest.mark.req("R-10.8")
def test_the_manifest_records_the_class(inproc):
    from agentprov_core.run import manifest

    src = Path(manifest.__file__).read_text()
    assert '"endpoint_class": prepared.endpoint_class' in src
    assert inproc(endpoint="ollama", model_id="m").endpoint_class == "local"


# ------------------------------------------------------------------ the URL rules (exit 4)
@pytest.mark.req("R-12.9", "R-12.10", "R-11.57", "R-11.58")
@pytest.mark.parametrize("name,url,flags,why", [
    ("openrouter", "https://user@openrouter.ai/api/v1", {}, "user name"),
    ("openrouter", "https://u:pw@openrouter.ai/api/v1", {"allow_custom": True}, "user name"),
    ("openrouter", "https://openrouter.ai/api/v1?key=x", {}, "query"),
    ("openrouter", "https://openrouter.ai/api/v1#s3cr", {}, "fragment"),
    ("openrouter", "http://openrouter.ai/api/v1", {}, "must be https"),
    ("openrouter", "https://evil.example/api/v1", {}, "--allow-custom-endpoint"),
    ("openrouter", "http://evil.example/api/v1", {"allow_custom": True}, "must be https"),
    ("ollama", "http://192.168.1.20:11434/v1", {}, "--allow-lan-endpoint"),
    ("ollama", "http://nas.local:11434/v1", {"allow_lan": True}, "no host names"),
    ("ollama", "http://8.8.8.8:11434/v1", {"allow_lan": True}, "literal private address"),
    ("ollama", "https://10.0.0.5:11434/v1", {"allow_lan": True}, "plain http"),
    ("ollama", "http://[fe80::1%25eth0]:11434/v1", {"allow_lan": True}, "zone ids"),
    ("ollama", "http://user@127.0.0.1:11434/v1", {"allow_lan": True}, "user name"),
])
def test_url_rules(name, url, flags, why):
    ep = epmod.load()[name]
    with pytest.raises(AgentprovError) as e:
        epmod.check_url(ep, url, "flag", allow_custom=flags.get("allow_custom", False),
                        allow_lan=flags.get("allow_lan", False))
    assert (e.value.code, e.value.exit_code) == ("cli.refused.endpoint", 4)
    assert why in e.value.message
    for secret in (":pw", "key=x", "s3cr"):
        assert secret not in e.value.message


@pytest.mark.req("R-12.9", "R-11.57")
@pytest.mark.parametrize("name,url,flags,cls", [
    ("openrouter", "https://openrouter.ai/api/v1", {}, "api"),
    ("openrouter", "https://proxy.example/v1", {"allow_custom": True}, "api"),
    ("openrouter", "http://127.0.0.1:9000/v1", {"allow_custom": True}, "api"),
    ("ollama", "http://127.0.0.1:11434/v1", {}, "local"),
    ("ollama", "http://[::1]:11434/v1", {}, "local"),
    ("vllm", "https://localhost:8000/v1", {}, "local"),
    ("ollama", "http://10.1.2.3:11434/v1", {"allow_lan": True}, "api"),
    ("ollama", "http://172.31.0.9:11434/v1", {"allow_lan": True}, "api"),
    ("ollama", "http://100.64.0.1:11434/v1", {"allow_lan": True}, "api"),
    ("ollama", "http://[fd00::5]:11434/v1", {"allow_lan": True}, "api"),
])
def test_urls_admitted(name, url, flags, cls):
    ep = epmod.load()[name]
    r = epmod.check_url(ep, url, "flag", allow_custom=flags.get("allow_custom", False),
                        allow_lan=flags.get("allow_lan", False))
    assert r.endpoint_class == cls
    assert r.custom == (name == "openrouter" and "openrouter.ai" not in url)


@pytest.mark.req("R-12.10", "R-15.9", "R-16.3")
def test_endpoint_refusal_through_the_cli(run_, built, corpora):
    before = snapshot(built)
    r = run_("--endpoint", "ollama", "--model-id", "m", "--base-url",
             "http://me:secret@127.0.0.1:11434/v1", "--containment", "vm")
    assert (r.code, r.error["error"]) == (4, "cli.refused.endpoint")
    assert "secret" not in r.out + r.err
    # the URL (4) comes before the containment (4)
    r = run_("--endpoint", "ollama", "--model-id", "m", "--base-url",
             "http://127.0.0.1:11434/v1?x=1")
    assert (r.code, r.error["error"]) == (4, "cli.refused.endpoint")
    assert snapshot(built) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-12.9")
def test_allow_custom_endpoint_is_recorded(inproc, tmp_path):
    home = Path(os.environ["AGENTPROV_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.toml").write_text(
        '[endpoints.openrouter]\nbase_url = "https://gateway.example/api/v1"\n')
    with pytest.raises(AgentprovError) as e:
        inproc(**API)
    assert e.value.code == "cli.refused.endpoint"
    p = inproc(**API, allow_custom_endpoint=True)
    assert p.resolved.custom and p.resolved.base_url_source == "setting"
    agent = planning.agent_config(p.request, p.endpoint, p.resolved, {})
    assert agent["allow_custom_endpoint"] is True
    assert agent["base_url"] == "https://gateway.example/api/v1"


@pytest.mark.req("R-11.28", "R-11.58", "R-11.59", "R-11.27")
def test_a_key_is_never_sent_to_a_lan_address(run_, built, tmp_path, corpora):
    omlx_env = tmp_path / "omlx.env"
    omlx_env.write_text(f"OMLX_API_KEY={SENTINEL}\n")
    lan = ("--endpoint", "omlx", "--model-id", "m", "--base-url", "http://192.168.1.20:8000/v1",
           "--allow-lan-endpoint", "--containment", "vm")
    # a LAN endpoint is class api: its caps first (exit 4), prices may be 0
    r = run_(*lan, "--env-file", omlx_env)
    assert (r.code, r.error["error"]) == (4, "cli.refused.api_caps")
    zero = ("--max-calls", "10", "--max-cost-usd", "0", "--price-in", "0", "--price-out", "0")
    r = run_(*lan, *zero, "--env-file", omlx_env)
    assert (r.code, r.error["error"]) == (4, "cli.refused.lan_key")
    assert "OMLX_API_KEY" in r.error["message"]
    no_secret(r)
    # keyless, the LAN run passes step 3 and goes on to step 4, which lists the server at
    # that address: no LAN server exists in tests (and none is contacted); the LAN class
    # (api) is asserted in-process by test_the_class_is_decided_before_consent_and_recorded
    assert list(corpora.iterdir()) == []


@pytest.mark.req("R-11.27")
def test_an_optional_local_key_is_recorded_by_name_when_set(inproc, tmp_path):
    (tmp_path / "none.env").write_text("")
    keyless = inproc(endpoint="omlx", model_id="m", env_file=str(tmp_path / "none.env"))
    keyed_env = tmp_path / "omlx.env"
    keyed_env.write_text(f"OMLX_API_KEY={SENTINEL}\n")
    keyed = inproc(endpoint="omlx", model_id="m", env_file=str(keyed_env))
    assert keyless.resolved.key_variable is None
    assert keyed.resolved.key_variable == "OMLX_API_KEY"
    assert keyless.plan.config_digest != keyed.plan.config_digest
    plain = inproc(endpoint="omlx", model_id="m", env_file=str(tmp_path / "none.env"))
    assert plain.plan.config_digest == keyless.plan.config_digest


# ------------------------------------------------------------------ key and containment
@pytest.mark.req("R-12.8", "R-14.7", "R-29.6", "R-16.3")
def test_a_missing_key_exits_3_after_the_caps(run_, built, tmp_path, corpora):
    empty = tmp_path / "empty.env"
    empty.write_text("OTHER=1\n")
    r = run_(*OPENROUTER, "--containment", "vm", "--env-file", empty)
    assert (r.code, r.error["error"]) == (4, "cli.refused.api_caps")  # caps before the key
    r = run_(*OPENROUTER, *CAPS, "--containment", "vm", "--env-file", empty)
    assert (r.code, r.error["error"]) == (3, "cli.environment.credential")
    assert "OPENROUTER_API_KEY" in r.error["message"]
    # the key (3) comes before the endpoint URL (4) and the containment (4)
    (built / "settings.toml").write_text(
        '[endpoints.openrouter]\nbase_url = "https://openrouter.ai/api/v1?x=1"\n')
    r = run_(*OPENROUTER, *CAPS, "--env-file", empty)
    assert (r.code, r.error["error"]) == (3, "cli.environment.credential")
    assert list(corpora.iterdir()) == []


@pytest.mark.req("R-15.7", "R-14.4", "R-14.7", "R-29.5", "R-16.3")
def test_containment_is_required_for_a_real_model(run_, built, env_file, corpora):
    r = run_(*OPENROUTER, *CAPS, "--env-file", env_file)
    assert (r.code, r.error["error"]) == (4, "cli.refused.containment")
    no_secret(r)
    r = run_("--endpoint", "ollama", "--model-id", "m")
    assert (r.code, r.error["error"]) == (4, "cli.refused.containment")
    if sys.platform != "darwin":
        r = run_("--endpoint", "ollama", "--model-id", "m", "--containment", "sandbox-exec")
        assert (r.code, r.error["error"]) == (4, "cli.refused.containment")
        assert "not applicable" in r.error["message"]
    # an enforced provider without a passed probe in the marker (this one records none)
    here = "bwrap" if sys.platform.startswith("linux") else "sandbox-exec"
    r = run_("--endpoint", "ollama", "--model-id", "m", "--containment", here)
    assert (r.code, r.error["error"]) == (4, "cli.refused.containment")
    assert "probe" in r.error["message"]
    assert list(corpora.iterdir()) == []


@pytest.mark.req("R-14.3", "R-16.8")
def test_a_scripted_run_reads_no_key_and_needs_no_containment(cli, corpora, script, tmp_path,
                                                              home):
    (tmp_path / ".env").write_text(f"OPENROUTER_API_KEY={SENTINEL}\n")
    audit = tmp_path / "audit.json"
    r = audited(cli, audit, tmp_path / ".env", "run", "agentdojo", "--dry-run", "--corpus",
                corpora / "s", "--campaign", "s", *BANKING, "--llm-script", script,
                cwd=tmp_path)
    assert r.returncode == 3 and "cli.environment.backend_missing" in r.stderr
    assert json.loads(audit.read_text()) == []


# ------------------------------------------------------------------ the caps touch nothing
AUDIT_RUNNER = r'''
import json, os, sys
watch = os.path.realpath(os.environ["AUDIT_WATCH"])
seen, busy = [], [False]
def hook(event, args):
    if busy[0]:
        return
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            path = os.path.realpath(os.fsdecode(args[0]))
        except Exception:
            return
        if path == watch:
            seen.append(["open", path])
    elif event in ("socket.connect", "socket.getaddrinfo"):
        seen.append([event, repr(args[1] if event == "socket.connect" else args[:2])])
sys.addaudithook(hook)
import atexit
def dump():
    busy[0] = True
    with open(os.environ["AUDIT_LOG"], "w") as f:
        json.dump(seen, f)
atexit.register(dump)
from agentprov_core.cli.main import main
main(sys.argv[1:])
'''


def audited(cli, log: Path, watch: Path, *args, env=None, cwd=None):
    """Run the CLI with an audit hook recording every open of ``watch`` and every socket
    connection or name lookup."""
    runner = log.with_suffix(".py")
    runner.write_text(AUDIT_RUNNER)
    e = child_env()
    e |= {"AGENTPROV_HOME": os.environ.get("TEST_HOME", ""), "AGENTPROV_ERROR_FORMAT": "json",
          "AUDIT_WATCH": str(watch), "AUDIT_LOG": str(log), "PYTHONPATH": str(ROOT)}
    e |= env or {}
    if not e["AGENTPROV_HOME"]:
        e["AGENTPROV_HOME"] = str(log.parent / "audit-home")
    return subprocess.run([sys.executable, str(runner), *map(str, args)], capture_output=True,
                          text=True, env=e, cwd=cwd or ROOT, timeout=120)


@pytest.mark.req("R-16.8", "R-16.3", "R-29.2", "R-14.9", "R-15.4", "R-15.6")
def test_the_caps_refusal_reads_no_key_contacts_nothing_writes_nothing(cli, built, tmp_path,
                                                                        registry_copy,
                                                                        corpora):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    with (registry_copy / "endpoints.toml").open("a") as f:
        f.write(f'\n[endpoints.watched]\nkind = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"'
                '\nkey = "OPENROUTER_API_KEY"\n')
    keys_env = tmp_path / "watched.env"
    keys_env.write_text(f"OPENROUTER_API_KEY={SENTINEL}\n")
    audit = tmp_path / "audit.json"
    env = {"AGENTPROV_REGISTRY": str(registry_copy), "AGENTPROV_HOME": str(built)}
    before = snapshot(built)
    args = ("run", "agentdojo", "--dry-run", "--corpus", corpora / "w", "--campaign", "w",
            *BANKING, "--endpoint", "watched", "--model-id", "m", "--containment", "vm",
            "--env-file", keys_env)
    p = audited(cli, audit, keys_env, *args, "--max-calls", "80", env=env)
    assert p.returncode == 4, p.stderr
    assert json.loads(p.stderr.strip().splitlines()[-1])["error"] == "cli.refused.api_caps"
    assert json.loads(audit.read_text()) == []  # the .env never opened, no socket used
    assert SENTINEL not in p.stdout + p.stderr
    listener.setblocking(False)
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody knocked
    assert snapshot(built) == before
    assert list(corpora.iterdir()) == []
    # the positive control: with its caps the same run reads the key file
    p = audited(cli, audit, keys_env, *args, *CAPS, env=env)
    assert ["open", os.path.realpath(keys_env)] in json.loads(audit.read_text())
    assert SENTINEL not in p.stdout + p.stderr
    listener.close()


# ------------------------------------------------------------------ the plan, then consent
@pytest.mark.req("R-16.6", "R-8.14", "R-16.7")
def test_a_dry_run_stops_before_consent(inproc):
    p = inproc(**API)  # no consent flag, no terminal: prepare (steps 1-6) still passes
    assert p.plan.units == 2 and p.containment == {"kind": "vm", "declared_by": "operator"}


@pytest.mark.req("R-15.2", "R-15.3", "R-15.1", "R-14.5", "R-14.8", "R-29.4", "R-16.7")
def test_consent_flags(run_, built, env_file, corpora, tmp_path):
    api = (*OPENROUTER, *CAPS, "--containment", "vm", "--env-file", env_file)
    r = run_(*api, dry=False, json_errors=False)
    assert r.code == 4
    hint, refusal = r.err.strip().split("\n", 1)  # the display-name hint first
    assert hint.startswith("hint: important_instructions address(es) the model by name")
    assert refusal.startswith("agentprov: error [cli.refused.consent]: a real-model run "
                              "needs consent")
    r = run_(*api, "--i-consent-to-local-run", dry=False)
    assert (r.code, r.error["error"]) == (4, "cli.refused.consent")
    r = run_(*api, "--i-consent-to-api-costs", dry=False)
    # consent given, the run goes on: the stand-in environment (a marker, no install)
    # cannot start its worker, before any corpus is written
    assert (r.code, r.error["error"]) == (3, "cli.environment.worker")
    no_secret(r)
    from tests.test_local_models import FakeServer, ollama_routes

    server = FakeServer(ollama_routes(tmp_path))  # step 4 lists and observes a local server
    local = ("--endpoint", "local", "--model-id", "llama3.2:latest", "--base-url",
             server.base_url, "--containment", "vm")
    r = run_(*local, dry=False)
    assert (r.code, r.error["error"]) == (4, "cli.refused.consent")
    assert "--i-consent-to-local-run or --i-consent-to-api-costs" in r.error["message"]
    for flag in ("--i-consent-to-local-run", "--i-consent-to-api-costs"):
        r = run_(*local, flag, dry=False)
        assert (r.code, r.error["error"]) == (3, "cli.environment.worker")
    server.close()
    assert list(corpora.iterdir()) == []


def _pty_run(args: list[str], answer: bytes | None, home: Path) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a real pseudo-terminal; answer the
    prompt with ``answer`` once it appears."""
    master, slave = pty.openpty()
    e = child_env()
    e |= {"AGENTPROV_HOME": str(home), "AGENTPROV_ERROR_FORMAT": "json"}
    proc = subprocess.Popen([sys.executable, "-m", "agentprov_core", *args], stdin=slave,
                            stdout=slave, stderr=slave, env=e, cwd=ROOT, close_fds=True)
    os.close(slave)
    out = b""
    sent = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        if not sent and answer is not None and b"Continue? [y/N]" in out:
            os.write(master, answer)
            sent = True
        if proc.poll() is not None and not ready:
            break
    code = proc.wait(timeout=30)
    os.close(master)
    return code, out.decode(errors="replace")


@pytest.mark.req("R-15.3", "R-16.7", "R-18.5")
@pytest.mark.parametrize("answer,code,error", [(b"y\n", 3, "cli.environment.worker"),
                                               (b"n\n", 4, "cli.refused.consent"),
                                               (b"\n", 4, "cli.refused.consent")])
def test_the_prompt_on_a_terminal(built, env_file, corpora, answer, code, error):
    args = ["run", "agentdojo", "--corpus", str(corpora / "t"), "--campaign", "t", *BANKING,
            *OPENROUTER, *CAPS, "--containment", "vm", "--env-file", str(env_file)]
    got, out = _pty_run(args, answer, built)
    assert got == code, out
    assert "Continue? [y/N]" in out
    assert "up to 3 preflight probe call(s), then up to 12 cell attempt(s)" in out
    assert "endpoint openrouter (class api)" in out
    assert f'"error": "{error}"' in out
    assert SENTINEL not in out
    assert list(corpora.iterdir()) == []


# ------------------------------------------------------------------ the spec's transcripts
@pytest.mark.req("R-29.2", "R-15.4", "R-15.6", "R-18.10", "R-17.13")
def test_transcript_api_caps(run_, built):
    r = run_(*OPENROUTER, "--containment", "vm", json_errors=False)
    assert r.code == 4
    assert r.err.strip() == (
        "agentprov: error [cli.refused.api_caps]: an API endpoint run needs its caps (the "
        "endpoint entry is not local): give --max-calls, --max-cost-usd (D-725; the provider's "
        "own key limit is the backstop)")


@pytest.mark.req("R-29.3", "R-15.6", "R-16.1", "R-18.11")
def test_transcript_cost_needs_prices(run_):
    r = run_(*OPENROUTER, "--containment", "vm", "--max-calls", "80", "--max-cost-usd", "1.00",
             json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: --max-cost-usd needs --price-in and "
                                          "--price-out (USD per million tokens)")


@pytest.mark.req("R-15.8", "R-18.12")
def test_transcript_preflight_takes_no_caps(cli):
    r = cli("run", "agentdojo", "--preflight-only", *OPENROUTER, "--max-calls", "5",
            json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: --preflight-only is one model call; "
                                          "the caps belong to a campaign")


@pytest.mark.req("R-14.2", "R-12.7", "R-18.13")
def test_transcript_keychain_with_a_script(run_, script):
    r = run_("--llm-script", script, "--keychain", json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: --keychain reads the key of a real "
                                          "endpoint; a scripted run needs none")


@pytest.mark.req("R-29.4", "R-29.5", "R-29.6")
def test_common_refusals_codes_and_exits():
    from agentprov_core.errors import REGISTRY

    for code, exit_code in (("cli.refused.api_caps", 4), ("cli.refused.consent", 4),
                            ("cli.refused.containment", 4), ("cli.environment.credential", 3),
                            ("cli.refused.endpoint", 4), ("cli.refused.lan_key", 4),
                            ("cli.usage.cost_needs_prices", 2)):
        assert int(REGISTRY[code].exit) == exit_code
    assert REGISTRY["cli.refused.consent"].message.startswith("a real-model run needs consent")


@pytest.mark.req("R-13.2")
def test_a_display_name_hint_comes_before_consent(run_, built, env_file, corpora):
    """An attack that names the model, and no --model-display-name: the hint is printed
    before consent is asked (here refused: no flag, no terminal), and not once the name is
    given."""
    api = (*OPENROUTER, *CAPS, "--containment", "vm", "--env-file", env_file)
    r = run_(*api, dry=False)
    assert (r.code, r.error["error"]) == (4, "cli.refused.consent")
    lines = r.err.strip().splitlines()
    assert lines[0] == (
        "hint: important_instructions address(es) the model by name, and no "
        "--model-display-name is given: unless the model id 'example-model' matches a stock "
        "name of the benchmark, the first attacked cell's setup refuses it and the run stops "
        "there; give --model-display-name NAME (the name the attack should use)")
    named = run_(*api, "--model-display-name", "Example", dry=False)
    assert named.error["error"] == "cli.refused.consent" and "hint:" not in named.err
    assert list(corpora.iterdir()) == []
