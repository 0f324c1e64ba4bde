"""Canonical JSON: a record's bytes in the log, and what its sha256 is taken of."""

from __future__ import annotations

import json
from typing import Any


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, separators ``(",", ":")``, UTF-8 (not
    ASCII-escaped), no NaN or infinity."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")
