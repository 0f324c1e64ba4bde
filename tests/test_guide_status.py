"""docs/guide.md's "Not in this build yet" is held to the build: every command it lists is
run and refused with the code and exit code it names, without writing anything, and the
parts it says run real-model campaigns, or are planned, are those ``agentprov info``
gives as such."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from conftest import ROOT, snapshot
from results_corpus import Cell, build

GUIDE = ROOT / "docs" / "guide.md"
SECTION = re.compile(r"^## Not in this build yet\n(.*?)^## ", re.S | re.M)
LIST = re.compile(r"<!-- not-in-this-build -->\n(.*?)<!-- /not-in-this-build -->", re.S)
ITEM = re.compile(r"`(agentprov [^`]+)`\s+is\s+`([a-z_.]+)`, exit (\d)")


def _section() -> str:
    m = SECTION.search(GUIDE.read_text(encoding="utf-8"))
    assert m, "docs/guide.md has no 'Not in this build yet' section"
    return m.group(1)


def _items() -> list[tuple[str, str, int]]:
    listed = LIST.search(_section())
    assert listed, "the section's list is not marked <!-- not-in-this-build -->"
    bullets = [b for b in re.split(r"^- ", listed.group(1), flags=re.M) if b.strip()]
    found = [ITEM.search(" ".join(b.split())) for b in bullets]
    assert all(found), [b for b, f in zip(bullets, found, strict=True) if not f]
    return [(f[1], f[2], int(f[3])) for f in found]


@pytest.mark.req("R-14.1")
@pytest.mark.parametrize("command,code,exit_", _items(), ids=lambda v: str(v)[:40])
def test_every_refusal_the_guide_lists_is_the_builds(cli, home, tmp_path, command, code,
                                                     exit_):
    script, spec = tmp_path / "script.json", tmp_path / "corpus-spec.toml"
    script.write_text("[]")
    spec.write_text("")
    live = build(tmp_path / "corpora", "live", [Cell("user_task_0")])
    words = {"SCRIPT": str(script), "DIR": str(tmp_path / "out" / "c"), "LIVE": str(live),
             "SPEC": str(spec)}
    args = [words.get(w, w) for w in shlex.split(command)][1:]
    before, corpora = snapshot(home), snapshot(tmp_path / "corpora")
    r = cli(*args)
    assert (r.code, r.error["error"]) == (exit_, code), r.err
    assert snapshot(home) == before and snapshot(tmp_path / "corpora") == corpora
    assert not (tmp_path / "out").exists()


def test_the_parts_the_guide_names_are_infos(cli):
    """The parts said to run real-model campaigns are the partial and full ones; the
    planned ones are those the list names as planned."""
    parts = json.loads(cli("info", "--format", "json").out)["parts"]
    text = " ".join(_section().split())
    runs = re.search(r"`partial` or `full`: ([a-z, ]+?) \(", text)
    assert runs, text
    named = set(re.split(r", | and ", runs.group(1)))
    assert named == {p["name"] for p in parts if p["live_status"] in ("partial", "full")}
    planned = re.search(r"live status is `planned`: ([a-z, ]+?) \(", text)
    assert planned, text
    assert set(re.split(r", | and ", planned.group(1))) == {
        p["name"] for p in parts if p["live_status"] == "planned"}


def test_the_readmes_development_install_names_every_plugin():
    """No plugin left to the reader's guess: every bundled plugin project is installed."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("For development", 1)[1].split("```", 2)[1]
    named = set(re.findall(r"-e (plugins/[\w-]+)", block))
    assert named == {f"plugins/{p.name}" for p in (ROOT / "plugins").iterdir()
                     if (p / "pyproject.toml").is_file()}
    assert "…" not in block
