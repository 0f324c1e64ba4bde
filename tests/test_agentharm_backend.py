"""The inspect-agentharm backend: its dataset, copied from a local directory by
``backends build agentharm --dataset DIR`` and never downloaded; the project's fixture of
it; the task files the marker hashes; and the worker's catalogue and plan check.

The fast tests check T0's side (the copy read, counted and refused before anything is
built); the slow ones build the real environment once per session (``agentharm_env``)."""

import json
import shutil

import pytest
from agentprov_agentharm.plugin import DATASET
from conftest import ROOT, snapshot

from agentprov_core.backend import datasets
from agentprov_core.testing import agentharm_fixture

TEST_PUBLIC = "benchmark/harmful_behaviors_test_public.json"


@pytest.fixture
def fixture_dir(tmp_path):
    d = tmp_path / "AgentHarm"
    agentharm_fixture.write(d)
    return d


def strip_marks(d):
    (d / datasets.FIXTURE_FILE).unlink()
    for p in d.rglob("*.json"):
        doc = json.loads(p.read_text())
        doc.pop(datasets.FIXTURE_KEY, None)
        p.write_text(json.dumps(doc))


# ----------------------------------------------------------------------------- fast: T0
@pytest.mark.req("R-25.10")
def test_the_fixture_is_counted_and_marked(fixture_dir):
    copy = datasets.read(DATASET, fixture_dir)
    assert copy.kind == "fixture" and copy.verified is False
    assert copy.counts == {f.path: f.records for f in DATASET.files}
    assert set(copy.counts.values()) == {176, 32}
    assert copy.fixture["file"] == datasets.FIXTURE_FILE
    assert sorted(copy.fixture["marked_files"]) == sorted(f.path for f in DATASET.files)
    assert datasets.FIXTURE_FILE in copy.files and "benchmark/chat_validation.json" in copy.files
    rec = copy.record()
    assert rec["kind"] == "fixture" and rec["verified_against_revision"] is False
    assert "publishes no per-file sha256 list" in rec["note"]
    assert rec["revision"] == "e23b3fe60a0da9037314b88e5ee3a0c054970dad"
    assert datasets.identity(rec)["kind"] == "fixture"


def test_either_mark_makes_a_fixture_and_none_a_copy(fixture_dir):
    (fixture_dir / datasets.FIXTURE_FILE).unlink()  # the files still carry the key
    assert datasets.read(DATASET, fixture_dir).kind == "fixture"
    strip_marks_dir = fixture_dir
    agentharm_fixture.write(strip_marks_dir)
    strip_marks(strip_marks_dir)
    copy = datasets.read(DATASET, strip_marks_dir)
    assert (copy.kind, copy.fixture, copy.verified) == ("copy", None, False)


def test_hidden_and_other_files_are_not_copied(fixture_dir):
    (fixture_dir / ".cache" / "huggingface").mkdir(parents=True)
    (fixture_dir / ".cache" / "huggingface" / "x.json").write_text("{}")
    (fixture_dir / "README.md").write_text("not json")
    files = datasets.read(DATASET, fixture_dir).files
    assert not any(p.startswith(".") or p == "README.md" for p in files)


def test_a_published_digest_list_is_enforced(fixture_dir):
    import msgspec

    from agentprov_core.errors import AgentprovError

    strip_marks(fixture_dir)
    good = datasets.read(DATASET, fixture_dir).files
    pinned = msgspec.structs.replace(DATASET, digests=good)
    assert datasets.read(pinned, fixture_dir).verified is True
    bad = msgspec.structs.replace(DATASET, digests=dict(good, **{TEST_PUBLIC: "0" * 64}))
    with pytest.raises(AgentprovError) as exc:
        datasets.read(bad, fixture_dir)
    assert exc.value.code == "cli.environment.dataset" and TEST_PUBLIC in exc.value.message


def test_the_environment_check_names_each_file(tmp_path, fixture_dir):
    env = tmp_path / "env"
    rec = datasets.provision(datasets.read(DATASET, fixture_dir), env)
    assert datasets.check_env(env, DATASET, rec) == []
    base = datasets.env_files(env, DATASET)
    (base / TEST_PUBLIC).write_text("{}")
    (base / "benchmark/chat_validation.json").unlink()
    (base / "benchmark/extra.json").write_text("{}")
    shown = "agentprov/datasets/agentharm/agentharm_dataset/AgentHarm"
    assert datasets.check_env(env, DATASET, rec) == [
        f"dataset file {shown}/benchmark/chat_validation.json is missing",
        f"dataset file {shown}/{TEST_PUBLIC} changed",
        f"dataset file {shown}/benchmark/extra.json was not in the build"]


def test_the_counted_files_are_the_declared_catalogue_splits():
    doc = json.loads((ROOT / "plugins/agentprov-agentharm/src/agentprov_agentharm/"
                      "catalogue.declared.json").read_text())
    declared = {(t["name"], s["name"]): s["samples"] for t in doc["tasks"] for s in t["splits"]}
    assert {(f.task, f.split): f.records for f in DATASET.files} == declared


def _refused(r, code, exit_code=3):
    assert (r.code, r.error["error"]) == (exit_code, code), r.err
    return r.error["message"]


@pytest.mark.req("R-25.2")
def test_a_build_without_a_dataset_is_refused_naming_the_option(cli, home):
    msg = _refused(cli("backends", "build", "agentharm"), "cli.environment.no_dataset")
    assert "--dataset DIR" in msg and "never downloaded" in msg and "e23b3fe6" in msg
    assert snapshot(home) == {}


@pytest.mark.req("R-25.2")
@pytest.mark.parametrize("damage", ["missing", "count", "json"])
def test_a_bad_copy_is_refused_naming_the_file(cli, home, fixture_dir, damage):
    target = fixture_dir / TEST_PUBLIC
    if damage == "missing":
        target.unlink()
    elif damage == "count":
        doc = json.loads(target.read_text())
        doc["behaviors"].pop()
        target.write_text(json.dumps(doc))
    else:
        target.write_text("{not json")
    msg = _refused(cli("backends", "build", "agentharm", "--dataset", fixture_dir),
                   "cli.environment.dataset")
    assert f"{fixture_dir}/{TEST_PUBLIC}" in msg or TEST_PUBLIC in msg
    assert {"missing": "is missing", "count": "holds 175 records, the catalogue counts 176",
            "json": "is not readable JSON"}[damage] in msg
    assert snapshot(home) == {}


def test_a_dataset_for_a_backend_that_takes_none(cli, home, fixture_dir):
    msg = _refused(cli("backends", "build", "agentdojo", "--dataset", fixture_dir),
                   "build.unsupported.dataset", 5)
    assert "inspect-agentharm" in msg
    assert snapshot(home) == {}


def test_the_dry_run_shows_the_fixture_and_writes_nothing(cli, home, fixture_dir):
    r = cli("backends", "build", "agentharm", "--dataset", fixture_dir, "--dry-run")
    assert r.code == 0, r.err
    assert "dataset agentharm: the project's FIXTURE" in r.out
    assert "counts benign_behaviors_test_public.json 176" in r.out
    assert "not verified against the pinned revision" in r.out
    assert "task files: inspect_evals/agentharm/**/*" in r.out
    no_data = cli("backends", "build", "agentharm", "--dry-run")
    assert "dataset: none given (--dataset DIR" in no_data.out
    assert snapshot(home) == {}


def test_offline_check_takes_no_dataset(cli, home, fixture_dir):
    _refused(cli("backends", "build", "agentharm", "--offline-check", "--dataset", fixture_dir),
             "cli.usage.exclusive", 2)


# ------------------------------------------------------------------- slow: the real build
def _cli(env, *args):
    import subprocess
    import sys

    from conftest import Result, child_env

    e = child_env()
    e["AGENTPROV_HOME"] = str(env.home)
    e["AGENTPROV_ERROR_FORMAT"] = "json"
    p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                       capture_output=True, text=True, env=e, cwd=ROOT, timeout=600)
    return Result(p.returncode, p.stdout, p.stderr)


@pytest.mark.slow
@pytest.mark.req("R-25.1", "R-25.2")
def test_the_fixture_builds_and_the_marker_records_it(agentharm_env):
    from agentprov_core.backend import marker

    m = marker.read(agentharm_env.env_dir)
    assert m.environment_id.startswith("inspect-agentharm-")
    lock = (ROOT / "backends/inspect/envs/agentharm/uv.lock").read_bytes()
    import hashlib

    assert m.environment_id == f"inspect-agentharm-{hashlib.sha256(lock).hexdigest()[:8]}"
    assert m.distributions["inspect-ai"]["version"] == "0.3.263"
    assert m.distributions["inspect-evals"]["version"] == "0.20.0"
    assert "openai" in m.distributions
    assert m.hello["served"]["agentharm"]["distribution"] == "agentprov-worker-agentharm"
    # the environment was built beside its place and renamed into it: its console scripts
    # still run (a relocatable venv), e.g. Inspect's own CLI for a user who reads a log
    import subprocess

    got = subprocess.run([str(agentharm_env.env_dir / "bin" / "inspect"), "--version"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                                             "HOME": str(agentharm_env.home)})
    assert (got.returncode, got.stdout.strip()) == (0, "0.3.263"), got.stderr
    # the task files of inspect_evals' agentharm, each hashed (the spec's 196)
    assert len(m.task_files) == 196
    assert all("/inspect_evals/agentharm/" in k for k in m.task_files)
    d = m.dataset
    assert (d["kind"], d["verified_against_revision"]) == ("fixture", False)
    fixture = agentharm_env.home / "fixture"
    assert d["files"] == {p.relative_to(fixture).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                          for p in fixture.rglob("*.json")}
    assert d["counts"][TEST_PUBLIC] == 176
    placed = agentharm_env.env_dir / "agentprov/datasets/agentharm/agentharm_dataset/AgentHarm"
    assert (placed / TEST_PUBLIC).read_bytes() == (fixture / TEST_PUBLIC).read_bytes()
    r = _cli(agentharm_env, "backends", "build", "agentharm", "--offline-check")
    assert r.code == 0, r.err
    assert "task files (every file re-hashed): 196" in r.out
    assert "dataset agentharm (fixture; every file re-hashed): 7 file(s)" in r.out
    again = _cli(agentharm_env, "backends", "build", "agentharm")  # kept: no --dataset needed
    assert again.code == 0 and "already built" in again.out, again.err


@pytest.mark.slow
@pytest.mark.req("R-25.9", "R-25.10", "R-25.11", "R-25.12")
def test_the_catalogue_is_the_workers(agentharm_env):
    r = _cli(agentharm_env, "run", "agentharm", "--catalogue")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["provenance"]["kind"] == "worker"
    assert doc["provenance"]["packages"] == {"inspect-ai": "0.3.263", "inspect-evals": "0.20.0"}
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert list(tasks) == ["inspect_evals/agentharm", "inspect_evals/agentharm_benign"]
    for t in tasks.values():
        assert {s["name"]: s["samples"] for s in t["splits"]} == {"test_public": 176, "val": 32}
        assert t["fixed"] == {"max_messages": 20, "max_tokens": 4096, "seed": 0,
                              "task_version": 8, "temperature": "0.0"}
        assert t["judge_roles"] == ["refusal_judge", "semantic_judge"]
    params = {p["name"]: p for p in tasks["inspect_evals/agentharm"]["parameters"]}
    assert params["n_irrelevant_tools"]["minimum"] == 0 and params["n_irrelevant_tools"]["maximum"] == 64
    assert params["agent"]["choices"] == ["default", "refusal"]
    assert params["tool_choice"]["choices"] == ["forced_first", "auto", "none"]
    assert "chat_dataset" in params
    assert "chat_dataset" not in {p["name"] for p in tasks["inspect_evals/agentharm_benign"]["parameters"]}
    # what T0 shows before a build has the shape the worker serves
    declared = json.loads((ROOT / "plugins/agentprov-agentharm/src/agentprov_agentharm/"
                           "catalogue.declared.json").read_text())
    assert declared["provenance"]["kind"] == "declared"
    assert declared["tasks"] == doc["tasks"]


def _dry(env, samples, *extra):
    return _cli(env, "run", "agentharm", "--dry-run", "--corpus", env.home / "corpora" / "ah",
                "--campaign", "ah", "--task", "inspect_evals/agentharm", "--samples", samples,
                "--message-limit", "10", "--token-limit", "20000", "--time-limit", "600",
                "--judge", "refusal_judge=m", "--judge", "semantic_judge=m",
                "--llm-script", env.home / "script.json", *extra)


@pytest.mark.slow
def test_the_worker_refuses_unknown_sample_ids(agentharm_env):
    (agentharm_env.home / "script.json").write_text("[]")
    ok = _dry(agentharm_env, "45-1,46-2", "--split", "val")
    assert ok.code == 0, ok.err
    assert "1 cell(s)" in ok.out
    bad = _dry(agentharm_env, "1-1,45-1", "--split", "val")  # 1-1 is a test_public id
    assert (bad.code, bad.error["error"]) == (2, "cli.usage.worker_plan"), bad.err
    assert "no sample '1-1' in inspect_evals/agentharm split val" in bad.error["message"]
    assert "45-1" not in bad.error["message"]


@pytest.mark.slow
def test_a_dry_run_checks_the_dataset_against_the_marker(agentharm_env):
    """Step 5 re-hashes the environment's dataset before the worker serves the plan."""
    (agentharm_env.home / "script.json").write_text("[]")
    target = (agentharm_env.env_dir / "agentprov/datasets/agentharm/agentharm_dataset/AgentHarm"
              / "benchmark/harmful_behaviors_validation.json")
    saved = target.read_bytes()
    try:
        target.write_bytes(saved + b" ")
        r = _dry(agentharm_env, "45-1", "--split", "val")
        assert (r.code, r.error["error"]) == (3, "cli.environment.identity"), r.err
        assert ("dataset file agentprov/datasets/agentharm/agentharm_dataset/AgentHarm/"
                "benchmark/harmful_behaviors_validation.json changed") in r.error["message"]
    finally:
        target.write_bytes(saved)
    assert _dry(agentharm_env, "45-1", "--split", "val").code == 0


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["altered", "missing", "added", "task file",
                                    "task file added"])
def test_offline_check_names_a_damaged_file(agentharm_env, damage):
    base = agentharm_env.env_dir / "agentprov/datasets/agentharm/agentharm_dataset/AgentHarm"
    task_dir = next(agentharm_env.env_dir.glob("lib/python3*/site-packages/inspect_evals/agentharm"))
    target = {"task file": task_dir / "agentharm.py",
              "task file added": task_dir / "benchmark" / "added_tool.py",
              "added": base / "benchmark" / "added.json"}.get(damage, base / TEST_PUBLIC)
    saved = target.read_bytes() if target.exists() else None
    try:
        if damage == "missing":
            target.unlink()
        else:
            target.write_bytes((saved or b"") + b"\n")
        r = _cli(agentharm_env, "backends", "build", "agentharm", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check"), r.err
        rel = target.relative_to(agentharm_env.env_dir).as_posix()
        data = rel.split("AgentHarm/", 1)[-1]
        want = {"altered": f"dataset file {rel} changed", "missing": f"dataset file {rel} is missing",
                "added": f"dataset file {rel} was not in the build",
                # a file RECORD lists is named by the RECORD check first
                "task file": "inspect-evals: inspect_evals/agentharm/agentharm.py differs from "
                             "its RECORD hash",
                # one it does not list, by the task files' own check
                "task file added": f"task file {rel} was not in the build"}[damage]
        assert want in r.error["message"], data
    finally:
        if saved is None:
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(saved)
    assert _cli(agentharm_env, "backends", "build", "agentharm", "--offline-check").code == 0


@pytest.mark.slow
def test_a_copy_without_the_fixture_marks_builds_as_a_copy(agentharm_env, tmp_path):
    """A second home, so the session's environment is left as it is: the same lock with a
    copy whose marks are stripped builds as kind "copy", never as the fixture."""
    from conftest import BuiltEnv

    other = BuiltEnv(tmp_path / "home", agentharm_env.env_id, tmp_path / "home" / "envs")
    data = tmp_path / "copy"
    shutil.copytree(agentharm_env.home / "fixture", data)
    strip_marks(data)
    r = _cli(other, "backends", "build", "agentharm", "--dataset", data)
    assert r.code == 0, r.err
    assert "a local copy of huggingface:ai-safety-institute/AgentHarm" in r.out
    from agentprov_core.backend import marker

    m = marker.read(tmp_path / "home" / "envs" / agentharm_env.env_id)
    assert m.dataset["kind"] == "copy" and m.dataset["fixture"] is None
    first = marker.read(agentharm_env.env_dir)
    assert m.identity_sha256 != first.identity_sha256  # the fixture's mark is in the identity


def test_a_fixture_marks_the_corpus_manifest(fixture_dir):
    """What ``run/manifest.py`` records of the environment's dataset: a fixture's corpus is
    test_only and synthetic, whatever its model; a copy's is not forced either way."""
    fixture = datasets.read(DATASET, fixture_dir).record()
    fields = datasets.manifest_fields(fixture)
    assert fields == {"dataset": datasets.identity(fixture), "test_only": True, "synthetic": True}
    assert fields["dataset"]["kind"] == "fixture"
    strip_marks(fixture_dir)
    copy = datasets.read(DATASET, fixture_dir).record()
    assert datasets.manifest_fields(copy) == {"dataset": datasets.identity(copy)}
    assert datasets.manifest_fields(None) == {}
