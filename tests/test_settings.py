"""``agentprov settings`` (D-828), the model-fact flags and their precedence (flag, setting,
folder, preset) as a dry run says it, the setting ``endpoints.<name>.base_url`` in the
base-URL precedence, and ``agentprov models --find-folders`` over a fake home tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_marker, snapshot

from tests import test_endpoints_consent as consent
from tests.test_endpoints_consent import BANKING, env_id
from tests.test_local_models import FakeServer, llamacpp_routes, make_weights

#: ``prepare`` in-process up to the plan (tests/test_endpoints_consent.py's fixture)
inproc = consent.inproc

USER_FILE = """\
# my settings: kept by every edit
[compute]
# the preset I use on the studio
preset = "m5ultra"  # a trailing comment

[endpoints.omlx]
base_url = "http://127.0.0.1:8001/v1"  # oMLX on its second port
"""


def settings_file(home: Path) -> Path:
    return home / "settings.toml"


@pytest.mark.req("R-11.21")
def test_set_get_list_unset_keep_the_users_comments(cli, home):
    home.mkdir(parents=True, exist_ok=True)
    settings_file(home).write_text(USER_FILE)
    model = "mlx-community/Qwen3.5-4B-MLX-4bit"  # dots and a slash, given as is
    r = cli("settings", "set", f"local_models.omlx.{model}.active_params_b", "13")
    assert r.code == 0, r.err
    assert r.out.strip() == f'local_models.omlx."{model}".active_params_b = 13'
    # the same key, TOML-quoted, is the same key
    assert cli("settings", "set", f'local_models.omlx."{model}".size_gb', "2.5").code == 0
    assert cli("settings", "set", f"local_models.omlx.{model}.context_tokens", "32768").code == 0
    assert cli("settings", "set", "compute.preset", "other").code == 0
    text = settings_file(home).read_text()
    for line in ("# my settings: kept by every edit", "# the preset I use on the studio",
                 'base_url = "http://127.0.0.1:8001/v1"  # oMLX on its second port',
                 f'[local_models.omlx."{model}"]', "active_params_b = 13.0",
                 "size_gb = 2.5", "context_tokens = 32768"):
        assert line in text, text
    assert 'preset = "other"' in text and "m5ultra" not in text
    got = cli("settings", "get", f"local_models.omlx.{model}.size_gb")
    assert (got.code, got.out.strip()) == (0, "2.5")
    listed = cli("settings", "list").out.splitlines()
    assert listed == ["compute.preset = other", "endpoints.omlx.base_url = http://127.0.0.1:8001/v1",
                      f'local_models.omlx."{model}".active_params_b = 13',
                      f'local_models.omlx."{model}".size_gb = 2.5',
                      f'local_models.omlx."{model}".context_tokens = 32768']
    doc = json.loads(cli("settings", "list", "--format", "json").out)
    assert doc["format"] == "agentprov-settings/0.1"
    assert doc["settings"][f'local_models.omlx."{model}".context_tokens'] == 32768
    # a key printed by list is accepted back
    for key in ("active_params_b", "size_gb", "context_tokens"):
        r = cli("settings", "unset", f'local_models.omlx."{model}".{key}')
        assert r.code == 0, r.err
    text = settings_file(home).read_text()
    assert "local_models" not in text  # the tables it left empty are gone
    assert "# my settings: kept by every edit" in text
    assert "# the preset I use on the studio" in text
    r = cli("settings", "get", f"local_models.omlx.{model}.size_gb")
    assert (r.code, r.out) == (1, "") and "is not set" in r.err
    before = settings_file(home).read_bytes()
    r = cli("settings", "unset", f"local_models.omlx.{model}.size_gb")
    assert (r.code, r.out.strip()) == (0, f'local_models.omlx."{model}".size_gb was not set')
    assert settings_file(home).read_bytes() == before


@pytest.mark.req("R-11.21")
@pytest.mark.parametrize(("args", "code", "names"), [
    (("set", "local_models.omlx.m.size", "1"), "cli.usage.setting_key", "'size' is not a model fact"),
    (("set", "local_models.nowhere.m.size_gb", "1"), "cli.usage.setting_key", "'nowhere' is not an endpoint"),
    (("set", "local_models.openrouter.m.size_gb", "1"), "cli.usage.setting_key", "is an API endpoint"),
    (("set", "endpoints.nowhere.base_url", "http://127.0.0.1:1/v1"), "cli.usage.setting_key", "'nowhere' is not an endpoint"),
    (("set", "endpoints.omlx.key", "x"), "cli.usage.setting_key", "endpoints.<name>.base_url"),
    (("set", "compute.jobs", "4"), "cli.usage.setting_key", "holds preset only"),
    (("set", "colour", "blue"), "cli.usage.setting_key", "'colour' is not a settings table"),
    (("set", "local_models.omlx.m.context_tokens", "1.5"), "cli.usage.setting_value", "an integer above 0"),
    (("set", "local_models.omlx.m.size_gb", "0"), "cli.usage.setting_value", "a number above 0"),
    (("set", "local_models.omlx.m.size_gb", "nan"), "cli.usage.setting_value", "a number above 0"),
    (("set", "local_models.omlx.m.active_params_b", "big"), "cli.usage.setting_value", "a number above 0"),
    (("set", "endpoints.omlx.base_url", "ftp://x"), "cli.usage.setting_value", "http:// or https://"),
    (("set", "compute.preset", "Bad Name"), "cli.usage.setting_value", "a preset's name"),
    (("get", "local_models.omlx.m"), "cli.usage.setting_key", "local_models.<endpoint>.<model id>.<fact>"),
])
def test_a_key_or_value_outside_the_schema_is_refused_and_nothing_written(cli, home, args,
                                                                         code, names):
    home.mkdir(parents=True, exist_ok=True)
    settings_file(home).write_text(USER_FILE)
    before = snapshot(home)
    r = cli("settings", *args)
    assert (r.code, r.error["error"]) == (2, code), r.err
    assert names in r.error["message"]
    assert args[1].split(".")[0] in r.error["message"]  # the message names the key
    assert snapshot(home) == before


@pytest.mark.req("R-11.21")
def test_a_wrong_file_is_refused_naming_the_file_and_line(cli, home):
    home.mkdir(parents=True, exist_ok=True)
    settings_file(home).write_text('[compute]\npreset = "m5ultra"\n\n'
                                   '[local_models.omlx.m]\nsize_gb = "big"\n')
    before = snapshot(home)
    r = cli("settings", "list")
    assert (r.code, r.error["error"]) == (2, "cli.usage.settings_file")
    assert "settings.toml:5" in r.error["message"]
    assert "local_models.omlx.m.size_gb" in r.error["message"]
    r = cli("settings", "set", "compute.preset", "x")  # an edit of a wrong file is refused
    assert (r.code, r.error["error"]) == (2, "cli.usage.settings_file")
    settings_file(home).write_text("[compute\n")
    r = cli("settings", "get", "compute.preset")
    assert (r.code, r.error["error"]) == (2, "cli.usage.settings_file")
    assert snapshot(home) != before and settings_file(home).read_text() == "[compute\n"


# ------------------------------------------------------------------ model facts in a run
def _qwen_folder(root: Path) -> Path:
    folder = make_weights(root, {"model-00001-of-00002.safetensors": b"A" * 3000,
                                 "model-00002-of-00002.safetensors": b"B" * 2000,
                                 "ignored.gguf": b"C" * 999})
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 9728,
        "vocab_size": 151936, "tie_word_embeddings": True,
        "max_position_embeddings": 40960}))
    return folder


def _facts_line(out: str) -> str:
    [line] = [x for x in out.splitlines() if x.startswith("  model facts: ")]
    return line


@pytest.mark.req("R-11.19", "R-11.20", "R-11.22")
def test_each_fact_has_its_source_in_precedence(cli, home, inproc, tmp_path):
    """flag over setting over folder over preset: size from the flag although the setting
    and the folder have one; active parameters from the setting although the folder has
    them; the context and the KV cache from the folder's config.json; with no folder, they
    fall to the preset step, which has none. (``prepare`` in-process up to the plan, as a
    dry run runs it; the dry run prints :func:`facts.summary`, tests/test_settings.py's
    slow test.)"""
    from agentprov_core.live.local import facts

    folder = _qwen_folder(tmp_path / "qwen")
    assert cli("settings", "set", "local_models.llamacpp.m.active_params_b", "3.5").code == 0
    assert cli("settings", "set", "local_models.llamacpp.m.size_gb", "9").code == 0
    local = dict(endpoint="llamacpp", model_id="m", base_url="http://127.0.0.1:9/v1")
    p = inproc(**local, model_dir=str(folder), model_size_gb="7.25")
    line = facts.summary(p.model_facts)
    assert "size_gb=7.25 (source=flag: --model-size-gb)" in line
    assert "active_params_b=3.5 (source=settings: local_models.llamacpp.m.active_params_b)" in line
    assert "context_tokens=40960 (source=folder: config.json max_position_embeddings)" in line
    # 2 x 36 layers x 8 KV heads x 128 x 40960 tokens x 2 bytes = 6.04 GB
    assert "kv_gb_per_trace=6.04 (source=folder: config.json, 16-bit cache at 40960 tokens)" in line
    line = facts.summary(inproc(**local).model_facts)  # no flag, no folder
    assert "size_gb=9 (source=settings" in line
    assert "context_tokens unknown (no preset)" in line
    assert "kv_gb_per_trace unknown (no preset)" in line
    # the folder alone: the safetensors sizes (not the gguf), 5,000 bytes; the estimate
    assert cli("settings", "unset", "local_models.llamacpp.m.size_gb").code == 0
    assert cli("settings", "unset", "local_models.llamacpp.m.active_params_b").code == 0
    line = facts.summary(inproc(**local, model_dir=str(folder)).model_facts)
    assert "size_gb=5e-06 (source=folder: 2 safetensors file(s))" in line
    # embeddings (tied) 0.389 B + 36 layers x (attention 26.2 M + MLP 74.7 M) = 4.022 B
    assert "active_params_b=4.022 (source=folder: config.json, estimated from the " \
           "architecture)" in line
    # no safetensors: the gguf shards, oMLX's split/ folder included
    gguf = make_weights(tmp_path / "gguf", {"split/m-00001-of-00002.gguf": b"G" * 7000,
                                            "split/m-00002-of-00002.gguf": b"H" * 1000})
    line = facts.summary(inproc(**local, model_dir=str(gguf)).model_facts)
    assert "size_gb=8e-06 (source=folder: 2 gguf file(s))" in line
    assert "context_tokens unknown (no preset)" in line  # no config.json
    # a model id with dots is looked up as one id
    assert cli("settings", "set", "local_models.llamacpp.a.b/c.d.context_tokens", "8192").code == 0
    line = facts.summary(inproc(**dict(local, model_id="a.b/c.d")).model_facts)
    assert 'context_tokens=8192 (source=settings: local_models.llamacpp."a.b/c.d".context_tokens)' in line
    # the facts are not configuration: the plan and config digests do not change
    a, b = inproc(**local).plan, inproc(**local, model_size_gb="3").plan
    assert (a.plan_sha256, a.config_digest) == (b.plan_sha256, b.config_digest)
    # an API endpoint and the scripted transport have none
    assert inproc(model="openrouter", model_id="x", max_calls=1, max_cost_usd=1.0,
                  price_in=1.0, price_out=1.0).model_facts is None


@pytest.mark.slow
@pytest.mark.req("R-11.22")
def test_the_dry_run_says_the_sources(e2e_cli, agentdojo_env, tmp_path):
    folder = _qwen_folder(tmp_path / "qwen")
    server = FakeServer(llamacpp_routes(tmp_path))
    path = settings_file(agentdojo_env.home)  # the session's home: removed again below
    assert not path.exists()
    try:
        assert e2e_cli("settings", "set", "local_models.llamacpp.m.active_params_b",
                       "3.5").code == 0
        r = e2e_cli("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "c", "--campaign",
                    "c", "--suite", "banking", "--user-tasks", "0", "--endpoint", "llamacpp",
                    "--model-id", "m", "--base-url", server.base_url, "--containment", "vm",
                    "--no-hash-weights", "--model-dir", folder, "--model-size-gb", "7.25",
                    json_errors=False)
    finally:
        server.close()
        path.unlink(missing_ok=True)
    assert r.code == 0, r.err
    line = _facts_line(r.out)
    assert line.startswith("  model facts: size_gb=7.25 (source=flag: --model-size-gb); "
                           "active_params_b=3.5 (source=settings: ")
    assert "context_tokens=40960 (source=folder: " in line
    assert not (tmp_path / "c").exists()


@pytest.mark.req("R-11.20")
@pytest.mark.parametrize(("extra", "code"), [
    (("--model-size-gb", "0"), "cli.usage.option_value"),
    (("--context-tokens", "4k"), "cli.usage.option_value"),
    (("--kv-gb-per-trace", "-1"), "cli.usage.option_value"),
    (("--model", "openrouter", "--model-id", "x", "--active-params-b", "3"), "cli.usage.local_only_option"),
])
def test_a_wrong_fact_flag_is_a_usage_error(cli, home, corpora, extra, code):
    make_marker(home, env_id())
    model = () if "--model" in extra else ("--endpoint", "ollama", "--model-id", "m")
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *BANKING, *model, *extra)
    assert (r.code, r.error["error"]) == (2, code), r.err
    assert list(corpora.iterdir()) == []


@pytest.mark.req("R-11.20")
def test_a_fact_flag_with_the_scripted_transport_is_refused(cli, home, corpora, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"content": "done"}]))
    r = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *BANKING, "--llm-script", script, "--context-tokens", "4096")
    assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive")
    assert "--context-tokens" in r.error["message"]


@pytest.mark.req("R-11.36")
def test_the_base_url_setting_written_by_settings_set_is_the_runs(cli, home, inproc):
    """`settings set endpoints.llamacpp.base_url` names the server a run uses, after the
    flag and before the registry."""
    assert cli("settings", "set", "endpoints.llamacpp.base_url",
               "http://127.0.0.1:18080/v1").code == 0
    r = inproc(endpoint="llamacpp", model_id="m").resolved
    assert (r.base_url, r.base_url_source) == ("http://127.0.0.1:18080/v1", "setting")
    r = inproc(endpoint="llamacpp", model_id="m", base_url="http://127.0.0.1:1/v1").resolved
    assert (r.base_url, r.base_url_source) == ("http://127.0.0.1:1/v1", "flag")


# ------------------------------------------------------------------ models --find-folders
def _fake_home(h: Path) -> dict[str, Path]:
    made = {
        "hf": h / "hfhome/hub/models--mlx-community--Qwen3.5-4B-MLX-4bit/snapshots/abc123",
        "omlx": h / ".omlx/models/Qwen3.5-4B-MLX-4bit",
        "lmstudio": h / ".lmstudio/models/lmstudio-community/Qwen3.5-4B-MLX-4bit",
        "other": h / ".omlx/models/gemma-3-4b-it-4bit",
        "ollama": h / ".ollama/models/manifests/registry.ollama.ai/library/llama3.2",
        "default_hf": h / ".cache/huggingface/hub/models--mlx-community--Qwen3.5-4B-MLX-4bit/snapshots/def",
    }
    for p in made.values():
        p.mkdir(parents=True)
    (made["ollama"] / "latest").write_text("{}")
    return made


@pytest.mark.req("R-11.23")
def test_find_folders_lists_folders_by_name_and_contacts_no_server(cli, home, tmp_path):
    fake = tmp_path / "user"
    made = _fake_home(fake)
    env = {"HOME": str(fake), "HF_HOME": str(fake / "hfhome")}
    for var in ("HF_HUB_CACHE", "XDG_CACHE_HOME", "OLLAMA_MODELS", "LMSTUDIO_HOME", "LLAMA_CACHE"):
        env[var] = ""
    # omlx's registry port would refuse a connection: nothing is asked of it
    r = cli("models", "--endpoint", "omlx", "--model-id", "Qwen3.5-4B-MLX-4bit",
            "--find-folders", "--format", "json", env=env)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["format"] == "agentprov-model-folders/0.1"
    found = [(f["app"], f["path"]) for f in doc["folders"]]
    assert found == [("huggingface", str(made["hf"])), ("omlx", str(made["omlx"])),
                     ("lmstudio", str(made["lmstudio"]))]  # $HF_HOME wins over ~/.cache
    r = cli("models", "--endpoint", "ollama", "--model-id", "llama3.2:latest",
            "--find-folders", env=env, json_errors=False)
    assert r.code == 0 and str(made["ollama"]) in r.out
    r = cli("models", "--endpoint", "ollama", "--model-id", "llama3.2:70b",
            "--find-folders", env=env, json_errors=False)
    assert r.code == 0 and "no folder on this machine" in r.out  # another tag
    for bad in (("--endpoint", "openrouter", "--model-id", "x"), ("--endpoint", "omlx"),
                ("--endpoint", "omlx", "--model-id", "x", "--base-url", "http://127.0.0.1:1")):
        r = cli("models", *bad, "--find-folders", env=env)
        assert (r.code, r.error["error"]) == (2, "cli.usage.models_options"), bad
