"""Keyring backends for TESTS ONLY. Never a place to keep a real key.

Headless Linux has no keychain (keyring falls back to ``keyring.backends.fail.Keyring``),
so agentprov's key tests need a stand-in:

``MemoryKeyring``
    A dict in this process. In-process tests install it with :func:`use_memory_keyring`
    (or ``keyring.set_keyring``). It cannot serve subprocess tests: a new process starts
    with an empty dict, so ``agentprov keys set`` in one process and ``agentprov run`` in
    the next would never meet.

``FileTestKeyring``
    Stores in the JSON file named by ``AGENTPROV_TEST_KEYRING_FILE`` (plaintext, mode
    0600), so that the CLI run as subprocesses shares one "keychain" per test. It is viable
    only when that variable is set (its ``priority`` raises otherwise, which is keyring's
    own convention for "not usable here"), and it is selected only explicitly::

        PYTHON_KEYRING_BACKEND=agentprov_core.testing.memkeyring.FileTestKeyring
        AGENTPROV_TEST_KEYRING_FILE=/tmp/.../keyring.json

Both carry ``agentprov_test_backend = True``: ``agentprov_core.live.keys`` refuses every other
plaintext store (``cli.environment.keychain_unavailable``), and admits these two because
only a test can select them. Both have priority -1, below ``keyring.backends.fail``, so
keyring's own detection never picks them even where this module has been imported.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError

ENV_VAR = "AGENTPROV_TEST_KEYRING_FILE"


class MemoryKeyring(KeyringBackend):
    """A keyring in this process's memory (tests only)."""

    agentprov_test_backend = True

    @properties.classproperty
    def priority(cls) -> float:
        return -1

    def __init__(self) -> None:
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.store.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.store[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


class FileTestKeyring(KeyringBackend):
    """A keyring in the JSON file ``$AGENTPROV_TEST_KEYRING_FILE`` (tests only)."""

    agentprov_test_backend = True

    @properties.classproperty
    def priority(cls) -> float:
        if not os.environ.get(ENV_VAR):
            raise RuntimeError(f"test-only backend: {ENV_VAR} is not set")
        return -1

    @property
    def path(self) -> Path:
        value = os.environ.get(ENV_VAR)
        if not value:
            raise RuntimeError(f"test-only backend: {ENV_VAR} is not set")
        return Path(value)

    def _load(self) -> dict[str, dict[str, str]]:
        p = self.path
        return json.loads(p.read_text("utf-8")) if p.exists() else {}

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        p = self.path
        tmp = p.with_name(p.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, p)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data.setdefault(service, {})[username] = password
        self._save(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.get(service, {}).pop(username, None) is None:
            raise PasswordDeleteError(username)
        self._save(data)


@contextlib.contextmanager
def use_memory_keyring() -> Iterator[MemoryKeyring]:
    """Install a fresh :class:`MemoryKeyring` as keyring's backend for the ``with`` block,
    then restore the one before."""
    import keyring.core

    before = keyring.core._keyring_backend
    kr = MemoryKeyring()
    keyring.core.set_keyring(kr)
    try:
        yield kr
    finally:
        keyring.core._keyring_backend = before
