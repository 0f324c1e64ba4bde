"""`agentprov info`, `agentprov plugins` and `agentprov --version`."""

import json

import pytest

PARTS = [
    ("agentdojo · live", "partial", "local, OpenRouter and Anthropic (the 2026-10-22 pilot)"),
    ("autodojo · live", "partial", "local"),
    ("agentdyn · live", "partial", "local (the spec's 2026-10-22 pilot); on this build, one benign cell on llama.cpp with Gemma 3 270M (tox -e realmodel, 2026-12-01)"),
    ("agentharm · live", "partial", "OpenRouter, a 4-sample probe (2026-10-23)"),
    ("rope · head (live)", "planned", "none; no backend in this build"),
]


#: what the table adds to the caveat of a part whose backend this build lacks (a slot):
#: none (tests/test_honest_status.py makes one)
NO_BACKEND: dict[str, str] = {}
#: what it adds to the caveat of a part built from an upstream that is not public
UNPUBLISHED = {
    "autodojo": "the AutoDojo fork is not public, and no environment of its pinned commit "
                "aa458794 is built here (agentprov backends build autodojo --source-repo URL "
                "builds one from a copy)",
}


@pytest.mark.req("R-1.1", "R-1.2", "R-1.7", "R-27.16")
def test_info_lists_the_five_parts_in_order(cli):
    r = cli("info")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() [:2] == ["Part", "Live"]
    for (label, status, caveat), line in zip(PARTS, lines[1:6], strict=True):
        assert line.startswith(label)
        name = label.split()[0]
        if name in NO_BACKEND:
            caveat += (f"; no backend in this build: {NO_BACKEND[name]} "
                       f"(agentprov run {name} exits 5)")
        if name in UNPUBLISHED:
            caveat += f"; {UNPUBLISHED[name]}"
        assert line.split("  ")[-1].strip() == caveat
        assert f" {status} " in line
    assert lines[-1].endswith(" A finished live corpus seals as agentprov-corpus/0.3 "
                              "(agentprov package); \"Live Capture\" is claimed for none "
                              "until an approved, sealed, non-test live corpus exists.")


@pytest.mark.req("R-1.3", "R-1.2")
def test_info_json_has_no_gated_status(cli):
    r = cli("info", "--format", "json")
    doc = json.loads(r.out)
    assert doc["format"] == "agentprov-info/0.1"
    got = [(p["label"], p["live_status"], p["caveat"]) for p in doc["parts"]]
    assert got == PARTS
    assert {p["name"]: (p["buildable"], p["unbuildable"]) for p in doc["parts"]} == {
        "agentdojo": (True, None), "agentharm": (True, None), "agentdyn": (True, None),
        "autodojo": (True, None), "rope": (False, None),
        **{name: (False, why) for name, why in NO_BACKEND.items()}}
    assert {p["name"]: p["unpublished"] for p in doc["parts"] if p.get("unpublished")} == (
        UNPUBLISHED)
    assert all(p["live_status"] in {"planned", "partial", "full"} for p in doc["parts"])
    assert "gated" not in r.out
    assert {p["plugin"]["distribution"] for p in doc["parts"]} == {
        "agentprov-agentdojo", "agentprov-autodojo", "agentprov-agentdyn",
        "agentprov-agentharm", "agentprov-rope"}


def test_info_names_the_distribution_of_a_missing_plugin(cli):
    r = cli("info", "--format", "json", env={"AGENTPROV_LOAD_PLUGINS": "agentdojo"})
    parts = {p["name"]: p for p in json.loads(r.out)["parts"]}
    assert parts["agentdojo"]["note"] is None
    assert "agentprov-autodojo" in parts["autodojo"]["note"]
    assert "not-allowed" in parts["autodojo"]["note"]
    # text output says the same, under the table
    t = cli("info", env={"AGENTPROV_DISABLED_PLUGINS": "agentprov-rope"})
    assert "note: rope · head (live): its plugin agentprov-rope 0.1.0 is disabled" in t.out


def test_plugins_and_version_list_distributions_and_versions(cli):
    r = cli("plugins", "--format", "json")
    recs = {p["name"]: p for p in json.loads(r.out)["plugins"]}
    assert recs["agentprov.builtin"]["status"] == "builtin"
    assert "agentprov_endpoint_kinds" in recs["agentprov.builtin"]["hooks"]
    assert "agentprov_containment_providers" in recs["agentprov.builtin"]["hooks"]
    for name in ("agentdojo", "autodojo", "agentdyn", "agentharm", "rope"):
        assert recs[name]["distribution"] == f"agentprov-{name}"
        assert recs[name]["version"] == "0.1.0"
        assert recs[name]["status"] == "loaded"
        assert recs[name]["sources"] == [name]
        hooks = ["agentprov_sources"] if name == "rope" else ["agentprov_backends",
                                                              "agentprov_sources"]
        assert recs[name]["hooks"] == sorted(hooks + (["agentprov_mappers"]
                                                      if name == "agentdojo" else []))
    # each backend project, with the distribution that contributes it and its state
    backends = {b["name"]: b for b in json.loads(r.out)["backends"]}
    assert {n: (b["distribution"], b["project"], b["pinned"], b["status"])
            for n, b in backends.items()} == {
        "agentdojo": ("agentprov-agentdojo", "backends/agentdojo", "uv.lock", "ok"),
        "autodojo": ("agentprov-autodojo", "backends/autodojo", "commit aa458794", "ok"),
        "agentdyn": ("agentprov-agentdyn", "backends/agentdyn", "commit 5353cf7615b135cace8d07c8f12dac53a16b6db3", "ok"),
        "inspect-agentharm": ("agentprov-agentharm", "backends/inspect/envs/agentharm",
                              "uv.lock", "ok")}
    assert recs["agentharm"]["backends"] == ["inspect-agentharm"]
    assert recs["rope"]["backends"] == []
    info = {p["name"]: p for p in json.loads(cli("info", "--format", "json").out)["parts"]}
    assert info["agentdojo"]["backend_project"] == {
        "distribution": "agentprov-agentdojo", "version": "0.1.0", "plugin": "agentdojo",
        "project": "backends/agentdojo", "status": "ok", "problem": None}
    v = cli("--version")
    assert v.out.splitlines()[0] == "agentprov 0.1.0"
    assert ("  agentprov-agentdojo 0.1.0: source agentdojo; backend agentdojo; "
            "mappers agentdojo.capture, agentdojo.results") in v.out.splitlines()


#: what each built-in distribution contributes, as ``agentprov --version`` lists it
CONTRIBUTES = {
    "agentdojo": ("source agentdojo; backend agentdojo; "
                  "mappers agentdojo.capture, agentdojo.results"),
    "agentdyn": "source agentdyn; backend agentdyn",
    "agentharm": "source agentharm; backend inspect-agentharm",
    "autodojo": "source autodojo; backend autodojo",
    "inspect-harness": "mapper inspect.eval",
    "ray": "executor ray",
    "rope": "source rope",
}


def test_version_names_what_each_distribution_contributes(cli):
    v = cli("--version")
    assert v.code == 0, v.err
    assert v.out.splitlines() == ["agentprov 0.1.0"] + [
        f"  agentprov-{name} 0.1.0: {what}" for name, what in CONTRIBUTES.items()]
    # a plugin that is not loaded contributes nothing, and its line says why
    off = cli("--version", env={"AGENTPROV_DISABLED_PLUGINS": "agentprov-agentdojo"})
    assert "  agentprov-agentdojo 0.1.0 (disabled)" in off.out.splitlines()
    assert "  agentprov-autodojo 0.1.0: source autodojo; backend autodojo" in off.out


def test_plugins_lists_the_mappers_each_plugin_contributes(cli):
    r = cli("plugins", "--format", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert {p["name"]: p["mappers"] for p in doc["plugins"]} == {
        "agentprov.builtin": [], "agentdojo": ["agentdojo.capture", "agentdojo.results"],
        "agentdyn": [],
        "agentharm": [], "autodojo": [], "inspect-harness": ["inspect.eval"], "ray": [],
        "rope": []}
    # the mapper each source names for its live evidence, all of them registered
    assert {s["name"]: (s["distribution"], s["mapper"], s["problem"])
            for s in doc["sources"]} == {
        "agentdojo": ("agentprov-agentdojo", "agentdojo.capture", None),
        "autodojo": ("agentprov-autodojo", "agentdojo.capture", None),
        "agentdyn": ("agentprov-agentdyn", "agentdojo.capture", None),
        "agentharm": ("agentprov-agentharm", "inspect.eval", None),
        "rope": ("agentprov-rope", None, None)}
    text = cli("plugins").out.splitlines()
    assert text[0].split() == ["Plugin", "Distribution", "Version", "Status", "Sources",
                               "Backends", "Mappers"]
    rows = {line.split()[0]: line.split() for line in text[1:8]}
    assert rows["agentdojo"][-2:] == ["agentdojo.capture,", "agentdojo.results"]
    assert rows["autodojo"][-1] == "-" and rows["agentprov.builtin"][-1] == "-"
    # without agentprov-agentdojo, the sources that name its mapper are reported
    off = cli("plugins", "--format", "json", env={"AGENTPROV_LOAD_PLUGINS": "autodojo"})
    [auto] = [s for s in json.loads(off.out)["sources"] if s["name"] == "autodojo"]
    assert auto["problem"] == ("names the mapper 'agentdojo.capture' for its live evidence, "
                               "which cannot map it: no installed plugin registers a mapper "
                               "of that name (registered: none)")
    assert ("  source autodojo (autodojo): " + auto["problem"]) in cli(
        "plugins", env={"AGENTPROV_LOAD_PLUGINS": "autodojo"}).out.splitlines()


def test_info_names_the_distribution_of_source_backend_and_mapper(cli):
    r = cli("info", "--format", "json")
    assert r.code == 0, r.err
    parts = {p["name"]: p for p in json.loads(r.out)["parts"]}

    def dist(name):
        return f"agentprov-{name} 0.1.0"

    assert {n: (p["mapper"], p["contributed_by"]) for n, p in parts.items()} == {
        **{n: ("agentdojo.capture", {"source": dist(n), "backend": dist(n),
                                     "mapper": dist("agentdojo")})
           for n in ("agentdojo", "autodojo", "agentdyn")},
        # an Inspect source names the harness's mapper, from the harness's distribution
        "agentharm": ("inspect.eval", {"source": dist("agentharm"),
                                       "backend": dist("agentharm"),
                                       "mapper": dist("inspect-harness")}),
        "rope": (None, {"source": dist("rope"), "backend": None, "mapper": None})}
    # the existing fields are kept
    assert parts["agentdojo"]["plugin"] == {"name": "agentdojo",
                                            "distribution": "agentprov-agentdojo",
                                            "version": "0.1.0"}
    assert parts["agentdojo"]["backend_project"]["distribution"] == "agentprov-agentdojo"
    lines = cli("info").out.splitlines()
    assert ("  from: agentdojo · live: source agentprov-agentdojo 0.1.0; backend "
            "agentprov-agentdojo 0.1.0; mapper agentdojo.capture (agentprov-agentdojo "
            "0.1.0)") in lines
    assert ("  from: rope · head (live): source agentprov-rope 0.1.0; backend none; "
            "mapper none") in lines
    # a part whose named mapper is not registered: no mapper, and the note says why
    alone = {p["name"]: p for p in json.loads(cli(
        "info", "--format", "json", env={"AGENTPROV_LOAD_PLUGINS": "agentdyn"}).out)["parts"]}
    assert alone["agentdyn"]["mapper"] is None
    assert alone["agentdyn"]["contributed_by"] == {"source": dist("agentdyn"),
                                                   "backend": dist("agentdyn"),
                                                   "mapper": None}
    assert "names the mapper 'agentdojo.capture'" in alone["agentdyn"]["note"]
    assert "contributed_by" not in alone["agentdojo"]  # its plugin is not loaded


def test_empty_allowlist_loads_no_plugin(cli):
    r = cli("plugins", "--format", "json", env={"AGENTPROV_LOAD_PLUGINS": ""})
    recs = json.loads(r.out)["plugins"]
    assert [p["status"] for p in recs if p["name"] != "agentprov.builtin"] == ["not-allowed"] * 7
    # a source whose plugin is not loaded is not runnable, and the refusal says what to do
    c = cli("run", "agentdojo", "--catalogue", env={"AGENTPROV_LOAD_PLUGINS": ""})
    assert (c.code, c.error["error"]) == (2, "cli.usage.source_disabled")
    assert "agentprov-agentdojo 0.1.0, which is not-allowed" in c.error["message"]


def test_help_lists_commands_without_loading_plugins(cli):
    # a plugin allowlist naming a plugin that does not exist would be harmless; what
    # proves laziness is that --help works even when every plugin is broken
    r = cli("--help", env={"AGENTPROV_LOAD_PLUGINS": "no-such-plugin"})
    assert r.code == 0
    for cmd in ("info", "plugins", "registry", "run"):
        assert f"  {cmd} " in r.out
