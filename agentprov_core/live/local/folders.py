"""``agentprov models --find-folders``: folders on this machine that may hold a model, by
name only (R-11.23). No server is contacted and no file is opened; directories are listed.

Where the servers keep models (``HOME`` is the user's home, each variable honoured first):

=================  ==========================================================================
Hugging Face       ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
                   else ``HOME/.cache/huggingface/hub``: ``models--ORG--NAME/snapshots/REV``
                   (mlx_lm, vLLM and llama.cpp's ``-hf`` read it)
oMLX               ``HOME/.omlx/models/NAME`` (flat folders)
LM Studio          ``$LMSTUDIO_HOME/models``, ``HOME/.lmstudio/models`` and the older
                   ``HOME/.cache/lm-studio/models``: ``PUBLISHER/NAME``
Ollama             ``$OLLAMA_MODELS``, ``HOME/.ollama/models`` and the Linux service's
                   ``/usr/share/ollama/.ollama/models``: ``manifests/HOST/NAMESPACE/NAME/TAG``
llama.cpp          ``$LLAMA_CACHE``, else ``$XDG_CACHE_HOME/llama.cpp``, else
                   ``HOME/.cache/llama.cpp`` and ``HOME/Library/Caches/llama.cpp``: ``*.gguf``
=================  ==========================================================================

A folder matches when the model id's last part (after a ``/``; an Ollama tag after ``:``
is matched against the tag), lower-cased with everything but letters and digits dropped,
is part of the folder's name made the same way: ``Qwen3.5-4B-MLX-4bit`` matches
``models--mlx-community--Qwen3.5-4B-MLX-4bit`` and ``qwen3-8b`` matches
``lmstudio-community/Qwen3-8B-GGUF``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Candidate:
    app: str
    path: Path


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def roots(home: Path | None = None) -> list[tuple[str, Path]]:
    """(app, folder) for every place a server keeps models, variables first."""
    home = home or Path.home()
    xdg = _env_path("XDG_CACHE_HOME") or home / ".cache"
    hf = _env_path("HF_HUB_CACHE") or (
        _env_path("HF_HOME") / "hub" if os.environ.get("HF_HOME") else xdg / "huggingface/hub")
    out = [("huggingface", hf), ("omlx", home / ".omlx/models")]
    lms = _env_path("LMSTUDIO_HOME")
    out += [("lmstudio", p) for p in ([lms / "models"] if lms else [])
            + [home / ".lmstudio/models", home / ".cache/lm-studio/models"]]
    oll = _env_path("OLLAMA_MODELS")
    out += [("ollama", p) for p in ([oll] if oll else [])
            + [home / ".ollama/models", Path("/usr/share/ollama/.ollama/models")]]
    llama = _env_path("LLAMA_CACHE")
    out += [("llamacpp", p) for p in ([llama] if llama else
                                      [xdg / "llama.cpp", home / "Library/Caches/llama.cpp"])]
    seen: set[Path] = set()
    unique = []
    for app, p in out:
        if p not in seen:
            seen.add(p)
            unique.append((app, p))
    return unique


def _dirs(p: Path) -> list[Path]:
    try:
        return sorted(c for c in p.iterdir() if c.is_dir())
    except OSError:  # absent, unreadable: nothing there
        return []


def _files(p: Path) -> list[Path]:
    try:
        return sorted(c for c in p.iterdir() if c.is_file())
    except OSError:
        return []


def _walk(app: str, root: Path) -> Iterator[tuple[Path, str]]:
    """(folder, the name it is matched by) of each model folder under ``root``."""
    if app == "huggingface":
        for repo in _dirs(root):
            if repo.name.startswith("models--"):
                for snap in _dirs(repo / "snapshots") or [repo]:
                    yield snap, repo.name[len("models--"):]
    elif app == "omlx":
        for d in _dirs(root):
            yield d, d.name
    elif app == "lmstudio":
        for publisher in _dirs(root):
            for d in _dirs(publisher):
                yield d, f"{publisher.name}/{d.name}"
    elif app == "ollama":
        for host in _dirs(root / "manifests"):
            for namespace in _dirs(host):
                for d in _dirs(namespace):
                    yield d, d.name
    elif app == "llamacpp":  # one flat folder of downloaded files, matched by their names
        gguf = [f.name for f in _files(root) if f.suffix == ".gguf"]
        if gguf:
            yield root, " ".join(gguf)


def find(model_id: str, home: Path | None = None) -> list[Candidate]:
    """The folders that may hold ``model_id``, in the order of :func:`roots`."""
    name, _, tag = model_id.rpartition("/")[2].partition(":")
    want = _norm(name)
    if not want:
        return []
    out: list[Candidate] = []
    for app, root in roots(home):
        for folder, label in _walk(app, root):
            if want not in _norm(label):
                continue
            if app == "ollama" and tag and not (folder / tag).is_file():
                continue  # the model's name, but not its tag
            out.append(Candidate(app, folder))
    return out
