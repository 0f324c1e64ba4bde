"""The entry-point index (``agentprov_core.base.entrypoints``) changes nothing but speed;
nor does the rest of the plugin manager's start (the collector paused while the plugins
load, then frozen; a listing imports only what it uses).

In this process: distributions as an install leaves them (a ``.dist-info`` with
``entry_points.txt``) in directories on a patched ``sys.path``, the index in a temporary
directory. In a fresh virtual environment: the worked example installed and removed with
uv after the index was written, each ``agentprov --version`` a real subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from conftest import venv_env

from agentprov_core import plugins as plugins_mod
from agentprov_core.base import entrypoints

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "agentprov-example-source"
GROUP = "agentprov"


def install(site: Path, dist: str, entries: str, version: str = "1.0") -> Path:
    """A distribution as an installer leaves it: its ``.dist-info`` under ``site``."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entries}\n")
    return info


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory as the only ``sys.path`` entry with distributions; the index in
    ``tmp_path``."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(tmp_path / "empty"), str(site)])
    monkeypatch.setattr(entrypoints, "index_path", lambda: tmp_path / "cache" / "ep.json")
    return site


def names(refs) -> list[tuple[str, str | None, str | None]]:
    return sorted((r.name, r.distribution, r.version) for r in refs)


def scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every full scan from now on, recorded."""
    seen: list[str] = []
    real = entrypoints.scan

    def counting(group: str):
        seen.append(group)
        return real(group)

    monkeypatch.setattr(entrypoints, "scan", counting)
    return seen


def test_the_index_answers_until_a_distribution_is_added_changed_or_removed(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "one = json")
    done = scans(monkeypatch)
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0")]
    assert entrypoints.entry_points(GROUP) == entrypoints.entry_points(GROUP)
    assert len(done) == 1  # written once, then read

    two = install(site, "two-plugin", "two = json:dumps")
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0"),
                                                      ("two", "two-plugin", "1.0")]
    assert len(done) == 2
    # an entry_points.txt edited in place (the directory's listing unchanged)
    (two / "entry_points.txt").write_text(f"[{GROUP}]\nthree = json:loads\n")
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0"),
                                                      ("three", "two-plugin", "1.0")]
    # an upgrade: the old .dist-info replaced by one of another version
    shutil.rmtree(two)
    install(site, "two-plugin", "three = json:loads", version="2.0")
    assert names(entrypoints.entry_points(GROUP))[1] == ("three", "two-plugin", "2.0")
    shutil.rmtree(site / "one_plugin-1.0.dist-info")
    assert names(entrypoints.entry_points(GROUP)) == [("three", "two-plugin", "2.0")]
    assert len(done) == 5
    # every answer is the standard library's
    assert names(entrypoints.entry_points(GROUP)) == sorted(
        (e.name, e.dist.metadata["Name"], e.dist.version)
        for e in metadata.entry_points(group=GROUP))
    assert len(done) == 5


def test_a_path_entry_that_appears_is_seen(site: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "one = json")
    assert len(entrypoints.entry_points(GROUP)) == 1
    later = tmp_path / "later"
    install(later, "late-plugin", "late = json")
    monkeypatch.setattr(sys, "path", [*sys.path, str(later)])
    assert names(entrypoints.entry_points(GROUP)) == [("late", "late-plugin", "1.0"),
                                                      ("one", "one-plugin", "1.0")]


def test_path_entries_without_distributions_share_the_index(tmp_path: Path) -> None:
    """The console script and ``python -m`` put different first entries on the path."""
    site = tmp_path / "site"
    install(site, "one-plugin", "one = json")
    (tmp_path / "bin").mkdir()
    assert entrypoints.fingerprint([str(site)]) == entrypoints.fingerprint(
        [str(tmp_path / "bin"), "/nonexistent", str(site)])
    assert entrypoints.fingerprint([str(site)]) != entrypoints.fingerprint([])


@pytest.mark.parametrize("content", [
    b"", b"\x00\xff garbage", b"{}", b'{"format": "agentprov-entry-points/0.1"}',
    b'{"format": "other/9", "group": "agentprov", "fingerprint": [], "entries": []}',
    b'{"format": "agentprov-entry-points/0.1", "group": "agentprov", "fingerprint": [],'
    b' "entries": [["x", 1]]}',
    b"[" * 100_000,
], ids=["empty", "binary", "no-fields", "partial", "foreign-format", "bad-entry", "deep"])
def test_a_corrupted_index_is_ignored_and_rebuilt(site: Path, content: bytes,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "one = json")
    path = entrypoints.index_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    done = scans(monkeypatch)
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0")]
    assert len(done) == 1
    assert json.loads(path.read_bytes())["format"] == entrypoints.FORMAT  # rewritten
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0")]
    assert len(done) == 1


def test_an_index_that_lies_about_its_fingerprint_is_not_believed(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "one = json")
    entrypoints.entry_points(GROUP)
    path = entrypoints.index_path()
    doc = json.loads(path.read_text())
    doc["entries"] = [["evil", "os:system", GROUP, "os", "system", "evil", "6.6.6"]]
    doc["fingerprint"] = [["/elsewhere", []]]
    path.write_text(json.dumps(doc))
    assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0")]


def test_an_unwritable_index_is_no_error(site: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "one = json")
    (tmp_path / "blocker").write_text("a file where the index's directory would be")
    monkeypatch.setattr(entrypoints, "index_path", lambda: tmp_path / "blocker" / "ep.json")
    done = scans(monkeypatch)
    for _ in range(2):
        assert names(entrypoints.entry_points(GROUP)) == [("one", "one-plugin", "1.0")]
    assert len(done) == 2  # scanned each time, as without an index
    assert list(tmp_path.glob("blocker*")) == [tmp_path / "blocker"]


def test_another_distribution_finder_bypasses_the_index(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Finder:
        @staticmethod
        def find_distributions(context=None):
            return iter(())

    install(site, "one-plugin", "one = json")
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder])
    done = scans(monkeypatch)
    entrypoints.entry_points(GROUP)
    entrypoints.entry_points(GROUP)
    assert len(done) == 2 and not entrypoints.index_path().exists()


def test_the_importlib_metadata_backports_finder_keeps_the_index(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the backport (a dependency of the core's) adds its path finder to
    ``sys.meta_path``; it reads the entries the fingerprint covers, so the index stays."""
    try:
        from importlib_metadata import MetadataPathFinder
    except ImportError:  # not installed here: a finder of the same module and name
        MetadataPathFinder = type("MetadataPathFinder", (), {
            "__module__": "importlib_metadata",
            "find_distributions": staticmethod(lambda context=None: iter(()))})
    install(site, "one-plugin", "one = json")
    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, MetadataPathFinder()])
    done = scans(monkeypatch)
    entrypoints.entry_points(GROUP)
    entrypoints.entry_points(GROUP)
    assert len(done) == 1 and entrypoints.index_path().exists()


def test_a_loaded_entry_point_is_what_the_standard_library_loads(
        site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(site, "one-plugin", "\n".join([
        "module = json", "attr = json:dumps", "nested = json.decoder:JSONDecoder.decode",
        "missing = no_such_module_here:x", "noattr = json:no_such_attr",
        "bad = not a valid value!"]))
    entrypoints.entry_points(GROUP)
    monkeypatch.setattr(entrypoints, "scan", lambda group: pytest.fail("scanned"))
    mine = {r.name: r for r in entrypoints.entry_points(GROUP)}
    # the standard library's EntryPoint (a distribution found by the importlib_metadata
    # backport's finder, which an earlier import adds, yields the backport's class)
    theirs = {e.name: metadata.EntryPoint(e.name, e.value, e.group)
              for e in metadata.entry_points(group=GROUP)}
    assert sorted(mine) == sorted(theirs)
    for name, ref in mine.items():
        try:
            expected = theirs[name].load()
        except Exception as exc:  # the same exception, with the same message
            with pytest.raises(type(exc)) as got:
                ref.load()
            assert str(got.value) == str(exc)
        else:
            assert ref.load() is expected


# ------------------------------------------------------------ a real environment, uv
def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@pytest.fixture(scope="module")
def layered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fresh virtual environment over this one's (a ``.pth`` adds this environment's
    site directory, so the core and the bundled plugins are importable from it), and the
    worked example built as a wheel."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build and install the example distribution")
    base = tmp_path_factory.mktemp("entrypoints")
    copy = shutil.copytree(EXAMPLE, base / "src" / EXAMPLE.name)
    subprocess.run([uv, "build", "--quiet", "--wheel", "--out-dir", str(base / "dist"),
                    str(copy)], env=venv_env(), check=True, capture_output=True, timeout=300)
    venv = base / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
                   env=venv_env(), check=True, capture_output=True, timeout=300)
    site = subprocess.run([_python(venv), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                          text=True, check=True, env=venv_env()).stdout.strip()
    import sysconfig

    here = sysconfig.get_paths()["purelib"]
    Path(site, "_outer.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    (wheel,) = (base / "dist").glob("*.whl")
    return venv, wheel


def _version(venv: Path, home: Path) -> tuple[str, bool]:
    """``agentprov --version`` in ``venv``, and whether it imported importlib.metadata."""
    """``--version`` and ``info`` import neither :mod:`importlib.metadata` (the index
    answers) nor what only a build, a fetch, a run or a refusal uses."""
    code = ("import sys\nfrom agentprov_core.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "print('importlib.metadata' in sys.modules, file=sys.stderr)\n")
    done = subprocess.run([_python(venv), "-c", code], capture_output=True, text=True,
                          cwd=home, env=venv_env(AGENTPROV_HOME=str(home)), timeout=120)
    assert done.returncode == 0 and done.stderr.strip() in ("True", "False"), done.stderr
    return done.stdout, done.stderr.strip() == "True"


def test_a_plugin_installed_or_removed_with_uv_is_seen_at_the_next_start(
        layered: tuple[Path, Path], tmp_path: Path) -> None:
    venv, wheel = layered
    index = venv / "var" / "cache" / "agentprov" / "entry-points.json"
    uv = shutil.which("uv")
    python = str(_python(venv))
    before, scanned = _version(venv, tmp_path)
    assert scanned and index.is_file()
    assert "examplebench" not in before and "agentprov-agentdojo" in before
    assert _version(venv, tmp_path) == (before, False)  # from the index

    subprocess.run([uv, "pip", "install", "--quiet", "--no-deps", "--python", python,
                    str(wheel)], env=venv_env(), check=True, capture_output=True, timeout=300)
    with_example, scanned = _version(venv, tmp_path)
    assert scanned
    assert "  agentprov-example-source 0.1.0: source examplebench; backend examplebench; " \
           "mapper examplebench.capture\n" in with_example
    assert _version(venv, tmp_path) == (with_example, False)

    subprocess.run([uv, "pip", "uninstall", "--quiet", "--python", python,
                    "agentprov-example-source"], env=venv_env(), check=True,
                   capture_output=True, timeout=300)
    assert _version(venv, tmp_path) == (before, True)

    index.write_bytes(b'{"format": "agentprov-entry-points/0.1", "entries": [[')
    done = subprocess.run([python, "-m", "agentprov_core", "--version"], capture_output=True,
                          text=True, cwd=tmp_path, env=venv_env(AGENTPROV_HOME=str(tmp_path)))
    assert (done.returncode, done.stdout, done.stderr) == (0, before, "")
    assert json.loads(index.read_bytes())["format"] == entrypoints.FORMAT
    assert list(tmp_path.iterdir()) == []  # the home is left as it was found


# ----------------------------------------------------------- the rest of the start
@pytest.mark.parametrize("enabled", [True, False])
def test_the_manager_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    import gc

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        built = plugins_mod.manager.__wrapped__()
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() > 0  # what was alive is left aside
        assert built.record("agentprov.builtin").status == "builtin"
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


#: what only a build, a fetch, a run or a refusal uses
NOT_FOR_A_LISTING = ("importlib.metadata", "tarfile", "concurrent.futures", "difflib")


@pytest.mark.parametrize("args, also", [
    (["--version"], ("subprocess", "tempfile", "importlib.resources", "zipfile")),
    # nothing built in this home: the lock parse's packaging.tags imports subprocess
    (["info"], ()),
])
def test_a_listing_imports_only_what_it_uses(args: list[str], also: tuple[str, ...],
                                             tmp_path: Path) -> None:
    """``--version`` and ``info`` import neither :mod:`importlib.metadata` (the index
    answers) nor what only a build, a fetch, a run or a refusal uses."""
    code = ("import sys\nfrom agentprov_core.cli.main import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            f"print(sorted(m for m in {NOT_FOR_A_LISTING + also!r} if m in sys.modules), "
            "file=sys.stderr)\n")
    from conftest import child_env

    for _ in range(2):  # the first start may scan and write the index; the second reads it
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=120,
                              env=child_env() | {"AGENTPROV_HOME": str(tmp_path)})
        assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
