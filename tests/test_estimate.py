"""agentprov estimate and agentprov prices (the spec's "Estimates and prices").

Subprocess tests run the real CLI against a marker written by ``make_marker`` (no backend is
built: an estimate reads the environment's identity only); the refresh is tested against a
real HTTP server on loopback answering in the shape of OpenRouter's model list. Corpora for
``--stats-corpus`` are made by ``benchmarks/gen_corpus.py`` (the real mapping path)."""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import ROOT, fake_identity, make_marker, snapshot

SPEC_PLAN = ("agentdojo", "--suite", "banking", "--user-tasks", "0-1", "--attack",
             "important_instructions", "--injection-tasks", "0")
CAPS = ("--max-calls", "80", "--max-cost-usd", "1.00", "--price-in", "0.15", "--price-out", "0.60")
MODEL = ("--model", "openrouter", "--model-id", "example-model")


@pytest.fixture
def marked(home: Path) -> Path:
    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    make_marker(home, environments.environment_id(source_entry("agentdojo").source.meta))
    return home


def estimate(cli, corpora: Path, *extra: str, model=MODEL, caps=CAPS):
    return cli("estimate", *SPEC_PLAN, "--corpus", corpora / "e", "--campaign", "e", *model,
               *caps, *extra)


# ------------------------------------------------------------------------------ prices
@pytest.mark.req("R-9.24", "R-9.26", "R-9.23")
def test_prices_set_is_listed_and_shipped_prices_name_their_page(cli, home):
    r = cli("prices", "list", "--format", "json")
    assert r.code == 0, r.err
    shipped = json.loads(r.out)["prices"]
    assert shipped and all(p["source"].startswith("https://") and
                           re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["as_of"]) for p in shipped)
    r = cli("prices", "set", "openrouter", "example-model", "--input", "0.15", "--output",
            "0.60", "--as-of", "2026-10-28")
    assert r.code == 0, r.err
    assert "your override (agentprov prices set)" in r.out
    doc = json.loads((home / "prices.json").read_text())
    assert doc["prices"] == [{"as_of": "2026-10-28", "endpoint": "openrouter",
                              "input": 0.15, "model": "example-model", "note": "",
                              "output": 0.6, "source": "your override (agentprov prices set)"}]
    listed = json.loads(cli("prices", "list", "--format", "json").out)["prices"]
    assert listed[0]["model"] == "example-model" and listed[0]["origin"] == "override"
    # a second set replaces the first, never two rows of one model
    assert cli("prices", "set", "openrouter", "example-model", "--input", "1",
               "--output", "2").code == 0
    rows = json.loads((home / "prices.json").read_text())["prices"]
    assert [(p["input"], p["output"]) for p in rows] == [(1.0, 2.0)]


@pytest.mark.req("R-9.24")
@pytest.mark.parametrize("args, option", [
    (("--input", "-1", "--output", "1"), "--input"),
    (("--input", "abc", "--output", "1"), "--input"),
    (("--input", "1", "--output", "nan"), "--output"),
    (("--input", "1", "--output", "1", "--as-of", "2999-01-01"), "--as-of"),
    (("--input", "1", "--output", "1", "--as-of", "2026-02-30"), "--as-of"),
    (("--input", "1", "--output", "1", "--as-of", "yesterday"), "--as-of"),
])
def test_prices_set_refuses_bad_input_and_writes_nothing(cli, home, args, option):
    before = snapshot(home)
    r = cli("prices", "set", "openrouter", "m", *args)
    assert (r.code, r.error["error"]) == (2, "cli.usage.option_value")
    assert option in r.error["message"]
    assert snapshot(home) == before


def test_prices_set_refuses_an_unknown_endpoint(cli, home):
    r = cli("prices", "set", "nowhere", "m", "--input", "1", "--output", "1")
    assert (r.code, r.error["error"]) == (2, "cli.usage.unknown_endpoint")
    assert snapshot(home) == {}


class _ModelList(BaseHTTPRequestHandler):
    body = json.dumps({"data": [
        {"id": "openai/gpt-4o-mini", "pricing": {"prompt": "0.00000015",
                                                 "completion": "0.0000006"}},
        {"id": "openrouter/auto", "pricing": {"prompt": "-1", "completion": "-1"}},
        {"id": "no-pricing"},
    ]}).encode()
    paths: list[str] = []

    def do_GET(self):  # noqa: N802 - the standard library's name
        _ModelList.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.req("R-9.25")
def test_prices_refresh_needs_allow_network_and_reads_the_list(cli, home):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _ModelList)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = {"AGENTPROV_TEST_PRICES_URL": f"http://127.0.0.1:{srv.server_port}/api/v1"}
    try:
        r = cli("prices", "refresh", env=env)
        assert (r.code, r.error["error"]) == (4, "cli.refused.prices_network")
        assert snapshot(home) == {} and _ModelList.paths == []
        r = cli("prices", "refresh", "--allow-network", env=env)
        assert r.code == 0, r.err
        assert _ModelList.paths == ["/api/v1/models"]
        doc = json.loads((home / "prices-openrouter.json").read_text())
        # the router priced per request (-1) and the entry without prices are left out
        assert [(p["model"], p["input"], p["output"]) for p in doc["prices"]] == [
            ("openai/gpt-4o-mini", 0.15, 0.6)]
        listed = json.loads(cli("prices", "list", "--format", "json").out)["prices"]
        first = next(p for p in listed if p["model"] == "openai/gpt-4o-mini")
        assert first["origin"] == "refresh" and first["in_force"]
    finally:
        srv.shutdown()


# ------------------------------------------------------------------------------ estimate
HEADLINE = re.compile(
    r"^≈ \$(\d+\.\d{4}) \(p90 \$(\d+\.\d{4})\) for 4 cell run\(s\), prices as of 2026-10-28 "
    r"\(your override \(agentprov prices set\)\) Time ≈ \d+ [smhd] \(p90 \d+ [smhd]\) at "
    r"--jobs 1\.$")


@pytest.mark.req("R-9.1", "R-9.3", "R-9.4", "R-9.5", "R-9.6", "R-9.7", "R-9.8", "R-9.22")
def test_estimate_prints_the_spec_transcript_shape(cli, marked, corpora):
    assert cli("prices", "set", "openrouter", "example-model", "--input", "0.15",
               "--output", "0.60", "--as-of", "2026-10-28").code == 0
    before = snapshot(marked)
    r = estimate(cli, corpora)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    m = HEADLINE.match(lines[0])
    assert m, lines[0]
    assert re.fullmatch(r"Plan [0-9a-f]{16}…: 4 cells × 1 repeat\(s\) = 4 units; 0 already "
                        r"settled; up to 12 attempts due \(--max-attempts 3\)\.", lines[1])
    cost = re.fullmatch(r"Cost: p50 \$(\S+), p90 \$(\S+), worst case \(every due attempt at "
                        r"p90\) \$(\S+); model calls p50 (\d+), p90 (\d+)\.", lines[2])
    assert cost and cost.group(1) == m.group(1) and cost.group(2) == m.group(2)
    # the worst case is every due attempt (12 = 4 units x 3) at p90
    assert float(cost.group(3)) == pytest.approx(3 * float(m.group(2)), abs=2e-4)
    i = lines.index("By suite:")
    assert re.match(r"  banking +4 units  p50 \$\S+  p90 \$\S+  \[\w+\]$", lines[i + 1])
    j = lines.index("By attack:")
    assert lines[j + 1].startswith("  (benign)") and " 2 units " in lines[j + 1]
    assert lines[j + 2].startswith("  important_instructions") and " 2 units " in lines[j + 2]
    assert any(re.fullmatch(r"Sources of the cell statistics: .*\d+ units", x) for x in lines)
    assert any(x.startswith("Warning: Planned with a scripted stand-in (no key, no network): ")
               and x.endswith("so this estimate is high.") for x in lines)
    assert any(x.startswith("Warning: the priors' durations are the recorded runs' time")
               for x in lines)
    assert snapshot(marked) == before  # nothing written (the corpus neither)
    assert not (corpora / "e").exists() and not (corpora / "e.partial").exists()


@pytest.mark.req("R-9.28")
def test_price_in_and_price_out_price_the_caps_not_the_estimate(cli, marked, corpora):
    assert cli("prices", "set", "openrouter", "example-model", "--input", "0.15",
               "--output", "0.60").code == 0
    a = json.loads(estimate(cli, corpora, "--format", "json").out)
    dear = ("--max-calls", "80", "--max-cost-usd", "1", "--price-in", "50", "--price-out", "90")
    b = json.loads(estimate(cli, corpora, "--format", "json", caps=dear).out)
    assert a["cost_usd"] == b["cost_usd"] and a["cost_usd"]["p50"] > 0
    assert b["price"]["input_per_mtok"] == 0.15 and b["price"]["origin"] == "override"


@pytest.mark.req("R-9.10")
def test_without_a_price_there_is_no_cost(cli, marked, corpora):
    r = estimate(cli, corpora)
    assert r.code == 0, r.err
    assert r.out.startswith("≈ no price for this model: no cost for 4 cell run(s) Time ≈ ")
    assert "Cost: no price for this model; model calls p50 " in r.out
    assert "$" not in r.out.split("Warning:")[0]
    doc = json.loads(estimate(cli, corpora, "--format", "json").out)
    assert doc["cost_usd"] is None and doc["price"] is None


@pytest.mark.req("R-9.29")
def test_estimate_json_document(cli, marked, corpora):
    cli("prices", "set", "openrouter", "example-model", "--input", "0.15", "--output", "0.60")
    r = estimate(cli, corpora, "--format", "json", "--jobs", "2")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["format"] == "agentprov-estimate/0.1"
    assert (doc["units"], doc["units_due"], doc["attempts_due"]) == (4, 4, 12)
    assert set(doc["cost_usd"]) == {"p50", "p90", "worst_case"}
    assert doc["cost_usd"]["worst_case"] == pytest.approx(3 * doc["cost_usd"]["p90"], abs=1e-5)
    assert doc["time_s"]["jobs"] == 2 and doc["time_s"]["p90"] >= doc["time_s"]["p50"]
    assert [g["name"] for g in doc["by_suite"]] == ["banking"]
    assert sorted(g["name"] for g in doc["by_attack"]) == ["(benign)", "important_instructions"]
    assert sum(g["units"] for g in doc["by_attack"]) == 4
    assert doc["price"]["origin"] == "override" and doc["price"]["as_of"]
    assert doc["warnings"][0].startswith("Planned with a scripted stand-in")
    assert doc["model_calls"]["p90"] >= doc["model_calls"]["p50"] > 0


@pytest.mark.req("R-9.1", "R-9.2")
def test_an_estimate_before_any_build_gives_the_figures_of_after(cli, home, corpora):
    """On a fresh install the plugin's catalogue and the shipped priors plan and price the
    run: the estimate says the environment is not built, writes nothing, and once it is
    built gives the same figures (only the plan's digest names the environment)."""
    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    cli("prices", "set", "openrouter", "example-model", "--input", "0.15", "--output", "0.60")
    before_files = snapshot(home)
    fresh = estimate(cli, corpora, "--format", "json")
    assert fresh.code == 0, fresh.err
    assert snapshot(home) == before_files and list(corpora.iterdir()) == []
    doc = json.loads(fresh.out)
    env_id = environments.environment_id(source_entry("agentdojo").source.meta)
    assert doc["warnings"][0] == (
        f"the backend environment {env_id} is not built: the plan comes from the catalogue "
        "the agentdojo plugin ships, the cell statistics from the priors shipped with "
        "agentprov; a build changes none of these figures")
    assert "not built" in estimate(cli, corpora).out
    make_marker(home, env_id)
    built = json.loads(estimate(cli, corpora, "--format", "json").out)
    assert built["warnings"] == doc["warnings"][1:]
    same = {k: v for k, v in doc.items() if k != "warnings"}
    assert same == {k: v for k, v in built.items() if k != "warnings"}
    assert same["cost_usd"]["p50"] > 0 and same["units"] == 4


@pytest.mark.req("R-9.2")
def test_stats_corpus_refusals_write_nothing(cli, marked, corpora, tmp_path):
    before = snapshot(marked), snapshot(tmp_path / "x")
    plain = tmp_path / "x"
    plain.mkdir()
    r = estimate(cli, corpora, "--stats-corpus", plain)
    assert (r.code, r.error["error"]) == (2, "cli.usage.stats_corpus")
    assert str(plain) in r.error["message"] and "not a corpus" in r.error["message"]
    many = [a for _ in range(17) for a in ("--stats-corpus", str(plain))]
    r = estimate(cli, corpora, *many)
    assert (r.code, r.error["error"]) == (2, "cli.usage.stats_corpus")
    assert "17th" in r.error["message"]
    assert (snapshot(marked), snapshot(tmp_path / "x")) == before


def _gen_corpus(out: Path, n: int) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gen_corpus
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return gen_corpus.generate(out, n)


@pytest.mark.req("R-9.2", "R-9.8")
def test_stats_corpus_counts_come_from_the_index(cli, marked, corpora, tmp_path):
    import msgspec

    from agentprov_core.evidence.aer import AER
    from agentprov_core.evidence.executions import Executions
    from agentprov_core.evidence.sem import derive

    root = _gen_corpus(tmp_path / "stats", 3)
    ex = Executions(root)
    entries = ex.entries()
    assert len(entries) == 3
    for e in entries:  # the index row's counts are the AER's
        aer = msgspec.json.decode(ex.path(e.execution_id, "aer").read_bytes(), type=AER)
        assert e.counts is not None
        assert e.counts.agent_calls == derive(aer).model_calls > 0
        assert e.counts.agent_input_tokens == derive(aer).tokens.input
    cli("prices", "set", "openrouter", "example-model", "--input", "0.15", "--output", "0.60")
    r = estimate(cli, corpora, "--stats-corpus", tmp_path / "stats", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["sources"] == {"corpora": 4}
    calls = entries[0].counts.agent_calls
    assert doc["model_calls"] == {"p50": 4 * calls, "p90": 4 * calls}
    ins, outs = entries[0].counts.agent_input_tokens, entries[0].counts.agent_output_tokens
    assert doc["cost_usd"]["p50"] == pytest.approx(4 * (ins * 0.15 + outs * 0.6) / 1e6, rel=1e-3)
    text = estimate(cli, corpora, "--stats-corpus", tmp_path / "stats").out
    assert "Sources of the cell statistics: corpora 4 units" in text
    assert "[corpora]" in text


def test_executions_with_calls_but_no_tokens_are_not_used(tmp_path):
    """An index row whose calls carry no token counts (an imported AgentDojo result file
    records none) would price its cell at nothing: it is not pooled, and counted apart."""
    from agentprov_core.estimate import cellstats

    root = tmp_path / "c"
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"source": "agentdyn"}))
    unit = "shopping/user_task_0/none/none|none|r0"
    full = {"agent_calls": 4, "judge_calls": 0, "agent_input_tokens": 900,
            "agent_output_tokens": 90, "duration_ms": 2000}
    rows = [{"unit": unit, "execution_observed": True, "counts": full},
            {"unit": unit, "execution_observed": True,
             "counts": dict(full, agent_calls=7, agent_input_tokens=None,
                            agent_output_tokens=None)}]
    (root / "executions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stats = cellstats.read_corpora([str(root)])
    assert (stats.executions, stats.without_tokens, stats.without_counts) == (2, 1, 0)
    pool = stats.by_cell[("agentdyn", "shopping/user_task_0/none/none")]
    assert pool.n == 1 and pool.values["agent_calls"] == [4.0]


# ------------------------------------------------------------------------------ priors
def test_priors_fall_back_to_coarser_rows(tmp_path):
    from agentprov_core.estimate import cellstats

    row = {"agent_calls": [5, 9], "agent_input_tokens": [100, 200],
           "agent_output_tokens": [10, 20], "duration_s": [3, 6], "n": 4,
           "tokens_estimated": True}
    doc = {"format": "agentprov-priors/0.1", "rows": [
        dict(row, benchmark="agentdyn", suite="shopping", attack="none", family="gpt-4o",
             defence="none"),
        dict(row, benchmark="agentdyn", suite="*", attack="*", family="*", defence="*",
             agent_calls=[7, 11])]}
    path = tmp_path / "priors.json"
    path.write_text(json.dumps(doc))
    p = cellstats.load_priors(path)
    exact = p.lookup("agentdyn", "shopping", None, "gpt-4o", "none")
    assert exact.get("agent_calls", 50) == 5 and exact.get("agent_calls", 90) == 9
    assert exact.estimated_tokens and exact.basis == "priors"
    coarse = p.lookup("agentdyn", "github", "important_instructions", "gpt-4o", "tool_filter")
    assert coarse.get("agent_calls", 50) == 7 and "any suite" in coarse.detail
    assert p.lookup("agentdojo", "banking", None, "gpt-4o", "none") is None
    assert cellstats.family("openai/gpt-4o-2024-08-06") == "gpt-4o"
    assert cellstats.quantiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == (5, 9)


@pytest.mark.req("R-9.17")
def test_shipped_priors_name_their_source():
    from agentprov_core.estimate import cellstats

    p = cellstats.load_priors()
    assert p is not None
    src = p.doc["sources"][0]
    assert src["commit"] == "5353cf7615b135cace8d07c8f12dac53a16b6db3"
    assert src["path_prefix"] == "runs/" and src["files"] == 47723
    assert "o200k_base" in p.doc["tokenizer"]
    assert all(r["tokens_estimated"] for r in p.rows.values())
    assert ("agentdyn", "shopping", "important_instructions", "*", "none") in p.rows
    assert ("*", "*", "*", "*", "*") in p.rows
    row = p.rows[("agentdyn", "shopping", "important_instructions", "*", "none")]
    for f in ("agent_calls", "agent_input_tokens", "agent_output_tokens", "duration_s"):
        assert len(row[f]) == 2 and 0 < row[f][0] <= row[f][1]  # p50, p90 per cell


# ------------------------------------------------------------------------------ AgentHarm
def _harm(monkeypatch, tmp_path, judges, prices_set=()):
    from agentprov_core.backend import environments
    from agentprov_core.base import paths
    from agentprov_core.estimate import cellstats, prices
    from agentprov_core.estimate import estimate as est
    from agentprov_core.run import prepare as planning
    from agentprov_core.run.runrequest import RunRequest

    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    for model, pin, pout in prices_set:
        prices.set_override("openrouter", model, prices.parse_price("--input", pin),
                            prices.parse_price("--output", pout), "2026-10-28")
    opts = {"corpus": str(paths.home() / "corpora" / "ah"), "campaign": "ah",
            "task": "inspect_evals/agentharm", "samples": "limit:2", "message_limit": 10,
            "token_limit": 20000, "time_limit": 600, "cell_size": 1,
            "judge": tuple(f"{r}={m}" for r, m in judges.items()), "model": "openrouter",
            "model_id": "example-model", "max_calls": 100, "max_cost_usd": 1.0,
            "price_in": 0.15, "price_out": 0.6}
    req = RunRequest.of("agentharm", opts, set(opts))
    prepared = planning.prepare(req, estimate=True)
    return est.build(prepared, corpora=None, priors=cellstats.load_priors(), stand_in=True)


@pytest.mark.req("R-9.21", "R-9.20", "R-9.30", "R-25.32")
def test_agentharm_estimate_counts_and_prices_judges_apart(monkeypatch, tmp_path):
    from agentprov_core.estimate import estimate as est
    from agentprov_core.plugins import source_entry

    judges = {"refusal_judge": "example-model", "semantic_judge": "example-model"}
    e = _harm(monkeypatch, tmp_path, judges, [("example-model", "0.15", "0.60")])
    text = est.text(e)
    bound = source_entry("agentharm").source.cell_bound.per_sample(1, 10)
    assert bound == 42
    assert ("Inspect inspect_evals/agentharm: 2 sample(s) × 1 epoch(s), 4 at a time; judges "
            "(priced at their model, at the agent's endpoint): refusal_judge example-model, "
            "semantic_judge example-model; at most 42 billed calls per sample (D-740).") in text
    doc = est.document(e)
    assert doc["judge_calls"]["p50"] > 0 and doc["agent_calls"]["p50"] > 0
    assert doc["model_calls"]["p50"] == doc["agent_calls"]["p50"] + doc["judge_calls"]["p50"]
    assert 0 < doc["judge_cost_usd"]["p50"] < doc["cost_usd"]["p50"]
    assert (doc["units"], doc["attempts_due"]) == (2, 6)


@pytest.mark.req("R-25.36")
def test_judges_on_other_models_are_priced_at_the_dearest_or_unknown(monkeypatch, tmp_path):
    from agentprov_core.estimate import estimate as est

    judges = {"refusal_judge": "cheap", "semantic_judge": "dear"}
    e = _harm(monkeypatch, tmp_path, judges, [("example-model", "0.15", "0.60"),
                                              ("cheap", "0.1", "0.1"), ("dear", "5", "20")])
    assert e.judge_price.model == "dear"
    assert any("priced at the dearest, dear" in w for w in e.warnings)
    e2 = _harm(monkeypatch, tmp_path / "2", {"refusal_judge": "example-model",
                                              "semantic_judge": "unpriced"},
               [("example-model", "0.15", "0.60")])
    assert not e2.priced and est.document(e2)["cost_usd"] is None
    assert any("no price for the judge semantic_judge's model unpriced" in w
               for w in e2.warnings)
    assert est.text(e2).startswith("≈ no price for this model")


@pytest.mark.req("R-9.27")
def test_a_local_endpoint_has_no_per_token_cost(cli, marked, corpora):
    # an override of a local model is kept, but a local endpoint is priced at zero
    assert cli("prices", "set", "ollama", "qwen3:8b", "--input", "5", "--output", "5").code == 0
    r = estimate(cli, corpora, "--format", "json", model=("--endpoint", "ollama", "--model-id",
                                                          "qwen3:8b"), caps=())
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["price"]["origin"] == "local"
    assert doc["price"]["input_per_mtok"] == doc["price"]["output_per_mtok"] == 0
    assert doc["cost_usd"] == {"p50": 0, "p90": 0, "worst_case": 0}
    assert doc["model_calls"]["p50"] > 0  # counted all the same
    assert doc["warnings"][0].startswith("Planned with a scripted stand-in")
    head = estimate(cli, corpora, model=("--endpoint", "ollama", "--model-id", "qwen3:8b"),
                    caps=()).out.splitlines()[0]
    assert "(a local endpoint: no per-token cost)" in head and head.startswith("≈ $0.0000 ")


@pytest.mark.parametrize("flag", ["--dry-run", "--catalogue", "--preflight-only"])
def test_estimate_refuses_what_only_run_does(cli, marked, corpora, flag):
    before = snapshot(marked)
    r = estimate(cli, corpora, flag)
    assert (r.code, r.error["error"]) == (2, "cli.usage.estimate_option")
    assert flag in r.error["message"]
    assert snapshot(marked) == before


@pytest.mark.slow
@pytest.mark.req("R-9.2")
def test_settled_units_are_not_estimated_again(e2e_cli, tmp_path):
    """A real scripted campaign (the AgentDojo environment), then its estimate: the settled
    units are not due, and the corpus's index rows (written by the campaign) carry counts."""
    script = ROOT / "examples" / "scripts" / "live-demo.json"
    corpus = tmp_path / "live-demo"
    plan = ("agentdojo", "--corpus", corpus, "--campaign", "demo", *SPEC_PLAN[1:],
            "--llm-script", script, "--model-display-name", "Scripted Model")
    r = e2e_cli("run", *plan, json_errors=False)
    assert r.code == 0, r.err
    root = corpus.with_name("live-demo.partial")
    rows = [json.loads(x) for x in (root / "executions.jsonl").read_text().splitlines() if x]
    assert len(rows) == 4 and all(x["counts"]["agent_calls"] > 0 for x in rows)
    before = snapshot(root)
    r = e2e_cli("estimate", *plan, "--stats-corpus", corpus, "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["units"], doc["settled"], doc["units_due"], doc["attempts_due"]) == (4, 4, 0, 0)
    assert doc["cost_usd"] == {"p50": 0, "p90": 0, "worst_case": 0}  # the scripted transport
    assert snapshot(root) == before
