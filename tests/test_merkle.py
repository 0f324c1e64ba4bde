"""The RFC 9162 Merkle tree (agentprov_core/base/merkle.py) against the reference test data
of the RFC 6962/9162 tree: the leaf inputs, tree heads, inclusion proofs and consistency
proofs of transparency-dev/merkle (Go, the Certificate Transparency project's tree library),
``testonly/constants.go`` (commit 582a6ad) and ``proof/verify_test.go`` (commit 02194e9),
the data certificate-transparency and Trillian test against. Only the data is copied here.
"""

from __future__ import annotations

import pytest

from agentprov_core.base import merkle

LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
# the heads of the trees of the first 1..8 leaves
ROOTS = [bytes.fromhex(h) for h in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")]
EMPTY_ROOT = bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def _h(*hexes: str) -> list[bytes]:
    return [bytes.fromhex(x) for x in hexes]


# (leaf number, 1-based; tree size; audit path)
INCLUSION = [
    (1, 1, []),
    (1, 8, _h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (6, 8, _h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
              "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
              "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (3, 3, _h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")),
    (2, 5, _h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
]
# (size1, size2, consistency proof)
CONSISTENCY = [
    (1, 1, []),
    (1, 8, _h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (6, 8, _h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
              "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
              "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (2, 5, _h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
              "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
    (6, 7, _h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
              "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
              "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
]
HASHES = [merkle.leaf_hash(x) for x in LEAVES]


def test_tree_heads_of_the_reference_data():
    assert merkle.root([]) == EMPTY_ROOT
    assert [merkle.root(HASHES[:n]) for n in range(1, 9)] == ROOTS
    assert HASHES[0].hex() == ROOTS[0].hex()  # a tree of one leaf: its leaf hash


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION)
def test_inclusion_proofs_of_the_reference_data(leaf, size, path):
    assert merkle.inclusion_proof(leaf - 1, HASHES[:size]) == path
    assert merkle.verify_inclusion(leaf - 1, size, HASHES[leaf - 1], path, ROOTS[size - 1])


@pytest.mark.parametrize(("size1", "size2", "proof"), CONSISTENCY)
def test_consistency_proofs_of_the_reference_data(size1, size2, proof):
    assert merkle.consistency_proof(size1, HASHES[:size2]) == proof
    assert merkle.verify_consistency(size1, size2, ROOTS[size1 - 1], ROOTS[size2 - 1], proof)


def _corrupt_inclusion(index, size, leaf, path, head):
    """The corruptions the reference tests try (verify_test.go, corruptInclusionProof)."""
    some = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")
    yield index - 1, size, leaf, path, head
    yield index + 1, size, leaf, path, head
    yield index ^ 2, size, leaf, path, head
    yield index, size * 2, leaf, path, head
    yield index, size // 2, leaf, path, head
    yield index, size, b"WrongLeaf", path, head
    yield index, size, leaf, path, EMPTY_ROOT
    yield index, size, leaf, path, some
    yield index, size, leaf, [*path, b""], head
    yield index, size, leaf, [*path, head], head
    yield index, size, leaf, [b"", *path], head
    yield index, size, leaf, [head, *path], head
    for i in range(len(path)):
        bad = list(path)
        bad[i] = bytes([bad[i][0] ^ 8]) + bad[i][1:]
        yield index, size, leaf, bad, head
    if path:
        yield index, size, leaf, path[:-1], head
    if len(path) > 1:
        yield index, size, leaf, [some, path[0], *path[1:]], head


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION[1:])
def test_corrupted_inclusion_proofs_fail(leaf, size, path):
    for args in _corrupt_inclusion(leaf - 1, size, HASHES[leaf - 1], path, ROOTS[size - 1]):
        assert not merkle.verify_inclusion(*args), args


@pytest.mark.parametrize(("size1", "size2", "proof"), CONSISTENCY[1:])
def test_corrupted_consistency_proofs_fail(size1, size2, proof):
    r1, r2 = ROOTS[size1 - 1], ROOTS[size2 - 1]
    probes = [(size1 - 1, size2, r1, r2, proof), (size1 + 1, size2, r1, r2, proof),
              (size1 ^ 2, size2, r1, r2, proof), (size1, size2 * 2, r1, r2, proof),
              (size1, size2 // 2, r1, r2, proof), (size1, size2, b"WrongRoot", r2, proof),
              (size1, size2, r1, b"WrongRoot", proof), (size1, size2, r2, r1, proof),
              (size1, size2, r1, r2, []), (size1, size2, r1, r2, [*proof, b""]),
              (size1, size2, r1, r2, [*proof, r1]), (size1, size2, r1, r2, [*proof, r2]),
              (size1, size2, r1, r2, [b"", *proof]), (size1, size2, r1, r2, [r1, *proof]),
              (size1, size2, r1, r2, [r2, *proof]), (size1, size2, r1, r2, [proof[0], *proof]),
              (size1, size2, r1, r2, proof[:-1])]
    for i in range(len(proof)):
        bad = list(proof)
        bad[i] = bytes([bad[i][0] ^ 16]) + bad[i][1:]
        probes.append((size1, size2, r1, r2, bad))
    for args in probes:
        if args[0] == 0 and not args[4]:  # the empty tree is consistent with every tree
            continue
        assert not merkle.verify_consistency(*args), args


def test_every_proof_of_larger_trees_verifies():
    """Every inclusion and consistency proof of trees of up to 40 leaves verifies against
    heads computed independently (the RFC's recursive definition, not the level walk)."""
    def mth(d):
        if len(d) == 1:
            return d[0]
        k = 1 << ((len(d) - 1).bit_length() - 1)
        return merkle.node_hash(mth(d[:k]), mth(d[k:]))

    leaves = [merkle.leaf_hash(bytes([i])) for i in range(40)]
    for n in range(1, 41):
        head = mth(leaves[:n])
        assert merkle.root(leaves[:n]) == head
        for i in range(n):
            assert merkle.verify_inclusion(i, n, leaves[i],
                                           merkle.inclusion_proof(i, leaves[:n]), head)
        for m in range(1, n + 1):
            assert merkle.verify_consistency(m, n, mth(leaves[:m]), head,
                                             merkle.consistency_proof(m, leaves[:n]))
