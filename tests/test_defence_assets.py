"""Defence assets without a built environment: the registry's pins, `backends build
--defence-assets/--defence-source` up to the point where uv would run (dry runs and every
refusal, each with its code, exit code and proof that nothing was written), the fetch
cache filled from a real git repository and a loopback HTTP hub, and T0's refusal of a
defence whose assets are not provisioned."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading
from pathlib import Path

import fixture_defence as fx
import pytest
from conftest import ROOT, snapshot

from agentprov_core.base.digests import file_sha256

LOCK8 = file_sha256(ROOT / "backends" / "agentdojo" / "uv.lock")[:8]
ENV_ID = f"agentdojo-{LOCK8}"


@pytest.fixture
def fixture(tmp_path, registry_copy) -> fx.Fixture:
    return fx.make(tmp_path / "trees", registry_copy)


def env_of(f: fx.Fixture) -> dict[str, str]:
    return {"AGENTPROV_REGISTRY": str(f.registry)}


def build(cli, f, *args):
    return cli("backends", "build", "agentdojo", "--defence-assets",
               "fixture_code,fixture_weights", *args, env=env_of(f))


def sources(f: fx.Fixture) -> tuple[str, ...]:
    return ("--defence-source", f.source(), "--defence-source", f"fixture_weights={f.weights}")


# ------------------------------------------------------------------------------ the registry
@pytest.mark.req("R-22.7", "R-22.8", "R-22.9", "R-22.11")
def test_the_registry_pins_or_says_why_not():
    """Every asset of the shipped registry either pins its files or says why it cannot; the
    PI detector's origin is its model repository at a revision, Mandate is recorded with
    its licence "MIT, publisher unverified", MELON's entries call a model of their own."""
    from agentprov_core.backend import defassets
    from agentprov_core.registries import defences

    assets = defassets.load(ROOT / "registry" / "defences.toml")
    assert sorted(assets) == ["mandate", "melon", "transformers_pi_detector"]
    assert all(not a.files and a.unpinned for a in assets.values())  # none invented
    pi = assets["transformers_pi_detector"]
    assert (pi.kind, pi.layout, pi.group) == ("weights", "hf-hub-cache", "defences")
    assert pi.origin.repository == "protectai/deberta-v3-base-prompt-injection-v2"
    assert len(pi.origin.revision) == 40 and set(pi.distributions) == {"torch", "transformers"}
    assert assets["mandate"].licence == "MIT, publisher unverified"
    by_name = {d.name: d for d in defences.load_registry(ROOT / "registry" / "defences.toml")}
    for name in ("mandate_envelope", "mandate_scoped", "mandate_intent"):
        assert by_name[name].assets == ["mandate"] and by_name[name].suites == ["banking"]
        assert by_name[name].licence == "MIT, publisher unverified"
    for name in ("melon", "melon_sm", "melon_at"):
        d = by_name[name]
        assert d.assets == ["melon"] and d.endpoint and d.port
    assert by_name["transformers_pi_detector"].assets == ["transformers_pi_detector"]


def test_git_blob_ids_are_gits_own(tmp_path):
    """The blob id of a file, and of a Git LFS file's pointer, as git computes them."""
    from agentprov_core.backend import defassets

    p = tmp_path / "f.bin"
    p.write_bytes(b"\x00\x01 some bytes\n" * 1000)
    h = defassets.hash_file(p)
    assert h.git_blob == fx.blob_of(p)
    assert h.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    ptr = tmp_path / "pointer"
    ptr.write_bytes(defassets.lfs_pointer(h.sha256, h.size))
    pin = defassets.PinnedFile(path="f.bin", sha256=h.sha256, git_blob=fx.blob_of(ptr),
                               size=h.size, lfs=True)
    assert h.matches(pin)
    assert not h.matches(defassets.PinnedFile(path="f.bin", sha256=h.sha256,
                                              git_blob=h.git_blob, size=h.size, lfs=True))


GOOD_PIN = f'sha256 = "{"0" * 64}"\ngit_blob = "{"0" * 40}"\nsize = 1\n'
GIT = f'origin = {{ kind = "git", url = "u", commit = "{"a" * 40}" }}\n'


@pytest.mark.parametrize("table, named", [
    (f'kind = "code"\nmodule = "m"\nfactory = "f"\n{GIT}[[assets.broken.files]]\n'
     f'path = "../escape.py"\n{GOOD_PIN}', "../escape.py"),
    (f'kind = "code"\nmodule = "m"\nfactory = "f"\n{GIT}[[assets.broken.files]]\n'
     'path = "a.py"\nsha256 = "00"\ngit_blob = "00"\nsize = 1\n', "file a.py: sha256"),
    ('kind = "code"\nmodule = "m"\nfactory = "f"\norigin = { kind = "git", url = "u", '
     f'commit = "main" }}\n[[assets.broken.files]]\npath = "a.py"\n{GOOD_PIN}',
     "origin commit 'main' must be a full commit id"),
    (f'kind = "code"\n{GIT}[[assets.broken.files]]\npath = "a.py"\n{GOOD_PIN}',
     "names the module and factory"),
    ('kind = "weights"\nlayout = "hf-hub-cache"\norigin = { kind = "hf-model", repository = '
     f'"../x", revision = "{"a" * 40}" }}\n[[assets.broken.files]]\npath = "w"\n{GOOD_PIN}',
     "origin repository '../x' must be ORG/NAME"),
    ('kind = "code"\n', "pins no files: say why in `unpinned`"),
])
def test_a_malformed_asset_is_a_registry_error_naming_the_table(cli, home, registry_copy,
                                                                table, named):
    reg = registry_copy / "defences.toml"
    reg.write_text(reg.read_text() + "\n[assets.broken]\n" + table)
    r = cli("backends", "build", "agentdojo", "--dry-run", "--defence-assets", "broken",
            env={"AGENTPROV_REGISTRY": str(registry_copy)})
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_file")
    assert "[assets.broken]" in r.error["message"] and named in r.error["message"]
    assert snapshot(home) == {}


# ------------------------------------------------------------------------------ the build plan
@pytest.mark.req("R-6.11", "R-6.12", "R-6.4")
def test_the_dry_run_shows_what_would_be_provisioned_and_writes_nothing(cli, home, fixture):
    r = build(cli, fixture, "--dry-run", *sources(fixture))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[5] == ("  then: uv pip install the worker host's libraries, T0 identity, "
                        "hello identity, sandbox-exec feasibility probe, marker AGENTPROV_ENV.json")
    assert lines[6].startswith("  defence asset fixture_code (code, 2 file(s), ")
    assert lines[6].endswith(f"2 of 2 present and matching their pins, from --defence-source "
                             f"{fixture.code}")
    assert lines[7] == ("    into <env>/agentprov/defence-assets/fixture_code/ (the worker "
                        "imports agentprov_fixture_defence.build_pipeline)")
    assert lines[8].startswith("  defence asset fixture_weights (weights, 2 file(s)")
    assert lines[9].endswith("(a Hugging Face hub cache, loaded with the hub offline)")
    assert snapshot(home) == {}
    # without a source the files are looked for in the fetch cache, which is empty
    r = build(cli, fixture, "--dry-run")
    assert r.code == 0, r.err
    assert "0 of 2 present and matching their pins, from nowhere yet" in r.out
    assert (f"    missing: README.md, agentprov_fixture_defence.py; the build fetches them from "
            f"{fixture.code}@{fixture.commit[:12]} with --allow-network") in r.out.splitlines()
    r = cli("backends", "build", "agentdojo", "--dry-run", "--defence-assets", "none")
    assert r.code == 0 and r.out.splitlines()[6:] == [
        "  defence assets: none",
        "  project: backends/agentdojo (from agentprov-agentdojo 0.1.0; worker agentprov-worker-agentdojo)",
        "  pins: agentdojo 0.1.35 (the project's direct dependencies, as its uv.lock records "
        "them)",
        "  host libraries: agentprov-backend from the agentprov 0.1.0 checkout's backends/shared; "
        "agentprov-capture from the agentprov 0.1.0 checkout's packages/capture"]
    assert snapshot(home) == {}


@pytest.mark.req("R-6.12")
def test_one_altered_file_refuses_the_build_naming_it_and_both_digests(cli, home, fixture):
    target = fixture.code / "agentprov_fixture_defence.py"
    pinned = hashlib.sha256(target.read_bytes()).hexdigest()
    target.write_text(target.read_text() + "# altered\n")
    got = hashlib.sha256(target.read_bytes()).hexdigest()
    for extra in ((), ("--dry-run",)):
        r = build(cli, fixture, *extra, *sources(fixture))
        assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset_mismatch"), r.err
        msg = r.error["message"]
        assert f"{target} does not match its pin agentprov_fixture_defence.py" in msg
        assert f"sha256 {got} (pinned {pinned})" in msg
        assert f"git blob {fx.blob_of(target)} (pinned " in msg
        assert msg.endswith("nothing was written")
    assert snapshot(home) == {}


@pytest.mark.req("R-6.12")
def test_one_missing_file_refuses_the_build_naming_it(cli, home, fixture):
    (fixture.code / "README.md").unlink()
    r = build(cli, fixture, *sources(fixture))
    assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset_missing"), r.err
    assert r.error["message"].startswith(
        f"agentprov: error [cli.environment.defence_asset_missing]: defence asset fixture_code:"
        f" its pinned file README.md is neither in {fixture.code} nor in the fetch cache "
        f"{home}/cache/defence-assets/fixture_code/{fixture.commit}: add --allow-network")
    assert snapshot(home) == {}


@pytest.mark.req("R-6.11")
def test_bad_asset_options_are_refused_before_anything(cli, home, fixture, tmp_path,
                                                      landed_env):
    cases = [
        (("--defence-assets", "nope"), 2, "cli.usage.defence_asset_unknown"),
        (("--defence-source", str(fixture.code)), 2, "cli.usage.defence_source"),
        (("--defence-assets", "fixture_weights", "--defence-source", str(fixture.code)), 2,
         "cli.usage.defence_source"),  # a bare DIR serves the one code asset named: none
        (("--defence-assets", "fixture_code", "--defence-source", "fixture_weights=/x"), 2,
         "cli.usage.defence_source"),
        (("--defence-assets", "fixture_code", "--defence-source", str(tmp_path / "nowhere")),
         2, "cli.usage.defence_source"),
        (("--offline-check", "--defence-assets", "fixture_code"), 2, "cli.usage.exclusive"),
        (("--defence-assets", "melon"), 3, "cli.environment.defence_asset_unpinned"),
        (("--defence-assets", "mandate"), 3, "cli.environment.defence_asset_unpinned"),
        (("--defence-assets", "transformers_pi_detector"), 3,
         "cli.environment.defence_asset_unpinned"),
    ]
    for args, code, error in cases:
        r = cli("backends", "build", "agentdojo", *args, env=env_of(fixture))
        assert (r.code, r.error["error"]) == (code, error), (args, r.err)
    r = cli("backends", "build", "agentdojo", "--defence-assets", "melon", env=env_of(fixture))
    assert "MELON port's code is not public" in r.error["message"]
    # a backend that builds no defences, once its project has landed
    r = cli("backends", "build", "autodojo", "--defence-assets", "fixture_code",
            env=env_of(fixture) | landed_env)
    assert (r.code, r.error["error"]) == (5, "build.unsupported.defence_assets")
    assert "for agentdojo only" in r.error["message"]
    assert snapshot(home) == {}


def test_an_asset_whose_group_the_lock_lacks_and_one_it_declares(cli, home, fixture, tmp_path):
    """The PI detector's weights need the `defences` group (torch, transformers): a lock
    without it refuses (exit 3, saying how to add it); a lock that declares it syncs it."""
    reg = fixture.registry / "defences.toml"
    head, sep, tail = reg.read_text().rpartition('layout = "hf-hub-cache"\n')  # the fixture's
    reg.write_text(head + sep + 'group = "defences"\ndistributions = ["fixture-dist"]\n' + tail)
    r = build(cli, fixture, "--dry-run", *sources(fixture))
    assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset_group")
    assert ("needs the dependency group defences (fixture-dist), which "
            "backends/agentdojo/uv.lock does not declare") in r.error["message"]
    backends = tmp_path / "backends"
    shutil.copytree(ROOT / "backends", backends)
    lock = backends / "agentdojo" / "uv.lock"
    lock.write_text(lock.read_text().replace(
        'source = { virtual = "." }\n',
        'source = { virtual = "." }\n\n[package.dev-dependencies]\ndefences = []\n', 1))
    r = cli("backends", "build", "agentdojo", "--dry-run", "--defence-assets", "fixture_weights",
            "--defence-source", f"fixture_weights={fixture.weights}",
            env=env_of(fixture) | {"AGENTPROV_BACKENDS": str(backends)})
    assert r.code == 0, r.err
    assert " --compile-bytecode --group defences --offline " in r.out.splitlines()[2]
    assert snapshot(home) == {}


# ------------------------------------------------------------------------------ the fetch cache
def test_allow_network_fetches_a_git_asset_into_the_cache(fixture, home, monkeypatch):
    """The pinned commit is fetched from its repository (here a local one) into the fetch
    cache; each blob is read with git cat-file, checked, and kept at its pinned path."""
    from agentprov_core.backend import defassets

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    assets = defassets.load(fixture.registry / "defences.toml")
    fx.git("commit", "-q", "--allow-empty", "-m", "later", cwd=fixture.code)  # pin stays older
    (r,) = defassets.resolve(["fixture_code"], assets, {})
    assert len(r.missing) == 2
    defassets.fetch_missing(r)
    cache = home / "cache" / "defence-assets" / "fixture_code" / fixture.commit
    assert r.missing == [] and set(r.via.values()) == {"cache"}
    for name, text in fx.CODE_FILES.items():
        assert (cache / name).read_text() == text
    again = defassets.resolve(["fixture_code"], assets, {})[0]
    assert again.missing == [] and len(again.found) == 2   # found in the cache now


def test_a_git_origin_that_does_not_hold_the_pinned_blob_is_refused(fixture, home,
                                                                   monkeypatch):
    from agentprov_core.backend import defassets
    from agentprov_core.errors import AgentprovError

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    reg = fixture.registry / "defences.toml"
    pin = fx.blob_of(fixture.code / "README.md")
    reg.write_text(reg.read_text().replace(f'git_blob = "{pin}"', f'git_blob = "{"1" * 40}"'))
    (r,) = defassets.resolve(["fixture_code"], defassets.load(reg), {})
    with pytest.raises(AgentprovError) as e:
        defassets.fetch_missing(r)
    assert (e.value.code, e.value.exit_code) == ("cli.environment.defence_asset_fetch", 3)
    assert "does not hold blob 111111111111 at README.md" in e.value.message
    assert not (home / "cache" / "defence-assets" / "fixture_code" / fixture.commit
                / "README.md").exists()


class _Hub(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *a):
        pass


def test_allow_network_fetches_hub_weights_and_checks_them(tmp_path, registry_copy, home,
                                                           monkeypatch):
    """A model repository's files come from the hub's resolve URL at the pinned revision
    (here a loopback stand-in of the hub); a file that differs from its pin is not kept."""
    from agentprov_core.backend import defassets
    from agentprov_core.errors import AgentprovError

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        f = fx.make(tmp_path / "trees", registry_copy,
                    endpoint=f"http://127.0.0.1:{server.server_address[1]}")
        base = f"/fixture/tiny-classifier/resolve/{fx.WEIGHTS_REVISION}/"
        _Hub.files = {base + n: t.encode() for n, t in fx.WEIGHTS_FILES.items()}
        monkeypatch.setenv("AGENTPROV_HOME", str(home))
        assets = defassets.load(f.registry / "defences.toml")
        (r,) = defassets.resolve(["fixture_weights"], assets, {})
        defassets.fetch_missing(r)
        cache = home / "cache" / "defence-assets" / "fixture_weights" / fx.WEIGHTS_REVISION
        assert (cache / "weights.txt").read_text() == fx.WEIGHTS_FILES["weights.txt"]
        shutil.rmtree(home / "cache")
        _Hub.files[base + "weights.txt"] = b"other weights\n"
        (r,) = defassets.resolve(["fixture_weights"], assets, {})
        with pytest.raises(AgentprovError) as e:
            defassets.fetch_missing(r)
        assert e.value.code == "cli.environment.defence_asset_mismatch"
        assert not (cache / "weights.txt").exists()
        assert sorted(p.name for p in cache.iterdir()) == ["config.json"]  # no temp file
    finally:
        server.shutdown()


# ------------------------------------------------------------------------------ T0's refusal
def write_marker(home: Path, registry: Path, defence_assets: dict | None = None) -> Path:
    from agentprov_core.backend import marker

    d = home / "envs" / ENV_ID
    d.mkdir(parents=True, exist_ok=True)
    marker.write(d, marker.Marker(
        format=marker.FORMAT, environment_id=ENV_ID, backend="agentdojo",
        project="backends/agentdojo", built_at="2026-11-29T00:00:00Z", agentprov="0.1.0",
        python="3.12.1", uv="uv", lock_sha256=file_sha256(ROOT / "backends/agentdojo/uv.lock"),
        exclude_newer=None, pinned_commit=None, distributions={}, files_verified=0, guarded={},
        defence_registry_sha256=file_sha256(registry), hello={}, probe={},
        identity_sha256="0" * 64, defence_assets=defence_assets))
    return d


def dry_run(cli, corpora, script, f, defence):
    return cli("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
               "--suite", "banking", "--user-tasks", "0", "--defence", defence,
               "--llm-script", script, env=env_of(f))


@pytest.mark.req("R-22.18", "R-22.7", "R-22.8", "R-22.9")
def test_a_defence_whose_assets_are_not_provisioned_is_refused_before_anything(
        cli, home, corpora, script, fixture):
    env_dir = write_marker(home, fixture.registry / "defences.toml")
    before = snapshot(home)
    r = dry_run(cli, corpora, script, fixture, "fixture_defence")
    assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset")
    assert r.error["message"] == (
        "agentprov: error [cli.environment.defence_asset]: defence fixture_defence: its pinned "
        "file README.md is not provisioned (agentprov backends build agentdojo "
        "--defence-assets fixture_code)")
    for defence, asset in (("transformers_pi_detector", "transformers_pi_detector"),
                           ("mandate_envelope", "mandate"), ("mandate_scoped", "mandate"),
                           ("mandate_intent", "mandate")):
        r = dry_run(cli, corpora, script, fixture, defence)
        assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset"), defence
        assert r.error["message"].endswith(
            f"so it is not provisioned (agentprov backends build agentdojo --defence-assets "
            f"{asset})")
        assert f"its pinned files are not in the defence registry ([assets.{asset}]: " in \
            r.error["message"]
    assert snapshot(home) == before and list(corpora.iterdir()) == []
    assert env_dir.is_dir()


def test_a_marker_that_records_the_asset_but_lacks_a_file_is_refused(
        cli, home, corpora, script, fixture, monkeypatch):
    """The marker's record alone is not enough: every pinned file must be in place."""
    from agentprov_core.backend import defassets, marker
    from agentprov_core.registries import defences

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    reg = fixture.registry / "defences.toml"
    assets = defassets.load(reg)
    resolved = defassets.resolve(["fixture_code", "fixture_weights"], assets,
                                 {"fixture_code": fixture.code,
                                  "fixture_weights": fixture.weights})
    env_dir = write_marker(home, reg)
    recorded = defassets.provision(resolved, env_dir)
    write_marker(home, reg, recorded)
    entry = {d.name: d for d in defences.load_registry(reg)}["fixture_defence"]
    defassets.require_provisioned(entry, marker.read(env_dir), env_dir, "agentdojo", assets)
    assert defassets.check_env(env_dir, recorded) == []
    hub_file = defassets.env_path(env_dir, assets["fixture_weights"], "weights.txt")
    assert hub_file == (env_dir / "agentprov/defence-assets/fixture_weights/hub/"
                        f"models--fixture--tiny-classifier/snapshots/{fx.WEIGHTS_REVISION}/"
                        "weights.txt")
    hub_file.unlink()
    before = snapshot(home)
    r = dry_run(cli, corpora, script, fixture, "fixture_defence")
    assert (r.code, r.error["error"]) == (3, "cli.environment.defence_asset")
    assert "its pinned file weights.txt is not provisioned (agentprov backends build " \
           "agentdojo --defence-assets fixture_weights)" in r.error["message"]
    assert snapshot(home) == before and list(corpora.iterdir()) == []
    assert defassets.check_env(env_dir, recorded) == ["defence asset fixture_weights: "
                                                      "weights.txt is missing"]


@pytest.mark.req("R-22.9")
def test_melon_needs_its_endpoint_which_this_build_refuses(cli, home, corpora, script):
    """MELON's embeddings endpoint: missing is a usage error (2); given, it is refused with
    the defence (exit 5): a second key in the worker and a second egress pair are not
    wired in this build. The option means nothing for a defence without a model."""
    from conftest import make_marker

    make_marker(home, ENV_ID)
    before = snapshot(home)
    base = ("run", "agentdojo", "--dry-run", "--corpus", corpora / "c", "--campaign", "c",
            "--suite", "banking", "--llm-script", script)
    r = cli(*base, "--defence", "melon")
    assert (r.code, r.error["error"]) == (2, "cli.usage.defence_endpoint_missing")
    assert "give --defence-endpoint NAME" in r.error["message"]
    r = cli(*base, "--defence", "melon_at", "--defence-endpoint", "openai", json_errors=False)
    assert r.code == 5
    assert r.err.splitlines()[0] == ("agentprov: cannot run 'agentdojo': defence melon_at "
                                     "with --defence-endpoint openai.")
    assert "its key would be a second key in the worker" in r.err
    assert r.err.splitlines()[-1] == "Nothing was started and nothing was written."
    for defence in ("none", "repeat_user_prompt"):
        r = cli(*base, "--defence", defence, "--defence-endpoint", "openai")
        assert (r.code, r.error["error"]) == (2, "cli.usage.defence_endpoint_unused")
    assert snapshot(home) == before and list(corpora.iterdir()) == []


def test_the_offline_check_sees_a_changed_or_added_asset_file(fixture, home, monkeypatch):
    from agentprov_core.backend import defassets

    monkeypatch.setenv("AGENTPROV_HOME", str(home))
    assets = defassets.load(fixture.registry / "defences.toml")
    resolved = defassets.resolve(["fixture_code", "fixture_weights"], assets,
                                 {"fixture_code": fixture.code,
                                  "fixture_weights": fixture.weights})
    env_dir = home / "env"
    recorded = defassets.provision(resolved, env_dir)
    assert json.loads(json.dumps(recorded)) == recorded
    assert recorded["fixture_code"]["sha256"] == assets["fixture_code"].pins_digest()
    assert defassets.check_env(env_dir, recorded) == []
    code = env_dir / "agentprov/defence-assets/fixture_code/files/agentprov_fixture_defence.py"
    code.write_text(code.read_text() + "# edited\n")
    (code.parent / "extra.py").write_text("")
    ref = env_dir / ("agentprov/defence-assets/fixture_weights/hub/"
                     "models--fixture--tiny-classifier/refs/main")
    ref.write_text("main")
    problems = defassets.check_env(env_dir, recorded)
    assert problems[0].startswith("defence asset fixture_code: agentprov_fixture_defence.py "
                                  "differs from its pin (sha256 ")
    assert problems[1] == ("defence asset fixture_weights: agentprov/defence-assets/"
                           "fixture_weights/hub/models--fixture--tiny-classifier/refs/main "
                           "changed")
    assert problems[2] == ("agentprov/defence-assets/fixture_code/files/extra.py is not a "
                           "provisioned file")


@pytest.mark.req("R-22.19")
def test_an_environment_built_from_another_defence_registry_is_refused(cli, home, corpora,
                                                                       script, fixture):
    """The fixture's pins are a change of the registry: an environment whose marker records
    the shipped registry is refused (exit 3) until it is rebuilt, defended or not."""
    write_marker(home, ROOT / "registry" / "defences.toml")
    before = snapshot(home)
    for defence in ("none", "fixture_defence"):
        r = dry_run(cli, corpora, script, fixture, defence)
        assert (r.code, r.error["error"]) == (3, "cli.environment.marker"), defence
        assert "records a defence registry that differs from" in r.error["message"]
        assert r.error["message"].endswith("rebuild with agentprov backends build agentdojo")
    assert snapshot(home) == before and list(corpora.iterdir()) == []
