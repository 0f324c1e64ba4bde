"""AutoDojo's attack cache against a fixture fork: a git repository made here whose tree
holds a cache file at a known path, fetched into the fetch cache (real git, no mocks), with
the pinned commit replaced by the fixture's through AGENTPROV_TEST_AUTODOJO_PIN.

The shape and variant refusals (exit 2, step 1) go through ``agentprov run autodojo
--dry-run``; the identity check (exit 3, step 5) comes after the environment check of step 2
in the specification's order, so here (nothing built) it is proven on T0's own function
(``prepare.check_attack_cache`` and :mod:`agentprov_core.run.attackcache`), the one a run
calls; tests/test_autodojo_backend.py runs it through the CLI against a built
environment."""

import hashlib
import types
from pathlib import Path

import pytest
from conftest import snapshot

from agentprov_core.backend import fetchcache
from agentprov_core.backend.autodojofork import PIN_OVERRIDE, fork_pin
from agentprov_core.errors import AgentprovError
from agentprov_core.run import attackcache
from agentprov_core.testing.autodojo_fork import CACHE, CACHE_PATH, cache_bytes
from agentprov_core.testing.gitrepo import git, make_repo

BANKING = {"banking": [f"injection_task_{i}" for i in range(9)]}


@pytest.fixture
def fork(tmp_path) -> tuple[Path, str]:
    """The fixture fork: its cache file at CACHE_PATH and a README; (path, commit)."""
    src = tmp_path / "fork"
    commit = make_repo(src, {CACHE_PATH: cache_bytes(), "README.md": b"fixture fork\n"})
    return src, commit


@pytest.fixture
def fetched(fork, home, monkeypatch) -> str:
    """The fixture fork's commit in the fetch cache of ``home``, and pinned by the test
    override (in this process; pass ``pin_env`` to the CLI)."""
    src, commit = fork
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    monkeypatch.setenv(PIN_OVERRIDE, commit)
    assert fetchcache.ensure(fork_pin(), source_repo=str(src)) == commit
    return commit


def copy_of_cache(tmp_path, data: bytes | None = None) -> Path:
    p = tmp_path / "my-cache.json"
    p.write_bytes(cache_bytes() if data is None else data)
    return p


# ------------------------------------------------------------------ step 5: verified
@pytest.mark.req("R-23.7", "R-23.8")
def test_a_copy_of_the_forks_file_is_verified(tmp_path, fork, fetched, home):
    cache = copy_of_cache(tmp_path)
    before = snapshot(home)
    checked = attackcache.check(cache, 0, BANKING, ["injection_task_0"])
    o = checked.origin
    blob = git(fork[0], "hash-object", CACHE_PATH)
    assert (o.repository, o.commit, o.path, o.blob) == ("autodojo", fetched, CACHE_PATH, blob)
    assert o.sha256 == hashlib.sha256(cache.read_bytes()).hexdigest()
    assert o.message() == (f"attack cache verified: blob {blob[:12]} is {CACHE_PATH} of "
                           f"autodojo@{fetched[:8]}")
    assert o.record() == {"repository": "autodojo", "commit": fetched, "path": CACHE_PATH,
                          "blob": blob, "sha256": o.sha256, "size": len(cache_bytes()),
                          "test_only": True, "override": PIN_OVERRIDE}
    assert snapshot(home) == before  # read with ls-tree and cat-file only: nothing written


@pytest.mark.req("R-23.7", "R-23.9")
def test_a_changed_byte_matches_no_blob(tmp_path, fetched, home):
    data = cache_bytes().replace(b'"v1"', b'"V1"')
    before = snapshot(home)
    with pytest.raises(AgentprovError) as exc:
        attackcache.check(copy_of_cache(tmp_path, data), 0, BANKING, [])
    assert (exc.value.code, exc.value.exit_code) == ("cli.environment.autodojo_cache_blob", 3)
    assert fetchcache.blob_id(data) in exc.value.message
    assert f"of the fork at {fetched[:8]}" in exc.value.message
    assert snapshot(home) == before


@pytest.mark.req("R-23.9")
def test_a_file_of_another_commit_matches_no_blob_of_the_pinned_tree(tmp_path, fork, fetched,
                                                                      home):
    """The same path at a later commit of the fork is not the pinned commit's file."""
    src, _ = fork
    newer = dict(CACHE, extra=1)
    (src / CACHE_PATH).write_bytes(cache_bytes(newer))
    git(src, "commit", "--quiet", "-am", "newer cache")
    with pytest.raises(AgentprovError) as exc:
        attackcache.check(copy_of_cache(tmp_path, cache_bytes(newer)), 0, BANKING, [])
    assert exc.value.code == "cli.environment.autodojo_cache_blob"


@pytest.mark.req("R-23.9", "R-23.6")
def test_the_pinned_commit_not_in_the_fetch_cache(tmp_path, fork, home, monkeypatch):
    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    cache = copy_of_cache(tmp_path)
    # the real pin: the fork is not public, nothing has fetched it
    monkeypatch.delenv(PIN_OVERRIDE, raising=False)
    for allow_network, dry_run in ((False, True), (True, True), (True, False)):
        with pytest.raises(AgentprovError) as exc:
            attackcache.check(cache, 0, BANKING, [], allow_network=allow_network,
                              dry_run=dry_run)
        assert (exc.value.code, exc.value.exit_code) == (
            "cli.environment.autodojo_cache_commit", 3)
        assert "pinned fork commit aa458794" in exc.value.message
        assert "agentprov backends build autodojo --source-repo URL" in exc.value.message
        assert snapshot(home) == {}  # and no fetch was tried: nothing written
    assert "a dry run never fetches" in AgentprovError(
        "cli.environment.autodojo_cache_commit", commit="c", path="p",
        why="the fetch cache does not hold it; a dry run never fetches").message
    # the fixture's commit pinned, but the fetch cache holds another repository's commit
    other = make_repo(tmp_path / "other", {"x": b"x"})
    fetchcache.ensure(fetchcache.Pin("autodojo", "", other), source_repo=str(tmp_path / "other"))
    monkeypatch.setenv(PIN_OVERRIDE, fork[1])
    with pytest.raises(AgentprovError) as exc:
        attackcache.check(cache, 0, BANKING, [])
    assert exc.value.code == "cli.environment.autodojo_cache_commit"
    assert f"commit {fork[1]}" in exc.value.message
    monkeypatch.setenv(PIN_OVERRIDE, "not-a-commit")
    with pytest.raises(AgentprovError) as exc:
        attackcache.check(cache, 0, BANKING, [])
    assert exc.value.code == "cli.environment.autodojo_cache_commit"
    assert f"{PIN_OVERRIDE} is not a commit id" in exc.value.message


# ---------------------------------------------------------------- fallbacks
@pytest.mark.req("R-23.5")
def test_vectors_that_cannot_serve_the_variant_fall_back(tmp_path, fetched):
    cache = copy_of_cache(tmp_path)
    plan = ["injection_task_0", "injection_task_1", "injection_task_2", "injection_task_0"]
    counted = {k: attackcache.check(cache, k, BANKING, plan).fallbacks for k in (0, 1, 2, 3)}
    # variant 0: every vector has one; 1: w0 has none and x's is a hole; 2: w0 has none
    assert [(f.vectors, f.fallbacks) for f in counted.values()] == [(3, 0), (3, 2), (3, 1),
                                                                    (3, 3)]
    assert counted[1].absent == ("injection_task_2",)
    assert counted[1].line() == (
        "attack cache: variant 1: 1 of 3 vector(s) serve it; 2 fall back to the injection "
        "task's goal; 1 injection task(s) not in the cache fall back entirely "
        "(injection_task_2)")
    assert counted[1].record() == {"variant": 1, "vectors": 3, "fallbacks": 2,
                                   "absent_injection_tasks": ["injection_task_2"]}


# ------------------------------------------------------------------ the corpus record
@pytest.mark.req("R-23.8")
def test_the_verified_file_is_stored_with_its_git_origin(tmp_path, fork, fetched):
    from agentprov_core.corpus.working import WorkingCorpus
    from agentprov_core.run.manifest import record_attack_cache

    cache = copy_of_cache(tmp_path)
    checked = attackcache.check(cache, 1, BANKING, ["injection_task_0"])
    wc = WorkingCorpus(tmp_path / "c.partial")
    manifest = {"test_only": False, "live": {}}
    record_attack_cache(types.SimpleNamespace(attack_cache=checked), wc, manifest)
    sha = checked.origin.sha256
    entry = manifest["attack_caches"][sha]
    assert entry["raw"] == f"raw/sha256/{sha[:2]}/{sha}"
    assert (wc.root / entry["raw"]).read_bytes() == cache.read_bytes()
    assert entry["origin"] == {"repository": "autodojo", "commit": fetched, "path": CACHE_PATH,
                               "blob": git(fork[0], "hash-object", CACHE_PATH), "sha256": sha,
                               "size": len(cache_bytes()), "test_only": True,
                               "override": PIN_OVERRIDE}
    assert entry["variants"]["fallbacks"] == 1
    # made under the test override: the corpus says so, and names the override
    assert manifest["test_only"] is True
    assert manifest["live"]["test_overrides"] == [PIN_OVERRIDE]
    # a resume keeps the first record and stays test_only
    again = {"test_only": False, "live": {}, "attack_caches": manifest["attack_caches"]}
    record_attack_cache(types.SimpleNamespace(attack_cache=checked), wc, again)
    assert again["attack_caches"] == manifest["attack_caches"] and again["test_only"] is True


@pytest.mark.req("R-23.7", "R-23.8", "R-16.5")
def test_t0_step_5_prints_the_verification_and_the_fallbacks(tmp_path, fetched, capsys,
                                                            monkeypatch):
    """prepare's step 5, the call a run makes before anything is staged or spawned."""
    from agentprov_core.plan.plandoc import PlanDoc
    from agentprov_core.plan.plans import Cell
    from agentprov_core.plugins import source_entry
    from agentprov_core.run.prepare import check_attack_cache
    from agentprov_core.run.runrequest import RunRequest

    cache = copy_of_cache(tmp_path)
    src = source_entry("autodojo").source
    cat = src.catalogue()
    doc = PlanDoc(backend="autodojo", suites=["banking"], attacks=["autodojo"],
                  autodojo_cache=str(cache), autodojo_variant=2)
    cells = [Cell.suite_cell("attack", "banking", "user_task_1", "autodojo", "injection_task_0")]
    req = RunRequest.of("autodojo", {"dry_run": True, "allow_network": False})
    checked = check_attack_cache(req, doc, cat, cells)
    err = capsys.readouterr().err.splitlines()
    assert err == [checked.origin.message(),
                   "attack cache: variant 2: 1 of 2 vector(s) serve it; 1 fall back to the "
                   "injection task's goal"]
    # the plan hashes the same file: a file changed after the check is refused
    checked.same_as_plan({"backend_config": {"autodojo": {"cache_sha256": checked.origin.sha256}}})
    with pytest.raises(AgentprovError) as exc:
        checked.same_as_plan({"backend_config": {"autodojo": {"cache_sha256": "0" * 64}}})
    assert exc.value.code == "cli.environment.autodojo_cache_blob"
    assert "changed while it was checked" in exc.value.message


# ------------------------------------------------------------ step 1: the CLI (exit 2)
@pytest.fixture
def adry(cli, corpora, script):
    """``agentprov run autodojo --dry-run --attack autodojo``."""
    def run(*args, env=None):
        return cli("run", "autodojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
                   "--suite", "banking", "--user-tasks", "1", "--injection-tasks", "0",
                   "--attack", "autodojo", "--llm-script", script, *args, env=env)
    return run


BAD = [
    (b"{not json", "(the file)", "is not strict JSON"),
    (b'{"injection_tasks": {"injection_task_0": {"v": ["a"]}}, "x": NaN}', "(the file)",
     "NaN is not JSON"),
    (b'{"injection_tasks": {}, "injection_tasks": {}}', "(the file)", "appears twice"),
    (b"[1, 2]", "injection_tasks", "the file is a JSON list, not an object"),
    (b'{"tasks": {}}', "injection_tasks", "missing"),
    (b'{"injection_tasks": []}', "injection_tasks", "must be a non-empty object"),
    (b'{"injection_tasks": {"injection_task_0": ["a"]}}', "injection_tasks.injection_task_0",
     "must be a non-empty object of injection vectors"),
    (b'{"injection_tasks": {"injection_task_0": {"v": "a"}}}',
     "injection_tasks.injection_task_0.v", "must be a list of variants"),
    (b'{"injection_tasks": {"injection_task_0": {"v": ["a", 3]}}}',
     "injection_tasks.injection_task_0.v[1]", "a variant is a string (or null), not a JSON int"),
    (b'{"injection_tasks": {"injection_task_99": {"v": ["a"]}}}',
     "injection_tasks.injection_task_99", "no such injection task in the plan's suite(s) banking"),
    (b"\xff\xfe{}", "(the file)", "is not UTF-8"),
    (b"[" * 100_000, "(the file)", "nests arrays and objects too deeply"),
    (b'{"injection_tasks": {"injection_task_0": {"v": [["a"]]}}}',
     "injection_tasks.injection_task_0.v[0]", "not a JSON list"),
]


@pytest.mark.req("R-23.4", "R-23.9", "R-16.1")
@pytest.mark.parametrize("data,field,what", BAD)
def test_a_malformed_cache_is_a_usage_error(adry, tmp_path, home, corpora, data, field, what):
    cache = copy_of_cache(tmp_path, data)
    r = adry("--autodojo-cache", cache, "--autodojo-variant", "0")
    assert (r.code, r.error["error"]) == (2, "cli.usage.autodojo_cache"), r.err
    msg = r.error["message"]
    assert msg.startswith(f"agentprov run: --autodojo-cache {cache}: {field}: "), msg
    assert what in msg
    assert "attack cache verified" not in r.err
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.req("R-23.5", "R-23.9")
@pytest.mark.parametrize("variant", ["-1", "x", "1.5"])
def test_a_bad_variant_is_a_usage_error(adry, tmp_path, home, corpora, variant):
    r = adry("--autodojo-cache", copy_of_cache(tmp_path), "--autodojo-variant", variant)
    assert r.code == 2, r.err
    assert "--autodojo-variant" in r.err
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.req("R-23.5", "R-23.9")
@pytest.mark.parametrize("value", ['"0"', "-1", "true"])
def test_a_bad_variant_in_a_plan_file(cli, tmp_path, home, corpora, script, value):
    plan = tmp_path / "plan.toml"
    plan.write_text('[plan]\nformat = "agentprov-run-plan/0.1"\nbackend = "autodojo"\n'
                    'suites = ["banking"]\nattacks = ["autodojo"]\n'
                    f'autodojo_cache = "{copy_of_cache(tmp_path)}"\n'
                    f"autodojo_variant = {value}\n")
    r = cli("run", "autodojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            "--plan", plan, "--llm-script", script)
    assert r.code == 2, r.err
    assert "autodojo_variant" in r.err or "--autodojo-variant" in r.err
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.req("R-16.2", "R-16.5")
def test_a_well_formed_cache_passes_step_1_and_stops_at_the_environment(adry, tmp_path, home,
                                                                        corpora, fork):
    """Step 2 (the environment, exit 3) comes before step 5 (the cache's identity): without
    an AutoDojo environment the dry run stops there, with the fixture fork not even
    fetched, and nothing is written."""
    r = adry("--autodojo-cache", copy_of_cache(tmp_path), "--autodojo-variant", "0",
             env={PIN_OVERRIDE: fork[1]})
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err
    assert "attack cache verified" not in r.err
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


# ------------------------------------------------------------- backends build autodojo
def test_backends_build_autodojo_without_the_fork_cached(cli, home):
    """Without the pinned commit in the fetch cache and without --source-repo, the build,
    its dry run included, says how to provide it (exit 3) and writes nothing: the fork is
    not public, so --allow-network cannot fetch it."""
    for args in ((), ("--dry-run",), ("--allow-network",)):
        r = cli("backends", "build", "autodojo", *args)
        assert (r.code, r.error["error"]) == (3, "cli.environment.source_not_cached"), r.err
        msg = r.error["message"]
        assert "the pinned commit aa458794 of autodojo is not in the fetch cache" in msg
        assert "give --source-repo URL" in msg and "the AutoDojo fork is not public" in msg
        assert "only --source-repo can provide it" in msg
        # no fix that cannot work: --allow-network is named only as what cannot fetch it
        assert msg.count("--allow-network") == 1
        assert "so --allow-network cannot fetch it" in msg
    assert snapshot(home) == {}


@pytest.mark.req("R-16.2")
def test_a_run_without_the_environment_names_a_build_that_can_work(cli, home, corpora,
                                                                   script):
    """The fork is not public and not cached: the build the refusal names takes
    --source-repo (a bare ``backends build autodojo`` would only fail again)."""
    r = cli("run", "autodojo", "--dry-run", "--suite", "banking", "--llm-script", script,
            "--corpus", corpora / "c", "--campaign", "c")
    assert (r.code, r.error["error"]) == (3, "cli.environment.backend_missing"), r.err
    assert r.error["message"].endswith(
        "is not built: run agentprov backends build autodojo --source-repo URL (a mirror, a "
        "path or a bundle holding its pinned commit aa458794: the AutoDojo fork is not "
        "public)")
    assert snapshot(home) == {} and list(corpora.iterdir()) == []


@pytest.mark.req("R-5.2")
def test_backends_build_autodojo_dry_run_names_the_fetch_and_fetches_nothing(cli, fork, home):
    """With --source-repo the dry run names the fetch (of the test override's commit, said
    to be one) and the environment named from it; it fetches nothing."""
    src, commit = fork
    dry = cli("backends", "build", "autodojo", "--dry-run", "--source-repo", src,
              env={PIN_OVERRIDE: commit})
    assert dry.code == 0, dry.err
    lines = dry.out.splitlines()
    assert lines[0] == f"backend autodojo: environment {home}/envs/autodojo-{commit[:8]}"
    assert lines[1].startswith(f"  commit8 {commit[:8]} (the test-only override {PIN_OVERRIDE})")
    assert (f"  upstream: autodojo (the AutoDojo fork is not public) at {commit} (the "
            f"test-only override {PIN_OVERRIDE}, not the pinned commit)") in lines
    assert f"would fetch commit {commit} from {src} (--source-repo)" in dry.out
    assert "worker agentprov-worker-autodojo" in dry.out
    assert snapshot(home) == {}
    real = cli("backends", "build", "autodojo", "--dry-run", "--source-repo", src)
    assert real.code == 0, real.err  # the real pin: named by it, never by a fixture's
    assert real.out.splitlines()[0].endswith("/envs/autodojo-aa458794")
    assert "test-only" not in real.out
    bad = cli("backends", "build", "autodojo", "--dry-run", env={PIN_OVERRIDE: "abc"})
    assert (bad.code, bad.error["error"]) == (2, "cli.usage.option_value"), bad.err
    assert PIN_OVERRIDE in bad.error["message"]
    assert snapshot(home) == {}


def test_backends_build_autodojo_with_the_fork_cached_needs_no_source(cli, fork, fetched,
                                                                      home):
    """With the pinned commit in the fetch cache the dry run needs no --source-repo."""
    r = cli("backends", "build", "autodojo", "--dry-run", env={PIN_OVERRIDE: fetched})
    assert r.code == 0, r.err
    assert f"commit {fetched} is in the fetch cache" in r.out


def test_a_source_repo_without_the_pinned_commit_fetches_nothing_usable(cli, fork, home,
                                                                         tmp_path):
    """A source repository that lacks the commit: exit 3 naming it, nothing built."""
    other = tmp_path / "other"
    make_repo(other, {"README.md": b"not the fork\n"})
    r = cli("backends", "build", "autodojo", "--source-repo", other, env={PIN_OVERRIDE: fork[1]})
    assert (r.code, r.error["error"]) == (3, "cli.environment.source_fetch"), r.err
    assert fork[1] in r.error["message"]
    assert not (home / "envs").exists()
