"""`agentprov run SOURCE --catalogue`: the real packages' numbers (or declared ones)."""

import json

import pytest
from conftest import snapshot


def cat(cli, source):
    r = cli("run", source, "--catalogue")
    assert r.code == 0, r.err
    return json.loads(r.out)


def counts(doc, version):
    suites = [s for s in doc["suites"] if s["benchmark_version"] == version]
    return (len(suites), sum(len(s["user_tasks"]) for s in suites),
            sum(len(s["injection_tasks"]) for s in suites))


@pytest.mark.req("R-7.11", "R-7.12", "R-7.13", "R-7.14", "R-7.15")
def test_agentdojo_catalogue_is_the_real_package(cli, home):
    doc = cat(cli, "agentdojo")
    assert doc["format"] == "agentprov-catalogue/0.1"
    assert doc["provenance"]["kind"] == "snapshot"
    assert doc["provenance"]["packages"]["agentdojo"] == "0.1.35"
    assert doc["benchmark_versions"] == ["v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1",
                                         "v1.2.2"]
    assert doc["default_benchmark_version"] == "v1.2.2"
    assert counts(doc, "v1.2.2") == (4, 97, 35)
    assert counts(doc, "v1") == (4, 97, 27)
    sizes = {s["name"]: (s["tools"], s["tool_definitions_bytes"]) for s in doc["suites"]
             if s["benchmark_version"] == "v1.2.2"}
    assert sizes == {"workspace": (24, 12666), "travel": (28, 15132), "banking": (11, 4886),
                     "slack": (11, 3989)}
    attacks = doc["attacks"]
    assert len(attacks) == 17
    assert sorted(a["name"] for a in attacks if a["dos"]) == [
        "captcha_dos", "dos", "felony_dos", "offensive_email_dos", "swearwords_dos"]
    assert sum(a["names_model"] for a in attacks) == 12
    defences = doc["defences"]
    assert len(defences) == 10
    assert all(d["enabled"] and "agentdojo" in d["backends"] for d in defences)
    melon = [d for d in defences if d["name"].startswith("melon")]
    assert len(melon) == 3 and all(d["port"] for d in melon)
    assert snapshot(home) == {}  # nothing written


@pytest.mark.req("R-7.16", "R-23.1", "R-23.2")
def test_autodojo_catalogue_declared_counts(cli):
    doc = cat(cli, "autodojo")
    assert doc["provenance"]["kind"] == "declared"
    assert "not verified" in doc["provenance"]["note"]
    assert counts(doc, doc["default_benchmark_version"]) == (17, 337, 143)
    names = [s["name"] for s in doc["suites"]]
    assert names[:4] == ["workspace", "travel", "banking", "slack"]
    assert {f"banking_v2_{i}" for i in range(5)} | {f"travel_v2_{i}" for i in range(5)} <= set(names)
    assert {"shopping", "github", "dailylife"} <= set(names)
    attacks = {a["name"]: a for a in doc["attacks"]}
    assert len(attacks) == 20 and sum(a["dos"] for a in attacks.values()) == 5
    assert attacks["ours"]["refused"] and attacks["variant_generation"]["refused"]
    assert attacks["autodojo"]["needs"] == ["--autodojo-cache", "--autodojo-variant"]
    assert doc["defences"] == []


@pytest.mark.req("R-7.17", "R-24.2")
def test_agentdyn_catalogue_snapshot_counts(cli):
    """Before a build, the snapshot of the worker's catalogue (generated from the installed
    code of agentdyn-5353cf76; tests/test_agentdyn_backend.py compares it with the worker)."""
    doc = cat(cli, "agentdyn")
    assert doc["provenance"]["kind"] == "snapshot"
    assert doc["provenance"]["packages"]["agentdojo"] == "0.1.35"
    version = doc["default_benchmark_version"]
    assert counts(doc, version) == (7, 157, 63)
    assert [s["name"] for s in doc["suites"] if s["benchmark_version"] == version][4:] == [
        "shopping", "github", "dailylife"]
    assert len(doc["attacks"]) == 17 and sum(a["dos"] for a in doc["attacks"]) == 5
    assert doc["defences"] == []


@pytest.mark.req("R-25.9", "R-25.10", "R-25.11", "R-25.12")
def test_agentharm_catalogue_tasks_and_splits(cli):
    doc = cat(cli, "agentharm")
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert set(tasks) == {"inspect_evals/agentharm", "inspect_evals/agentharm_benign"}
    for t in tasks.values():
        assert {s["name"]: s["samples"] for s in t["splits"]} == {"test_public": 176, "val": 32}
        assert t["judge_roles"] == ["refusal_judge", "semantic_judge"]
        params = {p["name"]: p for p in t["parameters"]}
        assert params["n_irrelevant_tools"]["minimum"] == 0
        assert params["n_irrelevant_tools"]["maximum"] == 64
        assert {"split", "agent", "detailed_behaviors", "hint_included", "tool_choice",
                "prompt_technique"} <= set(params)
    for t in tasks.values():
        assert {"max_messages", "max_tokens", "temperature", "seed"} <= set(t["fixed"])
        assert not {"max_messages", "max_tokens", "temperature", "seed"} & {
            p["name"] for p in t["parameters"]}


@pytest.mark.req("R-1.6")
def test_rope_has_no_catalogue(cli):
    r = cli("run", "rope", "--catalogue")
    assert (r.code, r.error["error"]) == (5, "run.unsupported.no_live_capability")
