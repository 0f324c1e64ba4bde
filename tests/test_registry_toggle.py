"""Maintainers toggle defences and part statuses; tomlkit keeps everything else."""

import difflib

import pytest
from conftest import snapshot


@pytest.mark.req("R-22.2")
def test_disable_changes_only_the_toggled_line_and_refuses_runs(cli, registry_copy, corpora,
                                                                home, script):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    path = registry_copy / "defences.toml"
    before = path.read_text()
    r = cli("registry", "defences", "disable", "tool_filter", env=env)
    assert r.code == 0, r.err
    assert r.out.startswith("defence tool_filter: disabled in ")
    after = path.read_text()
    diff = [d for d in difflib.unified_diff(before.splitlines(), after.splitlines(), n=0,
                                            lineterm="") if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    assert diff == ["-enabled = true", "+enabled = false"]
    # the disabled defence is refused before anything starts, and is no longer offered
    d = cli("run", "agentdojo", "--dry-run", "--suite", "banking", "--defence", "tool_filter",
            "--corpus", corpora / "c", "--campaign", "c", "--llm-script", script, env=env)
    assert (d.code, d.error["error"]) == (5, "run.unsupported.defence_disabled")
    u = cli("run", "agentdojo", "--dry-run", "--defence", "nope", "--corpus", corpora / "c",
            "--campaign", "c", "--llm-script", script, env=env)
    assert "tool_filter" not in u.error["message"].split("builds: ")[1]
    assert snapshot(home) == {} and list(corpora.iterdir()) == []
    # enabling restores the file byte for byte
    assert cli("registry", "defences", "enable", "tool_filter", env=env).code == 0
    assert path.read_text() == before
    again = cli("registry", "defences", "enable", "tool_filter", env=env)
    assert "(unchanged)" in again.out and path.read_text() == before


def test_replacing_defences_cannot_be_enabled(cli, registry_copy):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    before = (registry_copy / "defences.toml").read_text()
    r = cli("registry", "defences", "enable", "progent", env=env)
    assert (r.code, r.error["error"]) == (5, "run.unsupported.defence_replaces_pipeline")
    assert (registry_copy / "defences.toml").read_text() == before


def test_unknown_entry_and_list(cli, registry_copy):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    r = cli("registry", "defences", "disable", "nope", env=env)
    assert (r.code, r.error["error"]) == (2, "cli.usage.registry_unknown_entry")
    assert "melon_sm" in r.error["message"]
    listing = cli("registry", "defences", "list", env=env).out.splitlines()
    assert listing[0].split()[:2] == ["Defence", "State"]
    states = {line.split()[0]: line.split()[1] for line in listing[1:]}
    assert states["progent"] == "refused" and states["melon"] == "enabled"
    assert len(states) == 14


def test_part_status_round_trip(cli, registry_copy):
    env = {"AGENTPROV_REGISTRY": str(registry_copy)}
    path = registry_copy / "parts.toml"
    before = path.read_text()
    assert cli("registry", "parts", "set-status", "agentdyn", "planned", env=env).code == 0
    changed = [(a, b) for a, b in zip(before.splitlines(), path.read_text().splitlines(),
                                      strict=True) if a != b]
    assert changed == [('live_status = "partial"', 'live_status = "planned"')]
    info = cli("info", env=env).out
    assert [ln for ln in info.splitlines() if ln.startswith("agentdyn")][0].split()[3] == "planned"
    assert cli("registry", "parts", "set-status", "agentdyn", "partial", env=env).code == 0
    assert path.read_text() == before


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
