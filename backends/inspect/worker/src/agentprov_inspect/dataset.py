"""The dataset ``agentprov backends build --dataset DIR`` copied into the environment.

It lies under ``<environment>/agentprov/datasets/<name>/``, laid out as the task's loader
expects below its cache directory (for inspect_evals, ``INSPECT_EVALS_CACHE_DIR``), and is
never downloaded: T0 hashed every file into the marker when it copied them, and checks them
again in ``--offline-check``. The worker only reads it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


class DatasetError(RuntimeError):
    """The environment holds no dataset, or a file of it is not as the task expects."""


def root(name: str) -> Path:
    """The directory the build copied dataset ``name`` into (the task's cache directory)."""
    return Path(sys.prefix) / "agentprov" / "datasets" / name


def records(path: Path, key: str) -> list[dict[str, Any]]:
    """The records of one dataset file: the list under ``key`` of its JSON object."""
    if not path.is_file():
        raise DatasetError(f"{path} is missing: build the environment with --dataset DIR")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path} is not readable JSON ({exc})") from None
    rows = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DatasetError(f"{path}: {key!r} is not a list of records")
    return rows
