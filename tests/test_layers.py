"""The run's layers import downwards only (docs/decisions.md, "The run's modules and the
prepared run"): nothing in ``agentprov_core/backend/`` imports ``agentprov_core.run`` or
``agentprov_core.cli``, at module level or inside a function; and the prepared run is
frozen, so a step that changes the plan returns a new one."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from conftest import ROOT

UPPER = ("agentprov_core.run", "agentprov_core.cli")


def imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement of ``path`` names (absolute, or resolved from a
    relative one), with its line."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def test_the_imports_are_read_from_function_bodies_too():
    """The scan itself: an import inside a function is found."""
    f = ROOT / "agentprov_core" / "backend" / "session.py"
    found = {m for _, m in imports(f)}
    assert "agentprov_core.backend.workerclient.Worker" in found  # imported inside functions


def test_no_backend_module_imports_run_or_cli():
    backend = ROOT / "agentprov_core" / "backend"
    files = sorted(backend.rglob("*.py"))
    assert len(files) > 10
    upward = [f"{f.relative_to(ROOT)}:{line}: {m}" for f in files for line, m in imports(f)
              if m == UPPER[0] or m == UPPER[1] or m.startswith(tuple(u + "." for u in UPPER))]
    assert upward == []


def test_the_prepared_run_is_frozen():
    from agentprov_core.run.prepare import Prepared

    assert dataclasses.fields(Prepared)  # a dataclass
    assert Prepared.__dataclass_params__.frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        object.__new__(Prepared).__setattr__("plan", None)
