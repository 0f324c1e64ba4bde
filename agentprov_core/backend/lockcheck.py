"""Whether a backend project's ``uv.lock`` still records what its ``pyproject.toml``
declares, decided from the files alone: no uv, no cache, no network.

``uv sync --locked`` finds a changed requirement only by resolving it, which offline
needs the changed package in uv's cache: with an empty cache it fails with "not found in
the cache" instead of naming the mismatch. So T0 compares, before uv runs, what the lock
records for the project with what the project declares:

- ``requires-python`` (the lock's top-level field);
- ``[project] dependencies`` and ``optional-dependencies`` (the project package's
  ``[package.metadata] requires-dist`` and ``provides-extras``), each with its
  ``[tool.uv.sources]`` entry (a path source is recorded as ``directory``/``editable``/
  ``virtual``/``path``, without its version specifier, as uv records it);
- ``[dependency-groups]`` and ``tool.uv.dev-dependencies`` (``requires-dev``);
- ``tool.uv`` ``constraint-dependencies``, ``override-dependencies`` and
  ``build-constraint-dependencies`` (``[manifest]``);
- ``tool.uv.exclude-newer`` (the build passes it to uv; ``[options] exclude-newer``: uv
  keeps the lock for a later cut-off, not for an earlier one or none);
- each path dependency's own declared requirements and groups (its package's metadata in
  the lock), recursively.

Markers are compared by meaning, not by text (uv rewrites ``python_version`` as
``python_full_version`` and reorders clauses): both are evaluated over every combination
of the values they mention. Where the two files cannot be compared statically (dynamic
dependencies, a lock version other than 1, markers with too many variables) the check
stays silent and leaves the decision to uv.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker, default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from agentprov_core.base import paths

PATH_KINDS = ("directory", "editable", "virtual", "path")
SOURCE_KINDS = (*PATH_KINDS, "git", "url", "index")
#: a package of a lock whose source is a path (its whole entry is compared)
_PATH_SOURCE = re.compile(r"^source = \{ (?:directory|editable|virtual|path) = ", re.M)
#: the lines of any other package the checks read (its name and where it comes from)
_NAMING = re.compile(r"^(?:name|version|source) = .*$", re.M)
MANIFEST = (("constraint-dependencies", "constraints"), ("override-dependencies", "overrides"),
            ("build-constraint-dependencies", "build-constraints"))


@dataclass(frozen=True)
class Dep:
    """One requirement as declared or as the lock records it. ``kinds`` is the set of
    source kinds it may be recorded with (one, for a recorded entry); ``where`` the
    resolved directory or file of a path source."""

    name: str
    extras: frozenset[str] = frozenset()
    specifier: str = ""
    marker: str | None = None
    kinds: frozenset[str] = frozenset()
    where: Path | None = None

    def __str__(self) -> str:
        text = self.name + (f"[{','.join(sorted(self.extras))}]" if self.extras else "")
        text += self.specifier
        if self.marker:
            try:
                text += f"; {Marker(self.marker)}"
            except InvalidMarker:
                text += f"; {self.marker}"
        if self.kinds:
            place = f" {paths.display(self.where)}" if self.where is not None else ""
            text += f" ({'/'.join(sorted(self.kinds))}{place})"
        return text


def read_lock(text: str) -> dict[str, Any]:
    """What the checks read of a ``uv.lock``: its top-level fields and tables, each
    path-sourced package whole, and of every other package only its ``name``, ``version``
    and ``source`` lines. A lock is mostly registry packages' wheels and dependencies, which
    no check reads: leaving them out before parsing makes this about four times cheaper than
    parsing the whole file (``agentprov info`` checks every project's lock). Raises
    ``tomllib.TOMLDecodeError`` as parsing the whole file would."""
    head, *packages = text.split("\n[[package]]\n")
    kept = [head]
    for chunk in packages:
        top = chunk.split("\n[", 1)[0]  # the package's own lines, before its sub-tables
        if _PATH_SOURCE.search(top):
            kept.append(chunk)
        else:
            kept.append("\n".join(m.group(0) for m in _NAMING.finditer(top)) + "\n")
    return tomllib.loads("\n[[package]]\n".join(kept))


def differences(project: Path, lock: dict[str, Any] | None = None,
                seen: set[Path] | None = None) -> list[str]:
    """What the project's ``uv.lock`` does not record as its ``pyproject.toml`` (and its
    path dependencies) declare; empty when they agree or cannot be compared.

    :param lock: the lock already parsed (it is the largest file read: a caller that reads
        it anyway passes it rather than have it parsed twice).
    :param seen: filled with the directories whose ``pyproject.toml`` was compared (the
        project's and each path dependency's): what a cached answer depends on."""
    try:
        pyproject = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
        if lock is None:
            lock = read_lock((project / "uv.lock").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []  # unreadable files are reported by whoever reads them next (uv)
    if lock.get("version") != 1 or "project" not in pyproject:
        return []
    root = project.resolve()
    packages = lock.get("package", [])
    out: list[str] = []
    want, have = pyproject["project"].get("requires-python"), lock.get("requires-python")
    if want is not None and not _same_specifier(want, have or ""):
        out.append(f"requires-python: {want} is declared, the lock records {have or 'none'}")
    uv = pyproject.get("tool", {}).get("uv", {})
    manifest = lock.get("manifest", {})
    for key, recorded in MANIFEST:
        declared = [d for s in uv.get(key, []) if (d := _declared(s, {}, root)) is not None]
        out += _diff(key, declared, [_recorded(e, root) for e in manifest.get(recorded, [])])
    # uv keeps a lock made under an earlier cut-off when given a later one, and resolves
    # again for an earlier one or when either side has none
    want_en, have_en = uv.get("exclude-newer"), lock.get("options", {}).get("exclude-newer")
    a, b = _timestamp(want_en), _timestamp(have_en)
    if (a is None) != (b is None) or (isinstance(a, dt.datetime) and isinstance(b, dt.datetime)
                                      and a < b):
        out.append(f"exclude-newer: {want_en or 'none'} is declared (the build passes it to "
                   f"uv), the lock records {have_en or 'none'}")
    name = canonicalize_name(pyproject["project"].get("name", ""))
    entry = next((p for p in packages if canonicalize_name(p.get("name", "")) == name
                  and _source_dir(p, root) == root), None)
    if entry is None:
        return [*out, f"the lock records no package {name} for the project itself"]
    seen = set() if seen is None else seen
    seen.add(root)
    out += _compare_package(pyproject, project, root, entry, packages, prefix="", seen=seen)
    return out


def _compare_package(pyproject: dict, here: Path, root: Path, entry: dict,
                     packages: list[dict], prefix: str, seen: set[Path]) -> list[str]:
    proj = pyproject.get("project", {})
    uv = pyproject.get("tool", {}).get("uv", {})
    sources = {canonicalize_name(k): v for k, v in uv.get("sources", {}).items()}
    meta = entry.get("metadata", {})
    out: list[str] = []
    declared: list[Dep] = []
    if "dependencies" not in proj.get("dynamic", []) and \
            "optional-dependencies" not in proj.get("dynamic", []):
        declared = [d for s in proj.get("dependencies", [])
                    if (d := _declared(s, sources, here)) is not None]
        extras = sorted(canonicalize_name(e) for e in proj.get("optional-dependencies", {}))
        for extra, reqs in proj.get("optional-dependencies", {}).items():
            declared += [d for s in reqs if (d := _declared(
                s, sources, here, extra=canonicalize_name(extra))) is not None]
        out += _diff(prefix + "dependencies", declared,
                     [_recorded(e, root) for e in meta.get("requires-dist", [])])
        have = sorted(canonicalize_name(e) for e in meta.get("provides-extras", []))
        if extras != have:
            out.append(f"{prefix}optional-dependencies: extras {extras} are declared, the "
                       f"lock records {have}")
    groups = _groups(pyproject, sources, here)
    recorded = {canonicalize_name(g): [_recorded(e, root) for e in reqs]
                for g, reqs in meta.get("requires-dev", {}).items()}
    for g in sorted(set(groups) | set(recorded)):
        if g not in recorded:
            out.append(f"{prefix}dependency group {g} is declared, the lock does not record it")
        elif g not in groups:
            out.append(f"{prefix}the lock records dependency group {g}, which is not declared")
        else:
            out += _diff(f"{prefix}dependency group {g}", groups[g], recorded[g])
    # each path dependency (a directory holding a pyproject.toml) is compared in turn
    for dep in declared:
        target = dep.where
        if target is None or target in seen or not (target / "pyproject.toml").is_file():
            continue
        seen.add(target)
        sub = next((p for p in packages if _source_dir(p, root) == target), None)
        label = paths.display(target / "pyproject.toml")
        if sub is None:
            out.append(f"{label}: the lock records no package from {paths.display(target)}")
            continue
        try:
            sub_py = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        out += _compare_package(sub_py, target, root, sub, packages, prefix=f"{label}: ",
                                seen=seen)
    return out


def _groups(pyproject: dict, sources: dict, here: Path) -> dict[str, list[Dep]]:
    """Dependency groups as uv records them: ``include-group`` expanded, and
    ``tool.uv.dev-dependencies`` added to ``dev``."""
    raw = {canonicalize_name(k): v for k, v in pyproject.get("dependency-groups", {}).items()}

    def expand(name: str, stack: tuple[str, ...]) -> list[Dep]:
        out: list[Dep] = []
        for item in raw.get(name, []):
            if isinstance(item, dict) and "include-group" in item:
                inc = canonicalize_name(item["include-group"])
                if inc not in stack:
                    out += expand(inc, (*stack, inc))
            elif isinstance(item, str) and (d := _declared(item, sources, here)):
                out.append(d)
        return out

    groups = {g: expand(g, (g,)) for g in raw}
    dev = pyproject.get("tool", {}).get("uv", {}).get("dev-dependencies")
    if dev:
        groups["dev"] = groups.get("dev", []) + [
            d for s in dev if (d := _declared(s, sources, here)) is not None]
    return groups


def _declared(spec: str, sources: dict, here: Path, *, extra: str | None = None) -> Dep | None:
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return None  # uv reports a malformed requirement itself
    name = canonicalize_name(req.name)
    marker = str(req.marker) if req.marker else None
    if extra is not None:
        marker = f"({marker}) and extra == '{extra}'" if marker else f"extra == '{extra}'"
    kinds: frozenset[str] = frozenset()
    where = None
    src = sources.get(name)
    if isinstance(src, list) or (isinstance(src, dict) and src.keys() & {"marker", "extra",
                                                                          "group"}):
        kinds = frozenset(SOURCE_KINDS)  # conditional sources: any kind, checked by uv
    elif isinstance(src, dict) and "path" in src:
        where = (here / src["path"]).resolve()
        if where.is_file():
            kinds = frozenset({"path"})
        elif src.get("editable") is True:
            kinds = frozenset({"editable"})
        elif src.get("editable") is False:
            kinds = frozenset({"directory", "virtual"})
        else:
            kinds = frozenset({"directory", "editable", "virtual"})
    elif isinstance(src, dict) and src.get("workspace"):
        kinds = frozenset(PATH_KINDS)
    elif isinstance(src, dict):
        kinds = frozenset(k for k in ("git", "url", "index") if k in src)
    elif req.url:
        kinds = frozenset({"git"} if req.url.startswith("git+") else
                          {"path", "directory", "editable"} if req.url.startswith("file:")
                          else {"url"})
    # uv records a path dependency without the version specifier it was declared with
    specifier = "" if kinds & set(PATH_KINDS) else str(req.specifier)
    return Dep(name, frozenset(canonicalize_name(e) for e in req.extras), specifier, marker,
               kinds, where)


def _recorded(entry: dict[str, Any], root: Path) -> Dep:
    kind = next((k for k in SOURCE_KINDS if k in entry), None)
    where = (root / entry[kind]).resolve() if kind in PATH_KINDS else None
    return Dep(canonicalize_name(entry.get("name", "")),
               frozenset(canonicalize_name(e) for e in entry.get("extras", [])),
               "" if kind in PATH_KINDS else entry.get("specifier", ""), entry.get("marker"),
               frozenset({kind}) if kind else frozenset(), where)


def _source_dir(package: dict, root: Path) -> Path | None:
    src = package.get("source", {})
    kind = next((k for k in ("directory", "editable", "virtual") if k in src), None)
    return (root / src[kind]).resolve() if kind else None


def _matches(d: Dep, r: Dep) -> bool:
    if (d.name, d.extras) != (r.name, r.extras) or not _same_specifier(d.specifier, r.specifier):
        return False
    if bool(d.kinds) != bool(r.kinds) or (d.kinds and not d.kinds & r.kinds):
        return False
    if d.where is not None and r.where is not None and d.where != r.where:
        return False
    return same_marker(d.marker, r.marker)


def _diff(section: str, declared: list[Dep], recorded: list[Dep]) -> list[str]:
    left = list(recorded)
    missing = []
    for d in declared:
        hit = next((i for i, r in enumerate(left) if _matches(d, r)), None)
        if hit is None:
            missing.append(d)
        else:
            left.pop(hit)
    out = []
    for d in missing:
        other = next((r for r in left if r.name == d.name), None)
        if other is not None:
            left.remove(other)
            out.append(f"{section}: {d} is declared, the lock records {other}")
        else:
            out.append(f"{section}: {d} is declared, the lock does not record it")
    out += [f"{section}: the lock records {r}, which is not declared" for r in left]
    return out


def _same_specifier(a: str, b: str) -> bool:
    try:
        return SpecifierSet(a) == SpecifierSet(b)
    except InvalidSpecifier:
        return a == b


def _timestamp(value: str | None) -> object:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return value


# ------------------------------------------------------------------ markers, by meaning
_VERSIONED = {"python_version", "python_full_version", "implementation_version"}
_VARIABLES = {"os_name", "sys_platform", "platform_machine", "platform_python_implementation",
              "platform_release", "platform_system", "platform_version", "implementation_name",
              "extra", "dependency_groups", "extras", *_VERSIONED}
_QUOTED = re.compile(r"""'([^']*)'|"([^"]*)\"""")
_WORD = re.compile(r"\b[a-z_]+\b")
GRID_LIMIT = 20000


def same_marker(a: str | None, b: str | None) -> bool:
    """Whether two environment markers hold in the same environments (``None`` holds in
    all). Decided over every combination of the values either mentions (and neighbours
    of each version); ``True`` when that grid would be too large to try."""
    if a == b:
        return True
    try:
        ma, mb = (Marker(m) if m else None for m in (a, b))
    except InvalidMarker:
        return True  # not ours to judge: uv reports it
    if ma is not None and mb is not None and str(ma) == str(mb):
        return True
    text = f"{a or ''} {b or ''}"
    literals = {x or y for x, y in _QUOTED.findall(text)}
    unquoted = _QUOTED.sub(" ", text)
    variables = sorted(set(_WORD.findall(unquoted)) & _VARIABLES)
    dims: list[list[dict[str, str]]] = []
    if {"python_version", "python_full_version"} & set(variables):
        dims.append([{"python_version": f"{v.major}.{v.minor}", "python_full_version": str(v)}
                     for v in _versions(literals)])
    if "implementation_version" in variables:
        dims.append([{"implementation_version": str(v)} for v in _versions(literals)])
    for var in variables:
        if var not in _VERSIONED:
            dims.append([{var: v} for v in sorted(literals | {"", "agentprov-other"})])
    size = 1
    for d in dims:
        size *= len(d)
    if size > GRID_LIMIT:
        return True
    base = default_environment() | {"extra": ""}
    for combo in itertools.product(*dims):
        env = dict(base)
        for part in combo:
            env |= part
        try:
            if (ma.evaluate(env) if ma else True) != (mb.evaluate(env) if mb else True):
                return False
        except Exception:  # noqa: BLE001 - an undecidable comparison is left to uv
            return True
    return True


def _versions(literals: set[str]) -> list[Version]:
    """Final versions around each version literal: the same, the previous and the next
    minor, each at .0, the literal's own patch and its neighbours, and .99."""
    found = set()
    for lit in literals:
        try:
            v = Version(lit.removesuffix(".*"))
        except InvalidVersion:
            continue
        major, minor, patch = (*v.release, 0, 0)[:3]
        for m in (minor - 1, minor, minor + 1):
            for p in (0, patch - 1, patch, patch + 1, 99):
                if m >= 0 and p >= 0:
                    found.add(Version(f"{major}.{m}.{p}"))
    return sorted(found) or [Version(default_environment()["python_full_version"])]
