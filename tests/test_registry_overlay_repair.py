"""The overlay commands repair what they write: a hand edit that broke an overlay (a
misspelt key, malformed TOML, a directory in its place) is refused wherever the overlay is
read, naming the file, the line, the field and the repair command; a toggle rewrites its own
entry whole; ``registry defences|parts reset [NAME]`` removes an entry or the overlay. A
toggle writes nothing while the other registry's overlay is invalid."""

import pytest
from conftest import snapshot

DEFENCES = 'format = "agentprov-defence-registry/0.1"\n\n'
PARTS = 'format = "agentprov-parts/0.1"\n\n'
MISSPELT = DEFENCES + "[defences.tool_filter]\nenabld = false\n"


def overlay(home, name: str, text: str):
    p = home / "registry" / name
    p.parent.mkdir(exist_ok=True)
    p.write_text(text)
    return p


def refused(r, code: str, *words: str) -> str:
    assert (r.code, r.error["error"]) == (2, code), r.err
    for w in words:
        assert w in r.error["message"], r.error["message"]
    return r.error["message"]


@pytest.mark.req("R-22.2")
def test_a_misspelt_key_names_its_line_and_the_repair_and_a_toggle_repairs_it(
        cli, home, corpora, script):
    p = overlay(home, "defences.toml", MISSPELT)
    fix = "agentprov registry defences reset tool_filter"
    r = cli("registry", "defences", "list")
    msg = refused(r, "cli.usage.registry_field", f"{p}:4", "[defences.tool_filter].enabld",
                  "did you mean enabled?")
    assert "agentprov registry defences reset NAME" in msg and fix.rsplit(" ", 1)[0] in msg
    # every command that reads the registry names the same repair
    d = cli("run", "agentdojo", "--dry-run", "--suite", "banking", "--corpus", corpora / "c",
            "--campaign", "c", "--llm-script", script)
    assert d.code == 2 and "agentprov registry defences reset" in d.error["message"], d.err
    # the toggle rewrites its entry whole: the misspelt key goes, the overlay is valid
    t = cli("registry", "defences", "disable", "tool_filter")
    assert t.code == 0, t.err
    assert p.read_text().endswith("[defences.tool_filter]\nenabled = false\n")
    assert "enabld" not in p.read_text()
    assert cli("registry", "defences", "list").code == 0
    assert cli("registry", "defences", "enable", "tool_filter").code == 0
    assert not p.exists()  # back to the registry's own value: the overlay sets nothing


def test_reset_removes_an_entry_or_the_whole_overlay(cli, home):
    p = overlay(home, "defences.toml",
                MISSPELT + "\n[defences.melon]\nenabled = false\n")
    r = cli("registry", "defences", "reset", "tool_filter")
    assert r.code == 0, r.err
    assert r.out.strip() == f"removed tool_filter from the overlay {p}"
    assert "tool_filter" not in p.read_text() and "[defences.melon]" in p.read_text()
    assert cli("registry", "defences", "list").code == 0
    # reset of an entry the overlay does not set, then of the whole overlay
    assert "nothing to reset" in cli("registry", "defences", "reset", "tool_filter").out
    r = cli("registry", "defences", "reset")
    assert (r.code, r.out.strip()) == (0, f"removed the overlay {p}")
    assert snapshot(home) == {}
    assert "no overlay; nothing to reset" in cli("registry", "defences", "reset").out


def test_malformed_toml_is_reset_whole_and_an_entry_reset_says_so(cli, home):
    p = overlay(home, "defences.toml", DEFENCES + "[defences.tool_filter\nenabled = false\n")
    before = snapshot(home)
    for args in (("list",), ("disable", "melon")):
        refused(cli("registry", "defences", *args), "cli.usage.registry_file", str(p),
                "agentprov registry defences reset")
    refused(cli("registry", "defences", "reset", "tool_filter"), "cli.usage.registry_file",
            "agentprov registry defences reset removes the overlay")
    assert snapshot(home) == before
    assert cli("registry", "defences", "reset").code == 0 and snapshot(home) == {}


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_overlay_that_is_not_a_file_is_refused_by_every_command(cli, home, kind):
    import os

    p = home / "registry" / "defences.toml"
    p.parent.mkdir()
    if kind == "directory":
        p.mkdir()
    else:
        os.mkfifo(p)
    before = snapshot(home)
    for args in (("list",), ("disable", "melon"), ("enable", "melon"), ("reset",)):
        r = cli("registry", "defences", *args)
        refused(r, "cli.usage.registry_file", str(p))
    assert snapshot(home) == before and (p.is_dir() if kind == "directory" else p.exists())


@pytest.mark.parametrize("parts", [
    PARTS + "[parts.agentdojo\nlive_status = \"full\"\n",
    PARTS + "[parts.nosuchpart]\nlive_status = \"full\"\n",
], ids=["malformed", "unknown-part"])
def test_a_toggle_writes_nothing_while_the_other_overlay_is_invalid(cli, home, parts):
    overlay(home, "parts.toml", parts)
    before = snapshot(home)
    r = cli("registry", "defences", "disable", "melon")
    assert r.code == 2 and r.error["error"].startswith("cli.usage.registry_"), r.err
    assert "parts.toml" in r.error["message"]
    assert snapshot(home) == before
    # and the other way round
    overlay(home, "parts.toml", PARTS)
    overlay(home, "defences.toml", MISSPELT)
    before = snapshot(home)
    r = cli("registry", "parts", "set-status", "agentdojo", "full")
    refused(r, "cli.usage.registry_field", "defences.toml", "enabld")
    assert snapshot(home) == before


def test_parts_overlay_is_repaired_by_its_toggle_and_reset(cli, home):
    p = overlay(home, "parts.toml", PARTS + "[parts.agentdojo]\nlive_statu = \"full\"\n")
    refused(cli("registry", "parts", "list"), "cli.usage.registry_field",
            "[parts.agentdojo].live_statu", "agentprov registry parts reset")
    assert cli("registry", "parts", "set-status", "agentdojo", "full").code == 0
    assert p.read_text().endswith('[parts.agentdojo]\nlive_status = "full"\n')
    assert cli("registry", "parts", "list").code == 0
    assert cli("registry", "parts", "reset", "agentdojo").code == 0
    assert not p.exists()
