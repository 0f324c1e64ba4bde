"""The redaction scan T0 runs over everything staged before it is stored.

A staged file holding a key's value, or a key-shaped string, quarantines the session: nothing
is stored, the staging directory is kept, and the register records ``capture.quarantined``
with the file and the kind of finding (never the value)."""

from __future__ import annotations

import re
from pathlib import Path

KEY_SHAPES = {
    "openai-style key": re.compile(rb"sk-(?!ant-)[A-Za-z0-9_-]{20,}"),
    "anthropic key": re.compile(rb"sk-ant-[A-Za-z0-9_-]{10,}"),
    "aws access key": re.compile(rb"AKIA[0-9A-Z]{16}"),
    "private key": re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
}


def scan(root: Path, secrets: dict[str, str]) -> list[str]:
    """Findings as ``relative/path: what`` (``what`` names the variable or the shape)."""
    findings = []
    values = {name: v.encode() for name, v in secrets.items() if v}
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        rel = p.relative_to(root)
        for name, v in values.items():
            if v in data:
                findings.append(f"{rel}: the value of {name}")
        for what, rx in KEY_SHAPES.items():
            if rx.search(data):
                findings.append(f"{rel}: a key-shaped string ({what})")
    return findings
