"""Unit identity (docs/decisions.md, "Unit identity"): a unit is its key and its unit digest,
which holds everything that changes what its cell runs; a settled unit of one plan never
answers for another, and a plan that runs the corpus's cells another way is refused unless
``--allow-mixed-config``.

The in-process tests plan with the real planning code (the environment check replaced by a
fixed environment id, as in test_planning.py) against a working corpus written on disk. The
slow ones run the real CLI against the real AgentDojo environment and the scripted
transport.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from conftest import ROOT, fake_identity, snapshot

from agentprov_core.backend import environments
from agentprov_core.corpus.ledger import Attempt, Ledger
from agentprov_core.corpus.store import RawStore
from agentprov_core.corpus.working import partial_dir, unit_id, unit_key
from agentprov_core.errors import AgentprovError
from agentprov_core.run import checks, units
from agentprov_core.run import prepare as planning
from agentprov_core.run.runrequest import RunRequest

SCRIPT = str(ROOT / "examples" / "scripts" / "live-demo.json")
DEMO = dict(suite=("banking",), user_tasks="0-1", attack=("important_instructions",),
            injection_tasks="0")


@pytest.fixture
def built(monkeypatch):
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))


def prepare(corpus: Path, source: str = "agentdojo", **options):
    options = {"corpus": str(corpus), "campaign": "u", "llm_script": SCRIPT, **options}
    return planning.prepare(RunRequest.of(source, options, set(options)))


def corpus_of(p, root: Path) -> Path:
    """A working corpus whose manifest records ``p``'s plan, as T0's first write does."""
    part = partial_dir(root)
    part.mkdir(parents=True)
    plan = p.plan
    (part / "manifest.json").write_text(json.dumps({
        "format": "agentprov-live-corpus/0.1", "test_only": True, "working": True,
        "plans": [plan.plan_sha256], "config_digests": [plan.config_digest],
        "plan_contents": {plan.content_digest: plan.content}}))
    return part


def refusal(p) -> AgentprovError:
    with pytest.raises(AgentprovError) as exc:
        checks.check_corpus(p)
    return exc.value


# ------------------------------------------------------------------ digests
@pytest.mark.req("R-8.10", "R-8.12")
def test_the_content_digest_holds_what_a_cell_runs_not_which_cells(built, tmp_path):
    """Selecting more user tasks, another attack or more repeats keeps the content digest
    (the same campaign, sharing its units); the benchmark version, the defence and the
    element change it; the configuration digest holds neither the version nor the
    defence, which is why the content digest exists."""
    c = tmp_path / "c"
    a = prepare(c, **DEMO).plan
    for other in (dict(DEMO, user_tasks="0-3"), dict(DEMO, attack=("direct",)),
                  dict(DEMO, repeats=3), dict(DEMO, attack=())):
        b = prepare(c, **other).plan
        assert b.plan_sha256 != a.plan_sha256 and b.content_digest == a.content_digest, other
    for other in (dict(DEMO, benchmark_version="v1.2.1"),
                  dict(DEMO, defence="repeat_user_prompt"),
                  dict(DEMO, llm_element="gateway_compat")):
        b = prepare(c, **other).plan
        assert b.content_digest != a.content_digest, other
    assert prepare(c, **DEMO, benchmark_version="v1.2.1").plan.config_digest == a.config_digest
    assert prepare(c, **DEMO, defence="repeat_user_prompt").plan.config_digest == a.config_digest


@pytest.mark.req("R-13.8")
def test_the_display_name_is_in_the_units_of_attacks_that_name_the_model(built, tmp_path):
    """The display name changes the injection text of an attack that addresses the model by
    name (``important_instructions``), so it is in those units' digests; it is not in the
    benign units' nor in those of an attack that does not name the model (``direct``), and
    not in the plan's content digest (re-running with it is never refused)."""
    c = tmp_path / "c"
    args = dict(DEMO, attack=("important_instructions", "direct"))
    a = prepare(c, **args).plan
    b = prepare(c, **args, model_display_name="Scripted Model").plan
    assert a.content_digest == b.content_digest and a.named_attacks == ["important_instructions"]
    by_attack = {}
    for x, y in zip(a.cells, b.cells, strict=True):
        by_attack.setdefault(x.attack, set()).add(a.unit_digest(x) == b.unit_digest(y))
    assert by_attack == {None: {True}, "direct": {True}, "important_instructions": {False}}


# ------------------------------------------------------------------ refusals
@pytest.mark.req("R-2.14", "R-15.13")
def test_an_autodojo_variant_is_another_way_of_running_the_cells(built, tmp_path, landed_env,
                                                                 monkeypatch):
    """AutoDojo's cache and variant configure the attack of every attacked cell: another
    variant (or another cache) on the corpus is refused (exit 4, ``cli.refused.mixed_plan``),
    naming what differs, and accepted under ``--allow-mixed-config``, where none of the
    corpus's units answers for it. Both caches are files of a fixture fork (verified at
    step 5 against its commit, pinned by the test override)."""
    from agentprov_core.backend.autodojofork import PIN_OVERRIDE
    from agentprov_core.testing.gitrepo import fetch_fork, make_repo

    one = b'{"injection_tasks": {"injection_task_0": {"v": ["a", "b"]}}}'
    two = b'{"injection_tasks": {"injection_task_0": {"v": ["c"]}}}'
    commit = make_repo(tmp_path / "fork", {"cache/one.json": one, "cache/two.json": two})
    home = tmp_path / "home"
    fetch_fork(tmp_path / "fork", commit, home)
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    monkeypatch.setenv(PIN_OVERRIDE, commit)
    cache = tmp_path / "autodojo-cache.json"
    cache.write_bytes(one)
    c = tmp_path / "c"
    args = dict(suite=("banking",), user_tasks="0", attack=("autodojo",),
                injection_tasks="0", autodojo_cache=str(cache))
    first = prepare(c, "autodojo", **args, autodojo_variant=0)
    part = corpus_of(first, c)
    before = snapshot(part)
    checks.check_corpus(prepare(c, "autodojo", **args, autodojo_variant=0))  # the same
    other = prepare(c, "autodojo", **args, autodojo_variant=1)
    err = refusal(other)
    assert (err.code, err.spec.exit) == ("cli.refused.mixed_plan", 4)
    assert "backend configuration autodojo variant 0 (this run: 1)" in err.message
    assert "--allow-mixed-config" in err.message
    cache.write_bytes(two)
    err = refusal(prepare(c, "autodojo", **args, autodojo_variant=0))
    assert "backend configuration autodojo cache_sha256" in err.message
    cache.write_bytes(one)
    allowed = prepare(c, "autodojo", **args, autodojo_variant=1, allow_mixed_config=True)
    checks.check_corpus(allowed)
    assert snapshot(part) == before


@pytest.mark.req("R-2.14", "R-15.13")
def test_a_changed_inspect_parameter_is_refused(built, tmp_path, landed_env, monkeypatch):
    """An Inspect task's limits and parameters (``--message-limit``, ``--task-param``)
    change what every sample runs."""
    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    c = tmp_path / "home" / "corpora" / "c"  # agentharm's corpus is restricted
    opts = dict(task="inspect_evals/agentharm", samples="limit:2", message_limit=10,
                token_limit=20000, time_limit=600,
                judge=("refusal_judge=m", "semantic_judge=m"))
    part = corpus_of(prepare(c, "agentharm", **opts), c)
    err = refusal(prepare(c, "agentharm", **{**opts, "message_limit": 11}))
    assert "backend configuration inspect limits message_limit 10 (this run: 11)" in err.message
    err = refusal(prepare(c, "agentharm", **opts, task_param=("detailed_behaviors=true",)))
    assert err.code == "cli.refused.mixed_plan" and "inspect params" in err.message
    assert (part / "manifest.json").is_file()


# ------------------------------------------------------------------ old ledger entries
def old_entry(seq: int, cell_key: str, plan_sha256: str, config: str, sha: str) -> Attempt:
    """A conclusive entry as T0 wrote it before units had a digest (no unit_digest)."""
    return Attempt(seq=seq, invocation="old", unit=unit_key(cell_key, "none", 0),
                   cell_key=cell_key, defence="none", repeat=0, attempt=1,
                   session_id=f"s-old{seq}", started_at="2026-01-01T00:00:00.000000Z",
                   ended_at="2026-01-01T00:00:01.000000Z", status="complete", conclusive=True,
                   capture_sha256=sha, plan_sha256=plan_sha256, config_digest=config)


@pytest.mark.req("R-21.28")
def test_an_old_entry_answers_only_for_its_own_plan(built, tmp_path):
    """An entry written before units had a digest reads, re-encodes to its own bytes (so
    ``verify``'s form check holds), and counts as done only for a unit of its own plan
    digest whose attack does not name the model; for any other plan it is no unit's."""
    c = tmp_path / "c"
    p = prepare(c, **DEMO)
    part = corpus_of(p, c)
    sha = RawStore(part / "raw").put_bytes(b'{"kind": "header"}\n')
    ledger = Ledger(part / "ledger.jsonl")
    cells = [cell.key for cell in p.plan.cells]
    for i, key in enumerate(cells):
        ledger.append(old_entry(i, key, p.plan.plan_sha256, p.plan.config_digest, sha))
    line = (part / "ledger.jsonl").read_bytes().splitlines()[0]
    assert b"unit_digest" not in line
    [e, *_] = ledger.read()
    assert e.unit_digest is msgspec.UNSET and msgspec.json.encode(e) == line
    read = units.read_progress(p)
    assert p.plan.settled == 0  # a new prepared run: the one read from is left as it was
    p = read
    assert (p.plan.settled, p.plan.settled_cells) == (
        2, {"banking/user_task_0/none/none": 1, "banking/user_task_1/none/none": 1})
    wider = prepare(c, **dict(DEMO, user_tasks="0-2"))  # another plan digest, same content
    wider = units.read_progress(wider)
    assert wider.plan.settled == 0
    # a new entry names its unit by key and unit digest
    new = msgspec.structs.replace(ledger.read()[0], seq=4, unit_digest="d" * 64)
    assert units.unit_ids(p.plan)(new) == unit_id(new.unit, "d" * 64)
    assert b'"unit_digest":"' + b"d" * 64 + b'"' in msgspec.json.encode(new)


# ------------------------------------------------------------------ real runs (slow)
DEMO_ARGS = ("--suite", "banking", "--user-tasks", "0-1", "--attack", "important_instructions",
             "--injection-tasks", "0")


def ledger(part: Path) -> list[dict]:
    return [json.loads(x) for x in (part / "ledger.jsonl").read_text().splitlines() if x.strip()]


def tail(r) -> str:
    """The last clause of the run's stdout line (``N of M unit(s) done before``)."""
    return r.out.strip().splitlines()[-1].split("; ")[-1]


@pytest.mark.slow
@pytest.mark.req("R-2.14", "R-15.13", "R-8.4", "R-21.28")
def test_a_corpus_of_one_benchmark_version_never_answers_for_another(e2e_cli, tmp_path):
    """On a corpus settled at v1.2.2, ``--benchmark-version v1.2.1`` (the same cells run on
    another task set) is refused, dry or not, without writing; with ``--allow-mixed-config``
    nothing is done before (the dry run settles 0, the run runs every unit as a new unit);
    the original plan then still has everything done, and widening its selection shares its
    units."""
    corpus = tmp_path / "v"
    part = partial_dir(corpus)
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "v", "--suite", "banking",
            "--user-tasks", "0-1", "--llm-script", SCRIPT)
    r = e2e_cli(*base, json_errors=False)
    assert (r.code, tail(r)) == (0, "0 of 2 unit(s) done before"), r.err
    first = ledger(part)
    before = snapshot(part)
    old = ("--benchmark-version", "v1.2.1")
    for dry in (("--dry-run",), ()):
        r = e2e_cli(*base, *old, *dry)
        assert (r.code, r.error["error"]) == (4, "cli.refused.mixed_plan"), r.err
        assert "benchmark version v1.2.2 (this run: v1.2.1)" in r.error["message"]
        assert "done before" not in r.out and snapshot(part) == before
    r = e2e_cli(*base, *old, "--dry-run", "--allow-mixed-config", json_errors=False)
    assert r.code == 0 and "; 0 unit(s) already settled;" in r.out, r.err
    r = e2e_cli(*base, *old, "--allow-mixed-config", json_errors=False)
    assert (r.code, tail(r)) == (0, "0 of 2 unit(s) done before"), r.err
    entries = ledger(part)
    assert entries[:2] == first and len(entries) == 4
    assert [e["unit"] for e in entries[2:]] == [e["unit"] for e in first]
    assert {e["unit_digest"] for e in entries[2:]}.isdisjoint(e["unit_digest"] for e in first)
    assert all(e["conclusive"] for e in entries)
    m = json.loads((part / "manifest.json").read_text())
    assert sorted(c["benchmark_version"] for c in m["plan_contents"].values()) == [
        "v1.2.1", "v1.2.2"]
    assert len(m["config_digests"]) == 1  # the same configuration: only the content differs
    r = e2e_cli(*base, json_errors=False)  # the corpus holds v1.2.2's content: not refused
    assert (r.code, tail(r)) == (0, "2 of 2 unit(s) done before"), r.err
    wider = [a if a != "0-1" else "0-2" for a in base]
    r = e2e_cli(*wider, json_errors=False)  # more cells of the same campaign: it resumes
    assert (r.code, tail(r)) == (0, "2 of 3 unit(s) done before"), r.err
    assert len(ledger(part)) == 5
    r = e2e_cli("verify", "--corpus", part, json_errors=False)
    assert r.code == 0, r.out + r.err
    r = e2e_cli("stats", "--corpus", part, "--tables", "counts", "--format", "json",
                json_errors=False)  # two contents of two cells, and a third cell: five
    assert r.code == 0, r.err
    (counts,) = json.loads(r.out)["tables"]["counts"]
    assert (counts["attempts"], counts["units"]) == (5, 5)


@pytest.mark.slow
@pytest.mark.req("R-2.14", "R-15.13", "R-8.4")
def test_a_defended_plan_of_the_same_cells_is_another_campaign(e2e_cli, tmp_path):
    """On a corpus settled undefended, ``--defence repeat_user_prompt`` on the same cells is
    refused (exit 4) without writing; with ``--allow-mixed-config`` its dry run settles none
    of them, while the undefended dry run still settles both."""
    corpus = tmp_path / "d"
    part = partial_dir(corpus)
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "d", "--suite", "banking",
            "--user-tasks", "0-1", "--llm-script", SCRIPT)
    r = e2e_cli(*base, json_errors=False)
    assert r.code == 0, r.err
    before = snapshot(part)
    defended = (*base, "--dry-run", "--defence", "repeat_user_prompt")
    r = e2e_cli(*defended)
    assert (r.code, r.error["error"]) == (4, "cli.refused.mixed_plan"), r.err
    assert "defence none (this run: repeat_user_prompt)" in r.error["message"]
    assert snapshot(part) == before
    r = e2e_cli(*defended, "--allow-mixed-config", json_errors=False)
    assert r.code == 0 and "; 0 unit(s) already settled;" in r.out, r.err
    r = e2e_cli(*base, "--dry-run", json_errors=False)
    assert r.code == 0 and "; 2 unit(s) already settled;" in r.out, r.err
    assert snapshot(part) == before


@pytest.mark.slow
@pytest.mark.req("R-13.8")
def test_another_display_name_reruns_only_the_units_that_name_the_model(e2e_cli, tmp_path):
    """Settled with ``--model-display-name "Model A"``, the same plan with "Model B" is not
    refused: the benign units are done before, the two attacked units (whose injection
    addresses the model by the new name) are new units and run; "Model A"'s stay."""
    corpus = tmp_path / "n"
    part = partial_dir(corpus)
    base = ("run", "agentdojo", "--corpus", corpus, "--campaign", "n", *DEMO_ARGS,
            "--llm-script", SCRIPT)
    r = e2e_cli(*base, "--model-display-name", "Model A", json_errors=False)
    assert (r.code, tail(r)) == (0, "0 of 4 unit(s) done before"), r.err
    r = e2e_cli(*base, "--model-display-name", "Model B", json_errors=False)
    assert (r.code, tail(r)) == (0, "2 of 4 unit(s) done before"), r.err
    entries = ledger(part)
    assert [e["unit"] for e in entries[4:]] == [e["unit"] for e in entries[2:4]]
    assert all("important_instructions" in e["unit"] for e in entries[4:])
    assert {e["unit_digest"] for e in entries[4:]}.isdisjoint(
        e["unit_digest"] for e in entries[2:4])
    r = e2e_cli(*base, "--model-display-name", "Model A", json_errors=False)
    assert (r.code, tail(r)) == (0, "4 of 4 unit(s) done before"), r.err
