"""A part whose backend this build lacks (a slot under backends/) says so, from the files:
``info`` shows why, ``run`` answers at once (exit 5, before usage), ``backends build`` says
the same reason (exit 5), ``--catalogue`` keeps printing the plugin's committed catalogue;
and all of it lifts by itself once the backend's project lands. Every backend of this
build has its project, so the slot is made here: a copy of backends/ in which agentdyn's
project is a slot (``slotted``)."""

import json

import pytest
from conftest import ROOT, SLOT_SOURCE, SLOT_WHY, snapshot

SLOTTED = (SLOT_SOURCE,)
BACKEND = {SLOT_SOURCE: SLOT_SOURCE}
WHY = {SLOT_SOURCE: SLOT_WHY}


@pytest.fixture
def slot_env(slotted) -> dict[str, str]:
    return {"AGENTPROV_BACKENDS": str(slotted)}


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
                                                        source, args, slot_env):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    args = [str(script) if a == "SCRIPT" else str(corpora / "c") if a == "CORPUS" else a
            for a in args]
    r = cli("run", source, *args, cwd=cwd, env=slot_env)
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


@pytest.mark.parametrize("source", SLOTTED)
@pytest.mark.parametrize("args", [(), ("--dry-run",), ("--offline-check",),
                                  ("--dry-run", "--offline-check"),
                                  ("--defence-assets", "melon"), ("--allow-network",)])
def test_backends_build_of_a_backend_this_build_lacks(cli, home, source, args, slot_env):
    for name in {source, BACKEND[source]}:
        r = cli("backends", "build", name, *args, env=slot_env)
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
def test_the_catalogue_needs_no_backend(cli, home, source, slot_env):
    from agentprov_core.plugins import source_entry

    r = cli("run", source, "--catalogue", env=slot_env)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    committed = json.loads(source_entry(source).source.catalogue_file.read_text())
    assert doc["source"] == source
    assert doc["provenance"] == committed["provenance"]  # the plugin's committed catalogue
    assert snapshot(home) == {}


@pytest.mark.parametrize("source", SLOTTED)
def test_it_lifts_by_itself_once_the_project_lands(cli, script, corpora, slot_env, source):
    """The copy with the slot, then this checkout (the project in its place): info no
    longer says it, and a run gets as far as the environment (here unbuilt)."""
    doc = json.loads(cli("info", "--format", "json", env=slot_env).out)
    part = {p["name"]: p for p in doc["parts"]}[source]
    assert part["buildable"] is False and part["unbuildable"].startswith(WHY[source])
    doc = json.loads(cli("info", "--format", "json").out)
    part = {p["name"]: p for p in doc["parts"]}[source]
    assert (part["buildable"], part["unbuildable"]) == (True, None)
    line = [ln for ln in cli("info").out.splitlines() if ln.startswith(f"{source} ")][0]
    assert "no backend in this build" not in line
    r = cli("run", source, "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            "--llm-script", script, "--suite", "banking")
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err


def test_a_malformed_slot_file_is_named(cli, tmp_path):
    from agentprov_core.testing.fixtures import slotted_backends

    backends = slotted_backends(tmp_path / "backends", SLOT_SOURCE, "x")
    (backends / SLOT_SOURCE / "slot.toml").write_text(
        'format = "agentprov-backend-slot/0.1"\nwhy = ""\n')
    r = cli("run", SLOT_SOURCE, env={"AGENTPROV_BACKENDS": str(backends)})
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_file")
    assert f"{backends / SLOT_SOURCE / 'slot.toml'}:2: why must be a non-empty string" in (
        r.error["message"])


def test_every_slot_says_why_and_no_project_is_both(slotted):
    """This build has no slot (every backend has its project); a slot says why, with a
    README, and holds no project file."""
    from agentprov_core.backend.slots import PROJECT_FILES, SLOT_FILE, slot_why

    assert sorted((ROOT / "backends").rglob(SLOT_FILE)) == []
    for slot in sorted(p.parent for p in slotted.rglob(SLOT_FILE)):
        assert slot_why(slot) == SLOT_WHY and (slot / "README.md").is_file()
        assert not any((slot / f).exists() for f in PROJECT_FILES), slot
