"""DSSE envelopes (the Dead Simple Signing Envelope of the secure-systems-lab, v1.0) signed
with Ed25519 through ``cryptography``.

An envelope is the JSON object ``{"payload": base64, "payloadType": TYPE, "signatures":
[{"keyid": ID, "sig": base64}]}``; a signature covers the pre-authentication encoding
``PAE(type, payload) = "DSSEv1" SP len(type) SP type SP len(payload) SP payload``, never
the JSON. A key's id is the sha256 of its 32 raw public bytes (its fingerprint), in hex.
Any DSSE implementation (``securesystemslib``, in-toto's) verifies what this writes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

INTOTO = "application/vnd.in-toto+json"
#: the largest envelope read (a statement is a few kilobytes)
MAX_BYTES = 4 << 20


def pae(payload_type: str, payload: bytes) -> bytes:
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def fingerprint(public_raw: bytes) -> str:
    """A public key's id: the sha256 of its 32 raw bytes, in hex."""
    return hashlib.sha256(public_raw).hexdigest()


def public_raw(public_key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw,
                                   serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[tuple[str, bytes], ...]  # (keyid, signature)

    def to_json(self) -> dict[str, Any]:
        return {"payload": base64.b64encode(self.payload).decode("ascii"),
                "payloadType": self.payload_type,
                "signatures": [{"keyid": k, "sig": base64.b64encode(s).decode("ascii")}
                               for k, s in self.signatures]}

    def encode(self) -> bytes:
        return (json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n").encode("utf-8")

    def signed_by(self, public_key: Any) -> bool:
        """Whether one signature is ``public_key``'s over this payload."""
        from cryptography.exceptions import InvalidSignature

        message = pae(self.payload_type, self.payload)
        for _keyid, sig in self.signatures:
            try:
                public_key.verify(sig, message)
            except InvalidSignature:
                continue
            return True
        return False


def envelope(payload: bytes, private_key: Any | None, payload_type: str = INTOTO) -> Envelope:
    """An envelope of ``payload``, signed by the Ed25519 ``private_key`` (None: unsigned,
    an envelope with no signature)."""
    sigs: tuple[tuple[str, bytes], ...] = ()
    if private_key is not None:
        keyid = fingerprint(public_raw(private_key.public_key()))
        sigs = ((keyid, private_key.sign(pae(payload_type, payload))),)
    return Envelope(payload_type, payload, sigs)


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} is not a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        try:  # DSSE allows the URL-safe alphabet too
            return base64.urlsafe_b64decode(value)
        except (binascii.Error, ValueError):
            raise ValueError(f"{what} is not base64") from None


def parse(data: bytes) -> Envelope:
    """The envelope in ``data``; ``ValueError`` saying what is wrong."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES} bytes")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    ptype = doc.get("payloadType")
    if not isinstance(ptype, str):
        raise ValueError("payloadType is missing")
    payload = _b64(doc.get("payload"), "payload")
    sigs = doc.get("signatures")
    if not isinstance(sigs, list):
        raise ValueError("signatures is not a list")
    out = []
    for i, s in enumerate(sigs):
        if not isinstance(s, dict):
            raise ValueError(f"signatures[{i}] is not an object")
        out.append((str(s.get("keyid") or ""), _b64(s.get("sig"), f"signatures[{i}].sig")))
    return Envelope(ptype, payload, tuple(out))


def load_public(data: bytes) -> Any:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo); ``ValueError`` otherwise."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a PEM public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise ValueError(f"not an Ed25519 key ({type(key).__name__})")
    return key


def public_pem(public_key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.PEM,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)
