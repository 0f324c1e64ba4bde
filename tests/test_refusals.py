"""Refusals before anything starts: their codes, exit codes, exact messages, their order,
and proof that nothing was written (no corpus, no DIR.partial, an empty home)."""

import pytest
from conftest import SLOTTED, make_marker, snapshot

BANKING = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
           "--injection-tasks", "0")


@pytest.fixture
def dry(cli, corpora, script, landed):
    """A dry run; a source whose backend this build lacks runs against the ``landed``
    backends, so that the refusals of its own plan are what is checked."""
    def run(source, *args, corpus="c", env=None, json_errors=True):
        if source in SLOTTED:
            env = {"AGENTPROV_BACKENDS": str(landed), **(env or {})}
        return cli("run", source, "--dry-run", "--corpus", corpora / corpus, "--campaign", "c",
                   *args, env=env, json_errors=json_errors)
    return run


def nothing_written(home, corpora):
    assert snapshot(home) == {}
    assert list(corpora.iterdir()) == []


# ---------------------------------------------------------------- defences (exit 5)
@pytest.mark.req("R-22.14", "R-22.13", "R-29.9")
def test_defence_on_a_backend_that_does_not_build_it(dry, script, home, corpora):
    r = dry("autodojo", "--suite", "banking", "--defence", "melon", "--llm-script", script,
            json_errors=False)
    assert r.code == 5
    assert r.err.splitlines() == [
        "agentprov: cannot run 'autodojo': defence melon for the autodojo backend.",
        "  The registry builds it on: agentdojo.",
        "Nothing was started and nothing was written."]
    nothing_written(home, corpora)


@pytest.mark.req("R-22.15", "R-22.12")
@pytest.mark.parametrize("source", ["agentdojo", "autodojo", "agentdyn"])
@pytest.mark.parametrize("defence", ["progent", "drift", "camel", "camel_nopolicy"])
def test_pipeline_replacing_defences_are_refused_everywhere(dry, script, source, defence,
                                                            home, corpora):
    r = dry(source, "--defence", defence, "--llm-script", script)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_replaces_pipeline")
    assert r.error["message"].splitlines()[:2] == [
        f"agentprov: cannot run '{source}': defence {defence} replaces pipeline components.",
        "  DRIFT, Progent and CaMeL need defence-specific capture (D.11.6)."]
    nothing_written(home, corpora)


@pytest.mark.req("R-22.16", "R-22.8")
@pytest.mark.parametrize("defence", ["mandate_envelope", "mandate_scoped", "mandate_intent"])
def test_mandate_runs_on_banking_only(dry, script, defence, home, corpora):
    r = dry("agentdojo", "--suite", "workspace", "--defence", defence, "--llm-script", script,
            json_errors=False)
    assert r.code == 5
    assert r.err.splitlines()[:2] == [
        f"agentprov: cannot run 'agentdojo': defence {defence} on workspace.",
        "  It runs on banking only."]
    # no --suite means every suite, workspace included: refused the same way
    r = dry("agentdojo", "--defence", defence, "--llm-script", script)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_suite")
    nothing_written(home, corpora)


@pytest.mark.req("R-22.17")
def test_defence_not_in_the_registry(dry, script, home, corpora):
    r = dry("agentdojo", "--defence", "not_a_defence", "--llm-script", script,
            json_errors=False)
    assert r.code == 5
    assert r.err.splitlines() == [
        "agentprov: cannot run 'agentdojo': defence not_a_defence.",
        "  It is not in the defence registry (registry/defences.toml). The agentdojo backend "
        "builds: mandate_envelope, mandate_intent, mandate_scoped, melon, melon_at, melon_sm, "
        "repeat_user_prompt, spotlighting_with_delimiting, tool_filter, "
        "transformers_pi_detector (D-670, D-671).",
        "Nothing was started and nothing was written."]
    nothing_written(home, corpora)


@pytest.mark.req("R-22.3", "R-24.5", "R-23.12")
@pytest.mark.parametrize("source", ["autodojo", "agentdyn"])
def test_every_registry_defence_is_refused_off_agentdojo(dry, script, source):
    r = dry(source, "--suite", "banking", "--defence", "repeat_user_prompt", "--llm-script",
            script)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_backend")


@pytest.mark.req("R-23.12", "R-24.5", "R-11.54")
@pytest.mark.parametrize("source", ["autodojo", "agentdyn"])
def test_gateway_compat_refused_on_autodojo_and_agentdyn(dry, script, source, home, corpora):
    r = dry(source, "--suite", "banking", "--llm-element", "gateway_compat", "--llm-script",
            script)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.llm_element")
    nothing_written(home, corpora)


@pytest.mark.req("R-23.12")
@pytest.mark.parametrize("attack", ["ours", "variant_generation"])
def test_autodojo_refused_attacks(dry, script, attack, home, corpora):
    r = dry("autodojo", "--suite", "banking", "--attack", attack, "--llm-script", script)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.attack_refused")
    assert "Nothing was started and nothing was written." in r.error["message"]
    nothing_written(home, corpora)


# ------------------------------------------------------------ live status gate (exit 5)
@pytest.mark.req("R-1.6", "R-29.1")
def test_rope_has_no_live_capability(dry, script, home, corpora):
    r = dry("rope", "--llm-script", script, json_errors=False)
    assert r.code == 5
    assert r.err.splitlines()[0] == "agentprov: cannot run 'rope': no live capability"
    assert r.err.splitlines()[-1] == "Nothing was started and nothing was written."
    nothing_written(home, corpora)


# ------------------------------------------------------------------- usage (exit 2)
@pytest.mark.req("R-15.8")
def test_preflight_only_takes_no_caps(cli, home):
    r = cli("run", "agentdojo", "--preflight-only", "--model", "openrouter", "--model-id",
            "example-model", "--max-calls", "5", json_errors=False)
    assert r.code == 2
    assert r.err.strip() == ("agentprov run: --preflight-only is one model call; the caps "
                             "belong to a campaign")
    assert snapshot(home) == {}


@pytest.mark.req("R-14.2", "R-8.15")
@pytest.mark.parametrize("flag,extra", [("--keychain", ()), ("--env-stdin", ()),
                                        ("--env-file", ("x.env",))])
def test_credentials_with_a_script(dry, script, flag, extra, home, corpora):
    r = dry("agentdojo", *BANKING, "--llm-script", script, flag, *extra)
    assert (r.code, r.error["error"]) == (2, "cli.usage.script_credential")
    assert r.error["message"] == (f"agentprov run: {flag} reads the key of a real endpoint; "
                                  "a scripted run needs none")
    nothing_written(home, corpora)


@pytest.mark.req("R-15.6", "R-29.3")
def test_cost_cap_needs_both_prices_and_prices_need_it(dry):
    base = ("agentdojo", *BANKING, "--model", "openrouter", "--model-id", "m",
            "--containment", "vm", "--max-calls", "80")
    r = dry(*base, "--max-cost-usd", "1.00", json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: --max-cost-usd needs --price-in "
                                          "and --price-out (USD per million tokens)")
    r = dry(*base, "--max-cost-usd", "1.00", "--price-in", "0.15")
    assert (r.code, r.error["error"]) == (2, "cli.usage.cost_needs_prices")
    r = dry(*base, "--price-in", "0.15", "--price-out", "0.60")
    assert (r.code, r.error["error"]) == (2, "cli.usage.prices_need_cost")


@pytest.mark.req("R-23.10", "R-23.3", "R-29.10", "R-23.5")
def test_autodojo_attack_needs_its_pair(dry, script, tmp_path, home, corpora):
    r = dry("autodojo", "--suite", "banking", "--attack", "autodojo", "--llm-script", script,
            json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: --attack autodojo needs "
                                          "--autodojo-cache and --autodojo-variant")
    cache = tmp_path / "cache.json"
    cache.write_text("{}")
    r = dry("autodojo", "--suite", "banking", "--attack", "autodojo", "--autodojo-cache",
            cache, "--llm-script", script)
    assert r.error["error"] == "cli.usage.autodojo_pair"
    r = dry("autodojo", "--suite", "banking", "--attack", "autodojo,important_instructions",
            "--autodojo-cache", cache, "--autodojo-variant", "0", "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.autodojo_mixed")
    r = dry("autodojo", "--suite", "banking", "--attack", "autodojo", "--autodojo-cache",
            cache, "--autodojo-variant", "-1", "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.option_value")
    nothing_written(home, corpora)


@pytest.mark.req("R-25.18", "R-29.11", "R-25.34")
def test_agentharm_plan_missing_a_limit(dry, script, home, corpora):
    args = ("agentharm", "--task", "inspect_evals/agentharm", "--samples", "limit:2",
            "--token-limit", "20000", "--time-limit", "600", "--judge",
            "refusal_judge=example-model", "--judge", "semantic_judge=example-model",
            "--cell-size", "1", "--llm-script", script)
    r = dry(*args, json_errors=False)
    assert (r.code, r.err.strip()) == (2, "agentprov run: the backend refused the plan: "
                                          "[inspect].limits: missing key(s) message_limit")
    nothing_written(home, corpora)


@pytest.mark.req("R-25.19", "R-25.17", "R-25.20", "R-25.21", "R-25.22", "R-25.15", "R-25.16")
@pytest.mark.parametrize("change,needle", [
    (("--message-limit", "501"), "[inspect].limits.message_limit"),
    (("--epochs", "11"), "[inspect].epochs"),
    (("--max-connections", "65"), "[inspect].max_connections"),
    (("--cell-size", "501"), "[inspect].cell_size"),
    (("--task-param", "n_irrelevant_tools=65"), "[inspect].params.n_irrelevant_tools"),
    (("--task-param", "agent=nope"), "[inspect].params.agent"),
    (("--samples", "limit:177"), "[inspect].samples"),
])
def test_agentharm_ranges(dry, script, change, needle):
    args = {"--task": "inspect_evals/agentharm", "--samples": "limit:2",
            "--message-limit": "10", "--token-limit": "20000", "--time-limit": "600"}
    args[change[0]] = change[1]
    flat = [x for kv in args.items() for x in kv if kv[0] != "--task-param"]
    if change[0] == "--task-param":
        flat += list(change)
    r = dry("agentharm", *flat, "--judge", "refusal_judge=m", "--judge", "semantic_judge=m",
            "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.backend_plan"), r.err
    assert needle in r.error["message"]


@pytest.mark.req("R-25.19")
@pytest.mark.parametrize("option,lowest,highest", [
    ("--message-limit", 1, 500), ("--token-limit", 1, 10_000_000), ("--time-limit", 1, 86_400),
])
def test_agentharm_limit_ranges(dry, script, home, corpora, option, lowest, highest):
    """Each limit's bounds are accepted by the plan check and one past them is refused."""
    args = {"--message-limit": "10", "--token-limit": "20000", "--time-limit": "600"}

    def run(value: int):
        limits = [x for k, v in (args | {option: str(value)}).items() for x in (k, v)]
        return dry("agentharm", "--task", "inspect_evals/agentharm", "--samples", "limit:2",
                   *limits, "--judge", "refusal_judge=m", "--judge", "semantic_judge=m",
                   "--llm-script", script)

    for bad in (lowest - 1, highest + 1):
        r = run(bad)
        assert (r.code, r.error["error"]) == (2, "cli.usage.backend_plan"), r.err
        assert f"[inspect].limits.{option[2:].replace('-', '_')}" in r.error["message"]
    for good in (lowest, highest):
        r = run(good)  # past the plan check: the next refusal is the unbuilt environment
        assert r.error["error"] != "cli.usage.backend_plan", r.err
        assert r.code != 2, r.err
    nothing_written(home, corpora)


@pytest.mark.req("R-25.15")
def test_task_param_floats_are_refused(dry, script):
    r = dry("agentharm", "--task", "inspect_evals/agentharm", "--samples", "limit:1",
            "--task-param", "n_irrelevant_tools=1.5", "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.option_value")


@pytest.mark.req("R-25.22")
def test_agentharm_needs_every_judge_role(dry, script):
    r = dry("agentharm", "--task", "inspect_evals/agentharm", "--samples", "limit:1",
            "--message-limit", "10", "--token-limit", "1000", "--time-limit", "60",
            "--judge", "refusal_judge=m", "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.backend_plan")
    assert "semantic_judge" in r.error["message"]


def test_model_options(cli, dry, script, corpora):
    r = dry("agentdojo", *BANKING)
    assert (r.code, r.error["error"]) == (2, "cli.usage.model_missing")
    r = dry("agentdojo", *BANKING, "--model", "openrouter", "--endpoint", "openrouter")
    assert r.error["error"] == "cli.usage.exclusive"
    r = dry("agentdojo", *BANKING, "--model", "openrouter", "--llm-script", script)
    assert r.error["error"] == "cli.usage.exclusive"
    r = dry("agentdojo", *BANKING, "--model", "openrouter")
    assert (r.code, r.error["error"]) == (2, "cli.usage.model_id_missing")
    r = dry("agentdojo", *BANKING, "--model", "nowhere", "--model-id", "m")
    assert (r.code, r.error["error"]) == (2, "cli.usage.unknown_endpoint")
    assert "openrouter" in r.error["message"]


@pytest.mark.req("R-15.9")
def test_local_only_endpoint_options_on_an_api_endpoint(dry):
    for extra in (("--base-url", "http://127.0.0.1:9/v1"), ("--allow-lan-endpoint",)):
        r = dry("agentdojo", *BANKING, "--model", "openrouter", "--model-id", "m", *extra)
        assert (r.code, r.error["error"]) == (2, "cli.usage.local_only_option")


@pytest.mark.req("R-15.15")
def test_jobs_above_the_host_is_refused_not_clamped(dry, script):
    from agentprov_core.backend.hostlimits import max_jobs

    top = max_jobs()
    r = dry("agentdojo", *BANKING, "--llm-script", script, "--jobs", str(top + 1))
    assert (r.code, r.error["error"]) == (2, "cli.usage.jobs_above_host")
    assert f"maximum of {top}" in r.error["message"]
    r = dry("agentdojo", *BANKING, "--llm-script", script, "--jobs", str(top))
    assert r.error is None or r.error["error"] != "cli.usage.jobs_above_host"


@pytest.mark.req("R-15.15")
def test_the_hosts_maximum_is_eight_cells_per_cpu_bounded_by_memory(monkeypatch):
    from agentprov_core.backend import hostlimits

    monkeypatch.setattr(hostlimits, "cpus", lambda: 2)
    monkeypatch.setattr(hostlimits, "available_memory_mib", lambda: 24 * 1024)
    assert hostlimits.max_jobs() == 16  # I/O-bound cells: 8 per CPU, not 1
    monkeypatch.setattr(hostlimits, "available_memory_mib", lambda: 700)
    assert hostlimits.max_jobs() == 2  # one per 256 MiB available
    monkeypatch.setattr(hostlimits, "cpus", lambda: 64)
    monkeypatch.setattr(hostlimits, "available_memory_mib", lambda: 1 << 20)
    assert hostlimits.max_jobs() == 64  # the ceiling


@pytest.mark.req("R-8.8", "R-27.17")
def test_corpus_inside_the_repository_is_refused(cli, script):
    from conftest import ROOT
    r = cli("run", "agentdojo", "--dry-run", "--corpus", ROOT / "corpus", "--campaign", "c",
            "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.corpus_in_repository")
    assert not (ROOT / "corpus").exists() and not (ROOT / "corpus.partial").exists()


def test_unknown_source_lists_the_installed_ones(cli):
    r = cli("run", "nosuch", "--catalogue")
    assert (r.code, r.error["error"]) == (2, "cli.usage.unknown_source")
    assert "agentdojo, agentdyn, agentharm, autodojo, rope" in r.error["message"]


@pytest.mark.req("R-7.5")
@pytest.mark.parametrize("spec,needle", [
    ("0-99", "index 99 is out of range; banking (v1.2.2) has 16 user tasks (indices 0-15"),
    ("3-1", "range 3-1 runs backwards"),
    ("x", "'x' is neither an index, a range nor a task id"),
    ("0,,1", "an empty item between commas"),
    ("user_task_99", "'user_task_99' is neither"),
])
def test_malformed_or_out_of_range_task_specs(dry, script, spec, needle, home, corpora):
    r = dry("agentdojo", "--suite", "banking", "--user-tasks", spec, "--llm-script", script)
    assert (r.code, r.error["error"]) == (2, "cli.usage.task_spec")
    assert needle in r.error["message"]
    nothing_written(home, corpora)


def test_unknown_suite_attack_version_name_the_valid_ones(dry, script):
    r = dry("agentdojo", "--suite", "bank", "--llm-script", script)
    assert r.error["error"] == "cli.usage.unknown_suite"
    assert "suites: workspace, travel, banking, slack" in r.error["message"]
    r = dry("agentdojo", "--attack", "nope", "--llm-script", script)
    assert r.error["error"] == "cli.usage.unknown_attack"
    assert "important_instructions" in r.error["message"]
    r = dry("agentdojo", "--benchmark-version", "v9", "--llm-script", script)
    assert r.error["error"] == "cli.usage.unknown_version"
    assert "v1.2.2" in r.error["message"]


# ----------------------------------------------------------------- the order of the checks
@pytest.mark.req("R-16.1", "R-16.2", "R-16.8")
def test_order_usage_before_defence_before_environment(dry, script, home, corpora):
    # a usage error and a defence refusal: usage wins
    r = dry("agentdojo", "--defence", "progent", "--user-tasks", "x", "--llm-script", script)
    assert r.code == 2
    # a defence refusal and a missing environment: the defence wins (exit 5, not 3)
    r = dry("agentdojo", "--suite", "banking", "--defence", "progent", "--llm-script", script)
    assert r.code == 5
    # a clean plan without an environment: exit 3, telling what to run
    r = dry("agentdojo", *BANKING, "--llm-script", script, json_errors=False)
    assert r.code == 3
    assert "run agentprov backends build agentdojo" in r.err
    nothing_written(home, corpora)


@pytest.mark.req("R-29.2")
def test_api_caps_refusal_comes_before_any_key(cli, dry, home, corpora, script):
    env_id = cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "x", "--campaign", "x",
                 "--llm-script", script).error["message"].split("environment ")[1].split()[0]
    make_marker(home, env_id)
    before = snapshot(home)
    r = dry("agentdojo", *BANKING, "--model", "openrouter", "--model-id", "example-model",
            "--containment", "vm", json_errors=False,
            env={"OPENROUTER_API_KEY": "sentinel-never-read"})
    assert r.code == 4
    assert r.err.strip() == (
        "agentprov: error [cli.refused.api_caps]: an API endpoint run needs its caps (the "
        "endpoint entry is not local): give --max-calls, --max-cost-usd (D-725; the provider's "
        "own key limit is the backstop)")
    assert "sentinel-never-read" not in r.out + r.err
    r = dry("agentdojo", *BANKING, "--model", "openrouter", "--model-id", "example-model",
            "--containment", "vm", "--max-calls", "80")
    assert (r.code, r.error["error"]) == (4, "cli.refused.api_caps")
    assert "give --max-cost-usd (" in r.error["message"]
    assert snapshot(home) == before
    assert list(corpora.iterdir()) == []


@pytest.mark.req("R-1.5", "R-14.3")
def test_a_planned_part_admits_scripted_runs_only(cli, dry, script, registry_copy):
    text = (registry_copy / "parts.toml").read_text()
    (registry_copy / "parts.toml").write_text(
        text.replace('label = "agentdojo · live"\nlive_status = "partial"',
                     'label = "agentdojo · live"\nlive_status = "planned"'))
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    r = dry("agentdojo", *BANKING, "--endpoint", "ollama", "--model-id", "m", env=env)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.planned")
    r = dry("agentdojo", *BANKING, "--llm-script", script, env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing")
