"""A part whose backend this build lacks (a slot under backends/) says so, from the files:
``info`` shows why, ``run`` answers at once (exit 5, before usage), ``backends build`` says
the same reason (exit 5), ``--catalogue`` keeps printing the plugin's committed catalogue;
and all of it lifts by itself once the backend's project lands."""

import json
import shutil

import pytest
from conftest import ROOT, SLOTTED, snapshot

BACKEND = {"autodojo": "autodojo"}
WHY = {"autodojo": "the AutoDojo fork pinned at aa458794 is not public"}


def nothing_written(home, corpora, cwd):
    assert snapshot(home) == {}
    assert list(corpora.iterdir()) == []
    assert list(cwd.iterdir()) == []


@pytest.mark.req("R-29.1", "R-16.2")
@pytest.mark.parametrize("source", SLOTTED)
@pytest.mark.parametrize("args", [
    (),                                    # no option at all: not a usage error
    ("--plan-json",),                      # a usage error (no --dry-run) comes later
    ("--dry-run", "--llm-script", "SCRIPT", "--corpus", "CORPUS", "--campaign", "c"),
    ("--model", "openrouter", "--model-id", "m", "--corpus", "CORPUS", "--campaign", "c"),
])
def test_run_of_a_source_whose_backend_this_build_lacks(cli, home, corpora, script, tmp_path,
                                                        source, args):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    args = [str(script) if a == "SCRIPT" else str(corpora / "c") if a == "CORPUS" else a
            for a in args]
    r = cli("run", source, *args, cwd=cwd)
    assert (r.code, r.error["error"], r.error["exit"]) == (
        5, "run.unsupported.no_live_capability", 5), r.err
    lines = r.error["message"].splitlines()
    assert lines[0] == f"agentprov: cannot run '{source}': no live capability"
    assert lines[1].startswith(f"  {source} has no backend in this build: {WHY[source]}")
    assert lines[-1] == "Nothing was started and nothing was written."
    assert "backends build" not in r.err  # no advice that cannot succeed
    assert r.out == ""
    nothing_written(home, corpora, cwd)


@pytest.mark.req("R-1.6")
def test_rope_answers_before_usage(cli, home):
    r = cli("run", "rope")
    assert (r.code, r.error["error"]) == (5, "run.unsupported.no_live_capability")
    assert r.error["message"].splitlines()[1] == "  rope has no backend in this build."
    assert snapshot(home) == {}


@pytest.mark.parametrize("source", [s for s in SLOTTED if s != "autodojo"])  # autodojo
# first needs its fork in the fetch cache (tests/test_autodojo_cache.py)
@pytest.mark.parametrize("args", [(), ("--dry-run",), ("--offline-check",),
                                  ("--dry-run", "--offline-check"),
                                  ("--defence-assets", "melon"), ("--allow-network",)])
def test_backends_build_of_a_backend_this_build_lacks(cli, home, source, args):
    for name in {source, BACKEND[source]}:
        r = cli("backends", "build", name, *args)
        assert (r.code, r.error["error"], r.error["exit"]) == (
            5, "build.unsupported.no_backend", 5), r.err
        assert r.error["message"].startswith(
            f"agentprov: error [build.unsupported.no_backend]: backend {BACKEND[source]} "
            f"cannot be built in this build: {WHY[source]}")
        assert "uv" not in r.error["message"].split(", so ")[0]
        assert r.out == ""
    assert snapshot(home) == {}


@pytest.mark.req("R-7.11")
@pytest.mark.parametrize("source", SLOTTED)
def test_the_catalogue_needs_no_backend(cli, home, source):
    r = cli("run", source, "--catalogue")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["source"] == source and doc["provenance"]["kind"] == "declared"
    assert snapshot(home) == {}


@pytest.mark.parametrize("source", SLOTTED)
def test_it_lifts_by_itself_once_the_project_lands(cli, script, corpora, landed_env, source):
    """The same checkout with the project in the slot: info no longer says it, and a run
    gets as far as the environment (here unbuilt)."""
    doc = json.loads(cli("info", "--format", "json", env=landed_env).out)
    part = {p["name"]: p for p in doc["parts"]}[source]
    assert (part["buildable"], part["unbuildable"]) == (True, None)
    line = [ln for ln in cli("info", env=landed_env).out.splitlines()
            if ln.startswith(f"{source} ")][0]
    assert "no backend in this build" not in line
    r = cli("run", source, "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            "--llm-script", script, "--suite", "banking", env=landed_env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err


def test_a_malformed_slot_file_is_named(cli, tmp_path):
    backends = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", backends, ignore=shutil.ignore_patterns("__pycache__"))
    (backends / "autodojo" / "slot.toml").write_text(
        'format = "agentprov-backend-slot/0.1"\nwhy = ""\n')
    r = cli("run", "autodojo", env={"AGENTPROV_BACKENDS": str(backends)})
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_file")
    assert f"{backends / 'autodojo' / 'slot.toml'}:2: why must be a non-empty string" in (
        r.error["message"])


def test_every_slot_says_why_and_no_project_is_both():
    from agentprov_core.backend.slots import PROJECT_FILES, SLOT_FILE, slot_why

    slots = sorted(p.parent for p in (ROOT / "backends").rglob(SLOT_FILE))
    assert [s.relative_to(ROOT / "backends").as_posix() for s in slots] == ["autodojo"]
    for slot in slots:
        assert slot_why(slot) and (slot / "README.md").is_file()
        assert not any((slot / f).exists() for f in PROJECT_FILES), slot
