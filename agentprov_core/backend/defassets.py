"""Defence assets: the pinned code and weights a registry defence needs in its environment.

The defence registry's ``[assets.<id>]`` tables pin every file of an asset by its path,
sha256, git blob id and size, and say where it comes from (a git repository and commit, or
a Hugging Face model repository and revision), its kind (``code`` or ``weights``) and its
licence. ``agentprov backends build agentdojo --defence-assets ID[,ID…]`` provisions them:

* the files are read from the **fetch cache**, ``$AGENTPROV_HOME/cache/defence-assets/
  <id>/<commit or revision>/<path>`` (the asset's tree as pinned; ``--allow-network`` fills
  it from the origin, a git fetch of the pinned commit or the hub's ``resolve`` URL), or
  from a local tree given with ``--defence-source [ID=]DIR`` (files at their pinned paths);
* every file is checked against both of its digests before anything is written (one
  altered or missing file refuses the build, naming it); files read from a local tree are
  then kept in the fetch cache, so that a later rebuild finds them there;
* they are copied into the new environment under ``<env>/agentprov/defence-assets/<id>/``
  (``files/<path>``, or a hub cache ``hub/models--<org>--<name>/snapshots/<revision>/<path>``
  for weights loaded with the hub offline), checked again while they are copied, and the
  marker records each asset's pins and digest (:func:`record`).

``--offline-check`` re-hashes every provisioned file against the marker (:func:`check_env`),
and T0 refuses a defence whose assets are not provisioned in the plan's environment before
any worker starts (:func:`require_provisioned`, exit 3).

A git blob id is ``sha1("blob <size>\\0" + content)``; for a file a repository keeps in Git
LFS (``lfs = true``), the tree holds its pointer, so the pinned blob id is the pointer's,
recomputed from the file's sha256 and size.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec

from agentprov_core.base import paths, tomlfile
from agentprov_core.base.digests import digest
from agentprov_core.errors import AgentprovError

ENV_SUBDIR = "agentprov/defence-assets"
HUB = "https://huggingface.co"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PinnedFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    path: str
    sha256: str
    git_blob: str
    size: int
    lfs: bool = False


class Origin(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    kind: Literal["git", "hf-model"]
    url: str | None = None          # git
    commit: str | None = None       # git
    repository: str | None = None   # hf-model: org/name
    revision: str | None = None     # hf-model
    endpoint: str | None = None     # hf-model: the hub (default https://huggingface.co)

    @property
    def pin(self) -> str | None:
        return self.commit if self.kind == "git" else self.revision


class Asset(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    id: str
    kind: Literal["code", "weights"]
    summary: str = ""
    licence: str | None = None
    origin: Origin | None = None
    layout: Literal["files", "hf-hub-cache"] = "files"
    module: str | None = None
    factory: str | None = None
    group: str | None = None
    distributions: list[str] = []
    unpinned: str | None = None
    files: list[PinnedFile] = []

    @property
    def pinned(self) -> bool:
        return bool(self.files)

    def pins_digest(self) -> str:
        """What the asset is, independent of where it was read from."""
        return digest({"id": self.id, "kind": self.kind, "layout": self.layout,
                       "origin": msgspec.to_builtins(self.origin),
                       "module": self.module, "factory": self.factory,
                       "files": [msgspec.to_builtins(f) for f in self.files]})


# ------------------------------------------------------------------------------ the registry
def load(path: Path | None = None) -> dict[str, Asset]:
    """The registry's assets by id, each checked (exit 2 naming the table and the field)."""
    path = path or paths.defence_registry()
    data, text = tomlfile.read(path, "cli.usage.registry_file")
    out: dict[str, Asset] = {}
    for aid, entry in (data.get("assets") or {}).items():
        where = tomlfile.location(path, text, "kind", f"assets.{aid}")

        def bad(what: str, aid=aid, where=where) -> AgentprovError:
            return AgentprovError("cli.usage.registry_file", location=where,
                                  what=f"[assets.{aid}]: {what}")

        if not _ID.match(aid):
            raise bad("an asset id is lower-case letters, digits and _ (it names directories)")
        try:
            a = msgspec.convert(dict(entry, id=aid), type=Asset)
        except msgspec.ValidationError as exc:
            raise bad(str(exc)) from None
        o = a.origin
        if o is not None and o.pin is not None and not _HEX40.match(o.pin):
            raise bad(f"origin {'commit' if o.kind == 'git' else 'revision'} {o.pin!r} must be "
                      "a full commit id (40 hex digits)")
        if o is not None and o.repository is not None and not _REPO.match(o.repository):
            raise bad(f"origin repository {o.repository!r} must be ORG/NAME")
        seen: set[str] = set()
        for f in a.files:
            p = PurePosixPath(f.path)
            if p.is_absolute() or ".." in p.parts or not f.path or f.path in seen:
                raise bad(f"file path {f.path!r} must be relative, unique and stay inside "
                          "the asset")
            seen.add(f.path)
            if not _HEX64.match(f.sha256) or not _HEX40.match(f.git_blob) or f.size < 0:
                raise bad(f"file {f.path}: sha256 (64 hex), git_blob (40 hex) and size are "
                          "required")
        if a.pinned:
            if a.unpinned:
                raise bad("pins files and says it is unpinned: drop one")
            if a.origin is None or not a.origin.pin:
                raise bad("pinned files need an origin with its commit or revision")
            if a.kind == "code" and not (a.module and a.factory):
                raise bad("a code asset names the module and factory the worker imports")
        elif not a.unpinned:
            raise bad("pins no files: say why in `unpinned`")
        if a.layout == "hf-hub-cache" and (a.origin is None or a.origin.kind != "hf-model"
                                           or not a.origin.repository):
            raise bad('layout "hf-hub-cache" needs an hf-model origin with its repository')
        out[aid] = a
    return out


# ------------------------------------------------------------------------------ digests
def git_blob_id(size: int, chunks) -> str:
    h = hashlib.sha1(f"blob {size}\0".encode())
    for c in chunks:
        h.update(c)
    return h.hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class Hashed:
    sha256: str
    git_blob: str
    size: int

    def blob_for(self, pin: PinnedFile) -> str:
        """The blob id to compare with the pin: the content's, or its LFS pointer's."""
        if pin.lfs:
            ptr = lfs_pointer(self.sha256, self.size)
            return git_blob_id(len(ptr), [ptr])
        return self.git_blob

    def matches(self, pin: PinnedFile) -> bool:
        return (self.size == pin.size and self.sha256 == pin.sha256
                and self.blob_for(pin) == pin.git_blob)


def hash_file(path: Path, copy_to: Path | None = None) -> Hashed:
    """sha256 and git blob id of ``path`` in one read; with ``copy_to``, also copy it there."""
    import contextlib

    size = path.stat().st_size
    sha = hashlib.sha256()
    blob = hashlib.sha1(f"blob {size}\0".encode())
    with open(path, "rb") as f, (open(copy_to, "wb") if copy_to is not None
                                 else contextlib.nullcontext()) as out:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
            blob.update(chunk)
            if out is not None:
                out.write(chunk)
    return Hashed(sha.hexdigest(), blob.hexdigest(), size)


# ------------------------------------------------------------------------------ places
def cache_dir(a: Asset) -> Path:
    return paths.home() / "cache" / "defence-assets" / a.id / a.origin.pin


def env_asset_dir(env_dir: Path, aid: str) -> Path:
    return env_dir / ENV_SUBDIR / aid


def hub_model_dir(a: Asset) -> str:
    return "models--" + a.origin.repository.replace("/", "--")


def env_path(env_dir: Path, a: Asset, rel: str) -> Path:
    """Where a pinned file lives in an environment."""
    base = env_asset_dir(env_dir, a.id)
    if a.layout == "hf-hub-cache":
        return base / "hub" / hub_model_dir(a) / "snapshots" / a.origin.revision / rel
    return base / "files" / rel


def derived_files(env_dir: Path, a: Asset) -> dict[Path, bytes]:
    """Files the layout needs besides the pinned ones (a hub cache's ``refs/main``)."""
    if a.layout == "hf-hub-cache":
        ref = env_asset_dir(env_dir, a.id) / "hub" / hub_model_dir(a) / "refs" / "main"
        return {ref: a.origin.revision.encode()}
    return {}


# ------------------------------------------------------------------------------ planning
@dataclass
class Resolved:
    """One asset as a build would provision it: where each pinned file is read from."""

    asset: Asset
    source_dir: Path | None
    found: dict[str, Path] = field(default_factory=dict)     # path -> file to copy
    via: dict[str, str] = field(default_factory=dict)        # path -> "cache" | "--defence-source"
    missing: list[PinnedFile] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.asset.files)


def parse_ids(value: str | None, assets: dict[str, Asset], registry: str) -> list[str] | None:
    """``--defence-assets ID[,ID…]`` (or ``none``): the ids, in order, without repeats."""
    if value is None:
        return None
    ids: list[str] = []
    for raw in value.split(","):
        aid = raw.strip()
        if not aid or aid in ids or aid == "none":
            continue
        if aid not in assets:
            raise AgentprovError("cli.usage.defence_asset_unknown", asset=aid, registry=registry,
                                 known=", ".join(sorted(assets)) or "none")
        ids.append(aid)
    return ids


def parse_sources(values: tuple[str, ...], ids: list[str] | None,
                  assets: dict[str, Asset]) -> dict[str, Path]:
    """``--defence-source DIR`` (the one code asset named) or ``ID=DIR`` (repeatable)."""
    out: dict[str, Path] = {}
    for raw in values:
        aid, sep, d = raw.partition("=")
        if not sep:
            aid, d = "", raw
        if ids is None:
            raise AgentprovError("cli.usage.defence_source", value=raw,
                                 what="name the assets it holds with --defence-assets ID")
        if not aid:
            code = [i for i in ids if assets[i].kind == "code"]
            if len(code) != 1:
                raise AgentprovError(
                    "cli.usage.defence_source", value=raw,
                    what=f"--defence-assets names {len(code)} code asset(s); write "
                         "--defence-source ID=DIR to say which asset the tree holds")
            aid = code[0]
        if aid not in ids:
            raise AgentprovError("cli.usage.defence_source", value=raw,
                                 what=f"asset {aid!r} is not named by --defence-assets")
        p = Path(d).expanduser()
        if not p.is_dir():
            raise AgentprovError("cli.usage.defence_source", value=raw,
                                 what=f"{p} is not a directory")
        out[aid] = p.absolute()
    return out


def check_buildable(ids: list[str], assets: dict[str, Asset], lock_groups: set[str],
                    project: str, registry: str) -> None:
    """Exit 3 for an asset that cannot be provisioned at all: no pins, or a dependency
    group the backend's lock does not declare."""
    for aid in ids:
        a = assets[aid]
        if not a.pinned:
            raise AgentprovError("cli.environment.defence_asset_unpinned", asset=aid,
                                 registry=registry, why=a.unpinned)
        if a.group and a.group not in lock_groups:
            raise AgentprovError("cli.environment.defence_asset_group", asset=aid,
                                 group=a.group, project=project,
                                 distributions=", ".join(a.distributions) or "its packages")


def resolve(ids: list[str], assets: dict[str, Asset], sources: dict[str, Path]) -> list[Resolved]:
    """Find and check every pinned file (reading only). A file that is present but differs
    from its pin refuses at once (exit 3, naming it and both digests); missing ones are
    listed for the caller, which fetches them or refuses."""
    out = []
    for aid in ids:
        a = assets[aid]
        r = Resolved(a, sources.get(aid))
        cache = cache_dir(a)
        for pin in a.files:
            for where, base in (("--defence-source", r.source_dir), ("cache", cache)):
                if base is None:
                    continue
                p = base / pin.path
                if p.is_file():
                    _check(a, pin, p, hash_file(p))
                    r.found[pin.path], r.via[pin.path] = p, where
                    break
            else:
                r.missing.append(pin)
        out.append(r)
    return out


def _check(a: Asset, pin: PinnedFile, p: Path, h: Hashed) -> None:
    if not h.matches(pin):
        raise AgentprovError(
            "cli.environment.defence_asset_mismatch", asset=a.id, path=pin.path, file=p,
            sha256=h.sha256, pinned_sha256=pin.sha256, git_blob=h.blob_for(pin),
            pinned_git_blob=pin.git_blob, size=h.size, pinned_size=pin.size)


def refuse_missing(r: Resolved, allow_network: bool) -> None:
    pin = r.missing[0]
    if allow_network:
        how = "it could not be fetched; give --defence-source DIR"
    else:
        how = (f"add --allow-network to fetch it from {_origin_text(r.asset)}, or give "
               "--defence-source DIR")
    raise AgentprovError("cli.environment.defence_asset_missing", asset=r.asset.id,
                         path=pin.path, cache=cache_dir(r.asset),
                         source=r.source_dir or "no --defence-source", how=how,
                         more=f" (and {len(r.missing) - 1} more)" if len(r.missing) > 1 else "")


def _origin_text(a: Asset) -> str:
    o = a.origin
    if o.kind == "git":
        return f"{o.url}@{o.commit[:12]}"
    return f"{o.endpoint or HUB}/{o.repository}@{o.revision[:12]}"


def plan_lines(resolved: list[Resolved], replace_note: str | None) -> list[str]:
    """What ``backends build --dry-run`` says it would provision."""
    lines = []
    for r in resolved:
        a = r.asset
        srcs = sorted(set(r.via.values()))
        where = " and ".join(f"--defence-source {r.source_dir}" if s == "--defence-source"
                             else f"the fetch cache {cache_dir(a)}" for s in srcs) or "nowhere yet"
        lines.append(f"  defence asset {a.id} ({a.kind}, {len(a.files)} file(s), "
                     f"{_size(r.bytes)}; licence {a.licence or 'not recorded'}): "
                     f"{len(r.found)} of {len(a.files)} present and matching their pins, from "
                     f"{where}")
        if r.missing:
            lines.append(f"    missing: {', '.join(p.path for p in r.missing[:5])}"
                         + (" …" if len(r.missing) > 5 else "")
                         + f"; the build fetches them from {_origin_text(a)} with "
                           "--allow-network")
        lines.append(f"    into <env>/{ENV_SUBDIR}/{a.id}/ ("
                     + ("a Hugging Face hub cache, loaded with the hub offline"
                        if a.layout == "hf-hub-cache" else "the worker imports "
                        f"{a.module}.{a.factory}" if a.kind == "code" else "files") + ")")
    if replace_note:
        lines.append(f"  {replace_note}")
    return lines


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"  # pragma: no cover


# ------------------------------------------------------------------------------ fetching
def fetch_missing(r: Resolved, timeout: float = 300) -> None:
    """Fetch ``r.missing`` into the fetch cache (``--allow-network``), checking each file
    before it is kept; refuse (exit 3) when a file cannot be had or differs."""
    a = r.asset
    if not r.missing:
        return
    cache = cache_dir(a)
    if a.origin.kind == "git":
        repo = _git_fetch(a, cache.parent / (a.origin.pin + ".git"), timeout)
    for pin in list(r.missing):
        target = cache / pin.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".fetch-", dir=target.parent)
        os.close(fd)
        tmp = Path(tmp_name)
        try:
            if a.origin.kind == "git":
                _git_blob_to(a, repo, pin, tmp, timeout)
            else:
                _http_to(a, pin, tmp, timeout)
            _check(a, pin, tmp, hash_file(tmp))
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        r.found[pin.path], r.via[pin.path] = target, "cache"
        r.missing.remove(pin)


def _fetch_error(a: Asset, what: str) -> AgentprovError:
    return AgentprovError("cli.environment.defence_asset_fetch", asset=a.id,
                          origin=_origin_text(a), what=what)


def _git(args: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env |= {"GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], env=env, capture_output=True, timeout=timeout, **kw)


def _git_fetch(a: Asset, repo: Path, timeout: float) -> Path:
    if shutil.which("git") is None:
        raise _fetch_error(a, "git is not installed")
    try:
        if not (repo / "HEAD").is_file():
            repo.mkdir(parents=True, exist_ok=True)
            _git(["init", "--bare", "-q", str(repo)], timeout, check=True)
        have = _git(["-C", str(repo), "cat-file", "-e", f"{a.origin.commit}^{{commit}}"],
                    timeout)
        if have.returncode != 0:
            p = _git(["-C", str(repo), "fetch", "-q", "--depth", "1", "--no-tags",
                      a.origin.url, a.origin.commit], timeout)
            if p.returncode != 0:
                tail = " | ".join(p.stderr.decode(errors="replace").strip().splitlines()[-2:])
                raise _fetch_error(a, f"git fetch failed: {tail}")
    except (OSError, subprocess.SubprocessError) as exc:
        raise _fetch_error(a, f"{type(exc).__name__}: {exc}") from None
    return repo


def _git_blob_to(a: Asset, repo: Path, pin: PinnedFile, out: Path, timeout: float) -> None:
    if pin.lfs:
        raise _fetch_error(a, f"{pin.path} is stored with Git LFS, which a git fetch does not "
                              "bring; give --defence-source DIR")
    # the tree of the pinned commit must name this blob at this path
    ls = _git(["-C", str(repo), "ls-tree", a.origin.commit, "--", pin.path], timeout)
    fields = ls.stdout.decode(errors="replace").split()
    if ls.returncode != 0 or len(fields) < 3 or fields[2] != pin.git_blob:
        raise _fetch_error(a, f"the tree of {a.origin.commit[:12]} does not hold blob "
                              f"{pin.git_blob[:12]} at {pin.path}")
    with open(out, "wb") as f:
        p = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", pin.git_blob],
                           stdout=f, stderr=subprocess.PIPE, timeout=timeout)
    if p.returncode != 0:
        raise _fetch_error(a, f"git cat-file {pin.git_blob[:12]} failed")


def _http_to(a: Asset, pin: PinnedFile, out: Path, timeout: float) -> None:
    import httpx

    o = a.origin
    url = f"{(o.endpoint or HUB).rstrip('/')}/{o.repository}/resolve/{o.revision}/{pin.path}"
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as resp, \
                open(out, "wb") as f:
            if resp.status_code != 200:
                raise _fetch_error(a, f"GET {url}: HTTP {resp.status_code}")
            for chunk in resp.iter_bytes(1 << 20):
                f.write(chunk)
    except httpx.HTTPError as exc:
        raise _fetch_error(a, f"GET {url}: {type(exc).__name__}: {exc}") from None


# ------------------------------------------------------------------------------ provisioning
def keep_in_cache(resolved: list[Resolved]) -> None:
    """Files read from a local tree (already checked) are kept in the fetch cache, so that a
    later rebuild finds them without the tree."""
    for r in resolved:
        for pin in r.asset.files:
            if r.via.get(pin.path) != "--defence-source":
                continue
            target = cache_dir(r.asset) / pin.path
            if target.is_file() and hash_file(target).matches(pin):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
            h = hash_file(r.found[pin.path], copy_to=tmp)
            if not h.matches(pin):
                tmp.unlink(missing_ok=True)
                _check(r.asset, pin, r.found[pin.path], h)
            tmp.replace(target)


def provision(resolved: list[Resolved], env_dir: Path) -> dict[str, Any]:
    """Copy every asset into ``env_dir`` (a build's temporary directory), checking each file
    again as it is copied; return what the marker records (:func:`record`)."""
    out = {}
    for r in resolved:
        a = r.asset
        for pin in a.files:
            target = env_path(env_dir, a, pin.path)
            target.parent.mkdir(parents=True, exist_ok=True)
            h = hash_file(r.found[pin.path], copy_to=target)
            _check(a, pin, r.found[pin.path], h)  # changed since it was checked
        for p, data in derived_files(env_dir, a).items():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        out[a.id] = record(a, sorted(set(r.via.values())))
    return out


def record(a: Asset, via: list[str]) -> dict[str, Any]:
    """An asset as the marker records it: its pins, origin, kind, licence and digest."""
    return {"kind": a.kind, "licence": a.licence, "layout": a.layout,
            "origin": msgspec.to_builtins(a.origin), "module": a.module, "factory": a.factory,
            "files": [msgspec.to_builtins(f) for f in a.files],
            "bytes": sum(f.size for f in a.files), "sha256": a.pins_digest(),
            "provisioned_from": via}


def identity(recorded: dict[str, Any] | None) -> dict[str, str]:
    """What enters the environment's identity digest: each asset's pins digest."""
    return {aid: rec["sha256"] for aid, rec in sorted((recorded or {}).items())}


def matches_registry(recorded: dict[str, Any] | None, ids: list[str],
                     assets: dict[str, Asset]) -> bool:
    """Whether the environment holds exactly these assets, as the registry pins them."""
    recorded = recorded or {}
    return sorted(recorded) == sorted(ids) and all(
        aid in assets and recorded[aid].get("sha256") == assets[aid].pins_digest()
        for aid in ids)


# ------------------------------------------------------------------------------ checking
def _as_asset(aid: str, rec: dict[str, Any]) -> Asset:
    return msgspec.convert({"id": aid, "kind": rec["kind"], "layout": rec["layout"],
                            "origin": rec["origin"], "module": rec.get("module"),
                            "factory": rec.get("factory"), "files": rec["files"],
                            "unpinned": None}, type=Asset)


def check_env(env_dir: Path, recorded: dict[str, Any] | None) -> list[str]:
    """``--offline-check``: every provisioned file re-hashed against the marker's pins, the
    derived files compared, and nothing else under ``agentprov/defence-assets/``."""
    problems: list[str] = []
    expected: set[Path] = set()
    for aid, rec in sorted((recorded or {}).items()):
        try:
            a = _as_asset(aid, rec)
        except (KeyError, msgspec.ValidationError) as exc:
            problems.append(f"the marker's defence asset {aid} is malformed ({exc})")
            continue
        if a.pins_digest() != rec.get("sha256"):
            problems.append(f"defence asset {aid}: the marker's pins do not give its digest")
        for pin in a.files:
            p = env_path(env_dir, a, pin.path)
            expected.add(p)
            if not p.is_file():
                problems.append(f"defence asset {aid}: {pin.path} is missing")
                continue
            h = hash_file(p)
            if not h.matches(pin):
                problems.append(f"defence asset {aid}: {pin.path} differs from its pin "
                                f"(sha256 {h.sha256[:16]}…, pinned {pin.sha256[:16]}…)")
        for p, data in derived_files(env_dir, a).items():
            expected.add(p)
            if not p.is_file() or p.read_bytes() != data:
                problems.append(f"defence asset {aid}: {p.relative_to(env_dir)} changed")
    root = env_dir / ENV_SUBDIR
    if root.is_dir():
        extra = sorted(str(p.relative_to(env_dir)) for p in root.rglob("*")
                       if (p.is_file() or p.is_symlink()) and p not in expected)
        problems += [f"{x} is not a provisioned file" for x in extra[:3]]
    return problems


def require_provisioned(entry, marker, env_dir: Path, backend: str,
                        assets: dict[str, Asset] | None = None) -> None:
    """T0, before any worker starts: every asset of the defence ``entry`` is provisioned in
    the plan's environment as the registry pins it (exit 3, naming the first file that is
    not: "its pinned file … is not provisioned (agentprov backends build … --defence-assets
    ID)")."""
    if entry is None or not entry.assets:
        return
    assets = load() if assets is None else assets
    recorded = getattr(marker, "defence_assets", None) or {}
    for aid in entry.assets:
        a = assets.get(aid)
        if a is None:
            raise AgentprovError("cli.usage.registry_file",
                                 location=paths.display(paths.defence_registry()),
                                 what=f"[defences.{entry.name}] needs asset {aid!r}, which has "
                                      "no [assets] table")

        def refuse(what: str, aid=aid) -> AgentprovError:
            return AgentprovError("cli.environment.defence_asset", defence=entry.name,
                                  what=what, backend=backend, asset=aid)

        if not a.pinned:
            raise refuse(f"its pinned files are not in the defence registry ([assets.{aid}]: "
                         f"{a.unpinned}), so it is not provisioned")
        rec = recorded.get(aid)
        have = {f.get("path"): f for f in (rec or {}).get("files", [])}
        for pin in a.files:
            f = have.get(pin.path)
            p = env_path(env_dir, a, pin.path)
            if (rec is None or rec.get("sha256") != a.pins_digest() or f is None
                    or f.get("sha256") != pin.sha256 or not p.is_file()
                    or p.stat().st_size != pin.size):
                raise refuse(f"its pinned file {pin.path} is not provisioned")


def lock_groups(lock_text: str, project_name: str | None) -> set[str]:
    """The dependency groups a backend project's uv.lock declares for the project itself."""
    lock = tomllib.loads(lock_text)
    for p in lock.get("package", []):
        src = p.get("source") or {}
        if (project_name and p.get("name") == project_name) or src.get("virtual") == ".":
            return set((p.get("dev-dependencies") or {}).keys())
    return set()
