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


def staged(root: Path) -> dict[str, bytes]:
    """Every file under ``root``, read once: ``{relative POSIX path: bytes}``, sorted. T0
    scans these bytes and stores the same ones (a file is never read again between the
    scan and the store)."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def scan(root: Path, secrets: dict[str, str]) -> list[str]:
    """Findings as ``relative/path: what`` (``what`` names the variable or the shape)."""
    return scan_files(staged(root), secrets)


def scan_files(files: dict[str, bytes], secrets: dict[str, str]) -> list[str]:
    """:func:`scan` of files already read (:func:`staged`)."""
    findings = []
    values = {name: v.encode() for name, v in secrets.items() if v}
    for rel, data in files.items():
        for name, v in values.items():
            if v in data:
                findings.append(f"{rel}: the value of {name}")
        for what, rx in KEY_SHAPES.items():
            if rx.search(data):
                findings.append(f"{rel}: a key-shaped string ({what})")
    return findings
