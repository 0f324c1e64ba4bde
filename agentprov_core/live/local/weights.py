"""The sha256 of a model's weight files, and the digest cache that makes a second
observation of unchanged files free.

The cache is ``$AGENTPROV_HOME/cache/model-digests.jsonl``: one JSON object a line,
``{"path", "size", "mtime_ns", "inode", "sha256", "hashed_at"}``, appended (one ``write``
of one line, ``O_APPEND``), never rewritten. A file whose (real path, size, mtime_ns,
inode) equals a line's is not read again; any change of the four (a rewritten, replaced,
touched or moved file) hashes it again. The last line of a key wins.

Hashing reads with ``readinto`` into one 8 MiB buffer (no per-chunk allocation) and feeds
``hashlib.sha256``, which releases the GIL on large updates, so several shards hash in
parallel threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentprov_core.base import paths

CHUNK = 8 << 20
CACHE_NAME = "model-digests.jsonl"

#: Weight file patterns, in order of preference: safetensors, then GGUF (oMLX keeps split
#: GGUF shards in ``split/``), then PyTorch files when a folder holds neither.
WEIGHT_GLOBS = (("*.safetensors",), ("*.gguf", "split/*.gguf"), ("*.bin", "*.pt", "*.pth"))
#: Small files that change what the model does (architecture, tokenizer, chat template).
CONFIG_NAMES = ("config.json", "generation_config.json", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                "chat_template.json")


def cache_path() -> Path:
    return paths.home() / "cache" / CACHE_NAME


def sha256_file(path: str | os.PathLike, chunk: int = CHUNK) -> str:
    """The sha256 (hex) of one file, read in ``chunk``-byte ``readinto`` calls."""
    h = hashlib.sha256()
    buf = bytearray(chunk)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        if hasattr(os, "posix_fadvise"):
            with contextlib.suppress(OSError):
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        readinto = f.readinto
        update = h.update
        while True:
            n = readinto(buf)
            if not n:
                break
            update(view[:n])
    return h.hexdigest()


def _key(real: str, st: os.stat_result) -> tuple[str, int, int, int]:
    return (real, st.st_size, st.st_mtime_ns, st.st_ino)


class DigestCache:
    """The lines of the cache file, keyed by (real path, size, mtime_ns, inode)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self.entries: dict[tuple[str, int, int, int], str] = {}
        self.hits = 0
        self.hashed = 0
        self._load()

    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                rec = json.loads(line)
                key = (rec["path"], int(rec["size"]), int(rec["mtime_ns"]), int(rec["inode"]))
                sha = rec["sha256"]
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line is skipped, never trusted
            if isinstance(sha, str) and len(sha) == 64:
                self.entries[key] = sha

    def lookup(self, real: str, st: os.stat_result) -> str | None:
        return self.entries.get(_key(real, st))

    def add(self, real: str, st: os.stat_result, sha: str) -> None:
        key = _key(real, st)
        self.entries[key] = sha
        line = json.dumps({"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                           "inode": st.st_ino, "sha256": sha,
                           "hashed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                          sort_keys=True) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def digest_files(files: Iterable[str | os.PathLike], cache: DigestCache | None = None,
                 *, workers: int | None = None) -> dict[str, str]:
    """The sha256 of each file (keyed by the path as given), from the cache when its
    (real path, size, mtime_ns, inode) is unchanged, else hashed (in parallel) and added."""
    cache = cache if cache is not None else DigestCache()
    out: dict[str, str] = {}
    todo: list[tuple[str, str, os.stat_result]] = []
    for f in files:
        name = str(f)
        real = os.path.realpath(name)
        st = os.stat(real)
        hit = cache.lookup(real, st)
        if hit is not None:
            cache.hits += 1
            out[name] = hit
        else:
            todo.append((name, real, st))
    if todo:
        n = workers or min(4, len(todo), os.cpu_count() or 1)
        if n > 1:
            with ThreadPoolExecutor(max_workers=n) as pool:
                shas = list(pool.map(lambda t: sha256_file(t[1]), todo))
        else:
            shas = [sha256_file(t[1]) for t in todo]
        for (name, real, st), sha in zip(todo, shas, strict=True):
            after = os.stat(real)
            if _key(real, after) == _key(real, st):  # unchanged while it was read
                cache.add(real, st, sha)
            cache.hashed += 1
            out[name] = sha
    return out


def folder_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """A model folder's weight files (the first pattern group that matches) and its config
    files, each sorted."""
    weights: list[Path] = []
    for group in WEIGHT_GLOBS:
        for pattern in group:
            weights += [p for p in folder.glob(pattern) if p.is_file()]
        if weights:
            break
    config = [folder / n for n in CONFIG_NAMES if (folder / n).is_file()]
    return sorted(set(weights)), config


def hf_cache_folder(repo_id: str) -> Path | None:
    """The snapshot folder of a Hugging Face repo in the local hub cache (``HF_HUB_CACHE``,
    else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``): the one ``refs/main`` names,
    else the only snapshot; None when absent or ambiguous."""
    if "/" not in repo_id or repo_id.startswith("/"):
        return None
    hub = os.environ.get("HF_HUB_CACHE")
    if not hub:
        hf_home = os.environ.get("HF_HOME")
        hub = str(Path(hf_home) / "hub") if hf_home else str(Path.home() / ".cache/huggingface/hub")
    repo = Path(hub) / ("models--" + repo_id.replace("/", "--"))
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return None
    ref = repo / "refs" / "main"
    if ref.is_file():
        cand = snaps / ref.read_text().strip()
        if cand.is_dir():
            return cand
    found = [p for p in snaps.iterdir() if p.is_dir()]
    return found[0] if len(found) == 1 else None
