"""Maintainers toggle defences and part statuses in the overlay ($AGENTPROV_HOME/registry/),
read over the registry files, which no command edits; every command checks the whole
registry first and writes nothing when it is invalid."""

import json
import re
import shutil

import pytest
from conftest import ROOT, make_marker, snapshot

from agentprov_core.base.digests import file_sha256

OVERLAY_BODY = '\n[defences.tool_filter]\nenabled = false\n'


def _registry_files() -> dict[str, bytes]:
    """The checkout's registry files, links resolved (the defence registry is the worker's)."""
    root = ROOT / "registry"
    return {str(p.relative_to(root)): p.resolve().read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.req("R-22.2")
def test_disable_writes_the_overlay_and_refuses_runs(cli, registry_copy, corpora, home,
                                                     script):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    registry_before = snapshot(registry_copy)
    r = cli("registry", "defences", "disable", "tool_filter", env=env)
    assert r.code == 0, r.err
    overlay = home / "registry" / "defences.toml"
    assert r.out.splitlines()[0] == (f"defence tool_filter: disabled in {overlay} "
                                     f"(over {registry_copy / 'defences.toml'})")
    assert r.out.splitlines()[1] == "no built environment is affected"
    # the registry is untouched; the overlay holds the one toggled key
    assert snapshot(registry_copy) == registry_before
    assert list(snapshot(home)) == ["registry/defences.toml"]
    text = overlay.read_text()
    assert text.split('format = "agentprov-defence-registry/0.1"\n')[1] == OVERLAY_BODY
    # the disabled defence is refused before anything starts, and is no longer offered
    d = cli("run", "agentdojo", "--dry-run", "--suite", "banking", "--defence", "tool_filter",
            "--corpus", corpora / "c", "--campaign", "c", "--llm-script", script, env=env)
    assert (d.code, d.error["error"]) == (5, "run.unsupported.defence_disabled")
    u = cli("run", "agentdojo", "--dry-run", "--defence", "nope", "--corpus", corpora / "c",
            "--campaign", "c", "--llm-script", script, env=env)
    assert "tool_filter" not in u.error["message"].split("builds: ")[1]
    listing = cli("registry", "defences", "list", env=env).out
    assert re.search(r"^tool_filter\s+disabled\s", listing, re.M)
    assert list(snapshot(home)) == ["registry/defences.toml"] and list(corpora.iterdir()) == []
    # enabling back to the registry's own value removes the line, and the emptied overlay
    assert cli("registry", "defences", "enable", "tool_filter", env=env).code == 0
    assert snapshot(home) == {} and snapshot(registry_copy) == registry_before
    again = cli("registry", "defences", "enable", "tool_filter", env=env)
    assert "(unchanged)" in again.out and snapshot(home) == {}


def test_a_checkout_registry_is_never_edited(cli, home):
    """Without $AGENTPROV_REGISTRY the checkout's files (the defence registry is part of
    what an environment is built from) stay byte for byte as they were."""
    before = _registry_files()
    assert cli("registry", "defences", "disable", "melon").code == 0
    assert cli("registry", "parts", "set-status", "agentdyn", "planned").code == 0
    assert _registry_files() == before
    assert sorted(snapshot(home)) == ["registry/defences.toml", "registry/parts.toml"]
    listed = cli("registry", "defences", "list", "--format", "json")
    assert {e["name"]: e["enabled"] for e in json.loads(listed.out)}["melon"] is False
    assert cli("registry", "defences", "enable", "melon").code == 0
    assert cli("registry", "parts", "set-status", "agentdyn", "partial").code == 0
    assert _registry_files() == before and snapshot(home) == {}


def _with_own_copy(home, env_id: str, registry_copy) -> None:
    """A stand-in marker whose environment holds its own copy of the defence registry
    (where the real build installs it: site-packages/agentprov_backend/defences.toml)."""
    make_marker(home, env_id)
    own = home / "envs" / env_id / "lib/python3.12/site-packages/agentprov_backend"
    own.mkdir(parents=True)
    shutil.copyfile(registry_copy / "defences.toml", own / "defences.toml")


@pytest.mark.req("R-22.19")
def test_the_toggle_names_the_environments_and_which_need_a_rebuild(cli, home,
                                                                    registry_copy):
    """A built environment is unaffected by a toggle, and by a summary reworded in the
    registry; one whose registry differs in what the worker runs (here: the registry copy
    is changed) is named with the fields and the command that refreshes it."""
    _with_own_copy(home, "agentdojo-0000aaaa", registry_copy)
    r = cli("registry", "defences", "disable", "melon")
    assert r.code == 0, r.err
    assert r.out.splitlines()[1:] == [
        "built environments unaffected (no file of theirs changes; runs check the toggle "
        "when they are planned): agentdojo-0000aaaa"]
    path = registry_copy / "defences.toml"
    path.write_text(path.read_text().replace(
        'summary = "MELON (a port) with a semantic mask"',
        'summary = "MELON (a port), semantic mask"'))
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    r = cli("registry", "defences", "disable", "melon_sm", env=env)
    assert r.code == 0, r.err
    assert "unaffected" in r.out.splitlines()[1] and len(r.out.splitlines()) == 2
    path.write_text(path.read_text().replace('port = true', 'port = false', 1))
    r = cli("registry", "defences", "disable", "melon_at", env=env)
    assert r.code == 0, r.err
    assert r.out.splitlines()[1:] == [
        "no built environment is affected",
        f"environment agentdojo-0000aaaa was built from a defence registry that differs "
        f"from {path} in what the worker runs ([defences.melon].port): rebuild it with "
        f"agentprov backends build agentdojo"]


def test_replacing_defences_cannot_be_enabled(cli, registry_copy, home):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    before = snapshot(registry_copy)
    r = cli("registry", "defences", "enable", "progent", env=env)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_replaces_pipeline")
    assert snapshot(registry_copy) == before and snapshot(home) == {}


def test_unknown_entry_and_list(cli, registry_copy, home):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    r = cli("registry", "defences", "disable", "nope", env=env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_unknown_entry")
    assert "melon_sm" in r.error["message"]
    r = cli("registry", "parts", "set-status", "nope", "full", env=env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_unknown_entry")
    assert snapshot(home) == {}
    listing = cli("registry", "defences", "list", env=env).out.splitlines()
    assert listing[0].split()[:2] == ["Defence", "State"]
    states = {line.split()[0]: line.split()[1] for line in listing[1:]}
    assert states["progent"] == "refused" and states["melon"] == "enabled"
    assert len(states) == 14


@pytest.mark.req("R-1.5")
def test_part_status_round_trip(cli, registry_copy, home):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    before = snapshot(registry_copy)
    assert cli("registry", "parts", "set-status", "agentdyn", "planned", env=env).code == 0
    assert snapshot(registry_copy) == before
    overlay = (home / "registry" / "parts.toml").read_text()
    assert overlay.split('format = "agentprov-parts/0.1"\n')[1] == \
        '\n[parts.agentdyn]\nlive_status = "planned"\n'
    info = cli("info", env=env).out
    assert [ln for ln in info.splitlines() if ln.startswith("agentdyn")][0].split()[3] == "planned"
    assert cli("registry", "parts", "set-status", "agentdyn", "partial", env=env).code == 0
    assert snapshot(home) == {} and snapshot(registry_copy) == before


@pytest.mark.parametrize("name", ["defences.toml", "parts.toml"])
def test_malformed_registry_names_file_and_line(cli, registry_copy, name):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    path = registry_copy / name
    lines = path.read_text().splitlines()
    lines[20] = lines[20] + " = = broken"
    path.write_text("\n".join(lines) + "\n")
    r = cli("info" if name == "parts.toml" else "registry", *(
        () if name == "parts.toml" else ("defences", "list")), env=env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_file")
    assert f"{path}:21: malformed TOML" in r.error["message"]
    assert "Traceback" not in r.err


def _line(text: str, needle: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if ln == needle)


# (file, the line changed, what it becomes, the command, what the message names: the field
# and the fix)
INVALID = [
    ("parts.toml", 'live_status = "partial"', 'live_stats = "partial"',
     ("parts", "set-status", "agentdojo", "full"),
     "[parts.agentdojo].live_stats is not a key of a part: did you mean live_status?"),
    ("parts.toml", "[parts.agentdojo]", "[parts.agentdoj]",
     ("parts", "set-status", "agentdyn", "full"),
     "[parts.agentdoj] is not a source of agentprov-agentdojo: rename the table to one of "
     "its sources: agentdojo"),
    ("parts.toml", 'live_status = "planned"', 'live_status = "gated"',
     ("parts", "set-status", "agentdyn", "full"),
     "[parts.rope].live_status is 'gated': use one of planned, partial, full"),
    ("defences.toml", 'backends = ["agentdojo"]', 'backend = ["agentdojo"]',
     ("defences", "disable", "melon"),
     "[defences.repeat_user_prompt].backend is not a key of a defence: did you mean "
     "backends?"),
    ("defences.toml", 'suites = ["banking"]', 'suites = ["bankin"]',
     ("defences", "disable", "melon"),
     "[defences.mandate_envelope].suites names 'bankin', which is not a suite of the "
     "agentdojo backend: use banking, slack, travel, workspace"),
    ("defences.toml", 'assets = ["mandate"]', 'assets = ["mandat"]',
     ("defences", "enable", "melon"),
     "[defences.mandate_envelope].assets names 'mandat', which has no [assets.mandat] table: "
     "add the table, or name one of mandate, melon, transformers_pi_detector"),
    ("defences.toml", "enabled = true", 'enabled = "yes"',
     ("defences", "disable", "melon"),
     "[defences.repeat_user_prompt].enabled is invalid (Expected `bool`, got `str`)"),
    ("defences.toml", "[defences.melon]", "[defence.melon]",
     ("defences", "disable", "melon_sm"),
     "defence is not a key or table of the defence registry: did you mean defences?"),
]


@pytest.mark.parametrize(("name", "line", "becomes", "command", "names"), INVALID,
                         ids=[c[4].split(" ")[0] + "-" + c[2] for c in INVALID])
def test_an_invalid_registry_is_refused_and_nothing_is_written(cli, registry_copy, home, name,
                                                               line, becomes, command, names):
    """The whole registry is checked before an edit: the error names the file, the line, the
    field and the fix; neither the registry nor the overlay is written, byte for byte."""
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    path = registry_copy / name
    text = path.read_text()
    changed = text.replace(line, becomes, 1)
    path.write_text(changed)
    # an overlay already there (from an earlier toggle) is not touched either
    assert cli("registry", "defences", "disable", "tool_filter",
               env={"AGENTPROV_REGISTRY": str(ROOT / "registry")}).code == 0
    registry_before, home_before = snapshot(registry_copy), snapshot(home)
    r = cli("registry", *command, env=env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_field"), r.err
    where = f"{path}:{_line(changed, becomes)}: "
    assert r.error["message"].startswith(f"agentprov registry: {where}{names}"), r.error
    assert snapshot(registry_copy) == registry_before and snapshot(home) == home_before
    listed = cli("registry", command[0], "list", env=env)
    assert (listed.code, listed.error["message"]) == (2, r.error["message"])


@pytest.mark.parametrize(("body", "at", "names"), [
    ("[defences.tool_filter]\nenable = false\n", "enable = false",
     "[defences.tool_filter].enable is not a key of an overlay entry: did you mean enabled?"),
    ("[defences.tool_filtre]\nenabled = false\n", "[defences.tool_filtre]",
     "[defences.tool_filtre] is not an entry of defences.toml: remove the table, or use one "
     "of camel, "),
    ("[defences.tool_filter]\nenabled = 0\n", "enabled = 0",
     "[defences.tool_filter].enabled is 0: write true or false"),
    ('[defences.tool_filter]\nenabled = false\nsummary = "x"\n', 'summary = "x"',
     "[defences.tool_filter].summary is not a key of an overlay entry"),
])
def test_an_invalid_overlay_is_refused_with_its_line(cli, home, body, at, names):
    overlay = home / "registry" / "defences.toml"
    overlay.parent.mkdir()
    text = f'format = "agentprov-defence-registry/0.1"\n\n{body}'
    overlay.write_text(text)
    before = snapshot(home)
    r = cli("registry", "defences", "disable", "melon")
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_field")
    assert f"{overlay}:{_line(text, at)}: {names}" in r.error["message"], r.error
    assert snapshot(home) == before
    # listing reads the overlay too, and is refused the same way
    d = cli("registry", "defences", "list")
    assert (d.code, d.error["message"]) == (2, r.error["message"])


@pytest.mark.req("R-22.19")
def test_a_registry_change_that_matters_to_the_worker_is_refused(cli, home, registry_copy,
                                                                 corpora, script):
    """An environment built from another defence registry (a defence's assets changed) is
    refused with exit 3, before anything starts; a toggle is not such a change."""
    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    env_id = environments.environment_id(source_entry("agentdojo").source.meta)
    make_marker(home, env_id)
    args = ("run", "agentdojo", "--dry-run", "--suite", "banking", "--corpus", corpora / "c",
            "--campaign", "c", "--llm-script", script)
    assert cli("registry", "defences", "disable", "melon").code == 0
    ok = cli(*args)  # past the marker's checks: the worker of the stand-in marker is absent
    assert ok.error["error"] != "cli.environment.marker", ok.err
    path = registry_copy / "defences.toml"
    path.write_text(path.read_text().replace('assets = ["melon"]\nendpoint = true',
                                             'assets = ["mandate"]\nendpoint = true', 1))
    assert file_sha256(path) != file_sha256(ROOT / "registry" / "defences.toml")
    before = snapshot(home)
    r = cli(*args, env={"AGENTPROV_REGISTRY": str(registry_copy)})
    assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
    assert "records a defence registry that differs" in r.error["message"]
    assert snapshot(home) == before and list(corpora.iterdir()) == []


def _built_env(home, registry_copy) -> str:
    """A stand-in marker of the agentdojo environment, with its own registry copy."""
    from agentprov_core.backend import environments
    from agentprov_core.plugins import source_entry

    env_id = environments.environment_id(source_entry("agentdojo").source.meta)
    _with_own_copy(home, env_id, registry_copy)
    return env_id


@pytest.mark.req("R-22.19", "R-14.1")
def test_a_registry_typo_is_named_before_the_environment(cli, home, registry_copy, corpora,
                                                         script):
    """A suite misspelt in the registry is refused with its file, line, field and fix
    (exit 2) before the environment is checked, undefended runs included: not as a marker
    to rebuild, which would not mend the typo."""
    _built_env(home, registry_copy)
    path = registry_copy / "defences.toml"
    text = path.read_text().replace('suites = ["banking"]', 'suites = ["bankin"]', 1)
    path.write_text(text)
    before = snapshot(home)
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    for extra in ((), ("--defence", "repeat_user_prompt")):
        r = cli("run", "agentdojo", "--dry-run", "--suite", "banking", "--corpus",
                corpora / "c", "--campaign", "c", "--llm-script", script, *extra, env=env)
        assert (r.code, r.error["error"]) == (2, "cli.usage.registry_field"), r.err
        line = _line(text, 'suites = ["bankin"]')
        assert (f"{path}:{line}: [defences.mandate_envelope].suites names 'bankin', which is "
                f"not a suite of the agentdojo backend: use banking, slack, travel, "
                f"workspace") in r.error["message"], r.error
    assert snapshot(home) == before and list(corpora.iterdir()) == []


@pytest.mark.req("R-22.19")
def test_only_a_change_the_worker_runs_makes_an_environment_stale(cli, home, registry_copy,
                                                                  corpora, script):
    """A defence's summary or enabled edited in the registry file changes nothing a worker
    runs (T0 checks enabled before any worker starts): the environment stays usable. A
    change to what the worker reads (a defence's assets) is refused with the field."""
    _built_env(home, registry_copy)
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    args = ("run", "agentdojo", "--dry-run", "--suite", "banking", "--corpus", corpora / "c",
            "--campaign", "c", "--llm-script", script)
    path = registry_copy / "defences.toml"
    text = path.read_text()
    path.write_text(text.replace('summary = "AgentDojo built-in: repeats the user prompt',
                                 'summary = "Repeats the user prompt', 1)
                        .replace("enabled = true", "enabled = false", 1))
    ok = cli(*args, env=env)  # past the marker's checks: the stand-in has no worker
    assert ok.error["error"] != "cli.environment.marker", ok.err
    path.write_text(text.replace('assets = ["melon"]\nendpoint = true',
                                 'assets = ["mandate"]\nendpoint = true', 1))
    before = snapshot(home)
    r = cli(*args, env=env)
    assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
    assert (f"records a defence registry that differs from {path} in what the worker runs "
            f"([defences.melon].assets): rebuild with agentprov backends build agentdojo"
            ) in r.error["message"], r.error
    assert snapshot(home) == before and list(corpora.iterdir()) == []


# ------------------------------------------------------------------ the real environment
SCRIPT = ROOT / "examples" / "scripts" / "live-demo.json"
CELLS = ("--suite", "banking", "--user-tasks", "0", "--attack", "important_instructions",
         "--injection-tasks", "0", "--model-display-name", "Scripted Model")


@pytest.mark.slow
@pytest.mark.req("R-22.1", "R-22.4")
def test_runs_keep_working_after_a_toggle(e2e_cli, agentdojo_env, tmp_path):
    """melon disabled: an undefended scripted campaign and a repeat_user_prompt one run to
    the end in the built environment (real worker), whose files the toggle did not touch;
    melon itself is refused."""
    env_files = snapshot(agentdojo_env.env_dir / "agentprov") | {
        "AGENTPROV_ENV.json": (agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_bytes()}
    try:
        r = e2e_cli("registry", "defences", "disable", "melon")
        assert r.code == 0, r.err
        assert f"runs check the toggle when they are planned): {agentdojo_env.env_id}" in r.out
        for defence in ("none", "repeat_user_prompt"):
            corpus = tmp_path / defence
            run = e2e_cli("run", "agentdojo", "--corpus", corpus, "--campaign", defence, *CELLS,
                          "--defence", defence, "--llm-script", SCRIPT, json_errors=False)
            assert run.code == 0, run.out + run.err
            assert ("2 attempt(s); 2 conclusive, 0 inconsistent, 0 inconclusive; 2 derived, "
                    "0 failed") in run.out
        refused = e2e_cli("run", "agentdojo", "--dry-run", "--corpus", tmp_path / "m",
                          "--campaign", "m", *CELLS, "--defence", "melon", "--llm-script",
                          SCRIPT)
        assert (refused.code, refused.error["error"]) == (5, "run.unsupported.defence_disabled")
        assert snapshot(agentdojo_env.env_dir / "agentprov") | {
            "AGENTPROV_ENV.json": (agentdojo_env.env_dir / "AGENTPROV_ENV.json").read_bytes()
        } == env_files
        check = e2e_cli("backends", "build", "agentdojo", "--offline-check")
        assert check.code == 0, check.out + check.err
    finally:
        shutil.rmtree(agentdojo_env.home / "registry", ignore_errors=True)


@pytest.mark.slow
@pytest.mark.req("R-22.19")
def test_the_real_environment_refuses_a_registry_that_changed_what_it_runs(
        e2e_cli, agentdojo_env, registry_copy, tmp_path):
    """A defence's pipeline field changed (melon no longer a port) in the registry T0 reads:
    the built environment, whose worker reads its own copy, is refused (exit 3)."""
    path = registry_copy / "defences.toml"
    text = path.read_text()
    path.write_text(text.replace("endpoint = true\nneeds = [\"--defence-endpoint NAME for its "
                                 "embeddings\"]\nport = true", "endpoint = true\nneeds = "
                                 "[\"--defence-endpoint NAME for its embeddings\"]", 1))
    assert path.read_text() != text
    r = e2e_cli("run", "agentdojo", "--corpus", tmp_path / "c", "--campaign", "c", *CELLS,
                "--llm-script", SCRIPT, env={"AGENTPROV_REGISTRY": str(registry_copy)})
    assert (r.code, r.error["error"]) == (3, "cli.environment.marker")
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.partial").exists()


@pytest.mark.req("R-22.2")
def test_a_copy_of_the_registry_made_with_cp_r_works(cli, home, tmp_path):
    """``cp -r registry/ elsewhere`` copies the defence registry itself (a file, not a
    link): the copy is the registry the commands read and name."""
    copy = tmp_path / "elsewhere" / "registry"
    shutil.copytree(ROOT / "registry", copy, symlinks=True)
    assert (copy / "defences.toml").is_file() and not (copy / "defences.toml").is_symlink()
    env = {"AGENTPROV_REGISTRY": str(copy)}
    listed = cli("registry", "defences", "list", env=env)
    assert listed.code == 0, listed.err
    assert re.search(r"^melon\s+enabled\s", listed.out, re.M)
    r = cli("registry", "defences", "disable", "melon", env=env)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0] == (f"defence melon: disabled in {home}/registry/defences.toml "
                                     f"(over {copy / 'defences.toml'})")


@pytest.mark.req("R-22.2")
def test_the_registry_defences_file_is_the_worker_librarys_copy():
    """``registry/defences.toml`` is a file (a ``cp -r`` of ``registry/`` carries it), with
    the bytes of the worker library's ``defences.toml``, the copy every backend environment
    installs and checks a run against: a registry edited in one place only would be read by
    T0 and not by the worker."""
    ours = ROOT / "registry" / "defences.toml"
    shipped = ROOT / "backends/shared/src/agentprov_backend/defences.toml"
    assert ours.is_file() and not ours.is_symlink() and not shipped.is_symlink()
    assert ours.read_bytes() == shipped.read_bytes(), (
        "registry/defences.toml differs from backends/shared/src/agentprov_backend/"
        "defences.toml: edit both (cp backends/shared/src/agentprov_backend/defences.toml "
        "registry/defences.toml)")
