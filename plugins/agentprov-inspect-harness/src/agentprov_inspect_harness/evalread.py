"""An Inspect ``.eval`` log read by Inspect's own reader (``inspect_ai.log.read_eval_log``).

A ``.eval`` log is a ZIP whose entries are zstd-compressed, which the core's Python cannot
read; the reader that wrote it can. So the log is read by the Python of a built Inspect
backend environment, in a child process: the log's bytes go to a private temporary file,
the child prints the log as Inspect's own JSON form (``EvalLog.model_dump_json``, with
attachments resolved: the same form ``inspect log dump`` prints), and T0 parses that.

The log was written by the worker, so it is hostile input: the child runs with a scrubbed
environment (its HOME and TMPDIR inside the temporary directory, no variable of T0's
passed), no network is needed, its output is bounded (:data:`MAX_JSON_BYTES`) and so is its
time (:data:`TIMEOUT_S`). Whatever goes wrong is an :class:`EvalUnreadable` naming why.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

#: the largest JSON form of one cell's log read (a cell of 25 samples is a few MB)
MAX_JSON_BYTES = 512 * 1024 * 1024
TIMEOUT_S = 300

_READER = (
    "import sys\n"
    "from inspect_ai.log import read_eval_log\n"
    "log = read_eval_log(sys.argv[1], resolve_attachments=True)\n"
    "sys.stdout.write(log.model_dump_json())\n"
)


class EvalUnreadable(Exception):
    """The ``.eval`` log could not be read by Inspect's reader (the text says why)."""


def environment_python(env_id: str) -> Path:
    """The Python of the built backend environment ``env_id`` (which holds Inspect)."""
    from agentprov_core.api import environment_dir

    if not env_id or "/" in env_id or env_id.startswith("."):
        raise EvalUnreadable(f"the corpus names no usable environment ({env_id!r})")
    python = environment_dir(env_id) / "bin" / "python"
    if not python.exists():
        raise EvalUnreadable(
            f"the environment {env_id}, whose Inspect reads the log, is not built here "
            "(agentprov backends build <source>)")
    return python


def read(data: bytes, env_id: str) -> dict[str, Any]:
    """The log ``data`` as Inspect's JSON form, read in environment ``env_id``."""
    python = environment_python(env_id)
    with tempfile.TemporaryDirectory(prefix="agentprov-eval-") as tmp:
        t = Path(tmp)
        log = t / "cell.eval"
        log.write_bytes(data)
        (t / "home").mkdir()
        env = {"HOME": str(t / "home"), "TMPDIR": tmp, "PATH": "/usr/bin:/bin",
               "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PYTHONUTF8": "1",
               "INSPECT_TELEMETRY": "", "NO_COLOR": "1"}
        with open(t / "out.json", "wb") as out, open(t / "err.txt", "wb") as err:
            try:
                p = subprocess.run([str(python), "-I", "-c", _READER, str(log)], stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=tmp,
                                   timeout=TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise EvalUnreadable(f"Inspect's reader took more than {TIMEOUT_S} s") from None
        if p.returncode != 0:
            tail = (t / "err.txt").read_bytes()[-600:].decode("utf-8", "replace").strip()
            last = tail.splitlines()[-1] if tail else f"exit {p.returncode}"
            raise EvalUnreadable(f"Inspect's reader refused the log: {last}")
        size = os.path.getsize(t / "out.json")
        if size > MAX_JSON_BYTES:
            raise EvalUnreadable(f"the log's JSON form is {size} bytes, over the "
                                 f"{MAX_JSON_BYTES} read")
        try:
            doc = json.loads((t / "out.json").read_bytes())
        except ValueError as exc:
            raise EvalUnreadable(f"Inspect's reader printed no JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise EvalUnreadable("Inspect's reader printed no log object")
    return doc
