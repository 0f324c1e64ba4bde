"""A third party adds a source with no change to the core.

The example distribution ``examples/agentprov-example-source`` (source
``examplebench``) and a distribution whose plugin fails to import
(``tests/fixtures/agentprov-broken-source``, source ``brokenbench``) are built as wheels and
installed, with the core, into a fresh virtual environment made once for this module; the
real CLI then runs there in subprocesses. The in-process fixtures of
``agentprov_core.testing`` are tested here too, and the plugin guide (docs/plugins.md) is
held to the example's files, which it quotes verbatim.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pluggy
import pytest
from conftest import venv_env

from agentprov_core import plugins as plugins_mod
from agentprov_core.plugins import hookimpl

# (the helpers of agentprov_core.testing are imported inside the tests, after pytest has
# registered the plugin module, so that pytest can still rewrite its asserts)
pytest_plugins = ["agentprov_core.testing.fixtures"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agentprov-example-source"
BROKEN = ROOT / "tests" / "fixtures" / "agentprov-broken-source"
EXAMPLE_PKG = EXAMPLE / "src" / "agentprov_example_source"
GUIDE = ROOT / "docs" / "plugins.md"

# the files of the example that the guide quotes, by the name in its marker
QUOTED = {
    "plugin.py": EXAMPLE_PKG / "plugin.py",
    "mapper.py": EXAMPLE_PKG / "mapper.py",
    "catalogue.json": EXAMPLE_PKG / "catalogue.json",
    "pyproject.toml": EXAMPLE / "pyproject.toml",
    "backend/pyproject.toml": EXAMPLE_PKG / "backend" / "pyproject.toml",
    "worker/pyproject.toml": EXAMPLE_PKG / "backend" / "worker" / "pyproject.toml",
    "examplebench_worker/__init__.py": (EXAMPLE_PKG / "backend" / "worker" / "src"
                                        / "examplebench_worker" / "__init__.py"),
}
BLOCK = re.compile(r"<!-- example:(?P<name>[\w./]+) -->\n```\w*\n(?P<body>.*?)```\n<!-- /example -->",
                   re.S)


def _catalogue() -> dict:
    return json.loads((EXAMPLE_PKG / "catalogue.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------- the guide
def test_guide_quotes_the_example_verbatim() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    assert text.count("<!-- example:plugin.py -->") == 1
    blocks = {m["name"]: m["body"] for m in BLOCK.finditer(text)}
    assert text.count("<!-- /example -->") == len(blocks), "a marker pair the test cannot read"
    assert sorted(blocks) == sorted(QUOTED), "the guide quotes every file the test names"
    for name, body in blocks.items():
        assert name in QUOTED, f"the guide quotes {name}, which is not a file of the example"
        assert body == QUOTED[name].read_text(encoding="utf-8"), (
            f"docs/plugins.md quotes {name} differently from {QUOTED[name].relative_to(ROOT)}")


def test_the_core_does_not_know_the_example() -> None:
    """Nothing in the core or its registries names the example: it is a third party."""
    for top in ("agentprov_core", "registry", "backends", "plugins"):
        for path in (ROOT / top).rglob("*"):
            if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                continue  # a local virtual environment or cache, not the core
            if path.is_file() and path.suffix in {".py", ".toml", ".json", ".md", ".lock"}:
                assert "examplebench" not in path.read_text(encoding="utf-8", errors="replace"), path


# ------------------------------------------------------ the fixtures, in this process
def _example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("examplebench_under_test",
                                                  EXAMPLE_PKG / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.req("R-7.11")
def test_agentprov_plugin_registers_a_plugin_for_one_test(agentprov_plugin, agentprov_cli,
                                                          agentprov_home) -> None:
    plugins = agentprov_plugin(_example_module())
    assert plugins_mod.manager() is plugins
    listed = agentprov_cli("plugins", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    rows = {p["name"]: p for p in listed.json()["plugins"]}
    # only the core's built-ins and the registered plugin: no installed entry point
    assert sorted(rows) == ["agentprov.builtin", "examplebench"]
    assert rows["examplebench"]["sources"] == ["examplebench"]
    assert rows["examplebench"]["hooks"] == ["agentprov_backends", "agentprov_mappers",
                                          "agentprov_sources"]

    shown = agentprov_cli("--error-format", "json", "run", "examplebench", "--catalogue")
    assert shown.exit_code == 0, shown.stderr
    assert shown.json() == _catalogue()
    absent = agentprov_cli("--error-format", "json", "run", "agentdojo", "--catalogue")
    assert (absent.exit_code, absent.error["error"]) == (2, "cli.usage.source_not_installed")
    assert list(agentprov_home.iterdir()) == []


def test_use_plugins_swaps_the_manager_and_restores_it() -> None:
    from agentprov_core.testing import build_plugins, use_plugins

    original = plugins_mod.manager
    outer, inner = build_plugins(_example_module()), build_plugins()
    with use_plugins(outer):
        assert plugins_mod.manager() is outer
        assert "examplebench" in plugins_mod.manager().sources()
        with use_plugins(inner):
            assert plugins_mod.manager() is inner
            assert plugins_mod.manager().sources() == {}
        assert plugins_mod.manager() is outer
    assert plugins_mod.manager is original


def test_register_refuses_a_misspelled_hook() -> None:
    from agentprov_core.testing import build_plugins, register

    @hookimpl
    def agentprov_source():  # the hook is agentprov_sources
        return []

    plugins = build_plugins()
    plugin = SimpleNamespace(agentprov_source=agentprov_source)
    with pytest.raises(pluggy.PluginValidationError):
        register(plugins, plugin, "misspelled")
    assert not plugins.pm.is_registered(plugin)
    assert plugins.record("misspelled") is None


def test_a_second_plugin_of_a_source_name_is_refused(agentprov_plugin, agentprov_cli) -> None:
    """The first registered plugin keeps the name; a second one can only add the source
    under another entry-point name, and is refused for it (listed as failed, with the
    fix), so nothing of it is used."""
    from agentprov_core.source import Source, SourceMeta

    def plugin(label: str) -> SimpleNamespace:
        class Dup(Source):
            meta = SourceMeta(name="dupbench", label=label, summary="a duplicate",
                              kind="suites", backend=None)

        @hookimpl
        def agentprov_sources():
            return [Dup()]

        return SimpleNamespace(agentprov_sources=agentprov_sources)

    agentprov_plugin(plugin("first"), "dupbench")
    plugins = agentprov_plugin(plugin("second"), "dup-b")
    entry = plugins.sources()["dupbench"]
    assert (entry.plugin.name, entry.source.meta.label) == ("dupbench", "first")
    listed = agentprov_cli("plugins", "--format", "json").json()
    (dup_b,) = [p for p in listed["plugins"] if p["name"] == "dup-b"]
    assert dup_b["status"] == "failed"
    assert "comes from the entry point 'dup-b'" in dup_b["error"]


@pytest.mark.req("R-14.1")
def test_an_entry_point_not_named_as_its_source_is_refused(agentprov_plugin, agentprov_cli,
                                                            agentprov_home, tmp_path,
                                                            monkeypatch) -> None:
    """Not only the contract suite: ``plugins`` lists the plugin as failed with the fix,
    and ``run`` and ``backends build`` of its source (or its backend) refuse it (exit 3)
    with the same words, writing nothing."""
    from agentprov_core.backendproject import BackendProject

    shutil.copytree(EXAMPLE_BACKEND, tmp_path / "calbench")
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))
    agentprov_plugin(_bench_plugin("calbench", BackendProject(name="calbench",
                                                              path="calbench")),
                     "calbench-plugin", distribution="agentprov-calbench", version="1.0")
    fix = ("source 'calbench' comes from the entry point 'calbench-plugin': the entry-point "
           "name must be the source's name (name the entry point calbench in the "
           "distribution's [project.entry-points.agentprov] table)")
    listed = agentprov_cli("plugins", "--format", "json").json()
    (rec,) = [p for p in listed["plugins"] if p["name"] == "calbench-plugin"]
    assert (rec["status"], rec["error"]) == ("failed", fix)
    assert "calbench" not in listed["sources"] and "calbench" not in {
        b["name"] for b in listed["backends"]}
    text = agentprov_cli("plugins")
    assert fix in text.stdout
    (tmp_path / "s.json").write_text("[]")
    for args in (("run", "calbench", "--dry-run", "--llm-script", tmp_path / "s.json",
                  "--corpus", tmp_path / "c", "--campaign", "c"),
                 ("backends", "build", "calbench", "--dry-run")):
        done = agentprov_cli("--error-format", "json", *map(str, args))
        assert (done.exit_code, done.error["error"]) == (3, "cli.environment.plugin_failed"), \
            done.stderr
        assert fix in done.error["message"]
    assert list(agentprov_home.iterdir()) == [] and not (tmp_path / "c").exists()


# -------------------------------------------------------------- a fresh environment
def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


_clean_env = venv_env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment: the core and the two third-party wheels, none editable (an
    installed core has no checkout: no registry/ and no backends/ beside it)."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build and install the example distributions")
    base = tmp_path_factory.mktemp("third-party")
    dist = base / "dist"
    builds = []
    for project in (EXAMPLE, BROKEN):  # built from copies: nothing is written to the repo
        copy = shutil.copytree(project, base / "src" / project.name)
        builds.append(subprocess.Popen(
            [uv, "build", "--quiet", "--wheel", "--out-dir", str(dist), str(copy)],
            env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for build in builds:
        out, _ = build.communicate(timeout=300)
        assert build.returncode == 0, out
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["agentprov_broken_source",
                                                      "agentprov_example_source"]
    env_dir = base / "venv"
    for cmd in ([uv, "venv", "--quiet", "--python", sys.executable, str(env_dir)],
                [uv, "pip", "install", "--quiet", "--python", str(_python(env_dir)),
                 str(ROOT), str(ROOT / "packages" / "capture"), *map(str, wheels), "pytest"]):
        done = subprocess.run(cmd, env=_clean_env(), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    return env_dir


@dataclass
class Done:
    code: int
    out: str
    err: str

    @property
    def error(self) -> dict:
        return json.loads(self.err.strip().splitlines()[-1])


class ThirdParty:
    """``agentprov`` in the fresh environment: private home, empty working directory."""

    def __init__(self, venv: Path, tmp: Path) -> None:
        self.python = _python(venv)
        self.site = (venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
                     / "site-packages")
        self.home, self.cwd, self.corpora = tmp / "home", tmp / "cwd", tmp / "corpora"
        for d in (self.home, self.cwd, self.corpora):
            d.mkdir()
        self.script = tmp / "replies.json"
        self.script.write_text("[]")

    def __call__(self, *args: str, **env: str) -> Done:
        done = subprocess.run(
            [str(self.python), "-m", "agentprov_core", *args], cwd=self.cwd,
            env=_clean_env(AGENTPROV_HOME=str(self.home), AGENTPROV_ERROR_FORMAT="json", **env),
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        return Done(done.returncode, done.stdout, done.stderr)

    def transcript(self, command: str) -> str:
        """What a shell session shows for ``command``: the output, then ``[exit N]``."""
        words = shlex.split(command.replace("$SCRIPT", str(self.script))
                            .replace("$CORPORA", str(self.corpora)))
        env = {}
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        assert words[0] == "agentprov", command
        done = subprocess.run(
            [str(self.python), "-m", "agentprov_core", *words[1:]], cwd=self.cwd,
            env=_clean_env(AGENTPROV_HOME=str(self.home), COLUMNS="100", **env),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
            stdin=subprocess.DEVNULL)
        got = done.stdout.rstrip("\n").replace(str(ROOT), "…").replace(str(self.site), "…")
        for name in ("script", "corpora"):
            got = got.replace(str(getattr(self, name)), "$" + name.upper())
        return got + (f"\n[exit {done.returncode}]" if done.returncode else "")

    def dry_run(self, *args: str) -> Done:
        return self("run", "examplebench", "--dry-run", "--llm-script", str(self.script),
                    "--corpus", str(self.corpora / "example"), "--campaign", "try", *args)

    def assert_nothing_written(self) -> None:
        corpus = self.corpora / "example"
        assert not corpus.exists() and not corpus.with_name("example.partial").exists()
        assert list(self.corpora.iterdir()) == []
        assert list(self.home.iterdir()) == []
        assert list(self.cwd.iterdir()) == []


@pytest.fixture
def agentprov(venv: Path, tmp_path: Path) -> ThirdParty:
    return ThirdParty(venv, tmp_path)


SESSION = re.compile(r"^```shell-session\n(.*?)^```", re.S | re.M)


def _sessions() -> list[tuple[str, str]]:
    """The guide's shell sessions: (command, what it prints) pairs."""
    pairs: list[tuple[str, str]] = []
    for block in SESSION.findall(GUIDE.read_text(encoding="utf-8")):
        for chunk in block.split("$ ")[1:]:
            command, _, output = chunk.partition("\n")
            pairs.append((command, output.rstrip("\n")))
    return pairs


def test_the_guide_s_sessions_run_as_shown(agentprov: ThirdParty) -> None:
    sessions = _sessions()
    assert len(sessions) >= 8
    for command, shown in sessions:
        assert agentprov.transcript(command) == shown, command
    agentprov.assert_nothing_written()


def _plugins(done: Done) -> dict[str, dict]:
    assert done.code == 0, done.err
    doc = json.loads(done.out)
    assert doc["format"] == "agentprov-plugins/0.1"
    return {p["name"]: p for p in doc["plugins"]}


def test_plugins_lists_the_third_party_distributions(agentprov: ThirdParty) -> None:
    rows = _plugins(agentprov("plugins", "--format", "json"))
    assert sorted(rows) == ["agentprov.builtin", "brokenbench", "examplebench"]
    example = rows["examplebench"]
    assert (example["distribution"], example["version"], example["status"]) == (
        "agentprov-example-source", "0.1.0", "loaded")
    assert example["hooks"] == ["agentprov_backends", "agentprov_mappers", "agentprov_sources"]
    assert example["sources"] == ["examplebench"] and example["backends"] == ["examplebench"]
    assert example["mappers"] == ["examplebench.capture"]
    assert example["error"] is None
    broken = rows["brokenbench"]
    assert (broken["distribution"], broken["version"], broken["status"]) == (
        "agentprov-broken-source", "0.2.0", "failed")
    assert broken["error"].startswith("ImportError: cannot import name 'SuiteSourceV2'")
    assert broken["sources"] == [] and broken["hooks"] == []

    text = agentprov("plugins")
    assert text.code == 0, text.err
    assert "error: brokenbench (agentprov-broken-source 0.2.0): ImportError" in text.out
    version = agentprov("--version")
    assert version.code == 0, version.err
    assert ("  agentprov-example-source 0.1.0: source examplebench; backend examplebench; mapper examplebench.capture\n"
            in version.out)
    assert "  agentprov-broken-source 0.2.0 (failed)\n" in version.out
    agentprov.assert_nothing_written()


def test_info_shows_the_third_party_part(agentprov: ThirdParty) -> None:
    done = agentprov("info", "--format", "json")
    assert done.code == 0, done.err
    rows = {r["name"]: r for r in json.loads(done.out)["parts"]}
    example = rows["examplebench"]
    assert (example["label"], example["live_status"], example["source"], example["backend"]) == (
        "examplebench · example", "planned", "plugin", "examplebench")
    assert example["plugin"] == {"name": "examplebench",
                                 "distribution": "agentprov-example-source", "version": "0.1.0"}
    text = agentprov("info")
    assert text.code == 0, text.err
    assert re.search(r"^examplebench · example +planned +scripted runs only; an example",
                     text.out, re.M)
    agentprov.assert_nothing_written()


@pytest.mark.req("R-7.11", "R-7.12", "R-7.13")
def test_catalogue_of_the_third_party_source(agentprov: ThirdParty) -> None:
    done = agentprov("run", "examplebench", "--catalogue")
    assert done.code == 0, done.err
    printed = json.loads(done.out)
    assert printed == _catalogue()
    assert printed["provenance"]["kind"] == "declared"
    (suite,) = printed["suites"]
    assert suite["user_tasks"] == ["user_task_0", "user_task_1", "user_task_2"]
    assert suite["injection_tasks"] == ["injection_task_0"]
    flags = {a["name"]: (a["dos"], a["refused"], a["needs"]) for a in printed["attacks"]}
    assert flags == {"important_instructions": (False, False, []),
                     "exfil_oracle": (False, True, [])}
    agentprov.assert_nothing_written()


@pytest.mark.req("R-16.1", "R-16.2", "R-7.5")
def test_dry_run_checks_the_plan_before_the_environment(agentprov: ThirdParty) -> None:
    """Usage (2), then the backend's refusals (5), then the environment (3): a third-party
    plan is checked in full although no backend environment exists for it."""
    done = agentprov.dry_run("--user-tasks", "7")
    assert (done.code, done.error["error"]) == (2, "cli.usage.task_spec")
    assert ("index 7 is out of range; mail (v1) has 3 user tasks "
            "(indices 0-2: user_task_0 … user_task_2)") in done.error["message"]
    agentprov.assert_nothing_written()

    done = agentprov.dry_run("--attack", "no_such_attack")
    assert (done.code, done.error["error"]) == (2, "cli.usage.unknown_attack")
    assert "exfil_oracle, important_instructions" in done.error["message"]

    done = agentprov.dry_run("--user-tasks", "0", "--attack", "exfil_oracle")
    assert (done.code, done.error["error"]) == (5, "run.unsupported.attack_refused")
    assert "it needs a live mail server" in done.error["message"]
    assert done.error["message"].endswith("Nothing was started and nothing was written.")
    agentprov.assert_nothing_written()

    done = agentprov.dry_run("--attack", "important_instructions")
    assert done.code == 3, done.err
    assert done.error["error"] in {"cli.environment.no_backend_project",
                                   "cli.environment.backend_missing"}
    assert done.out == ""
    agentprov.assert_nothing_written()


def test_a_broken_plugin_fails_only_its_own_commands(agentprov: ThirdParty) -> None:
    done = agentprov("run", "brokenbench", "--catalogue")
    assert (done.code, done.error["error"]) == (3, "cli.environment.plugin_failed")
    assert "agentprov-broken-source 0.2.0" in done.error["message"]
    assert "ImportError: cannot import name 'SuiteSourceV2'" in done.error["message"]
    done = agentprov.dry_run()
    assert done.code == 3 and done.error["error"] != "cli.environment.plugin_failed", done.err
    assert agentprov("run", "examplebench", "--catalogue").code == 0
    assert agentprov("info").code == 0
    agentprov.assert_nothing_written()


@pytest.mark.parametrize("name", ["brokenbench", "agentprov-broken-source"])
def test_disabled_plugins(agentprov: ThirdParty, name: str) -> None:
    rows = _plugins(agentprov("plugins", "--format", "json", AGENTPROV_DISABLED_PLUGINS=name))
    assert (rows["brokenbench"]["status"], rows["brokenbench"]["error"]) == ("disabled", None)
    assert rows["examplebench"]["status"] == "loaded"
    done = agentprov("run", "brokenbench", "--catalogue", AGENTPROV_DISABLED_PLUGINS=name)
    assert (done.code, done.error["error"]) == (2, "cli.usage.source_disabled")
    assert "agentprov-broken-source 0.2.0, which is disabled" in done.error["message"]
    assert agentprov("run", "examplebench", "--catalogue",
                     AGENTPROV_DISABLED_PLUGINS=name).code == 0


def test_load_plugins_allowlist(agentprov: ThirdParty) -> None:
    # set but empty: no plugin is loaded, only the core's built-ins
    rows = _plugins(agentprov("plugins", "--format", "json", AGENTPROV_LOAD_PLUGINS=""))
    assert {n: r["status"] for n, r in rows.items()} == {
        "agentprov.builtin": "builtin", "brokenbench": "not-allowed",
        "examplebench": "not-allowed"}
    done = agentprov("run", "examplebench", "--catalogue", AGENTPROV_LOAD_PLUGINS="")
    assert (done.code, done.error["error"]) == (2, "cli.usage.source_disabled")
    assert "AGENTPROV_LOAD_PLUGINS does not name it" in done.error["message"]
    info = agentprov("info", "--format", "json", AGENTPROV_LOAD_PLUGINS="")
    assert info.code == 0, info.err
    assert "examplebench" not in {r["name"] for r in json.loads(info.out)["parts"]}

    rows = _plugins(agentprov("plugins", "--format", "json",
                              AGENTPROV_LOAD_PLUGINS="examplebench"))
    assert rows["examplebench"]["status"] == "loaded"
    assert (rows["brokenbench"]["status"], rows["brokenbench"]["error"]) == ("not-allowed", None)
    agentprov.assert_nothing_written()


def _contract(venv: Path, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_python(venv)), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         "--pyargs", "agentprov_core.testing.contract"],
        cwd=tmp_path, env=_clean_env(**env), capture_output=True, text=True, timeout=300)


@pytest.mark.req("R-7.2", "R-7.3")
def test_the_example_passes_the_contract_and_the_broken_plugin_fails_it(
        venv: Path, tmp_path: Path) -> None:
    done = _contract(venv, tmp_path, AGENTPROV_CONTRACT_SOURCE="examplebench")
    assert done.returncode == 0, done.stdout + done.stderr
    for check in ("test_source_is_installed", "test_metadata", "test_catalogue",
                  "test_catalogue_command", "test_attacks", "test_expansion_order",
                  "test_refused_attacks_exit_5"):
        assert re.search(rf"^PASSED \S*::{check}\[examplebench\]$", done.stdout, re.M), check

    # over every installed source, a plugin that failed to load is a failure of the contract
    done = _contract(venv, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^FAILED \S*::test_source_is_installed\[brokenbench\]", done.stdout, re.M)
    assert "agentprov-broken-source 0.2.0 failed to load" in done.stdout
    assert re.search(r"^PASSED \S*::test_expansion_order\[examplebench\]$", done.stdout, re.M)


# ------------------------------------------------------------ backends through the hook
EXAMPLE_BACKEND = EXAMPLE_PKG / "backend"


def _site_packages(venv: Path) -> Path:
    done = subprocess.run([str(_python(venv)), "-c",
                           "import agentprov_example_source as m; print(m.__file__)"],
                          env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip()).parent


@pytest.mark.req("R-5.1", "R-5.3", "R-6.1")
def test_the_third_party_backend_is_found_through_its_hook(agentprov: ThirdParty,
                                                          venv: Path) -> None:
    """The example ships its backend project as package data of a wheel (a normal
    install, no ``AGENTPROV_BACKENDS``): the dry run plans the build of the installed copy,
    names the distribution, and the offline check looks for the environment that lock
    names."""
    from agentprov_core.base.digests import file_sha256

    installed = _site_packages(venv) / "backend"
    assert (installed / "uv.lock").read_bytes() == (EXAMPLE_BACKEND / "uv.lock").read_bytes()
    env_id = f"examplebench-{file_sha256(installed / 'uv.lock')[:8]}"
    done = agentprov("backends", "build", "examplebench", "--dry-run")
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0] == f"backend examplebench: environment {agentprov.home}/envs/{env_id}"
    assert ("--exclude-newer 2026-10-07T00:00:00Z") in lines[2]
    assert lines[-3] == (f"  project: {installed} (from agentprov-example-source 0.1.0; "
                         "worker examplebench-worker)")
    assert lines[-2] == ("  pins: httpx 0.28.1 (the project's direct dependencies, as its "
                         "uv.lock records them)")
    assert lines[-1] == ("  host libraries: agentprov-backend from the copy shipped with "
                         "agentprov 0.1.0; agentprov-capture from the copy shipped with "
                         "agentprov 0.1.0")
    agentprov.assert_nothing_written()

    done = agentprov("backends", "build", "examplebench", "--offline-check")
    assert (done.code, done.error["error"]) == (3, "cli.environment.backend_missing")
    assert env_id in done.error["message"]
    assert not (agentprov.home / "envs" / env_id).exists()

    rows = json.loads(agentprov("plugins", "--format", "json").out)
    (row,) = [b for b in rows["backends"] if b["name"] == "examplebench"]
    assert row == {"name": "examplebench", "plugin": "examplebench",
                   "distribution": "agentprov-example-source", "version": "0.1.0",
                   "package": "agentprov_example_source", "path": "backend",
                   "project": str(installed), "pinned": "uv.lock",
                   "worker": "examplebench-worker", "status": "ok", "problem": None}
    plugin = {p["name"]: p for p in rows["plugins"]}["examplebench"]
    assert plugin["backends"] == ["examplebench"]
    info = json.loads(agentprov("info", "--format", "json").out)
    example = {r["name"]: r for r in info["parts"]}["examplebench"]
    assert example["backend_project"] == {
        "distribution": "agentprov-example-source", "version": "0.1.0",
        "plugin": "examplebench", "project": str(installed), "status": "ok",
        "problem": None}


def test_help_does_not_import_the_backend_hook(venv: Path) -> None:
    done = subprocess.run([str(_python(venv)), "-X", "importtime", "-m", "agentprov_core",
                           "--help"], env=_clean_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "agentprov_core.cli.main" in imported
    for module in ("agentprov_core.backendproject", "agentprov_core.backend.projects",
                   "agentprov_core.plugins", "agentprov_example_source.plugin"):
        assert module not in imported


def _bench_plugin(name: str, project: object | None, *, source: bool = True) -> SimpleNamespace:
    """A plugin adding source ``name`` (backend ``name``) and, optionally, a backend project."""
    from agentprov_core.source import Source, SourceMeta

    class Bench(Source):
        meta = SourceMeta(name=name, label=name, summary="a backend project test",
                          kind="suites", backend=name)

    hooks = {}
    if source:
        hooks["agentprov_sources"] = hookimpl(lambda: [Bench()])
    if project is not None:
        hooks["agentprov_backends"] = hookimpl(lambda: [project])
    return SimpleNamespace(**hooks)


def _backends_listed(agentprov_cli) -> dict[str, list[dict]]:
    listed = agentprov_cli("plugins", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    out: dict[str, list[dict]] = {}
    for b in listed.json()["backends"]:
        out.setdefault(b["name"], []).append(b)
    return out


def _build_refused(agentprov_cli, name: str, code: str, home: Path) -> str:
    for how in ("--dry-run", "--offline-check"):
        done = agentprov_cli("--error-format", "json", "backends", "build", name, how)
        assert (done.exit_code, done.error["error"]) == (3, code), done.stderr
    assert list(home.iterdir()) == []
    return done.error["message"]


def test_a_backend_project_whose_directory_is_missing(agentprov_plugin, agentprov_cli,
                                                     agentprov_home, tmp_path,
                                                     monkeypatch) -> None:
    from agentprov_core.backendproject import BackendProject

    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))  # holds no ghost/
    agentprov_plugin(_bench_plugin("ghostbench", BackendProject(name="ghostbench",
                                                                path="ghost")),
                     "ghostbench", distribution="agentprov-ghost", version="1.2")
    agentprov_plugin(_bench_plugin("nopkgbench", BackendProject(
        name="nopkgbench", package="agentprov_no_such_package", path="backend")),
        "nopkgbench", distribution="agentprov-nopkg", version="0.3")
    rows = _backends_listed(agentprov_cli)
    (ghost,), (nopkg,) = rows["ghostbench"], rows["nopkgbench"]
    assert (ghost["status"], ghost["distribution"]) == ("missing", "agentprov-ghost")
    assert ghost["problem"] == (f"backend ghostbench comes from agentprov-ghost 1.2, but its "
                                f"project is not there: {tmp_path}/ghost is not a directory")
    assert nopkg["status"] == "missing"
    assert "its package 'agentprov_no_such_package' cannot be imported" in nopkg["problem"]
    message = _build_refused(agentprov_cli, "ghostbench",
                             "cli.environment.backend_project_missing", agentprov_home)
    assert "agentprov-ghost 1.2" in message and f"{tmp_path}/ghost" in message
    message = _build_refused(agentprov_cli, "nopkgbench",
                             "cli.environment.backend_project_missing", agentprov_home)
    assert "agentprov-nopkg 0.3" in message
    text = agentprov_cli("plugins")
    assert text.exit_code == 0, text.stderr
    assert "  backend ghostbench (missing): backend ghostbench comes from agentprov-ghost" \
        in text.stdout


def test_a_backend_project_whose_lock_does_not_match(agentprov_plugin, agentprov_cli,
                                                    agentprov_home, tmp_path,
                                                    monkeypatch) -> None:
    from agentprov_core.backendproject import BackendProject

    project = shutil.copytree(EXAMPLE_BACKEND, tmp_path / "stalebench")
    py = project / "pyproject.toml"
    py.write_text(py.read_text().replace('"httpx==0.28.1",', '"httpx==0.28.1", "sniffio",'))
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))
    agentprov_plugin(_bench_plugin("stalebench", BackendProject(name="stalebench",
                                                                path="stalebench")),
                     "stalebench", distribution="agentprov-stale", version="2.0")
    (row,) = _backends_listed(agentprov_cli)["stalebench"]
    assert row["status"] == "lock mismatch"
    assert row["problem"].endswith("re-lock the backend project stalebench "
                                   "(from agentprov-stale 2.0)")
    assert "dependencies: sniffio is declared" in row["problem"]
    message = _build_refused(agentprov_cli, "stalebench", "cli.environment.lock_mismatch",
                             agentprov_home)
    assert message == ("agentprov: error [cli.environment.lock_mismatch]: " + row["problem"])


def test_two_distributions_contributing_one_backend(agentprov_plugin, agentprov_cli,
                                                   agentprov_home, tmp_path,
                                                   monkeypatch) -> None:
    """agentprov does not pick one of two projects for a backend: both are listed as a
    conflict, and the build's dry run and the offline check refuse naming both."""
    from agentprov_core.backendproject import BackendProject

    shutil.copytree(EXAMPLE_BACKEND, tmp_path / "twinbench")
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path))
    agentprov_plugin(_bench_plugin("twinbench", BackendProject(name="twinbench",
                                                               path="twinbench")),
                     "twinbench", distribution="agentprov-twin-a", version="1.0")
    agentprov_plugin(_bench_plugin("twinbench", BackendProject(
        name="twinbench", package="agentprov_example_source", path="backend"), source=False),
        "twin-b", distribution="agentprov-twin-b", version="1.1")
    rows = _backends_listed(agentprov_cli)["twinbench"]
    assert [(r["distribution"], r["status"]) for r in rows] == [
        ("agentprov-twin-a", "conflict"), ("agentprov-twin-b", "conflict")]
    expected = ("backend twinbench is contributed by more than one distribution "
                "(agentprov-twin-a 1.0, agentprov-twin-b 1.1); agentprov does not choose "
                "between them")
    assert {r["problem"] for r in rows} == {expected}
    message = _build_refused(agentprov_cli, "twinbench", "cli.environment.backend_conflict",
                             agentprov_home)
    assert message == f"agentprov: error [cli.environment.backend_conflict]: {expected}"


def test_a_backend_hook_that_returns_something_else(agentprov_plugin, agentprov_cli) -> None:
    """A hook returning a dict (not a ``BackendProject``) fails its plugin, visibly."""
    agentprov_plugin(SimpleNamespace(agentprov_backends=hookimpl(
        lambda: [{"name": "dictbench", "path": "backend"}])), "dictbench",
        distribution="agentprov-dict", version="0.1")
    listed = agentprov_cli("plugins", "--format", "json")
    assert listed.exit_code == 0, listed.stderr
    rec = {p["name"]: p for p in listed.json()["plugins"]}["dictbench"]
    assert (rec["status"], rec["error"]) == (
        "failed", "agentprov_backends: returned dict, not a BackendProject")
    assert listed.json()["backends"] == []


@pytest.mark.req("R-14.1")
def test_catalogue_errors_list_every_field_and_run_agrees_with_catalogue(
        agentprov_plugin, agentprov_cli, agentprov_home, tmp_path, monkeypatch) -> None:
    """A committed catalogue with two bad fields is refused naming both; once the backend
    environment is built, a run plans with the catalogue the environment recorded from its
    worker (as ``--catalogue`` prints the worker's), so a stale committed file no longer
    decides a dry run while ``--catalogue`` answers."""
    from agentprov_core.backend import environments, marker
    from agentprov_core.backendproject import BackendProject
    from agentprov_core.base.digests import file_sha256
    from agentprov_core.source import SourceMeta, SuiteSource

    good = json.loads((EXAMPLE_PKG / "catalogue.json").read_text())
    good["source"] = good["backend"] = "calbench"
    bad = json.loads(json.dumps(good))
    bad["suites"][0]["user_tasks"] = "user_task_0"
    bad["attacks"] = [{"name": "x", "dos": "yes"}]
    committed = tmp_path / "catalogue.json"
    committed.write_text(json.dumps(bad))

    class CalBench(SuiteSource):
        meta = SourceMeta(name="calbench", label="calbench", summary="a catalogue test",
                          kind="suites", backend="calbench")
        catalogue_file = committed

    shutil.copytree(EXAMPLE_BACKEND, tmp_path / "backends" / "calbench")
    monkeypatch.setenv("AGENTPROV_BACKENDS", str(tmp_path / "backends"))
    agentprov_plugin(SimpleNamespace(
        agentprov_sources=hookimpl(lambda: [CalBench()]),
        agentprov_backends=hookimpl(lambda: [BackendProject(name="calbench",
                                                            path="calbench")])), "calbench")
    script = tmp_path / "s.json"
    script.write_text("[]")
    dry = ("--error-format", "json", "run", "calbench", "--dry-run", "--llm-script",
           str(script), "--corpus", str(tmp_path / "c"), "--campaign", "c")
    for args in (dry, ("--error-format", "json", "run", "calbench", "--catalogue")):
        r = agentprov_cli(*args)
        assert (r.exit_code, r.error["error"]) == (3, "cli.environment.no_catalogue"), r.stderr
        assert "is not a catalogue (2 problem(s): " in r.error["message"]
        assert "Expected `array`, got `str` - at `$.suites[0].user_tasks`" in r.error["message"]
        assert "Expected `bool`, got `str` - at `$.attacks[0].dos`" in r.error["message"]
    # the environment built: its worker's catalogue recorded, its digest in the marker
    env_id = environments.environment_id(CalBench.meta)
    env_dir = agentprov_home / "envs" / env_id
    (env_dir / "agentprov").mkdir(parents=True)
    rel = "agentprov/catalogue-calbench.json"
    (env_dir / rel).write_text(json.dumps(good))
    marker.write(env_dir, marker.Marker(
        format=marker.FORMAT, environment_id=env_id, backend="calbench", project="calbench",
        built_at="2026-11-29T00:00:00Z", agentprov="0.1.0", python="3.12.1", uv="uv",
        lock_sha256=file_sha256(tmp_path / "backends/calbench/uv.lock"), exclude_newer=None,
        pinned_commit=None, distributions={}, files_verified=0,
        guarded={rel: file_sha256(env_dir / rel)}, defence_registry_sha256=None,
        hello={"sources": ["calbench"]}, probe={}, identity_sha256="0" * 64))
    r = agentprov_cli(*dry)
    assert r.error["error"] != "cli.environment.no_catalogue", r.stderr
    # a recorded file that is not the one the marker hashed is not planned with
    (env_dir / rel).write_text(json.dumps(good) + " ")
    assert agentprov_cli(*dry).error["error"] == "cli.environment.no_catalogue"
    assert not (tmp_path / "c").exists()


@pytest.mark.req("R-22.2")
def test_a_third_party_part_can_be_toggled(agentprov_plugin, agentprov_cli,
                                           agentprov_home) -> None:
    """A maintainer toggles the live status of any installed plugin's part, not only of
    those registry/parts.toml names: the overlay holds it, ``info`` and ``registry parts
    list`` show it, and setting the plugin's own status back removes the overlay."""
    agentprov_plugin(_bench_plugin("calbench", None), "calbench",
                     distribution="agentprov-calbench", version="1.0")

    def status(cmd: tuple[str, ...]) -> str:
        done = agentprov_cli(*cmd, "--format", "json")
        assert done.exit_code == 0, done.stderr
        rows = done.json()["parts"] if cmd == ("info",) else done.json()
        return {r["name"]: r["live_status"] for r in rows}["calbench"]

    assert status(("info",)) == status(("registry", "parts", "list")) == "planned"
    r = agentprov_cli("registry", "parts", "set-status", "calbench", "partial")
    assert r.exit_code == 0, r.stderr
    overlay = agentprov_home / "registry" / "parts.toml"
    assert r.stdout.startswith(f"part calbench: live status partial in {overlay}")
    assert '[parts.calbench]\nlive_status = "partial"' in overlay.read_text()
    assert status(("info",)) == status(("registry", "parts", "list")) == "partial"
    assert agentprov_cli("registry", "parts", "set-status", "calbench", "planned"
                         ).exit_code == 0
    assert not overlay.exists()
    unknown = agentprov_cli("--error-format", "json", "registry", "parts", "set-status",
                            "nobench", "partial")
    assert (unknown.exit_code, unknown.error["error"]) == (
        2, "cli.usage.registry_unknown_entry")
    assert unknown.error["message"].endswith(
        "is not in registry/parts.toml nor a part of an installed plugin; entries: agentdojo, "
        "agentdyn, agentharm, autodojo, calbench, rope")
    assert [p for p in agentprov_home.rglob("*") if p.is_file()] == []
