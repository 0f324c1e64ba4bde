"""Ed25519 signing keys for sealed corpora (``agentprov keys signing …``, ``package
--sign-key``).

A key NAME has two halves. The public half is a PEM file,
``$AGENTPROV_HOME/signing-keys/NAME.pub``: ``keys signing list`` enumerates these (keyring
cannot enumerate a keychain), ``export-public`` prints it, and a reader verifies with it.
The private half is kept in the OS keychain (service :data:`SERVICE`, user NAME, the 32
raw bytes in hex) when one is usable (the same test as endpoint keys:
:func:`agentprov_core.live.keys.keychain`); else in ``$AGENTPROV_HOME/signing-keys/NAME.key``
(PKCS#8 PEM, created with mode 0600 and never widened), which the command names and warns
about. It is never printed, logged, or written anywhere else: sealing reads it, signs,
and drops it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentprov_core.base import dsse
from agentprov_core.errors import AgentprovError

SERVICE = "agentprov-signing"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def key_dir() -> Path:
    from agentprov_core.base.paths import home

    return home() / "signing-keys"


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name) or name.endswith((".pub", ".key")):
        raise AgentprovError("keys.usage.signing_name", name=name)
    return name


@dataclass(frozen=True)
class SigningKey:
    name: str
    fingerprint: str
    where: str  # "keychain (BACKEND)" or the private key file
    public_path: Path


def _keychain() -> tuple[Any | None, str | None]:
    """The usable keychain, or None and why not."""
    from agentprov_core.live import keys

    try:
        return keys.keychain(), None
    except AgentprovError as exc:
        return None, str(exc.params.get("why", exc.code))


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def new(name: str) -> tuple[SigningKey, str | None]:
    """Make the key NAME; returns it and, when the private half went to a file (no usable
    keychain), why no keychain was used. An existing NAME is refused, never replaced."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    check_name(name)
    d = key_dir()
    pub_path, key_path = d / f"{name}.pub", d / f"{name}.key"
    if pub_path.exists() or key_path.exists():
        raise AgentprovError("keys.refused.signing_exists", name=name, path=pub_path)
    d.mkdir(parents=True, exist_ok=True)
    private = ed25519.Ed25519PrivateKey.generate()
    public = private.public_key()
    kr, why = _keychain()
    if kr is not None:
        raw = private.private_bytes(serialization.Encoding.Raw,
                                    serialization.PrivateFormat.Raw,
                                    serialization.NoEncryption())
        try:
            kr.set_password(SERVICE, name, raw.hex())
        except Exception as exc:  # the message of a failed write could echo the value
            kr, why = None, f"storing it failed ({type(exc).__name__})"
        else:
            where = f"keychain ({type(kr).__module__}.{type(kr).__qualname__}, service {SERVICE})"
        del raw
    if kr is None:
        pem = private.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        _write_new(key_path, pem, 0o600)
        del pem
        where = str(key_path)
    del private
    _write_new(pub_path, dsse.public_pem(public), 0o644)
    return SigningKey(name, dsse.fingerprint(dsse.public_raw(public)), where, pub_path), why


def public(name: str) -> tuple[Any, Path]:
    """The public key NAME and its file; ``keys.environment.signing_missing`` when there is
    no such key."""
    check_name(name)
    path = key_dir() / f"{name}.pub"
    try:
        return dsse.load_public(path.read_bytes()), path
    except FileNotFoundError:
        raise AgentprovError("keys.environment.signing_missing", name=name,
                             what=f"no public key {path}") from None
    except (OSError, ValueError) as exc:
        raise AgentprovError("keys.environment.signing_missing", name=name,
                             what=f"{path}: {exc}") from None


def listed() -> list[SigningKey]:
    """Every key with a public half, by name, and where its private half is."""
    d = key_dir()
    out = []
    for pub in sorted(d.glob("*.pub")) if d.is_dir() else []:
        name = pub.name[:-4]
        try:
            key = dsse.load_public(pub.read_bytes())
        except (OSError, ValueError):
            continue
        key_file = d / f"{name}.key"
        out.append(SigningKey(name, dsse.fingerprint(dsse.public_raw(key)),
                              str(key_file) if key_file.is_file() else "keychain", pub))
    return out


def private(name: str) -> Any:
    """The private key NAME (from its file, else the keychain), checked against its public
    half; ``keys.environment.signing_missing`` when it cannot be read."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    pub, _ = public(name)
    key_file = key_dir() / f"{name}.key"
    key: Any = None
    if key_file.is_file():
        try:
            key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise AgentprovError("keys.environment.signing_missing", name=name,
                                 what=f"{key_file} is not a readable private key "
                                      f"({type(exc).__name__})") from None
    else:
        kr, why = _keychain()
        value = None
        if kr is not None:
            try:
                value = kr.get_password(SERVICE, name)
            except Exception as exc:
                why = f"reading it failed ({type(exc).__name__})"
        if not value:
            raise AgentprovError("keys.environment.signing_missing", name=name,
                                 what=f"no private key in the keychain (service {SERVICE})"
                                      + (f": {why}" if why else ""))
        try:
            key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes.fromhex(value))
        except ValueError:
            raise AgentprovError("keys.environment.signing_missing", name=name,
                                 what="the keychain's entry is not an Ed25519 key") from None
        del value
    if not isinstance(key, ed25519.Ed25519PrivateKey) or (
            dsse.public_raw(key.public_key()) != dsse.public_raw(pub)):
        raise AgentprovError("keys.environment.signing_missing", name=name,
                             what="the private key is not the one of its public key file")
    return key
