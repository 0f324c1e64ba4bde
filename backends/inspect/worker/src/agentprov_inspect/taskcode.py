"""An Inspect task's declared parameters and fixed settings, read from its installed source.

The task modules are parsed with :mod:`ast`, never imported: importing ``inspect_evals``
reads its cache directory and may reach for the network, and the catalogue must describe
the code without running it. What is read:

* a function's parameters, each with its type (``str``, ``bool``, ``int``; ``X | None``
  is ``X``), the choices of a ``Literal[...]`` annotation and its default (a literal);
* the keyword values of a call inside a function (``Task(max_messages=20, …)``,
  ``GenerateConfig(temperature=0.0, …)``), when they are literals;
* the keys of a module-level ``dict`` literal (a registry such as ``AGENT_DICT``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from importlib import util
from pathlib import Path
from typing import Any


class TaskCodeError(RuntimeError):
    """The installed task code does not look as the catalogue expects."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str | None
    choices: list[str] | None
    default: Any
    has_default: bool


def module_file(module: str) -> Path:
    """The installed source file of ``module``, found without importing it (its parent
    packages' ``__init__`` are not run: the spec is found from the path)."""
    top, _, rest = module.partition(".")
    spec = util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise TaskCodeError(f"the package {top!r} is not installed here")
    base = Path(next(iter(spec.submodule_search_locations)))
    parts = rest.split(".") if rest else []
    path = base.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    raise TaskCodeError(f"module {module!r} has no source file under {base}")


def parse(module: str) -> ast.Module:
    path = module_file(module)
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def function(module: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in parse(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise TaskCodeError(f"{module} defines no function {name!r}")


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _Unreadable(ast.unparse(node))


class _Unreadable(str):
    """A default that is not a literal (kept as its source text)."""


def _annotation(node: ast.AST | None) -> tuple[str | None, list[str] | None]:
    """(type, choices) of an annotation: ``Literal['a', 'b']`` is ``str`` with choices;
    ``X | None`` and ``Optional[X]`` are ``X``; anything else is ``None`` (not offered)."""
    if node is None:
        return None, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [p for p in (node.left, node.right)
                 if not (isinstance(p, ast.Constant) and p.value is None)]
        return _annotation(parts[0]) if len(parts) == 1 else (None, None)
    if isinstance(node, ast.Subscript):
        head = ast.unparse(node.value).rsplit(".", 1)[-1]
        if head == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            values = [ast.literal_eval(e) for e in elts]
            if all(isinstance(v, str) for v in values):
                return "str", values
            return None, None
        if head == "Optional":
            return _annotation(node.slice)
        return None, None
    if isinstance(node, ast.Name) and node.id in ("str", "bool", "int"):
        return node.id, None
    return None, None


def parameters(module: str, name: str) -> dict[str, Param]:
    """The parameters of function ``name`` in ``module``, in order, by name."""
    fn = function(module, name)
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.AST | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    out: dict[str, Param] = {}
    for arg, default in pairs:
        typ, choices = _annotation(arg.annotation)
        out[arg.arg] = Param(arg.arg, typ, choices, _literal(default), default is not None)
    return out


def call_keywords(module: str, function_name: str, callee: str) -> dict[str, Any]:
    """The literal keyword arguments of the (first) call to ``callee`` inside
    ``function_name``; a keyword whose value is not a literal is left out."""
    fn = function(module, function_name)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == callee:
            out = {}
            for kw in node.keywords:
                if kw.arg is None:
                    continue
                value = _literal(kw.value)
                if not isinstance(value, _Unreadable):
                    out[kw.arg] = value
            return out
    raise TaskCodeError(f"{module}.{function_name} makes no call to {callee!r}")


def nested_call_keywords(module: str, function_name: str, callee: str,
                         keyword: str, inner: str) -> dict[str, Any]:
    """The literal keywords of the call ``inner(...)`` passed as ``keyword=`` to
    ``callee(...)`` inside ``function_name`` (``Task(config=GenerateConfig(...))``)."""
    fn = function(module, function_name)
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] == callee:
            for kw in node.keywords:
                if kw.arg == keyword and isinstance(kw.value, ast.Call) and \
                        ast.unparse(kw.value.func).rsplit(".", 1)[-1] == inner:
                    return {k.arg: _literal(k.value) for k in kw.value.keywords
                            if k.arg is not None and not isinstance(_literal(k.value), _Unreadable)}
    raise TaskCodeError(f"{module}.{function_name}: no {callee}({keyword}={inner}(...))")


def dict_keys(module: str, name: str) -> list[str]:
    """The keys of the module-level dict literal assigned to ``name``."""
    for node in parse(module).body:
        target = value = None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        if target == name and isinstance(value, ast.Dict):
            return [ast.literal_eval(k) for k in value.keys if k is not None]
    raise TaskCodeError(f"{module} assigns no dict literal to {name!r}")
