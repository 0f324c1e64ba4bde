"""Provisioned defences end to end, with the fixture defence the test makes
(`fixture_defence.py`): the real AgentDojo environment built from a copy of backends/ whose
defence registry pins the fixture's files, `--defence-source` for both assets, the marker
and `--offline-check`, a scripted cell that runs the provisioned code with its weights
loaded with the hub offline, and a rebuild that drops an asset (slow: two uv builds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import fixture_defence as fx
import pytest
from conftest import ROOT, Result, child_env, snapshot
from test_campaign import executions, ledger, raw

pytestmark = pytest.mark.slow
LIVE_DEMO = ROOT / "examples" / "scripts" / "live-demo.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("defassets")
    registry = tmp / "registry"
    registry.mkdir()
    for f in (ROOT / "registry").iterdir():
        if f.is_dir():  # presets/
            shutil.copytree(f, registry / f.name)
        else:
            shutil.copyfile(f.resolve(), registry / f.name)
    fixture = fx.make(tmp / "trees", registry)
    backends = fx.backends_with(registry / "defences.toml", tmp / "backends")
    home = tmp / "home"
    home.mkdir()
    env = {"AGENTPROV_HOME": str(home), "AGENTPROV_REGISTRY": str(registry),
           "AGENTPROV_BACKENDS": str(backends)}

    def cli(*args: str, json_errors: bool = True) -> Result:
        e = child_env() | env
        if json_errors:
            e["AGENTPROV_ERROR_FORMAT"] = "json"
        p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                           capture_output=True, text=True, env=e, cwd=ROOT, timeout=900)
        return Result(p.returncode, p.stdout, p.stderr)

    first = cli("backends", "build", "agentdojo", "--allow-network", "--defence-assets",
                "fixture_code,fixture_weights", "--defence-source", fixture.source(),
                "--defence-source", f"fixture_weights={fixture.weights}")
    assert first.code == 0, first.out + first.err
    env_dir = Path(first.out.split(" built at ")[1].split(" (")[0])
    return fixture, home, env_dir, cli, first


@pytest.mark.req("R-6.11", "R-6.12")
def test_the_build_provisions_the_pinned_files_and_the_marker_records_them(built):
    fixture, home, env_dir, cli, first = built
    lines = first.out.splitlines()
    assert lines[1].startswith("  defence asset fixture_code: 2 file(s) verified (sha256 and "
                               "git blob id), digest ")
    m = json.loads((env_dir / "AGENTPROV_ENV.json").read_text())
    assert sorted(m["defence_assets"]) == ["fixture_code", "fixture_weights"]
    code = m["defence_assets"]["fixture_code"]
    assert code["kind"] == "code" and code["provisioned_from"] == ["--defence-source"]
    assert code["origin"] == {"kind": "git", "url": str(fixture.code),
                              "commit": fixture.commit, "repository": None, "revision": None,
                              "endpoint": None}
    assert {f["path"]: f["git_blob"] for f in code["files"]} == {
        n: fx.blob_of(fixture.code / n) for n in fx.CODE_FILES}
    base = env_dir / "agentprov" / "defence-assets"
    assert (base / "fixture_code" / "files" / "agentprov_fixture_defence.py").read_text() \
        == fx.MODULE
    hub = base / "fixture_weights" / "hub" / "models--fixture--tiny-classifier"
    assert (hub / "refs" / "main").read_text() == fx.WEIGHTS_REVISION
    assert (hub / "snapshots" / fx.WEIGHTS_REVISION / "weights.txt").read_text() \
        == fx.WEIGHTS_FILES["weights.txt"]
    # what came from the local trees is kept in the fetch cache for later rebuilds
    cache = home / "cache" / "defence-assets"
    assert (cache / "fixture_code" / fixture.commit / "README.md").is_file()
    assert (cache / "fixture_weights" / fx.WEIGHTS_REVISION / "config.json").is_file()
    check = cli("backends", "build", "agentdojo", "--offline-check")
    assert check.code == 0, check.err
    assert check.out.splitlines()[1] == ("  defence assets (every file re-hashed): fixture_code "
                                         "2 file(s), fixture_weights 2 file(s)")
    target = base / "fixture_code" / "files" / "README.md"
    original = target.read_bytes()
    try:
        target.write_bytes(original + b"edited\n")
        bad = cli("backends", "build", "agentdojo", "--offline-check")
        assert (bad.code, bad.error["error"]) == (3, "cli.environment.offline_check")
        assert "defence asset fixture_code: README.md differs from its pin" in \
            bad.error["message"]
    finally:
        target.write_bytes(original)
    assert cli("backends", "build", "agentdojo", "--offline-check").code == 0
    again = cli("backends", "build", "agentdojo")  # no option: the assets are kept
    assert again.code == 0 and " already built at " in again.out, again.err
    # naming the assets the environment holds needs neither a tree nor the cache
    shutil.move(cache, home / "cache-aside")
    try:
        same = cli("backends", "build", "agentdojo", "--defence-assets",
                   "fixture_code,fixture_weights")
        assert same.code == 0 and " already built at " in same.out, same.err
    finally:
        shutil.move(home / "cache-aside", cache)


@pytest.mark.req("R-22.26", "R-22.18")
def test_a_scripted_cell_runs_the_provisioned_code_with_its_weights_offline(built, tmp_path):
    fixture, home, env_dir, cli, _ = built
    corpus = tmp_path / "fx"
    r = cli("run", "agentdojo", "--corpus", corpus, "--campaign", "fx", "--suite", "banking",
            "--user-tasks", "0", "--benign", "only", "--defence", "fixture_defence",
            "--llm-script", LIVE_DEMO, json_errors=False)
    assert r.code == 0, r.out + r.err
    (entry,) = ledger(corpus)
    assert (entry["status"], entry["defence"], entry["conclusive"]) == (
        "complete", "fixture_defence", True)
    records = [json.loads(x) for x in raw(corpus, entry["capture_sha256"]).splitlines()]
    declared = records[0]["declared_instrumentation"]
    digests = json.loads((env_dir / "AGENTPROV_ENV.json").read_text())["defence_assets"]
    assert (f"defence_code_provisioned@1 asset: fixture_code (sha256 "
            f"{digests['fixture_code']['sha256']}; agentprov_fixture_defence.build_pipeline)"
            in declared)
    assert (f"defence_weights_offline@1 asset: fixture_weights (sha256 "
            f"{digests['fixture_weights']['sha256']}; HF_HUB_OFFLINE=1)" in declared)
    assert ("defence_port@1 code: fixture_defence is agentprov's port, not the authors' "
            "released implementation" in declared)
    notes = {r["code"]: r for r in records if r["kind"] == "note"}
    prov = notes["defence.provisioned"]
    assert [a["asset"] for a in prov["assets"]] == ["fixture_code", "fixture_weights"]
    assert prov["environment"]["HF_HUB_OFFLINE"] == "1" and prov["port"] is True
    assert "not the authors' released implementation" in prov["text"]
    installed = notes["defence.installed"]  # under the defence's actor, named as AgentDojo
    assert installed["actor"] == "defense:fixture_defence"  # names a defended pipeline
    assert installed["pipeline_name"] == "scripted-fixture_defence"
    assert sorted(f["sha256"] for f in installed["code_files"]) == sorted(
        f["sha256"] for f in digests["fixture_code"]["files"])
    assert sorted(f["sha256"] for f in installed["weights"]) == sorted(
        f["sha256"] for f in digests["fixture_weights"]["files"])
    loaded = notes["defence.fixture_loaded"]  # the factory ran, offline, with its weights
    assert loaded["actor"] == "defense:fixture_defence"
    assert (loaded["hf_hub_offline"], loaded["weights"]) == ("1", "fixture weights 0.5")
    assert loaded["assets"] == ["fixture_code", "fixture_weights"]
    # the provisioned pipeline is the one the model talked to: the tool result it sent back
    # carries the fixture's mark
    bodies = [r["body"] for r in records if r["kind"] == "wire_request"]
    assert len(bodies) == 3 and fx.MARK not in json.dumps(bodies[0])
    assert fx.MARK in json.dumps(bodies[1])
    (row,) = executions(corpus)
    assert (row["status"], row["live_vs_native"]) == ("ok", "agree")
    aer = json.loads((corpus.with_name("fx.partial") / "executions" / row["execution_id"]
                      / "aer.json").read_text())
    assert aer["header"]["task"]["defense_id"] == "fixture_defence"
    assert [(x["id"], x["kind"]) for x in aer["header"]["actors"]] == [
        ("defense:fixture_defence", "defense")]
    assert set(declared) <= set(aer["header"]["instrumentation"])


@pytest.mark.req("R-22.18", "R-6.11")
def test_assets_change_only_by_a_rebuild_from_the_cache(built, tmp_path):
    """Naming other assets replaces the environment with one that holds just those (a
    rebuild in a new directory, never an edit), provisioned from the fetch cache with no
    source tree; the defence that needs the dropped asset is then refused by T0."""
    fixture, home, env_dir, cli, _ = built
    dry = cli("backends", "build", "agentdojo", "--dry-run", "--defence-assets", "fixture_code")
    assert dry.code == 0, dry.err
    *_, replaced, project, pins, _host = dry.out.splitlines()
    assert replaced == (
        "  the environment exists with defence assets fixture_code, fixture_weights: the build "
        "replaces it whole (a rebuild in a new directory, never an edit)")
    assert project.startswith("  project: ") and project.endswith(
        "/backends/agentdojo (from agentprov-agentdojo 0.1.0; worker agentprov-worker-agentdojo)")
    assert pins.startswith("  pins: agentdojo 0.1.35 ")
    inode = env_dir.stat().st_ino
    r = cli("backends", "build", "agentdojo", "--defence-assets", "fixture_code")
    assert r.code == 0 and " built at " in r.out, r.err
    assert env_dir.stat().st_ino != inode
    m = json.loads((env_dir / "AGENTPROV_ENV.json").read_text())
    assert sorted(m["defence_assets"]) == ["fixture_code"]
    assert m["defence_assets"]["fixture_code"]["provisioned_from"] == ["cache"]
    assert sorted(p.name for p in (env_dir / "agentprov" / "defence-assets").iterdir()) == [
        "fixture_code"]
    assert cli("backends", "build", "agentdojo", "--offline-check").code == 0
    before = snapshot(home / "envs")
    refused = cli("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "c", "--campaign",
                  "c", "--suite", "banking", "--user-tasks", "0", "--defence",
                  "fixture_defence", "--llm-script", LIVE_DEMO)
    assert (refused.code, refused.error["error"]) == (3, "cli.environment.defence_asset")
    assert refused.error["message"].endswith(
        "defence fixture_defence: its pinned file config.json is not provisioned (agentprov "
        "backends build agentdojo --defence-assets fixture_weights)")
    assert not (tmp_path / "c.partial").exists() and not (tmp_path / "c").exists()
    assert snapshot(home / "envs") == before
