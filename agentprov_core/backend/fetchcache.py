"""The fetch cache: one bare git repository per upstream, under ``$AGENTPROV_HOME/fetch/``.

A git-pinned backend (AgentDyn at ``5353cf76``, AutoDojo's fork at ``aa458794``) is built
from its pinned commit, which the cache holds. Only four git commands ever touch a cached
repository, and never a user's working tree: ``git fetch`` (of the one pinned commit, from
the upstream URL with ``--allow-network``, or from ``--source-repo URL``: a mirror, a path, a
bundle), ``git ls-tree`` and ``git cat-file`` (to read a tree and its blobs, e.g. to verify
an attack cache), and ``git archive`` (to extract the commit's files for a build). Nothing
is checked out.

The commit is verified by id: what was fetched must be the full commit the pin names (a
pin is a prefix of at least 8 hex digits; the cache records the full id the first fetch
resolved, and a later fetch that resolves the prefix to another commit is refused), and
when the backend declares its tree id, the commit's tree must be that tree. Git itself
checks that every object's content hashes to its id.

Git runs with a scrubbed environment: no user or system configuration (``GIT_CONFIG_NOSYSTEM``,
``HOME`` pointing at the cache), no terminal prompts, no hooks (a bare repository made here
has none), and a fetch of a local path uses ``file://`` so git's transport, not a hard-link
copy, reads it: the source repository is never written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agentprov_core.base import paths
from agentprov_core.errors import AgentprovError

_HEX = re.compile(r"^[0-9a-f]{8,40}$")
#: the longest a git command may take (a fetch of one commit of a large repository)
GIT_TIMEOUT_S = 900


@dataclass(frozen=True)
class Pin:
    """A git-pinned upstream: what the cache fetches and verifies.

    :param name: the cache's name for it (``agentdyn``): ``fetch/<name>.git``.
    :param upstream: the URL ``--allow-network`` fetches from.
    :param commit: the pinned commit (full, or a prefix of at least 8 hex digits).
    :param tree: the commit's tree id, when known: a fetched commit of another tree is
        refused.
    """

    name: str
    upstream: str
    commit: str
    tree: str | None = None


def cache_root() -> Path:
    return paths.home() / "fetch"


def repo_path(name: str) -> Path:
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise ValueError(f"not a fetch cache name: {name!r}")
    return cache_root() / f"{name}.git"


def _env(repo: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "LC_ALL": "C",
            "GIT_DIR": str(repo)}


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    """Run ``git`` on the bare repository ``repo``; its stdout, or :class:`GitFailed`."""
    import subprocess  # loaded when git runs: ``agentprov info`` reads pins, runs no git

    try:
        p = subprocess.run(["git", *args], env=_env(repo), cwd=repo, input=input,
                           capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GitFailed("git is not installed (apt install git)") from None
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} took more than {GIT_TIMEOUT_S} s") from None
    if p.returncode != 0:
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitFailed(err[-1] if err else f"git {args[0]} exited {p.returncode}")
    return p.stdout


class GitFailed(Exception):
    """A git command failed (the text is git's last line of error)."""


def _init(repo: Path) -> None:
    if (repo / "HEAD").is_file():
        return
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "--bare", "--quiet", str(repo))
    hooks = repo / "hooks"
    if hooks.is_dir():  # git's sample hooks: none runs, but none is kept either
        for h in hooks.iterdir():
            h.unlink()


def _url(source: str) -> str:
    """A source repository as git's transport reads it: a local directory as ``file://``,
    a local file (a bundle, which git reads only by its path) as its path."""
    if "://" in source or source.startswith("git@"):
        return source
    path = Path(source).expanduser().resolve()
    return str(path) if path.is_file() else path.as_uri()


def resolve(repo: Path, commit: str) -> str | None:
    """The full id of ``commit`` in ``repo`` when the repository holds it as a commit."""
    try:
        full = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    except GitFailed:
        return None
    return full.decode().strip() or None


def tree_of(repo: Path, commit: str) -> str:
    return git(repo, "rev-parse", f"{commit}^{{tree}}").decode().strip()


def ensure(pin: Pin, *, source_repo: str | None = None, allow_network: bool = False) -> str:
    """The full id of the pinned commit in the cache, fetching it when the cache lacks it
    (from ``source_repo``, else from the upstream with ``allow_network``), verified.

    :raises AgentprovError: ``cli.environment.source_not_cached`` (the cache lacks it and
        nothing may fetch it), ``cli.environment.source_fetch`` (the fetch failed or the
        source lacks the commit) or ``cli.environment.source_commit`` (the commit is not
        the pinned one: another full id for the prefix, or another tree); all exit 3.
    """
    if not _HEX.match(pin.commit):
        raise ValueError(f"not a commit id: {pin.commit!r}")
    repo = repo_path(pin.name)
    have = resolve(repo, pin.commit) if (repo / "HEAD").is_file() else None
    if have is None or source_repo is not None:
        url = _url(source_repo) if source_repo is not None else pin.upstream
        if source_repo is None and not (allow_network and pin.upstream):  # no URL: not public
            raise AgentprovError("cli.environment.source_not_cached", name=pin.name,
                                 commit=pin.commit, path=repo,
                                 how=f", or --allow-network to fetch it from {pin.upstream}"
                                 if pin.upstream else "; its upstream has no URL "
                                 "--allow-network could fetch from")
        _init(repo)
        fetch_ref = pin.commit if len(pin.commit) == 40 else None
        try:
            if fetch_ref is not None:
                git(repo, "fetch", "--quiet", "--no-tags", "--depth", "1", url, fetch_ref)
            else:  # a prefix cannot be fetched by id: fetch the refs, then resolve it
                git(repo, "fetch", "--quiet", "--no-tags", url,
                    "+refs/heads/*:refs/agentprov/heads/*")
        except GitFailed as exc:
            raise AgentprovError("cli.environment.source_fetch", name=pin.name,
                                 commit=pin.commit, url=url, why=str(exc)) from None
        got = resolve(repo, pin.commit)
        if got is None:
            raise AgentprovError("cli.environment.source_fetch", name=pin.name,
                                 commit=pin.commit, url=url,
                                 why=f"it holds no commit {pin.commit}")
        if have is not None and got != have:
            raise AgentprovError("cli.environment.source_commit", name=pin.name,
                                 commit=pin.commit, why=f"{url} resolves it to {got}, the "
                                 f"cache to {have}")
        have = got
        git(repo, "update-ref", f"refs/agentprov/pinned/{have}", have)
    if not have.startswith(pin.commit):
        raise AgentprovError("cli.environment.source_commit", name=pin.name, commit=pin.commit,
                             why=f"the cache resolves it to {have}")
    if pin.tree is not None:
        tree = tree_of(repo, have)
        if tree != pin.tree:
            raise AgentprovError("cli.environment.source_commit", name=pin.name,
                                 commit=pin.commit,
                                 why=f"its tree is {tree}, not the pinned {pin.tree}")
    return have


@dataclass(frozen=True)
class TreeEntry:
    mode: str
    type: str  # "blob" | "tree" | "commit"
    object: str
    path: str


def ls_tree(repo: Path, commit: str, path: str | None = None) -> list[TreeEntry]:
    """The blobs below ``path`` (all of the tree without one) of ``commit`` (``git ls-tree
    -r``)."""
    args = ["ls-tree", "-r", "-z", "--full-tree", commit] + (["--", path] if path else [])
    out = []
    for line in git(repo, *args).split(b"\0"):
        if not line:
            continue
        meta, _, name = line.partition(b"\t")
        mode, typ, obj = meta.decode().split()
        out.append(TreeEntry(mode, typ, obj, name.decode("utf-8", "surrogateescape")))
    return out


def blob(repo: Path, object_id: str) -> bytes:
    """A blob's bytes (``git cat-file blob``)."""
    return git(repo, "cat-file", "blob", object_id)


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what ``git hash-object`` prints), computed here."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def archive(repo: Path, commit: str, dest: Path, paths: list[str] | None = None) -> list[str]:
    """Extract ``commit``'s files (those below ``paths``, all without) into the new directory
    ``dest`` (``git archive``, a tar read here member by member: regular files and
    directories only, never a path outside ``dest``); returns the paths extracted."""
    import io
    import tarfile

    data = git(repo, "archive", "--format=tar", commit, *(["--", *paths] if paths else []))
    dest.mkdir(parents=True)
    root = dest.resolve()
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for m in tar:
            target = (root / m.name).resolve()
            if target != root and root not in target.parents:
                raise GitFailed(f"the archive names a path outside the tree: {m.name}")
            if m.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif m.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(m)
                assert src is not None
                target.write_bytes(src.read())
                if m.mode & 0o111:
                    target.chmod(0o755)
                names.append(m.name)
            elif m.issym() or m.islnk():
                raise GitFailed(f"the tree holds a link, which a build does not take: {m.name}")
    return names
