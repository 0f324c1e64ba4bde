"""The picture of the core stays true: docs/architecture.md names the layers that
``lint-imports`` enforces (pyproject.toml), and each stage package's ``May import:`` line
names every stage it imports.

``tox -e lint`` runs import-linter's contracts (a lower layer never imports a higher one,
no import circles); these tests keep the words around them from drifting."""

from __future__ import annotations

import ast
import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "agentprov_core"


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    stages = next(c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "stages")
    return [[m.strip().removeprefix("agentprov_core.") for m in re.split(r"[|:]", layer)]
            for layer in stages["layers"]]


def doc_layers() -> list[list[str]]:
    """The numbered list between ``<!-- layers -->`` marks, highest layer first."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- layers -->", 2)[1]
    return [re.findall(r"`([a-z_]+)`", line.split(":", 1)[0]) for line in block.splitlines()
            if re.match(r"\d+\. ", line)]


def stage_of(module: str) -> str:
    return module.removeprefix("agentprov_core.").split(".")[0]


def imported_stages(package: Path) -> set[str]:
    """Every stage a package's modules import, at module level or inside functions (not
    under ``if TYPE_CHECKING:``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                continue
            if isinstance(child, ast.Import):
                found.update(stage_of(a.name) for a in child.names
                             if a.name.startswith("agentprov_core."))
            elif isinstance(child, ast.ImportFrom) and (child.module or "").startswith(
                    "agentprov_core"):
                if child.module == "agentprov_core":
                    found.update(a.name for a in child.names)
                else:
                    found.add(stage_of(child.module))
            visit(child)

    for f in package.rglob("*.py"):
        visit(ast.parse(f.read_text(encoding="utf-8")))
    found.discard(package.name)
    found.discard("__version__")
    return found


def stage_packages() -> list[Path]:
    return sorted(p.parent for p in PKG.glob("*/__init__.py")
                  if p.parent.name not in ("cli", "testing"))


def test_the_architecture_page_lists_the_layers_lint_imports_enforces():
    assert doc_layers() == contract_layers()


def test_every_module_and_package_of_the_core_is_in_a_layer():
    listed = {m for layer in contract_layers() for m in layer}
    present = {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"} | {
        p.parent.name for p in PKG.glob("*/__init__.py")}
    assert present - listed == set(), "add it to a layer in pyproject.toml and the page"
    assert listed - present == set(), "a layer names a module the core no longer has"


@pytest.mark.parametrize("package", stage_packages(), ids=lambda p: p.name)
def test_a_stage_imports_only_what_its_docstring_says(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    line = re.search(r"May import:(.*?)(?:\n\n|$)", doc or "", re.S)
    assert line, f"{package.name}/__init__.py's docstring has no 'May import:' line"
    allowed = set(re.findall(r"``([a-z_]+)``", line.group(1).split("never")[0]))
    assert imported_stages(package) - allowed == set()


def test_the_prepared_run_is_frozen():
    """A step that changes the plan returns a new prepared run; nothing edits one in place."""
    from agentprov_core.run.prepare import Prepared

    assert dataclasses.fields(Prepared) and Prepared.__dataclass_params__.frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        object.__new__(Prepared).__setattr__("plan", None)


def test_every_file_the_page_names_exists():
    """A module renamed or moved without the page following it fails here."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_/]+\.py)`", text))
    assert len(named) > 30
    roots = [PKG, ROOT / "backends" / "shared" / "src", ROOT / "backends" / "dojo" / "src",
             ROOT / "packages" / "capture" / "src",
             ROOT]
    missing = sorted(n for n in named if not any((r / n).is_file() for r in roots))
    assert missing == []


# ------------------------------------------------------------------ import circles, anywhere
def source_roots(top: Path) -> list[Path]:
    """Every directory the repository's Python packages are imported from: the checkout
    (``agentprov_core``) and each ``src/`` (the capture library, the worker host, every
    worker package, plugin and example)."""
    skip = {".tox", ".tools", ".git", "node_modules", ".venv"}
    return [top] + sorted(p for p in top.rglob("src")
                          if p.is_dir() and not skip.intersection(p.relative_to(top).parts))


def modules_under(roots: list[Path]) -> dict[str, Path]:
    """Module name to file, for every package module under ``roots``."""
    out: dict[str, Path] = {}
    for root in roots:
        for init in sorted(root.glob("*/__init__.py")):
            for f in sorted(init.parent.rglob("*.py")):
                parts = f.relative_to(root).with_suffix("").parts
                package = root / Path(*parts[:-1])
                if "__pycache__" in parts or not (package / "__init__.py").is_file():
                    continue
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                out.setdefault(name, f)
    return out


def runtime_imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The repository modules ``module`` imports when it runs: at module level or inside a
    function (a function's import runs when it is called), never under
    ``if TYPE_CHECKING:``; each named as the most specific module the repository has."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def resolve(name: str) -> None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    resolve(a.name)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in child.names:
                    resolve(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def import_circles(roots: list[Path]) -> list[list[str]]:
    """Every circle of runtime imports between the modules under ``roots`` (Tarjan's
    strongly connected components of more than one module), each sorted."""
    known = modules_under(roots)
    graph = {m: sorted(runtime_imports(m, p, known)) for m, p in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return sorted(out)


def test_no_module_of_the_repository_imports_itself_through_others_at_run_time():
    """No runtime import circle in any package of the repository: the core, the capture
    library, the worker host, every worker package, plugin and example (import-linter's
    ``no-circles`` contract sees only the core's packages, and not a circle closed by an
    import inside a function)."""
    roots = source_roots(ROOT)
    assert {r.relative_to(ROOT).as_posix() for r in roots} >= {
        ".", "packages/capture/src", "backends/shared/src", "backends/inspect/worker/src",
        "backends/dojo/src", "plugins/agentprov-agentdojo/src"}
    assert import_circles(roots) == []


def test_a_circle_closed_inside_a_function_is_found(tmp_path):
    """The check above can fail: two modules of a package that import each other, one of
    them inside a function (the other through a relative import), are one circle; an
    import under ``if TYPE_CHECKING:`` closes none."""
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cells.py").write_text("def run():\n    from pkg.probe import probe\n")
    (pkg / "probe.py").write_text("from . import cells\n\ndef probe():\n    pass\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from pkg import hints\n")
    (pkg / "hints.py").write_text("import pkg.typed\n")
    assert import_circles(source_roots(tmp_path)) == [["pkg.cells", "pkg.probe"]]


#: the core's code files that may be longer, and why
LONG_FILES = {"errors.py": "the registry of error codes, which is data (one entry a code)"}
MAX_LINES = 700


def test_no_code_file_of_the_core_is_longer_than_700_lines():
    """Small modules named for what they hold: a file that grows past 700 lines is split by
    concept (as verify's checks, the egress proxy and the backend build were)."""
    long = {f.relative_to(PKG).as_posix(): n for f in PKG.rglob("*.py")
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert {k: v for k, v in long.items() if k not in LONG_FILES} == {}
