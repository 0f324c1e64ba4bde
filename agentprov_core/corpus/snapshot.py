"""A consistent view of a corpus for its readers (verify, validate, stats, recompute), also
while a run is writing it.

A run writes in one order: a raw file before the ledger entry that names it, an attempt's
ledger entry before its execution's files, the files before their index line, each line
whole and ended by a newline; the manifest is replaced atomically, and only grows what
later lines need (the plans and configurations they record). So a reader that fixes how
much of ``executions.jsonl``, then of ``ledger.jsonl`` and ``preflight/ledger.jsonl``, it
reads (in that order, and only complete lines while a run holds the corpus), and reads the
manifest after that, sees every index line's ledger entry and files, every ledger entry's
raw files, and a manifest that lists what those lines record. What it cannot see finished
is what the run is doing: an attempt ledgered and not yet mapped, a raw file not yet
ledgered. Whether a run holds the corpus is asked of its lock (``.lock``, held by the one
T0 writing it: :meth:`agentprov_core.corpus.working.WorkingCorpus.lock`) before and after
the lengths are fixed, without taking it: a reader never delays or refuses a writer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCK = ".lock"
#: the files a run appends lines to, in the order their lengths are fixed
APPENDED = ("executions.jsonl", "ledger.jsonl", "preflight/ledger.jsonl")
_TAIL = 1 << 16


def _proc_locks(path: Path) -> bool | None:
    """Whether ``/proc/locks`` lists a lock on ``path`` (None when it cannot tell)."""
    try:
        st = os.stat(path)
        text = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in text.splitlines():
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        for p in parts:
            bits = p.split(":")
            if len(bits) == 3:
                try:
                    got = (int(bits[0], 16), int(bits[1], 16), int(bits[2]))
                except ValueError:
                    continue
                if got == want:
                    return True
    return False


def _probe(path: Path) -> bool:
    """Whether another process holds the lock: try it without waiting, on a descriptor
    opened read-only (the file is never created or written), and let it go at once."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def lock_held(root: Path) -> bool:
    """Whether a run holds the corpus at ``root`` (its ``.lock``). On Linux the kernel's
    list of locks is read, which does not touch the lock at all; elsewhere the lock is
    tried for an instant."""
    path = root / LOCK
    if not path.is_file():
        return False
    if sys.platform.startswith("linux"):
        held = _proc_locks(path)
        if held is not None:
            return held
    if sys.platform == "win32":  # pragma: no cover - agentprov runs on Linux and macOS
        return False
    return _probe(path)


def _end(path: Path, complete: bool) -> int | None:
    """The length of ``path`` (None: no file); with ``complete``, up to and including its
    last newline (a line being written is not read)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size == 0 or not complete:
        return size
    with open(path, "rb") as f:
        pos = size
        while pos > 0:
            start = max(0, pos - _TAIL)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            pos = start
    return 0


@dataclass
class Snapshot:
    """How much of each appended file a reader reads, and whether a run held the corpus
    while that was fixed. Of a corpus no run holds, each file is read to the length it had
    (a line a dead run left cut short is then seen, and reported); of one a run holds, to
    its last complete line. Lines appended later are not read either way."""

    root: Path
    held: bool
    ends: dict[str, int | None] = field(default_factory=dict)

    def lines(self, rel: str) -> Iterator[tuple[int, bytes, bool]]:
        """``(line number from 1, bytes without newline, ended by a newline)`` of the file
        ``rel``, up to this snapshot's end of it."""
        path = self.root / rel
        end = self.ends.get(rel)
        if end is None:
            return
        if not path.exists():
            return
        with open(path, "rb") as f:
            left = end
            for n, raw in enumerate(f, 1):
                if left <= 0:
                    return
                raw = raw[:left]
                left -= len(raw)
                ended = raw.endswith(b"\n")
                yield n, raw[:-1] if ended else raw, ended

    def complete_lines(self, rel: str) -> int:
        """How many lines of ``rel`` this snapshot reads."""
        return sum(1 for _ in self.lines(rel))

    def note(self) -> str | None:
        """What a report says of a snapshot taken while a run held the corpus."""
        if not self.held:
            return None
        upto = ", ".join(f"{rel} line {self.complete_lines(rel)}" for rel in APPENDED
                         if (self.root / rel).exists())
        return (f"a run holds the corpus (its {LOCK} is locked): this is what it had written "
                f"when the check began (up to {upto}); an attempt ledgered and not yet "
                "mapped is in progress, not missing")


def _check_regular(root: Path) -> None:
    """Refuse a corpus whose appended files are there and are not regular files (a FIFO
    would never end a read, a directory cannot be read): ``corpus.environment.not_a_corpus``
    (exit 3), naming the entry."""
    import stat

    from agentprov_core.errors import AgentprovError

    for rel in APPENDED:
        try:
            mode = os.lstat(root / rel).st_mode
        except OSError:
            continue  # absent: each reader says what that means
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a symbolic link"
                    if stat.S_ISLNK(mode) else "a FIFO, socket or device")
            raise AgentprovError("corpus.environment.not_a_corpus", corpus=root,
                                 what=f"its {rel} is {kind}, not the file a run appends to")


def take(root: Path) -> Snapshot:
    """Fix how much of each appended file is read (see the module docstring)."""
    _check_regular(root)
    held = lock_held(root)
    ends = {rel: _end(root / rel, complete=True) for rel in APPENDED}
    if held or lock_held(root):
        return Snapshot(root, True, ends)
    # no run before or after: a line without its newline is a dead run's, and is read
    return Snapshot(root, False, {rel: _end(root / rel, complete=False) for rel in APPENDED})


def decoded(snap: Snapshot, rel: str, type_: Any, torn: list[int] | None = None
            ) -> Iterator[tuple[int, Any]]:
    """``(line number, entry)`` of the lines of ``rel`` that decode as ``type_``; the others
    (cut short, foreign, nested too deeply) are skipped, their numbers added to ``torn``
    when given: ``verify`` says what each is."""
    import msgspec

    dec = msgspec.json.Decoder(type_)
    for n, line, _ in snap.lines(rel):
        if not line.strip():
            continue
        try:
            yield n, dec.decode(line)
        except (msgspec.DecodeError, RecursionError):  # ValidationError included
            if torn is not None:
                torn.append(n)
