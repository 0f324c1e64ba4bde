"""The catalogue of a backend's source, as its worker package reads it from the installed
benchmark, and the helpers every worker package shares.

Run inside a backend environment::

    python -m agentprov_backend.catalogue SOURCE

It prints the source's ``agentprov-catalogue/0.1`` JSON document (sorted keys, one-space
indent, trailing newline) on stdout and writes nothing else there; the document comes from
the source's worker package (:meth:`agentprov_backend.source.WorkerSource.catalogue`).

This module never imports ``agentprov_core``, and imports no benchmark.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tomllib
from importlib import metadata, resources
from typing import Any

FORMAT = "agentprov-catalogue/0.1"
DEFENCE_REGISTRY_FORMAT = "agentprov-defence-registry/0.1"


class CatalogueError(RuntimeError):
    """The installed package does not look as the catalogue expects."""


# ---------------------------------------------------------------------------------------------
# Shared helpers (no benchmark imports)


def task_sort_key(task_id: str) -> tuple[str, int, str]:
    """Sort ``user_task_10`` after ``user_task_9``: by prefix, then number, then the id."""
    match = re.fullmatch(r"(.*?)(\d+)", task_id)
    if match is None:
        return (task_id, -1, task_id)
    return (match.group(1), int(match.group(2)), task_id)


def load_defences() -> list[dict[str, Any]]:
    """Every entry of the shipped defence registry, sorted by name, with defaults filled in.

    A missing ``enabled`` is read as false (fail closed).
    """
    text = (
        resources.files("agentprov_backend").joinpath("defences.toml").read_text(encoding="utf-8")
    )
    data = tomllib.loads(text)
    if data.get("format") != DEFENCE_REGISTRY_FORMAT:
        raise CatalogueError(
            f"defences.toml: format {data.get('format')!r}, expected {DEFENCE_REGISTRY_FORMAT!r}"
        )
    entries = data.get("defences", {})
    out = []
    for name in sorted(entries):
        entry = entries[name]
        if "summary" not in entry:
            raise CatalogueError(f"defences.toml: defence {name!r} has no summary")
        out.append(
            {
                "name": name,
                "enabled": bool(entry.get("enabled", False)),
                "summary": entry["summary"],
                "backends": list(entry.get("backends", [])),
                "suites": list(entry["suites"]) if "suites" in entry else None,
                "assets": list(entry.get("assets", [])),
                "needs": list(entry.get("needs", [])),
                "replaces_pipeline": bool(entry.get("replaces_pipeline", False)),
                "port": bool(entry.get("port", False)),
                "licence": entry.get("licence"),
            }
        )
    return out


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    return {name: metadata.version(name) for name in names}


def dumps(document: dict[str, Any]) -> str:
    """The catalogue's canonical text: sorted keys, one-space indent, trailing newline."""
    return json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------


def build(source: str) -> dict[str, Any]:
    """The catalogue of ``source``, from its worker package."""
    from agentprov_backend import host

    try:
        return host.source(source).catalogue()
    except host.SourceUnavailable as exc:
        raise CatalogueError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agentprov_backend.catalogue SOURCE", file=sys.stderr)
        return 2
    try:
        # Anything the benchmark prints while importing goes to stderr: stdout is the document.
        with contextlib.redirect_stdout(sys.stderr):
            document = build(args[0])
    except CatalogueError as exc:
        print(f"agentprov_backend.catalogue: {exc}", file=sys.stderr)
        return 3
    sys.stdout.buffer.write(dumps(document).encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
