"""The AutoDojo backend, built for real from a fixture fork (the real fork at aa458794 is not
public): a git repository made here whose tree is agentdojo 0.1.35's released code laid out
as the fork's, with the fork's three attacks as stand-ins and an attack cache file
(:mod:`agentprov_core.testing.autodojo_fork`), pinned by the test-only override
AGENTPROV_TEST_AUTODOJO_PIN. ``backends build autodojo --source-repo FORK`` builds it as
AgentDyn is built (fetch cache, git archive, ``uv sync --locked``); the environment is named
from the fixture's commit and says it is a test override; ``--offline-check`` passes; the
worker serves the catalogue; an attack-cache dry run verifies against the same fetch cache;
a fork whose pyproject.toml the lock does not record is refused, leaving nothing behind.
The slow tests share one build (``autodojo_env``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, BuiltEnv, Result, child_env, snapshot

from agentprov_core.backend.autodojofork import PIN_OVERRIDE
from agentprov_core.testing import autodojo_fork
from agentprov_core.testing.gitrepo import git

pytestmark = pytest.mark.slow

ATTACKS_FILE = "src/agentdojo/attacks/fork_fixture_attacks.py"


def run_cli(home: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    e = child_env() | {"AGENTPROV_HOME": str(home), "AGENTPROV_ERROR_FORMAT": "json"}
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                       capture_output=True, text=True, env=e, cwd=ROOT, timeout=900)
    return Result(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="session")
def agentdojo_wheel(tmp_path_factory) -> Path:
    """agentdojo 0.1.35's wheel, unpacked by uv (hash-checked against
    backends/agentdojo/uv.lock; from uv's cache, else PyPI)."""
    from agentprov_core.backend.build import uv_binary
    from agentprov_core.backend.interpreters import find_python312

    return autodojo_fork.install_wheel(uv_binary(), find_python312(),
                                       ROOT / "backends/agentdojo/uv.lock",
                                       tmp_path_factory.mktemp("agentdojo-wheel") / "w")


@pytest.fixture(scope="session")
def fixture_fork(tmp_path_factory, agentdojo_wheel) -> tuple[Path, str]:
    src = tmp_path_factory.mktemp("autodojo-fork") / "fork"
    return src, autodojo_fork.make_fork(src, agentdojo_wheel)


@pytest.fixture(scope="session")
def autodojo_env(tmp_path_factory, fixture_fork) -> BuiltEnv:
    """``agentprov backends build autodojo --source-repo FORK --allow-network`` under the
    override (uv downloads only what its cache lacks)."""
    src, commit = fixture_fork
    home = tmp_path_factory.mktemp("e2e-autodojo-home")
    r = run_cli(home, "backends", "build", "autodojo", "--source-repo", src, "--allow-network",
                env={PIN_OVERRIDE: commit})
    assert r.code == 0, r.out + r.err
    env_dir = Path(r.out.split(" built at ")[1].split(" (")[0])
    assert (f"upstream: autodojo at {commit} (tree " in r.out
            and f"the test-only override {PIN_OVERRIDE}, not the pinned commit" in r.out)
    return BuiltEnv(home, env_dir.name, env_dir)


def pinned(env: BuiltEnv, fork: tuple[Path, str], *args: str) -> Result:
    return run_cli(env.home, *args, env={PIN_OVERRIDE: fork[1]})


@pytest.mark.req("R-5.1", "R-5.2", "R-6.2")
def test_the_build_installs_the_forks_commit(autodojo_env, fixture_fork):
    from agentprov_core.backend import marker

    src, commit = fixture_fork
    env = autodojo_env
    assert env.env_id == f"autodojo-{commit[:8]}"  # named from the override's commit
    m = marker.read(env.env_dir)
    assert m.backend == "autodojo" and m.pinned_commit == commit
    tree = git(src, "rev-parse", "HEAD^{tree}")
    assert m.upstream == {"repository": "autodojo", "commit": commit, "tree": tree,
                          "paths": ["src", "pyproject.toml", "LICENSE", "README.md"],
                          "licence": "not stated: the fork is not public",
                          "fetched_from": str(src), "test_override": PIN_OVERRIDE}
    rec = json.loads((env.env_dir / "agentprov/upstream.json").read_text())
    assert rec["test_override"] == PIN_OVERRIDE and rec["commit"] == commit
    assert "agentprov/upstream.json" in m.guarded
    # the fork's code, which calls itself agentdojo 0.1.35, and the worker package
    assert m.distributions["agentdojo"]["version"] == "0.1.35"
    assert m.hello["served"]["autodojo"]["distribution"] == "agentprov-worker-autodojo"
    sp = next(env.env_dir.glob("lib/python3.12/site-packages"))
    assert (sp / "agentdojo/attacks/fork_fixture_attacks.py").read_bytes() == (
        (src / ATTACKS_FILE).read_bytes())
    # nothing is left of the build directory, and the checkout holds no upstream/
    assert [p.name for p in (env.home / "envs").iterdir() if p.name.startswith(".")] == []
    assert not (ROOT / "backends/autodojo/upstream").exists()


@pytest.mark.req("R-6.8", "R-6.9")
def test_offline_check_passes(autodojo_env, fixture_fork):
    r = pinned(autodojo_env, fixture_fork, "backends", "build", "autodojo", "--offline-check")
    assert r.code == 0, r.err
    assert f"{autodojo_env.env_id} verified" in r.out
    assert (f"upstream: autodojo at {fixture_fork[1]}" in r.out
            and f"the test-only override {PIN_OVERRIDE}, not the pinned commit" in r.out)
    # without the override the real pin is asked for, whose environment is not built
    r = run_cli(autodojo_env.home, "backends", "build", "autodojo", "--offline-check")
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err
    assert "autodojo-aa458794" in r.error["message"]


@pytest.mark.req("R-7.11", "R-7.13", "R-23.3", "R-23.12")
def test_the_catalogue_comes_from_the_worker(autodojo_env, fixture_fork):
    r = pinned(autodojo_env, fixture_fork, "run", "autodojo", "--catalogue")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["provenance"]["kind"] == "worker"
    worker = json.loads((autodojo_env.env_dir / "agentprov/catalogue-autodojo.json").read_text())
    assert {k: v for k, v in doc.items() if k not in ("provenance", "defences")} == {
        k: v for k, v in worker.items() if k not in ("provenance", "defences")}
    attacks = {a["name"]: a for a in doc["attacks"]}
    assert attacks["autodojo"]["needs"] == ["--autodojo-cache", "--autodojo-variant"]
    assert sorted(n for n, a in attacks.items() if a["refused"]) == ["ours",
                                                                    "variant_generation"]
    assert doc["defences"] == []  # every defence refused on AutoDojo
    # the fixture is agentdojo 0.1.35's code: its suites, not the fork's 17
    version = doc["default_benchmark_version"]
    assert [s["name"] for s in doc["suites"] if s["benchmark_version"] == version] == [
        "workspace", "travel", "banking", "slack"]
    # the real pin, with no environment built: the plugin's declared catalogue, labelled so
    r = run_cli(autodojo_env.home, "run", "autodojo", "--catalogue")
    declared = json.loads(r.out)
    assert declared["provenance"]["kind"] == "declared" and len(declared["suites"]) == 17


@pytest.mark.req("R-23.7", "R-23.8", "R-16.5")
def test_an_attack_cache_dry_run_verifies_against_the_fetch_cache(autodojo_env, fixture_fork,
                                                                  tmp_path):
    src, commit = fixture_fork
    cache = tmp_path / "my-cache.json"
    cache.write_bytes((src / autodojo_fork.CACHE_PATH).read_bytes())
    script = tmp_path / "script.json"
    script.write_text("[]")
    before = snapshot(autodojo_env.home / "fetch")
    r = pinned(autodojo_env, fixture_fork, "run", "autodojo", "--dry-run", "--corpus",
               tmp_path / "au", "--campaign", "au", "--suite", "banking", "--user-tasks", "1",
               "--attack", "autodojo", "--injection-tasks", "0", "--autodojo-cache", cache,
               "--autodojo-variant", "0", "--llm-script", script)
    assert r.code == 0, r.err
    blob = git(src, "hash-object", autodojo_fork.CACHE_PATH)
    assert (f"attack cache verified: blob {blob[:12]} is {autodojo_fork.CACHE_PATH} of "
            f"autodojo@{commit[:8]}") in r.err.splitlines()
    assert r.out.splitlines()[0].endswith(
        f": 2 cell(s) x 1 repeat(s); corpus autodojo-live-au; backend {autodojo_env.env_id}")
    assert snapshot(autodojo_env.home / "fetch") == before  # read, never written
    assert not (tmp_path / "au").exists() and not (tmp_path / "au.partial").exists()


def test_a_fork_whose_pyproject_the_lock_does_not_record_is_refused(agentdojo_wheel,
                                                                    tmp_path):
    """The fork declares a dependency agentdojo 0.1.35 does not: uv sync --locked refuses,
    and agentprov says so (exit 3, the commit and how to re-lock), with no environment and
    no build directory left."""
    tree = autodojo_fork.tree_of(agentdojo_wheel)
    pyproject = tree["pyproject.toml"].replace(
        b'    "typing-extensions>=4.11.0",\n',
        b'    "typing-extensions>=4.11.0",\n    "json_repair>=0.55.1",\n')
    assert pyproject != tree["pyproject.toml"]
    src = tmp_path / "other-fork"
    commit = autodojo_fork.make_fork(src, agentdojo_wheel, pyproject=pyproject)
    home = tmp_path / "home"
    r = run_cli(home, "backends", "build", "autodojo", "--source-repo", src,
                env={PIN_OVERRIDE: commit})
    assert (r.code, r.error["error"]) == (3, "cli.environment.upstream_lock"), r.err
    msg = r.error["message"]
    assert (f"backends/autodojo/uv.lock does not record what the pyproject.toml of autodojo "
            f"at commit {commit} declares") in msg
    assert "needs to be updated" in msg and "To update the lockfile" not in msg
    assert ("Re-lock the backend project autodojo with that commit extracted into "
            "backends/autodojo/upstream/ (backends/autodojo/README.md)") in msg
    assert "Traceback" not in r.err
    # nothing built, no build or source directory left: only the environment's lock file
    assert [p.name for p in (home / "envs").iterdir()] == [f"autodojo-{commit[:8]}.lock"]
    assert not (ROOT / "backends/autodojo/upstream").exists()


@pytest.mark.req("R-2.7", "R-2.8")
def test_a_scripted_cell_on_it_is_test_only_and_names_the_override(autodojo_env, fixture_fork,
                                                                  tmp_path):
    """A campaign on the environment built from the fixture's commit: its capture header
    names that commit, and the corpus names the override (``live.test_overrides``)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"content": "I have looked into it and changed nothing."}]))
    corpus = tmp_path / "au"
    r = pinned(autodojo_env, fixture_fork, "run", "autodojo", "--corpus", corpus, "--campaign",
               "au", "--suite", "banking", "--user-tasks", "0", "--llm-script", script)
    assert r.code == 0, r.out + r.err
    work = corpus.with_name("au.partial")
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest["test_only"] is True
    assert PIN_OVERRIDE in manifest["live"]["test_overrides"]
    assert manifest["backend_identity"]["pinned_commit"] == fixture_fork[1]
    (entry,) = [json.loads(x) for x in (work / "ledger.jsonl").read_text().splitlines()]
    assert entry["status"] == "complete" and entry["native_sha256"]
    sha = entry["capture_sha256"]
    header = json.loads((work / "raw/sha256" / sha[:2] / sha).read_text().splitlines()[0])
    assert header["upstream"]["commit"] == fixture_fork[1]
    assert header["backend"]["environment_id"] == autodojo_env.env_id


@pytest.mark.req("R-2.7")
def test_every_suite_of_the_fixture_digests_after_its_state_changes(autodojo_env):
    """Each suite of the environment built from the fixture fork, after every task's ground
    truth ran in it, is digested whole (``tests/envdigest_probe.py``)."""
    from test_envdigest import probe_suites

    got = probe_suites(autodojo_env)
    assert sorted(got) == ["banking", "slack", "travel", "workspace"]
    assert {d["digest"]["method"] for d in got.values()} == {"model_dump_json"}
