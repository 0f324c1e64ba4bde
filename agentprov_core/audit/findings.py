"""What ``agentprov verify`` finds and how it says it: a finding (failed, tombstoned or
unverified; a code; the path it is at), the report of one corpus, as text and as JSON
(``agentprov-verify/0.1``), and how two of its values are compared.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LEVEL = "chain"
PER_FILE = 5  # findings of one code at one path shown in text


@dataclass(frozen=True)
class Finding:
    kind: str  # failed | tombstoned | unverified
    code: str
    path: str  # relative to the corpus root
    message: str

    def line(self) -> str:
        return f"{self.kind}: {self.code} at {self.path}: {self.message}"


@dataclass
class Report:
    corpus: Path
    corpus_id: str
    working: bool
    findings: list[Finding] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {
        "ledger_entries": 0, "capture_logs": 0, "capture_records": 0, "raw_files": 0,
        "executions": 0, "preflight_calls": 0, "files_hashed": 0, "bytes_hashed": 0})

    def of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    @property
    def failed(self) -> list[Finding]:
        return self.of("failed")

    @property
    def not_verified(self) -> list[Finding]:
        return [f for f in self.findings if f.kind != "failed"]

    @property
    def result(self) -> str:
        if self.failed:
            return "failed"
        return "passed with unverified checks" if self.not_verified else "passed"

    def summary(self) -> str:
        return (f"agentprov verify: level {LEVEL}: {self.result}; {len(self.failed)} failed, "
                f"{len(self.not_verified)} unverified or tombstoned")

    def lines(self, per_file: int = PER_FILE) -> list[str]:
        """The findings, failures first; at most ``per_file`` of one code at one path (a
        record removed from a capture log puts every later record out of sequence):
        ``--format json`` lists them all."""
        order = {"failed": 0, "tombstoned": 1, "unverified": 2}
        shown: Counter[tuple[str, str, str]] = Counter()
        out: list[str] = []
        findings = _collapse_seq_runs(self.findings)
        groups = Counter((f.kind, f.code, f.path) for f in findings)
        for f in sorted(findings, key=lambda f: order[f.kind]):
            key = (f.kind, f.code, f.path)
            shown[key] += 1
            if shown[key] <= per_file:
                out.append(f.line())
            elif shown[key] == per_file + 1:
                out.append(f"{f.kind}: {f.code} at {f.path}: … and {groups[key] - per_file} "
                           "more (--format json lists them all)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": "agentprov-verify/0.1", "corpus": str(self.corpus),
                "corpus_id": self.corpus_id, "state": "working" if self.working else "sealed",
                "level": LEVEL, "result": self.result, "failed": len(self.failed),
                "unverified_or_tombstoned": len(self.not_verified), "counts": self.counts,
                "findings": [{"kind": f.kind, "code": f.code, "path": f.path,
                              "message": f.message} for f in self.findings]}


_SEQ = re.compile(r"record (\d+): seq is (-?\d+), expected \1$")


def _collapse_seq_runs(findings: list[Finding]) -> list[Finding]:
    """A run of records whose ``seq`` is off by the same amount (what a removed or inserted
    record does to every record after it) shown as its first record and one line."""
    out: list[Finding] = []
    run: list[tuple[Finding, int, int]] = []  # (finding, record, offset)

    def flush() -> None:
        if run:
            out.append(run[0][0])
        if len(run) > 1:
            f, first, off = run[0][0], run[1][1], run[0][2]
            out.append(Finding(f.kind, f.code, f.path,
                               f"records {first}-{run[-1][1]}: seq is off by {off} too (a "
                               f"record was removed or inserted at record {run[0][1]})"))
        run.clear()

    for f in findings:
        m = _SEQ.match(f.message) if f.code == "capture.chain" else None
        if m is not None:
            rec, off = int(m.group(1)), int(m.group(2)) - int(m.group(1))
            if run and (run[-1][0].path != f.path or run[-1][1] + 1 != rec
                        or run[-1][2] != off):
                flush()
            run.append((f, rec, off))
            continue
        flush()
        out.append(f)
    flush()
    return out


def same_json(a: Any, b: Any) -> bool:
    """Equal, and of one JSON type (``True`` is not ``1``)."""
    return type(a) is type(b) and a == b
