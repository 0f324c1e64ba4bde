"""The caps of an Inspect plan: the D-740 cell bound (declared by the source), the judges
under caps, the endpoint format, and the plan's bad input.

In-process tests run the real checks of ``prepare`` (steps 1 to 6) with the environment
check replaced by a fixed environment id (this build has no Inspect environment); the CLI
tests run the real CLI against ``landed`` backends and prove that nothing was written."""

from __future__ import annotations

from types import SimpleNamespace

import msgspec
import pytest
from conftest import fake_identity, snapshot

from agentprov_core.backend import environments
from agentprov_core.errors import AgentprovError
from agentprov_core.live import caps
from agentprov_core.plugins import source_entry
from agentprov_core.run import prepare as planning
from agentprov_core.run.consent import summary
from agentprov_core.run.live import account_of, bound_of, missing_log
from agentprov_core.run.runrequest import RunRequest
from agentprov_core.source import InspectCellBound, InspectSource

JUDGES = ("refusal_judge=example-model", "semantic_judge=example-model")
INSPECT = dict(task="inspect_evals/agentharm", samples="limit:2", message_limit=10,
               token_limit=20000, time_limit=600, judge=JUDGES)
CAPS = dict(model="openrouter", model_id="example-model", max_calls=100, max_cost_usd=1.0,
            price_in=0.15, price_out=0.60, containment="vm")
#: the D-740 note's prices: 32,000 input and 4,096 output tokens at $0.15 and $0.60 per
#: million
PRICES = caps.Caps(max_calls=None, max_cost_usd=1.0, price_in=0.15, price_out=0.60)


@pytest.fixture
def inproc(tmp_path, monkeypatch, landed_env):
    """In-process planning of agentharm: a fixed environment id, a private home, a key in a
    .env file (read at step 3 only after the caps and judges), and a marker whose probe the
    ``vm`` containment does not need."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))
    monkeypatch.setattr(environments, "read_marker",
                        lambda meta, env_id: SimpleNamespace(probe={}))
    env_file = tmp_path / ".env"
    env_file.write_text("OPENROUTER_API_KEY=sk-test-inspect-caps\n")
    corpora = home / "corpora"  # agentharm's corpus is restricted: under the home
    corpora.mkdir()
    (tmp_path / "script.json").write_text("[]")

    def prepare(source="agentharm", **options):
        options.setdefault("corpus", str(corpora / "c"))
        options.setdefault("campaign", "ah")
        if options.get("model") or options.get("endpoint"):
            options.setdefault("env_file", str(env_file))
        else:
            options.setdefault("llm_script", str(tmp_path / "script.json"))
        return planning.prepare(RunRequest.of(source, options, set(options)))

    prepare.home, prepare.corpora = home, corpora
    return prepare


def refused(fn, code: str, exit_code: int) -> str:
    with pytest.raises(AgentprovError) as e:
        fn()
    assert (e.value.code, e.value.exit_code) == (code, exit_code), e.value.message
    return e.value.message


# --------------------------------------------------------------------- the D-740 bound
@pytest.mark.req("R-25.27", "R-25.28", "R-25.29", "R-25.30")
@pytest.mark.parametrize("m,n,calls,usd", [(20, 1, 82, "0.595"), (20, 4, 328, "2.380"),
                                           (10, 1, 42, "0.305"), (10, 4, 168, "1.219")])
def test_the_d740_worked_figures(m, n, calls, usd):
    """The spec's table: n x E x ((M - 1) x (1 + a) + j) x (1 + K) with AgentHarm's
    declared a = 1, j = 3, K = 1 at E = 1, priced at the per-call bound of $0.00726."""
    bound = source_entry("agentharm").source.cell_bound
    assert bound == InspectCellBound(judge_calls_per_agent_call=1, judge_calls_per_sample=3,
                                     retries_per_call=1)
    assert bound.calls(n, 1, m) == calls
    b = caps.Bound(cell_calls=calls)
    assert f"{b.call_usd(PRICES):.5f}" == "0.00726"
    assert f"{b.cell_usd(PRICES):.3f}" == usd


@pytest.mark.req("R-25.27")
def test_the_bound_follows_its_symbols():
    """Every symbol enters as the spec says: E and n multiply, M - 1 agent calls each with
    a judge calls, j per sample, and each call retried K times."""
    b = InspectCellBound(judge_calls_per_agent_call=2, judge_calls_per_sample=5,
                         retries_per_call=0)
    assert b.per_sample(1, 1) == 5          # M = 1: no agent call, the j judge calls only
    assert b.per_sample(1, 4) == 3 * 3 + 5  # three agent calls, each with two judge calls
    assert b.per_sample(3, 4) == 3 * 14
    assert b.calls(4, 3, 4) == 4 * 3 * 14
    assert InspectCellBound(judge_calls_per_agent_call=2, judge_calls_per_sample=5,
                            retries_per_call=2).calls(4, 3, 4) == 4 * 3 * 14 * 3


@pytest.mark.req("R-25.31", "R-17.5", "R-25.21")
def test_the_approved_defaults_reserve_42_calls_a_cell(inproc):
    """Under caps the cells are of one sample (``--cell-size`` defaults to 1), the caps
    reserve 42 calls (about $0.305) for each instead of 48, and ``live.caps`` records the
    bound with its figures."""
    p = inproc(**INSPECT, **CAPS)
    assert [len(c.samples) for c in p.cells] == [1, 1]
    acc = account_of(p, None)
    assert acc.bound.cell_calls == 42
    assert f"{acc.bound.cell_usd(acc.caps):.3f}" == "0.305"
    rec = acc.record()
    assert rec["bound"]["calls_per_cell"] == 42
    assert rec["bound"]["cell_rule"] == {
        "rule": "D-740", "samples": 1, "epochs": 1, "message_limit": 10,
        "judge_calls_per_agent_call": 1, "judge_calls_per_sample": 3, "retries_per_call": 1,
        "calls_per_sample": 42}
    assert rec["cell_bound_usd"] == round(42 * 0.0072576, 6)
    # with the bound: 100 calls fit two cells in flight (84), not a third (126)
    assert acc.fits(0) is None and acc.fits(1) is None
    assert "+ 1 x 42 for the next cell = 126" in acc.fits(2)
    # a missing log is charged a whole cell at the same bound, not AgentDojo's 48
    assert missing_log(p, "none").whole_cell_calls == 42


@pytest.mark.req("R-25.27", "R-17.4", "R-17.10")
def test_bigger_cells_more_epochs_and_a_larger_message_limit(inproc):
    """The plan's largest cell sets the bound of every cell; epochs and the message limit
    enter it; a cell that bills more than it stops the campaign (``exceeds_cell``)."""
    p = inproc(**INSPECT | {"samples": "limit:5", "message_limit": 20}, **CAPS, cell_size=4,
               epochs=2)
    assert [len(c.samples) for c in p.cells] == [4, 1]
    b = bound_of(p)
    assert b.cell_calls == 4 * 2 * ((20 - 1) * 2 + 3) * 2 == 656
    assert caps.exceeds_cell(caps.Charge(calls=656), b) is None
    assert "more than the cell bound of 656" in caps.exceeds_cell(caps.Charge(calls=657), b)


@pytest.mark.req("R-17.6")
def test_agentdojo_keeps_its_48_calls(inproc):
    p = inproc("agentdojo", suite=("banking",), user_tasks="0", attack=(), benign="include")
    b = bound_of(p)
    assert (b.cell_calls, b.rule) == (48, None)
    assert "cell_rule" not in b.as_json()
    assert missing_log(p, "tool_filter").whole_cell_calls == 51


def test_consent_names_the_d740_bound(inproc):
    """The consent summary names the bound on calls: an Inspect plan's is D-740's."""
    p = inproc(**INSPECT, **CAPS)
    lines = summary(p, bound_of(p))
    assert lines[2].startswith("  caps: at most 100 billed call(s)")
    assert lines[3] == ("  cell bound (D-740): at most 42 billed call(s) per cell = 1 "
                         "sample(s) x 1 epoch(s) x ((10 - 1) x (1 + 1) + 3) x (1 + 1), about "
                         "$0.305")


def test_caps_need_a_declared_bound(inproc, monkeypatch):
    """An Inspect source whose plugin declares no cell bound has no known worst case of a
    cell: caps are refused (exit 5) at step 2; without caps nothing is checked against it."""
    src = source_entry("agentharm").source
    monkeypatch.setattr(type(src), "cell_bound", None)
    msg = refused(lambda: inproc(**INSPECT, **CAPS), "run.unsupported.cell_bound", 5)
    assert msg == "caps for agentharm."
    p = inproc(**INSPECT)
    b = bound_of(p)
    assert b.cell_calls is None and caps.exceeds_cell(caps.Charge(calls=10_000), b) is None


# -------------------------------------------------------------------- judges and format
@pytest.mark.req("R-25.24", "R-16.3", "R-16.8")
def test_under_caps_every_judge_uses_the_agents_model(inproc, monkeypatch):
    """Step 3, before any key is read: a judge on another model is ``cli.refused.api_caps``
    (exit 4), naming the judge and the fix."""
    from agentprov_core.live import keys

    def no_key(*a, **k):
        raise AssertionError("the key was read before the judges were checked")

    monkeypatch.setattr(keys, "read_key", no_key)
    judges = ("refusal_judge=example-model", "semantic_judge=other-model")
    msg = refused(lambda: inproc(**INSPECT | {"judge": judges}, **CAPS),
                  "cli.refused.api_caps", 4)
    assert msg == (
        "an API endpoint run needs its caps (under caps every judge uses the agent's model, "
        "example-model; semantic_judge is other-model): give --judge "
        "semantic_judge=example-model (D-725; the provider's own key limit is the backstop)")
    assert snapshot(inproc.home) == {} and list(inproc.corpora.iterdir()) == []
    # without caps (a scripted run), judges may use any model
    assert inproc(**INSPECT | {"judge": judges}).cells


@pytest.mark.req("R-25.25", "R-16.2")
def test_an_anthropic_format_endpoint_is_refused_before_consent(inproc):
    msg = refused(lambda: inproc(**INSPECT, **CAPS | {"model": "anthropic"}, max_tokens="1024"),
                  "run.unsupported.endpoint_wire", 5)
    assert msg == "an endpoint of the anthropic format."
    assert snapshot(inproc.home) == {} and list(inproc.corpora.iterdir()) == []


@pytest.mark.req("R-25.21", "R-25.35", "R-25.4")
def test_the_default_cell_size(inproc):
    """25 without caps (the two samples are one cell), 1 under caps; an explicit size wins."""
    assert [len(c.samples) for c in inproc(**INSPECT).cells] == [2]
    assert [len(c.samples) for c in inproc(**INSPECT, **CAPS).cells] == [1, 1]
    assert [len(c.samples) for c in inproc(**INSPECT, **CAPS, cell_size=2).cells] == [2]


# ------------------------------------------------------------------------- bad input
@pytest.mark.req("R-25.16")
def test_a_sample_id_the_catalogue_does_not_list(inproc, monkeypatch):
    """When the catalogue lists a split's sample ids, an explicit id outside them is a usage
    error naming it (exit 2) at step 1; a catalogue that lists none leaves the ids to the
    worker's plan check. (AgentHarm's declared catalogue lists none: the ids here are a
    test catalogue's.)"""
    src = source_entry("agentharm").source
    cat = src.catalogue()
    assert all(s.sample_ids is None for t in cat.tasks for s in t.splits)
    ids = [f"{b}-{v}" for b in range(1, 45) for v in range(1, 5)]
    tasks = [msgspec.structs.replace(t, splits=[
        msgspec.structs.replace(s, sample_ids=ids if s.name == "test_public" else None)
        for s in t.splits]) for t in cat.tasks]
    listed = msgspec.structs.replace(cat, tasks=tasks)
    monkeypatch.setattr(type(src), "catalogue", lambda self: listed)
    msg = refused(lambda: inproc(**INSPECT | {"samples": "1-1,99-9"}),
                  "cli.usage.backend_plan", 2)
    assert msg == ("the backend refused the plan: [inspect].samples: '99-9' not in the "
                   "test_public split of the catalogue (176 samples; --samples limit:N or ids "
                   "of the split)")
    assert snapshot(inproc.home) == {} and list(inproc.corpora.iterdir()) == []
    p = inproc(**INSPECT | {"samples": "1-1,44-4"}, cell_size=1)
    assert [c.samples for c in p.cells] == [({"id": "1-1"},), ({"id": "44-4"},)]


AH = ("--task", "inspect_evals/agentharm", "--samples", "limit:2", "--message-limit", "10",
      "--token-limit", "20000", "--time-limit", "600")


@pytest.mark.req("R-25.15", "R-25.19", "R-25.22", "R-25.11")
@pytest.mark.parametrize("extra,needle", [
    (("--task-param", "n_irrelevant_tools=-1"),
     "[inspect].params.n_irrelevant_tools: -1 is outside 0 to 64"),
    (("--task-param", "n_irrelevant_tools=65"),
     "[inspect].params.n_irrelevant_tools: 65 is outside 0 to 64"),
    (("--task-param", "n_irrelevant_tools=some"),
     "[inspect].params.n_irrelevant_tools: must be an integer"),
    (("--task-param", "n_irrelevant_tools=true"),
     "[inspect].params.n_irrelevant_tools: must be an integer"),
    (("--task-param", "detailed_behaviors=3"),
     "[inspect].params.detailed_behaviors: must be true or false"),
    (("--task-param", "split=test_private"), "[inspect].params.split: 'test_private' is not one of"),
    (("--task-param", "max_messages=5"), "[inspect].params: 'max_messages' is not a parameter"),
    (("--judge", "grader=example-model"), "[inspect].judges: unknown role(s) grader"),
    (("--message-limit", "0"), "[inspect].limits.message_limit: 0 is outside 1 to 500"),
    (("--message-limit", "501"), "[inspect].limits.message_limit: 501 is outside 1 to 500"),
])
def test_bad_input_is_refused_naming_it(cli, landed, tmp_path, extra, needle):
    """Step 1 (exit 2), by the real CLI: the option or key is named, and nothing is written
    (the home and the corpus directory stay empty)."""
    home = tmp_path / "home"
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    script = tmp_path / "script.json"
    script.write_text("[]")
    args = list(AH)
    if extra[0] == "--message-limit":
        args[args.index("--message-limit") + 1] = extra[1]
        extra = ()
    r = cli("run", "agentharm", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *args, "--judge", JUDGES[0], "--judge", JUDGES[1], *extra, "--llm-script", script,
            env={"AGENTPROV_BACKENDS": str(landed)})
    assert (r.code, r.error["error"]) == (2, "cli.usage.backend_plan"), r.err
    assert needle in r.error["message"]
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.req("R-25.22")
@pytest.mark.parametrize("judges,needle", [
    ((), "[inspect].judges: missing role(s) refusal_judge, semantic_judge"),
    ((JUDGES[1],), "[inspect].judges: missing role(s) refusal_judge"),
])
def test_a_judge_role_missing(cli, landed, tmp_path, judges, needle):
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    script = tmp_path / "script.json"
    script.write_text("[]")
    r = cli("run", "agentharm", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            *AH, *[x for j in judges for x in ("--judge", j)], "--llm-script", script,
            env={"AGENTPROV_BACKENDS": str(landed)})
    assert (r.code, r.error["error"]) == (2, "cli.usage.backend_plan"), r.err
    assert needle in r.error["message"]
    assert snapshot(tmp_path / "home") == {} and list(corpora.iterdir()) == []


def test_the_inspect_source_declares_its_bound_and_format():
    src = source_entry("agentharm").source
    assert isinstance(src, InspectSource)
    assert src.wires == ("openai",)
    assert type(src).cell_bound is not InspectSource.cell_bound
