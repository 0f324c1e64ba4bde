"""The Merkle tree of RFC 9162 (Certificate Transparency 2.0, section 2.1; the same tree as
RFC 6962's): the tree head over a list of leaves, the inclusion proof of one leaf, the
consistency proof between two sizes of the same list, and the verification of both.

Hashes are SHA-256, with the RFC's domain separation: a leaf is ``SHA-256(0x00 || data)``,
an interior node ``SHA-256(0x01 || left || right)``, the empty tree ``SHA-256()``. A tree of
``n > 1`` leaves splits at ``k``, the largest power of two smaller than ``n``. Proofs are
lists of 32-byte hashes in the RFC's order (nearest the leaf first). The verifiers are the
RFC's algorithms (2.1.3.2 and 2.1.4.2) step by step.

``pymerkle`` (7.0) computes the same tree heads, but its proofs are of its own form (the
leaf's own hash first, with direction bits, and a consistency path that is not the RFC's):
a reader with any RFC 9162 verifier could not check them, so the tree is here
(docs/decisions.md, "Sealed corpora").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

EMPTY = hashlib.sha256(b"").digest()


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n > 1``)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """The tree head (MTH) over leaf hashes ``leaves``, built bottom up: at each level,
    pairs are hashed left to right and a last odd node rises unchanged, which is the RFC's
    split at the largest power of two."""
    if not leaves:
        return EMPTY
    level = list(leaves)
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(index, D[n]): the audit path of leaf ``index`` in the tree of ``leaves``."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ValueError(f"leaf {index} is not in a tree of {n}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return inclusion_proof(index, leaves[:k]) + [root(leaves[k:])]
    return inclusion_proof(index - k, leaves[k:]) + [root(leaves[:k])]


def consistency_proof(m: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]): the consistency proof of the tree of the first ``m`` leaves with the
    tree of all ``leaves``."""
    n = len(leaves)
    if not 0 < m <= n:
        raise ValueError(f"no consistency proof from size {m} to size {n}")
    return _subproof(m, leaves, True)


def _subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [root(leaves)]
    k = _split(n)
    if m <= k:
        return _subproof(m, leaves[:k], complete) + [root(leaves[k:])]
    return _subproof(m - k, leaves[k:], False) + [root(leaves[:k])]


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes],
                     head: bytes) -> bool:
    """Whether ``proof`` proves leaf hash ``leaf`` at ``index`` in the tree of ``size``
    leaves whose head is ``head`` (RFC 9162, 2.1.3.2)."""
    if not 0 <= index < size or any(len(p) != 32 for p in proof):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == head


def verify_consistency(size1: int, size2: int, head1: bytes, head2: bytes,
                       proof: Sequence[bytes]) -> bool:
    """Whether ``proof`` proves the tree of ``size1`` leaves with head ``head1`` is a prefix
    of the tree of ``size2`` leaves with head ``head2`` (RFC 9162, 2.1.4.2)."""
    if any(len(p) != 32 for p in proof) or not 0 <= size1 <= size2:
        return False
    if size1 == size2:
        return not proof and head1 == head2
    if size1 == 0:
        return not proof
    if not proof:
        return False
    path = list(proof)
    if size1 & (size1 - 1) == 0:  # a power of two: the old head is the first node
        path.insert(0, head1)
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == head1 and sr == head2 and sn == 0
