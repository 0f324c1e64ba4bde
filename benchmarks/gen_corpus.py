"""Generate a synthetic working corpus of N executions for the corpus-tool benchmarks.

Not part of the corpus format's code: it drives the real T0 path. Each execution is the
committed template session (``benchmarks/fixtures/session/``: the capture log and native log
of one real scripted AgentDojo cell, banking ``user_task_0``) written again as a new session,
its records re-chained by the real ``CaptureWriter`` (without fsync: this is a generator),
stored in the raw store, ledgered, then mapped by ``live_mapping.map_attempt``: the
``agentdojo.capture`` mapper, SEM, PROV and validation, exactly as a run maps each attempt.
Every execution therefore has its own digests and passes ``verify`` and ``validate``.

    python benchmarks/gen_corpus.py OUT --executions 10000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "session"


def generate(out: Path, n: int, template: Path = TEMPLATE, progress: bool = False) -> Path:
    import agentprov_capture as capture

    from agentprov_core.corpus.ledger import Attempt, Ledger
    from agentprov_core.corpus.store import RawStore
    from agentprov_core.corpus.working import WorkingCorpus, partial_dir
    from agentprov_core.evidence.live_mapping import map_attempt

    records = [json.loads(x) for x in (template / "capture.jsonl").read_bytes().splitlines()]
    native = (template / "native.json").read_bytes()
    manifest = json.loads((template / "manifest.json").read_text(encoding="utf-8"))
    root = partial_dir(out)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    WorkingCorpus(root).write_manifest(manifest)  # as T0 writes it (its manifest_sha256)
    store, ledger = RawStore(root / "raw"), Ledger(root / "ledger.jsonl")
    scratch = root / ".gen"
    scratch.mkdir()
    header = {k: v for k, v in records[0].items() if k not in ("seq", "prev", "kind", "t")}
    cell_key = header["cell"]["cell_key"]
    t0 = time.monotonic()
    for i in range(n):
        sid = f"s-{uuid.UUID(int=i + 1).hex[-16:]}"
        unit = f"{cell_key}|none|r{i}"
        path = scratch / f"{sid}.jsonl"
        w = capture.CaptureWriter(path, {**header, "session_id": sid, "unit": unit,
                                         "attempt": 1}, durable=False)
        for r in records[1:]:
            fields = {k: v for k, v in r.items() if k not in ("seq", "prev", "kind", "t")}
            if r["kind"] == "end":
                w.end(fields.pop("status"), fields.pop("reason", None),
                      **{k: v for k, v in fields.items() if k != "counts"})
            else:
                w.append(r["kind"], **fields)
        cap_sha = store.put_file(path)
        head = capture.verify(path)[2]
        path.unlink()
        doc = json.loads(native)
        doc["duration"] = round(doc.get("duration", 1.0) + i * 1e-6, 6)  # its own digest
        nat = json.dumps(doc, indent=4).encode()
        nat_sha = store.put_bytes(nat)
        end = records[-1]
        a = Attempt(seq=i, invocation="gen", unit=unit, cell_key=cell_key, defence="none",
                    repeat=i, attempt=1, session_id=sid, started_at=header["started_at"],
                    ended_at=header["started_at"], status=end["status"],
                    conclusive=end["status"] == "complete", capture_sha256=cap_sha,
                    capture_head_sha256=head, capture_records=len(records),
                    native_sha256=nat_sha, native_path="native.json",
                    utility=end.get("utility"), security=end.get("security"),
                    calls=end.get("calls"), plan_sha256=header.get("plan_sha256") or "",
                    config_digest=header.get("config_digest") or "")
        ledger.append(a)
        map_attempt(root, a, manifest, mapped_at=header["started_at"])
        if progress and (i + 1) % 500 == 0:
            rate = (i + 1) / (time.monotonic() - t0)
            print(f"  {i + 1}/{n} executions ({rate:.0f}/s)", file=sys.stderr)
    scratch.rmdir()
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the corpus directory (OUT.partial is written)")
    ap.add_argument("--executions", type=int, default=10_000)
    ap.add_argument("--template", type=Path, default=TEMPLATE)
    a = ap.parse_args()
    os.environ.setdefault("AGENTPROV_LOAD_PLUGINS", "agentdojo")
    root = generate(a.out, a.executions, a.template, progress=True)
    print(root)


if __name__ == "__main__":
    main()
