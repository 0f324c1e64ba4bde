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
