"""The redaction scan T0 runs over everything staged before it is stored.

A staged file holding a key's value, or a key-shaped string, quarantines the session: nothing
is stored, the staging directory is kept, and the register records ``capture.quarantined``
with the file and the kind of finding (never the value)."""

from __future__ import annotations

import re
from collections.abc import Iterable

KEY_SHAPES = {
    "openai-style key": re.compile(rb"sk-(?!ant-)[A-Za-z0-9_-]{20,}"),
    "anthropic key": re.compile(rb"sk-ant-[A-Za-z0-9_-]{10,}"),
    "aws access key": re.compile(rb"AKIA[0-9A-Z]{16}"),
    "private key": re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
}


def scan_files(files: dict[str, bytes], secrets: dict[str, str]) -> list[str]:
    """Findings in files T0 read (:func:`agentprov_core.corpus.staged.read`: every staged
    file it reads, the capture and native logs it stores among them, none exempt) as
    ``relative/path: what`` (``what`` names the variable or the shape)."""
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


def key_shape(text: str | bytes) -> str | None:
    """The kind of the first key-shaped string in ``text``, or None."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    return next((what for what, rx in KEY_SHAPES.items() if rx.search(data)), None)


def redact_text(text: str, secrets: Iterable[str] = (), shapes: bool = True) -> str:
    """``text`` with every value of ``secrets`` (and, with ``shapes``, every key-shaped
    string) replaced by ``…``: for a message that must show where a key was, never the
    key."""
    for value in sorted((v for v in secrets if v), key=len, reverse=True):
        text = text.replace(value, "…")
    if shapes:
        for rx in KEY_SHAPES.values():
            text = re.sub(rx.pattern.decode("ascii"), "…", text)
    return text


def scan_value(where: str, value: object, secrets: dict[str, str]) -> list[str]:
    """:func:`scan`'s findings for a value T0 is given rather than a staged file (what the
    worker returned, a document T0 is about to write): ``where: what``."""
    import json

    try:
        data = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        data = repr(value)
    found = [f"{where}: the value of {name}" for name, v in secrets.items()
             if v and v in data]
    if what := key_shape(data):
        found.append(f"{where}: a key-shaped string ({what})")
    return found


def redact_document(doc: object, secrets: dict[str, str]) -> tuple[object, list[str]]:
    """``doc`` (JSON values) with every key's value in its strings replaced by ``…``, and
    where each was (``live.egress.target: the value of NAME``): what T0 writes of a document
    it builds from what it observed. Key-shaped strings are not rewritten here (a shape can
    match ordinary text, and the document records configuration): the inputs that could
    bring one in are refused before the run starts."""
    found: list[str] = []
    values = [v for v in secrets.values() if v]

    def walk(v: object, at: str) -> object:
        if isinstance(v, str):
            out = redact_text(v, values, shapes=False)
            if out != v:
                names = [n for n, s in secrets.items() if s and s in v]
                found.append(f"{at or '$'}: the value of {', '.join(names)}")
            return out
        if isinstance(v, dict):
            return {walk(k, at) if isinstance(k, str) else k:
                    walk(x, f"{at}.{k}" if at else str(k)) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x, f"{at}[{i}]") for i, x in enumerate(v)]
        return v

    return walk(doc, ""), found
