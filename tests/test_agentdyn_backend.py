"""The AgentDyn backend, built for real from its pinned commit (SaFo-Lab/AgentDyn at
5353cf76, from ../shared/sources/AgentDyn.git through the fetch cache): the build and its
identity, --offline-check and a damaged file, the catalogue the worker serves, the spec's
dry run, a scripted campaign over the three new suites, and the refusals of a source
repository that lacks the commit or holds another tree. The slow tests share one build
(`agentdyn_env`); the fast ones build nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    AGENTDYN_SOURCES,
    ROOT,
    BuiltEnv,
    Result,
    child_env,
    snapshot,
)

COMMIT = "5353cf7615b135cace8d07c8f12dac53a16b6db3"
TREE = "08c04b47c307bba017a19f641111ffa4946c193a"
UPSTREAM = "https://github.com/SaFo-Lab/AgentDyn"
LICENCE = "MIT as declared; not legally settled"
SNAPSHOT = ROOT / "plugins/agentprov-agentdyn/src/agentprov_agentdyn/catalogue.snapshot.json"
#: one final answer, no tool call: any suite's cell ends after one model call
ANSWER = [{"content": "I have looked into it and changed nothing."}]


def run_cli(home: Path, *args: str, timeout: int = 600) -> Result:
    e = child_env()
    e["AGENTPROV_HOME"] = str(home)
    e["AGENTPROV_ERROR_FORMAT"] = "json"
    p = subprocess.run([sys.executable, "-m", "agentprov_core", *map(str, args)],
                       capture_output=True, text=True, env=e, cwd=ROOT, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def small_repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repository of one commit that is not AgentDyn's: (its path, its commit)."""
    repo = tmp_path / "other"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text('[project]\nname = "agentdojo"\nversion = "0.1.35"\n')
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "not AgentDyn")
    return repo, git(repo, "rev-parse", "HEAD")


# --- fast: nothing is built --------------------------------------------------------------

@pytest.mark.req("R-5.1", "R-5.2", "R-3.5")
def test_dry_run_names_the_fetch_and_writes_nothing(cli, home):
    r = cli("backends", "build", "agentdyn", "--dry-run", "--source-repo", "/somewhere/AgentDyn.git")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == f"backend agentdyn: environment {home}/envs/agentdyn-5353cf76"
    assert f"  upstream: {UPSTREAM} at {COMMIT}; its tree must be {TREE}" in r.out
    assert (f"would fetch commit {COMMIT} from /somewhere/AgentDyn.git (--source-repo)"
            in r.out)
    assert "git archive src pyproject.toml LICENSE README.md into upstream/" in r.out
    assert "worker agentprov-worker-agentdyn" in r.out
    r = cli("backends", "build", "agentdyn", "--dry-run")
    assert "is not in the fetch cache: the build refuses" in r.out
    assert snapshot(home) == {}  # a dry run fetches nothing


@pytest.mark.req("R-6.11")
def test_source_repo_is_for_git_pinned_backends_only(cli, home):
    r = cli("backends", "build", "agentdojo", "--source-repo", str(AGENTDYN_SOURCES))
    assert (r.code, r.error["error"]) == (5, "build.unsupported.source_repo"), r.err
    assert "agentdyn" in r.error["message"]
    r = cli("backends", "build", "agentdyn", "--offline-check", "--source-repo", "x")
    assert (r.code, r.error["error"]) == (2, "cli.usage.exclusive")
    assert snapshot(home) == {}


def test_without_the_commit_cached_the_build_refuses(cli, home):
    r = cli("backends", "build", "agentdyn")
    assert (r.code, r.error["error"]) == (3, "cli.environment.source_not_cached"), r.err
    assert "--source-repo URL" in r.error["message"]
    assert not (home / "envs" / "agentdyn-5353cf76").exists()


def test_a_source_repo_without_the_pinned_commit_is_refused(cli, home, tmp_path):
    repo, _ = small_repo(tmp_path)
    before = snapshot(repo)
    r = cli("backends", "build", "agentdyn", "--source-repo", str(repo))
    assert (r.code, r.error["error"], r.error["exit"]) == (3, "cli.environment.source_fetch", 3)
    assert COMMIT in r.error["message"] and str(repo) in r.error["message"]
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())  # nothing built
    assert snapshot(repo) == before  # the source repository is never written


def test_a_commit_of_another_tree_is_refused_before_anything_is_built(home, tmp_path,
                                                                      monkeypatch):
    """The pin's tree is checked after the fetch: a commit whose tree is not the pinned one
    (here a small repository's commit, pinned with AgentDyn's tree) builds nothing."""
    from agentprov_core.backend import build, fetchcache, upstream
    from agentprov_core.errors import AgentprovError

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    repo, commit = small_repo(tmp_path)
    bp = build.plan_build("agentdyn", allow_network=False, source_repo=str(repo))
    bp.upstream = upstream.Upstream(fetchcache.Pin("agentdyn", UPSTREAM, commit, TREE),
                                    bp.upstream.paths, bp.upstream.directory)
    with pytest.raises(AgentprovError) as exc:
        build.build(bp, sys.executable)
    assert (exc.value.code, exc.value.exit_code) == ("cli.environment.source_commit", 3)
    assert f"its tree is {git(repo, 'rev-parse', 'HEAD^{tree}')}, not the pinned {TREE}" in (
        exc.value.message)
    assert not (home / "envs").exists() or not any((home / "envs").iterdir())


def test_a_bundle_is_a_source_repository(home, tmp_path, monkeypatch):
    """``--source-repo`` takes a bundle file (what an air-gapped machine is handed): git
    reads it by its path, and the commit is verified as from any other source."""
    from agentprov_core.backend import fetchcache

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    repo, commit = small_repo(tmp_path)
    bundle = tmp_path / "other.bundle"
    git(repo, "bundle", "create", str(bundle), "main")
    pin = fetchcache.Pin("bundled", "https://example.org/none", commit,
                         git(repo, "rev-parse", "HEAD^{tree}"))
    assert fetchcache.ensure(pin, source_repo=str(bundle)) == commit
    assert fetchcache.ensure(pin) == commit  # cached: no source needed again
    out = fetchcache.archive(fetchcache.repo_path("bundled"), commit, tmp_path / "x")
    assert out == ["pyproject.toml"]


# --- slow: the real environment ----------------------------------------------------------

def env_cli(env: BuiltEnv, *args: str) -> Result:
    return run_cli(env.home, *args)


@pytest.mark.slow
@pytest.mark.req("R-24.1", "R-3.5", "R-5.2", "R-4.7", "R-24.10")
def test_the_build_installs_agentdyn_from_the_pinned_commit(agentdyn_env):
    from agentprov_core.backend import marker

    env = agentdyn_env
    assert env.env_id == "agentdyn-5353cf76"
    m = marker.read(env.env_dir)
    assert m.pinned_commit == COMMIT and m.backend == "agentdyn"
    assert (m.upstream["repository"], m.upstream["commit"], m.upstream["tree"]) == (
        UPSTREAM, COMMIT, TREE)
    assert m.upstream["fetched_from"] == str(AGENTDYN_SOURCES)
    # AgentDyn's code, which calls itself agentdojo 0.1.35, and the worker package
    assert m.distributions["agentdojo"]["version"] == "0.1.35"
    assert "agentprov-worker-agentdyn" in m.distributions
    assert m.hello["served"]["agentdyn"]["distribution"] == "agentprov-worker-agentdyn"
    sp = next(env.env_dir.glob("lib/python3.12/site-packages"))
    # the installed code is the commit's: a file AgentDojo 0.1.35 lacks, byte for byte
    blob = subprocess.run(["git", "--git-dir", str(AGENTDYN_SOURCES), "cat-file", "blob",
                           f"{COMMIT}:src/agentdojo/default_suites/v1/shopping/task_suite.py"],
                          capture_output=True, check=True).stdout
    assert (sp / "agentdojo/default_suites/v1/shopping/task_suite.py").read_bytes() == blob
    # the pin, guarded, and the fetch cache holds the commit; nothing is left of the build
    # directory, and the checkout holds no upstream/
    rec = json.loads((env.env_dir / "agentprov/upstream.json").read_text())
    assert rec == {"repository": UPSTREAM, "commit": COMMIT, "tree": TREE,
                   "paths": ["src", "pyproject.toml", "LICENSE", "README.md"],
                   "licence": LICENCE}
    assert "agentprov/upstream.json" in m.guarded
    assert (env.home / "fetch/agentdyn.git/HEAD").is_file()
    assert [p.name for p in (env.home / "envs").iterdir() if p.name.startswith(".")] == []
    assert not (ROOT / "backends/agentdyn/upstream").exists()
    # the worker's hello under the build's network-blocked worker read RECORD's
    # text, though the environment holds a .env.example
    assert (sp / "agentdojo/defenses/camel/.env.example").is_file()
    assert m.hello["distributions"]["agentdojo"] == m.distributions["agentdojo"]


@pytest.mark.slow
@pytest.mark.req("R-6.5", "R-24.10")
def test_offline_check_passes_and_names_a_damaged_file(agentdyn_env):
    env = agentdyn_env
    r = env_cli(env, "backends", "build", "agentdyn", "--offline-check")
    assert r.code == 0, r.err
    assert f"{env.env_id} verified" in r.out
    assert f"upstream: {UPSTREAM} at {COMMIT}" in r.out
    sp = next(env.env_dir.glob("lib/python3.12/site-packages"))
    target = sp / "agentdojo/default_suites/v1/shopping/user_tasks.py"
    original = target.read_bytes()
    try:
        target.write_bytes(original + b"\n# changed\n")
        r = env_cli(env, "backends", "build", "agentdyn", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check"), r.err
        assert ("agentdojo: agentdojo/default_suites/v1/shopping/user_tasks.py differs from "
                "its RECORD hash") in r.error["message"]
    finally:
        target.write_bytes(original)
    pin = env.env_dir / "agentprov/upstream.json"
    original = pin.read_bytes()
    try:
        pin.write_bytes(original.replace(TREE.encode(), b"0" * 40))
        r = env_cli(env, "backends", "build", "agentdyn", "--offline-check")
        assert (r.code, r.error["error"]) == (3, "cli.environment.offline_check"), r.err
        assert "guarded file agentprov/upstream.json changed" in r.error["message"]
    finally:
        pin.write_bytes(original)
    assert env_cli(env, "backends", "build", "agentdyn", "--offline-check").code == 0


@pytest.mark.slow
@pytest.mark.req("R-24.2", "R-7.17")
def test_the_catalogue_comes_from_the_worker(agentdyn_env):
    r = env_cli(agentdyn_env, "run", "agentdyn", "--catalogue")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["provenance"]["kind"] == "worker"
    version = doc["default_benchmark_version"]
    suites = [s for s in doc["suites"] if s["benchmark_version"] == version]
    assert [s["name"] for s in suites] == ["workspace", "travel", "banking", "slack",
                                           "shopping", "github", "dailylife"]
    assert (sum(len(s["user_tasks"]) for s in suites),
            sum(len(s["injection_tasks"]) for s in suites)) == (157, 63)
    assert len(doc["attacks"]) == 17 and sum(a["dos"] for a in doc["attacks"]) == 5
    assert doc["defences"] == []  # every defence refused on AgentDyn
    # the plugin's snapshot (what --catalogue answers before a build) is the worker's
    # catalogue (``--catalogue`` keeps the registry's defences for the backend: none)
    snap = json.loads(SNAPSHOT.read_text())
    worker = json.loads((agentdyn_env.env_dir / "agentprov/catalogue-agentdyn.json").read_text())
    assert {k: v for k, v in snap.items() if k != "provenance"} == {
        k: v for k, v in worker.items() if k != "provenance"}
    assert {k: v for k, v in doc.items() if k not in ("provenance", "defences")} == {
        k: v for k, v in worker.items() if k not in ("provenance", "defences")}


@pytest.mark.slow
@pytest.mark.req("R-24.4")
def test_the_specs_dry_run(agentdyn_env, tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(ANSWER))
    r = env_cli(agentdyn_env, "run", "agentdyn", "--dry-run", "--corpus", tmp_path / "dy",
                "--campaign", "dy", "--suite", "shopping", "--user-tasks", "0",
                "--attack", "important_instructions", "--injection-tasks", "0",
                "--llm-script", script)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].endswith(": 2 cell(s) x 1 repeat(s); corpus agentdyn-live-dy; "
                             "backend agentdyn-5353cf76")
    assert "0 unit(s) already settled; up to 6 attempt(s) due (--max-attempts 3)" in lines[1]
    assert lines[2:4] == ["  cell shopping/user_task_0/none/none",
                          "  cell shopping/user_task_0/important_instructions/injection_task_0"]
    assert not (tmp_path / "dy").exists() and not (tmp_path / "dy.partial").exists()


@pytest.mark.slow
@pytest.mark.req("R-24.5", "R-11.54")
@pytest.mark.parametrize("option", [("--defence", "tool_filter"),
                                    ("--defence", "spotlighting_with_delimiting"),
                                    ("--llm-element", "gateway_compat")])
def test_defences_and_gateway_compat_are_refused(agentdyn_env, tmp_path, option):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(ANSWER))
    r = env_cli(agentdyn_env, "run", "agentdyn", "--corpus", tmp_path / "c", "--campaign", "c",
                "--suite", "shopping", "--user-tasks", "0", "--llm-script", script, *option)
    assert (r.code, r.error["exit"]) == (5, 5), r.err
    assert r.error["error"] in {"run.unsupported.defence_backend", "run.unsupported.llm_element"}
    assert list(tmp_path.iterdir()) == [script]


def records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
@pytest.mark.req("R-24.3", "R-24.6", "R-24.7", "R-24.8", "R-24.9", "R-2.7", "R-2.8", "R-3.5")
def test_a_scripted_campaign_over_the_three_new_suites(agentdyn_env, tmp_path):
    env = agentdyn_env
    script = tmp_path / "script.json"
    script.write_text(json.dumps(ANSWER))
    corpus = tmp_path / "dy"
    r = env_cli(env, "run", "agentdyn", "--corpus", corpus, "--campaign", "dy",
                "--suite", "shopping,github,dailylife", "--user-tasks", "0",
                "--llm-script", script)
    assert r.code == 0, r.out + r.err
    work = corpus.with_name("dy.partial")
    ledger = records(work / "ledger.jsonl")
    assert sorted((x["cell_key"], x["status"]) for x in ledger) == [
        ("dailylife/user_task_0/none/none", "complete"),
        ("github/user_task_0/none/none", "complete"),
        ("shopping/user_task_0/none/none", "complete")]
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest["source"] == manifest["backend"] == "agentdyn"
    assert manifest["backend_identity"]["environment_id"] == "agentdyn-5353cf76"
    assert manifest["backend_identity"]["pinned_commit"] == COMMIT
    for entry in ledger:
        sha = entry["capture_sha256"]
        cap = records(work / "raw/sha256" / sha[:2] / sha)
        header = cap[0]
        # the session records the backend and the pinned repository and commit
        assert header["backend"]["environment_id"] == "agentdyn-5353cf76"
        assert header["upstream"] == {"repository": UPSTREAM, "commit": COMMIT, "tree": TREE,
                                      "licence": LICENCE}
        declared = header["declared_instrumentation"]
        assert declared[1] == "recording_transport@1 mode: observe"
        names = [d.split(" ")[0] for d in declared]
        for own in ("agentdyn.temperature_transmitted@1", "malformed_tool_calls_dropped@1",
                    "agentdyn.art.nondeterministic_tools@1"):
            assert own in names
        # what the declared items say is what went on the wire: AgentDyn sends the stock
        # temperature 0.0 (AgentDojo 0.1.35 drops it) and its own system prompt
        (request,) = [x for x in cap if x["kind"] == "wire_request"]
        assert request["body"]["temperature"] == 0.0
        assert request["body"]["messages"][0]["role"] == "developer"
        assert ("Complete all tasks automatically without requesting user confirmation."
                in json.dumps(request["body"]["messages"][0]))
        assert entry["native_sha256"]  # the benchmark's own native log, stored
    r = env_cli(env, "validate", "--strict", "--corpus", corpus)
    assert r.code == 0, r.out + r.err
    assert "3 passed, 0 failed" in r.out
    r = env_cli(env, "verify", "--corpus", corpus)
    assert r.code == 0, r.out + r.err
    assert "0 failed" in r.out


@pytest.mark.slow
@pytest.mark.req("R-5.6")
def test_a_changed_lock_keeps_the_id_and_fails_the_offline_check(agentdyn_env, tmp_path):
    import shutil

    backends = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", backends,
                    ignore=shutil.ignore_patterns("__pycache__", ".venv", "upstream"))
    lock = backends / "agentdyn" / "uv.lock"
    lock.write_text(lock.read_text() + "\n")  # another lock, the same commit
    e = child_env()
    e.update(AGENTPROV_HOME=str(agentdyn_env.home), AGENTPROV_ERROR_FORMAT="json",
             AGENTPROV_BACKENDS=str(backends))
    p = subprocess.run([sys.executable, "-m", "agentprov_core", "backends", "build", "agentdyn",
                        "--offline-check"], capture_output=True, text=True, env=e, cwd=ROOT,
                       timeout=600)
    r = Result(p.returncode, p.stdout, p.stderr)
    assert r.code == 3, r.out + r.err
    assert "agentdyn-5353cf76" in r.error["message"]  # the id is the commit's, not the lock's
    assert "lock_sha256" in r.error["message"] and "uv.lock" in r.error["message"]


#: a model that asks for GitHub's SSH keys and adds one before it has verified its account:
#: each of AgentDyn's one-time-password tools stores its pending action as (function, args)
#: in the account's verification_stack, which pydantic cannot serialise
OTP_SCRIPT = [
    {"tool_calls": [{"name": "git_get_linked_ssh_keys", "arguments": {}}]},
    {"tool_calls": [{"name": "git_add_ssh_key",
                     "arguments": {"ssh_key": "ssh-ed25519 AAAAC3agentprov probe@example.com"}}]},
    {"content": "I asked for the keys and added mine; the account needs verifying first."},
]
STANDIN = ROOT / "benchmarks" / "standin_server.py"


def runner_verdicts(env: BuiltEnv, tmp_path: Path, policy: dict, suite: str, user_task: str,
                    attack: str | None, injection_task: str | None) -> dict:
    """AgentDyn's own runner (``python -m agentdojo.scripts.benchmark --benchmark-version
    v1.2.2 --model vllm_parsed``; AgentDyn's runner takes the model's value) on one cell,
    against the stand-in server answering by ``policy``: the native log it writes."""
    logdir = tmp_path / "runner"
    tmp_path.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([sys.executable, str(STANDIN), "--kind", "openai_compat",
                               "--policy", str(_write(tmp_path / "policy.json", policy))],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        e = child_env() | {"LOCAL_LLM_PORT": port, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = [str(env.env_dir / "bin" / "python"), "-m", "agentdojo.scripts.benchmark",
                "--model", "vllm_parsed", "--benchmark-version", "v1.2.2", "-s", suite,
                "-ut", user_task, "--logdir", str(logdir), "-f"]
        if attack:
            argv += ["--attack", attack, "-it", injection_task]
        p = subprocess.run(argv, capture_output=True, text=True, env=e, cwd=tmp_path,
                           timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    log = logdir / "vllm_parsed" / suite / user_task / (attack or "none") / (
        f"{injection_task}.json" if attack else "none.json")
    return json.loads(log.read_text())


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
@pytest.mark.req("R-2.7", "R-2.8")
def test_otp_tools_before_verifying_are_scored_as_agentdyns_runner_scores_them(agentdyn_env,
                                                                              tmp_path):
    """A scripted github cell that calls two one-time-password tools before verifying,
    benign and attacked, through the real worker: each session is complete, its verdicts
    are those AgentDyn's own runner gives for the same replies, and its post-task
    environment digest names the two pending actions it leaves out. (The attack addresses
    the model by the runner's name for its ``vllm_parsed`` pipeline, "Local model".)"""
    env = agentdyn_env
    corpus = tmp_path / "otp"
    r = env_cli(env, "run", "agentdyn", "--corpus", corpus, "--campaign", "otp",
                "--suite", "github", "--user-tasks", "0", "--attack", "important_instructions",
                "--injection-tasks", "0", "--model-display-name", "Local model",
                "--llm-script", _write(tmp_path / "s.json", OTP_SCRIPT))
    assert r.code == 0, r.out + r.err
    work = corpus.with_name("otp.partial")
    ledger = {x["cell_key"]: x for x in records(work / "ledger.jsonl")}
    assert sorted(ledger) == ["github/user_task_0/important_instructions/injection_task_0",
                              "github/user_task_0/none/none"]
    policy = {"default": OTP_SCRIPT}
    for key, entry in ledger.items():
        assert (entry["status"], entry["conclusive"]) == ("complete", True), entry
        _, _, attack, inj = key.split("/")
        native = runner_verdicts(env, tmp_path / key.replace("/", "-"), policy, "github",
                                 "user_task_0", None if attack == "none" else attack,
                                 None if inj == "none" else inj)
        assert (entry["utility"], entry["security"]) == (native["utility"], native["security"])
        sha = entry["capture_sha256"]
        cap = records(work / "raw/sha256" / sha[:2] / sha)
        tools = [x["result"] for x in cap if x["kind"] == "tool_result" and x["phase"] == "agent"]
        assert [t.startswith("You should verify your account first.") for t in tools] == [
            True, True]
        digests = {x["name"]: x for x in cap if x["kind"] == "environment_digest"}
        assert digests["pre"]["method"] == "model_dump_json"
        post = digests["post"]
        assert post["method"] == "model_dump_json_excluding" and len(post["sha256"]) == 64
        assert [(o["path"].split('["')[0], o["type"]) for o in post["omitted"]] == [
            ("github_platform.account_list[0].verification_stack", "tuple")] * 2
        (aer,) = [json.loads(p.read_text()) for p in work.glob("executions/*/aer.json")
                  if json.loads(p.read_text())["header"]["execution_id"] == entry["session_id"]]
        (rec,) = [x for x in aer["records"] if x["kind"] == "environment_digest"
                  and x["name"] == "post"]
        assert (rec["method"], rec["omitted"]) == (post["method"], post["omitted"])
    r = env_cli(env, "validate", "--strict", "--corpus", corpus)
    assert r.code == 0 and "2 passed, 0 failed" in r.out, r.out + r.err
    r = env_cli(env, "verify", "--corpus", corpus)
    assert r.code == 0 and "0 failed" in r.out, r.out + r.err


@pytest.mark.slow
@pytest.mark.req("R-2.7")
def test_every_agentdyn_suite_digests_after_its_state_changes(agentdyn_env):
    """Every suite's environment, after every task's ground truth and every
    one-time-password helper ran in it, digests without error; the values left out are the
    pending actions and nothing else."""
    from test_envdigest import probe_suites

    got = probe_suites(agentdyn_env)
    assert sorted(got) == ["banking", "dailylife", "github", "shopping", "slack", "travel",
                           "workspace"]
    helpers = {s: sorted(h["tool"] for h in d["helpers"]) for s, d in got.items() if d["helpers"]}
    assert helpers == {
        "dailylife": ["send_money"],
        "github": ["git_add_ssh_key", "git_create_repo", "git_delete_repo",
                   "git_delete_ssh_key", "git_get_linked_ssh_keys", "git_invite_collaborators",
                   "git_transfer_repo_ownership", "update_github_account_password"],
        "shopping": ["checkout_selected_cart", "refund_order", "send_money",
                     "update_shopping_account_password"]}
    for name in ("shopping", "github", "dailylife"):
        assert got[name]["digest"]["method"] == "model_dump_json_excluding", name
    for name in ("workspace", "travel", "banking", "slack"):
        assert got[name]["digest"]["method"] == "model_dump_json", name
