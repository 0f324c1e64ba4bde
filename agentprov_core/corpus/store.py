"""The content-addressed raw store: ``raw/sha256/<2 hex>/<64 hex>``, written once, never
rewritten."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class RawStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def put_bytes(self, data: bytes, *, sync: bool = True) -> str:
        """Store ``data`` under its sha256 (once); return the digest. ``sync=False`` leaves
        the flush to the caller (``os.sync()`` before anything names the file: an import
        stores a batch of files that way)."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if target.is_file():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def put_file(self, path: Path) -> str:
        return self.put_bytes(path.read_bytes())

    def verify(self, sha256: str) -> bool:
        p = self.path(sha256)
        return p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == sha256
