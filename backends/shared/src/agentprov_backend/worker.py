"""The worker (T2): ``python -m agentprov_backend.worker``, spoken to by T0 over stdio.

One JSON object per line in each direction (protocol ``agentprov-worker/0.1``, documented
in docs/protocol.md). A request is ``{"id": N, "type": T, ...}``; the answer is
``{"id": N, "ok": true, "result": ...}`` or ``{"id": N, "ok": false, "error": {"code": C,
"message": M}}``. Types: ``hello``, ``catalogue``, ``plan``, ``run-cell``, ``shutdown``.
``run-cell`` requests run concurrently (each in a process forked from the worker's cell
server, :mod:`agentprov_backend.cellserver`, which imported the benchmark once); their
answers may come in any order.

Only protocol lines are written to the real stdout: while a request is handled,
``sys.stdout`` is the real stderr, so a benchmark's prints cannot corrupt the stream.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from agentprov_backend import timing

_catalogues: dict[str, dict[str, Any]] = {}


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _source(name: str):
    """The source's worker package (:mod:`agentprov_backend.host`), or the request's error."""
    from agentprov_backend import host

    try:
        return host.source(name)
    except host.SourceUnavailable as exc:
        raise RequestError(exc.code, str(exc)) from None


def _catalogue(source: str) -> dict[str, Any]:
    """The catalogue recorded in the environment at build time (its sha256 is in the
    marker's guarded files, checked by T0), else the one the source's worker package reads
    from the installed benchmark."""
    if source not in _catalogues:
        recorded = Path(sys.prefix) / "agentprov" / f"catalogue-{source}.json"
        if recorded.is_file():
            _catalogues[source] = json.loads(recorded.read_text(encoding="utf-8"))
            return _catalogues[source]
        doc = _source(source).catalogue()
        doc["provenance"] = dict(doc.get("provenance") or {}, kind="worker",
                                 note="served by the backend environment's worker")
        _catalogues[source] = doc
    return _catalogues[source]


def _plan(req: dict[str, Any]) -> dict[str, Any]:
    """Check every cell against the installed benchmark, as the source's worker package
    does (:meth:`agentprov_backend.source.WorkerSource.check_plan`)."""
    cat = _catalogue(req["source"])
    version = req.get("benchmark_version") or cat.get("default_benchmark_version")
    problems = _source(req["source"]).check_plan(req, cat)
    return {"cells": len(req.get("cells", [])), "benchmark_version": version,
            "problems": [str(p) for p in problems]}


_server = None
_server_lock = threading.Lock()


#: Set by T0 for a campaign's worker (never for the check worker): the source, benchmark
#: version and the plan's suites, as JSON. The worker then starts its cell server at once,
#: before the first run-cell request, and the server's warm-up
#: (:mod:`agentprov_backend.forkserver`) reads them from the environment it inherits.
WARM_VARIABLE = "AGENTPROV_WORKER_WARM"


def _cells():
    """The cell server (:mod:`agentprov_backend.cellserver`) that imports the benchmark
    once and forks a process per cell, reachable only through the worker's socket pair."""
    global _server
    with _server_lock:
        if _server is None:
            from agentprov_backend import cellserver

            _server = cellserver.Server()
        return _server


def run_cell(req: dict[str, Any]) -> dict[str, Any]:
    """Run one cell in a forked child, confined to its own session directory (Landlock,
    :mod:`agentprov_backend.landlock`); end its session ``aborted`` when the child dies or
    outlives ``timeout_s``."""
    from agentprov_capture import CaptureError, CaptureWriter

    probe = req.get("probe") is True  # the containment probe's cells: no source runs
    missing = [k for k in ("session_id", "staging", "cell") + (
        () if probe else ("agent", "benchmark_version", "source")) if k not in req]
    if missing:
        raise RequestError("worker.bad_request", "run-cell needs " + ", ".join(missing))
    if not probe:  # an unknown or broken source is the request's error, not a cell's
        _source(req["source"])
    staging = Path(req["staging"])
    staging.mkdir(parents=True, exist_ok=True)
    t = time.time()
    proc = _cells().start(req)
    timing.emit("worker.fork", t, session=req["session_id"])
    t = time.time()
    proc.join(req.get("timeout_s"))
    timing.emit("worker.join", t, session=req["session_id"])
    reason = None
    if proc.is_alive():
        proc.terminate()
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
        reason = ("cell.timeout", f"the cell outlived --cell-timeout {req.get('timeout_s')}s")
    elif proc.exitcode != 0:
        reason = ("cell.died", f"the cell's process ended with exit code {proc.exitcode}")
    result_file = staging / "result.json"
    if reason is not None or not result_file.exists():
        code, text = reason or ("cell.no_result", "the cell's process left no result")
        try:  # the parent ends the session its child could not end, continuing the chain
            w = CaptureWriter.reopen(staging / "capture.jsonl")
            w.append("note", code=code, text=text)
            w.end("aborted", reason=text, sealed_by="parent")
        except (CaptureError, OSError):
            pass  # no log, an ended log or a damaged one: T0 records what it finds
        return {"status": "aborted", "reason": text, "utility": None, "security": None,
                "setup_refusal": None, "native_log": None, "error": text}
    return json.loads(result_file.read_text(encoding="utf-8"))


def handle(req: dict[str, Any]) -> Any:
    kind = req.get("type")
    if kind == "hello":
        # imported here: a campaign's worker never says hello, and importlib.metadata would
        # cost it 30 ms before its forkserver starts
        from agentprov_backend import identity

        return identity.hello()
    if kind == "catalogue":
        return _catalogue(req["source"])
    if kind == "plan":
        return _plan(req)
    if kind == "run-cell":
        return run_cell(req)
    raise RequestError("worker.unknown_request", f"unknown request type {kind!r}")


def serve(inp: TextIO, out: TextIO) -> int:
    write_lock = threading.Lock()
    cells_in_flight: list[threading.Thread] = []

    def send(reply: dict[str, Any]) -> None:
        with write_lock:
            out.write(json.dumps(reply, sort_keys=True) + "\n")
            out.flush()

    def answer(req: dict[str, Any]) -> None:
        t = time.time()
        try:
            reply = {"id": req.get("id"), "ok": True, "result": handle(req)}
        except RequestError as exc:
            reply = {"id": req.get("id"), "ok": False,
                     "error": {"code": exc.code, "message": str(exc)}}
        except Exception as exc:  # reported, never a dead pipe
            reply = {"id": req.get("id"), "ok": False,
                     "error": {"code": "worker.internal", "message": f"{type(exc).__name__}: {exc}"}}
        send(reply)
        timing.emit("worker.request", t, kind=req.get("type"), id=req.get("id"))

    for line in inp:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except json.JSONDecodeError as exc:
            send({"id": None, "ok": False, "error": {"code": "worker.bad_json", "message": str(exc)}})
            continue
        if req.get("type") == "shutdown":
            for t in cells_in_flight:
                t.join()
            send({"id": req.get("id"), "ok": True, "result": None})
            return 0
        if req.get("type") == "run-cell":  # cells run concurrently; replies carry the id
            t = threading.Thread(target=answer, args=(req,), daemon=True)
            cells_in_flight.append(t)
            t.start()
            continue
        answer(req)
    return 0


def start_forkserver() -> None:
    """Start the cell server now (its preload runs while T0 prepares the first request)."""
    _cells()


def main() -> int:
    timing.emit("worker.main", time.time())
    # The protocol gets a private copy of fd 1; fd 1 itself becomes stderr, so nothing but
    # protocol lines reaches T0's pipe, not even a C extension's printf.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # not inherited by what it starts
    sys.stdout.flush()
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if os.environ.get(WARM_VARIABLE):  # after the dup2: the cell server and its cells get
        start_forkserver()             # stderr as fd 1, never the protocol's pipe
    return serve(sys.stdin, out)


if __name__ == "__main__":
    sys.exit(main())
