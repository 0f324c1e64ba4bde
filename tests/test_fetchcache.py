"""The fetch cache against real git repositories made in tmp_path: a fetch by full id and by
prefix, a source without the commit, a commit of another tree, the cache's own refusal
when nothing may fetch, and an archive that refuses links."""

import os

import pytest

from agentprov_core.backend import fetchcache
from agentprov_core.backend.fetchcache import Pin
from agentprov_core.errors import AgentprovError
from agentprov_core.testing.gitrepo import git, make_repo


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    monkeypatch.setenv("AGENTPROV_HOME", str(h))
    return h


def test_fetch_by_full_id_then_read_without_a_checkout(tmp_path, home):
    src = tmp_path / "src"
    commit = make_repo(src, {"a.txt": b"alpha\n", "d/b.txt": b"beta\n"})
    before = {p: p.read_bytes() for p in src.rglob("*") if p.is_file()}
    got = fetchcache.ensure(Pin("fx", "https://example.invalid/fx", commit),
                            source_repo=str(src))
    assert got == commit
    repo = fetchcache.repo_path("fx")
    assert (repo / "HEAD").is_file() and not (repo / "a.txt").exists()  # bare, no checkout
    entries = {e.path: e for e in fetchcache.ls_tree(repo, commit)}
    assert sorted(entries) == ["a.txt", "d/b.txt"]
    assert entries["a.txt"].object == fetchcache.blob_id(b"alpha\n") == git(
        src, "hash-object", "a.txt")
    assert fetchcache.blob(repo, entries["d/b.txt"].object) == b"beta\n"
    # the source repository was not written
    assert {p: p.read_bytes() for p in src.rglob("*") if p.is_file()} == before
    # a second ensure needs no source: the cache holds the commit
    assert fetchcache.ensure(Pin("fx", "https://example.invalid/fx", commit)) == commit


def test_fetch_by_prefix_resolves_the_full_id(tmp_path, home):
    src = tmp_path / "src"
    commit = make_repo(src, {"a.txt": b"alpha\n"})
    got = fetchcache.ensure(Pin("fx", "https://example.invalid/fx", commit[:8]),
                            source_repo=str(src))
    assert got == commit


def test_not_cached_and_nothing_may_fetch(tmp_path, home):
    with pytest.raises(AgentprovError) as exc:
        fetchcache.ensure(Pin("fx", "https://example.invalid/fx", "0" * 40))
    assert exc.value.code == "cli.environment.source_not_cached"
    assert exc.value.exit_code == 3
    assert "--source-repo URL" in exc.value.message
    assert not home.exists()  # nothing written


def test_a_source_without_the_commit(tmp_path, home):
    src = tmp_path / "src"
    make_repo(src, {"a.txt": b"alpha\n"})
    for commit in ("1234567890" * 4, "12345678"):
        with pytest.raises(AgentprovError) as exc:
            fetchcache.ensure(Pin("fx", "https://example.invalid/fx", commit),
                              source_repo=str(src))
        assert exc.value.code == "cli.environment.source_fetch", exc.value.message
        assert exc.value.exit_code == 3


def test_a_commit_of_another_tree(tmp_path, home):
    src = tmp_path / "src"
    commit = make_repo(src, {"a.txt": b"alpha\n"})
    other_tree = fetchcache.blob_id(b"not a tree")  # any 40-hex id that is not its tree
    with pytest.raises(AgentprovError) as exc:
        fetchcache.ensure(Pin("fx", "https://example.invalid/fx", commit, tree=other_tree),
                          source_repo=str(src))
    assert exc.value.code == "cli.environment.source_commit"
    assert f"not the pinned {other_tree}" in exc.value.message
    # the right tree is accepted
    tree = git(src, "rev-parse", "HEAD^{tree}")
    assert fetchcache.ensure(Pin("fx", "u", commit, tree=tree)) == commit


def test_archive_extracts_files_and_refuses_links(tmp_path, home):
    src = tmp_path / "src"
    commit = make_repo(src, {"a.txt": b"alpha\n", "bin/run": b"#!/bin/sh\n"})
    os.chmod(src / "bin/run", 0o755)
    git(src, "add", "-A")
    git(src, "commit", "--quiet", "-m", "exec")
    commit = git(src, "rev-parse", "HEAD")
    fetchcache.ensure(Pin("fx", "u", commit), source_repo=str(src))
    repo = fetchcache.repo_path("fx")
    names = fetchcache.archive(repo, commit, tmp_path / "out")
    assert sorted(names) == ["a.txt", "bin/run"]
    assert (tmp_path / "out/a.txt").read_bytes() == b"alpha\n"
    assert os.access(tmp_path / "out/bin/run", os.X_OK)

    linked = tmp_path / "linked"
    lcommit = make_repo(linked, {"a.txt": b"alpha\n"}, links={"escape": "/etc/passwd"})
    fetchcache.ensure(Pin("lk", "u", lcommit), source_repo=str(linked))
    with pytest.raises(fetchcache.GitFailed, match="holds a link"):
        fetchcache.archive(fetchcache.repo_path("lk"), lcommit, tmp_path / "out2")
