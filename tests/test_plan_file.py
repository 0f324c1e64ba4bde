"""`--plan PLAN.toml` (agentprov-run-plan/0.1): equivalence with the flags, and bad input."""

import pytest
from conftest import ROOT, fake_identity, snapshot

from agentprov_core.backend import environments
from agentprov_core.run import prepare as planning
from agentprov_core.run.runrequest import RunRequest

SCRIPT = str(ROOT / "examples" / "scripts" / "live-demo.json")

SPOTLIGHT = """\
# banking-spotlighting.toml
[plan]
format = "agentprov-run-plan/0.1"
backend = "agentdojo"
suites = ["banking"]
user_tasks = "0-1"
injection_tasks = "0"
attacks = ["important_instructions"]
benign = "include"
defence = "spotlighting_with_delimiting"
"""

FLAGS = dict(suite=("banking",), user_tasks="0-1", injection_tasks="0",
             attack=("important_instructions",), benign="include")


@pytest.fixture
def built(monkeypatch):
    monkeypatch.setattr(environments, "backend_identity", fake_identity("00000000"))


def prepare(**options):
    options |= {"corpus": "/tmp/x/c", "campaign": "g", "llm_script": SCRIPT}
    return planning.prepare(RunRequest.of("agentdojo", options, set(options))).plan


@pytest.mark.req("R-22.27", "R-22.28", "R-7.10", "R-22.29")
def test_a_plan_file_and_the_flags_give_the_same_plan_digest(tmp_path, built):
    f = tmp_path / "banking-spotlighting.toml"
    f.write_text(SPOTLIGHT)
    from_file = prepare(plan=str(f))
    from_flags = prepare(**FLAGS, defence="spotlighting_with_delimiting")
    assert from_file.plan_sha256 == from_flags.plan_sha256
    assert [c.key for c in from_file.cells] == [c.key for c in from_flags.cells]
    undefended = prepare(**FLAGS)
    assert undefended.plan_sha256 != from_file.plan_sha256
    f.write_text(SPOTLIGHT.replace('defence = "spotlighting_with_delimiting"\n', ""))
    assert prepare(plan=str(f)).plan_sha256 == undefended.plan_sha256


def write(tmp_path, text):
    f = tmp_path / "p.toml"
    f.write_text(text)
    return f


@pytest.mark.req("R-22.30")
def test_a_refused_defence_in_a_plan_file_exits_5(cli, tmp_path, corpora, home):
    f = write(tmp_path, SPOTLIGHT.replace("spotlighting_with_delimiting", "progent"))
    r = cli("run", "agentdojo", "--dry-run", "--plan", f, "--corpus", corpora / "g",
            "--campaign", "g", "--llm-script", SCRIPT)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_replaces_pipeline")
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.parametrize("text,where,what", [
    (SPOTLIGHT.replace('suites = ["banking"]', 'suites = ["banking"'), ":6", "malformed TOML"),
    (SPOTLIGHT + "colour = 'blue'\n", ":11", "[plan] has an unknown key 'colour'"),
    (SPOTLIGHT.replace("agentprov-run-plan/0.1", "agentprov-run-plan/9"), ":3",
     '[plan].format must be "agentprov-run-plan/0.1"'),
    (SPOTLIGHT.replace("repeats", "x") + "repeats = 'two'\n", ":11",
     "[plan].repeats: expected `int`, got `str`"),
    (SPOTLIGHT.replace('benign = "include"', 'benign = "sometimes"'), ":9",
     "[plan].benign: invalid enum value 'sometimes' (include, exclude or only)"),
    ("[other]\nx = 1\n", "", "unknown table [other]"),
    (SPOTLIGHT + "[inspect]\nfoo = 1\n", ":12", "[inspect] has an unknown key 'foo'"),
])
def test_bad_plan_files_name_the_file_line_and_what(cli, tmp_path, corpora, home, text, where,
                                                    what):
    f = write(tmp_path, text)
    r = cli("run", "agentdojo", "--dry-run", "--plan", f, "--corpus", corpora / "g",
            "--campaign", "g", "--llm-script", SCRIPT)
    assert (r.code, r.error["error"]) == (2, "cli.usage.plan_file"), r.err
    assert r.error["message"].startswith(f"agentprov run: {f}{where}: ")
    assert what in r.error["message"]
    assert "Traceback" not in r.err
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


def test_plan_file_refusals(cli, tmp_path, corpora, landed_env):
    f = write(tmp_path, SPOTLIGHT)
    base = ("--dry-run", "--corpus", corpora / "g", "--campaign", "g", "--llm-script", SCRIPT)
    r = cli("run", "agentdojo", "--plan", f, "--suite", "banking", *base)
    assert (r.code, r.error["error"]) == (2, "cli.usage.plan_with_cell_options")
    assert "--suite" in r.error["message"]
    r = cli("run", "autodojo", "--plan", f, *base, env=landed_env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.plan_backend")
    r = cli("run", "agentdojo", "--plan", tmp_path / "missing.toml", *base)
    assert (r.code, r.error["error"]) == (2, "cli.usage.plan_file")
    assert "no such file" in r.error["message"]
