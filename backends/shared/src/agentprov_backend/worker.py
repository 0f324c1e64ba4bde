"""The worker (T2): ``python -m agentprov_backend.worker``, spoken to by T0 over stdio.

One JSON object per line in each direction (protocol ``agentprov-worker/0.1``, documented
in docs/protocol.md). A request is ``{"id": N, "type": T, ...}``; the answer is
``{"id": N, "ok": true, "result": ...}`` or ``{"id": N, "ok": false, "error": {"code": C,
"message": M}}``. Types: ``hello``, ``catalogue``, ``plan``, ``run-cell``, ``shutdown``.

Only protocol lines are written to the real stdout: while a request is handled,
``sys.stdout`` is the real stderr, so a benchmark's prints cannot corrupt the stream.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from agentprov_backend import identity

_catalogues: dict[str, dict[str, Any]] = {}


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _catalogue(source: str) -> dict[str, Any]:
    """The catalogue recorded in the environment at build time (its sha256 is in the
    marker's guarded files, checked by T0), else computed from the installed package."""
    if source not in _catalogues:
        recorded = Path(sys.prefix) / "agentprov" / f"catalogue-{source}.json"
        if recorded.is_file():
            _catalogues[source] = json.loads(recorded.read_text(encoding="utf-8"))
            return _catalogues[source]
        from agentprov_backend import catalogue

        if source not in catalogue.SOURCES:
            raise RequestError("worker.unknown_source",
                               f"this backend serves {', '.join(catalogue.SOURCES)}, not {source!r}")
        doc = catalogue.build(source)
        doc["provenance"] = dict(doc["provenance"], kind="worker",
                                 note="served by the backend environment's worker")
        _catalogues[source] = doc
    return _catalogues[source]


def _plan(req: dict[str, Any]) -> dict[str, Any]:
    """Check every cell against the installed benchmark: suites, tasks and attacks exist."""
    cat = _catalogue(req["source"])
    version = req.get("benchmark_version") or cat["default_benchmark_version"]
    suites = {s["name"]: dict(s, user_set=set(s["user_tasks"]), inj_set=set(s["injection_tasks"]))
              for s in cat["suites"] if s["benchmark_version"] == version}
    attacks = {a["name"]: a for a in cat["attacks"]}
    problems: list[str] = []
    if version not in cat["benchmark_versions"]:
        problems.append(f"benchmark version {version!r} is not one of "
                        + ", ".join(cat["benchmark_versions"]))
    for cell in req.get("cells", []):
        suite = suites.get(cell.get("suite"))
        if suite is None:
            problems.append(f"{cell.get('cell_key')}: no suite {cell.get('suite')!r} "
                            f"(suites: {', '.join(suites)})")
            continue
        if cell.get("user_task_id") not in suite["user_set"]:
            problems.append(f"{cell['cell_key']}: no user task {cell.get('user_task_id')!r} "
                            f"in {suite['name']}")
        inj = cell.get("injection_task_id")
        if cell.get("attack") is not None:
            if cell["attack"] not in attacks:
                problems.append(f"{cell['cell_key']}: no attack {cell['attack']!r} "
                                f"(attacks: {', '.join(attacks)})")
            elif attacks[cell["attack"]]["refused"]:
                problems.append(f"{cell['cell_key']}: attack {cell['attack']!r} is refused")
            if inj not in suite["inj_set"]:
                problems.append(f"{cell['cell_key']}: no injection task {inj!r} in "
                                f"{suite['name']}")
    return {"cells": len(req.get("cells", [])), "benchmark_version": version,
            "problems": problems}


def handle(req: dict[str, Any]) -> Any:
    kind = req.get("type")
    if kind == "hello":
        return identity.hello()
    if kind == "catalogue":
        return _catalogue(req["source"])
    if kind == "plan":
        return _plan(req)
    if kind == "run-cell":
        raise RequestError("worker.unsupported", "run-cell arrives with the live run")
    raise RequestError("worker.unknown_request", f"unknown request type {kind!r}")


def serve(inp: TextIO, out: TextIO) -> int:
    for line in inp:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as exc:
            reply: dict[str, Any] = {"id": None, "ok": False,
                                     "error": {"code": "worker.bad_json", "message": str(exc)}}
        else:
            if req.get("type") == "shutdown":
                out.write(json.dumps({"id": req.get("id"), "ok": True, "result": None}) + "\n")
                out.flush()
                return 0
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    reply = {"id": req.get("id"), "ok": True, "result": handle(req)}
            except RequestError as exc:
                reply = {"id": req.get("id"), "ok": False,
                         "error": {"code": exc.code, "message": str(exc)}}
            except Exception as exc:  # reported, never a dead pipe
                reply = {"id": req.get("id"), "ok": False,
                         "error": {"code": "worker.internal",
                                   "message": f"{type(exc).__name__}: {exc}"}}
        out.write(json.dumps(reply, sort_keys=True) + "\n")
        out.flush()
    return 0


def main() -> int:
    # The protocol gets a private copy of fd 1; fd 1 itself becomes stderr, so nothing but
    # protocol lines reaches T0's pipe, not even a C extension's printf.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, out)


if __name__ == "__main__":
    sys.exit(main())
