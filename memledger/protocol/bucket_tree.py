"""Hash layout 2: each bucket's entries under a binary Merkle tree, not hashed flat.

Why: under layout 1 a proof must carry every other entry of its bucket (about n / 65536
of them), so proofs grow with the state: 2.2 KB at 2M keys, 10 KB at 20M. Under layout 2
a proof carries one path of about log2(n / 65536) digests inside the bucket, and the
bucket hash still costs O(entries) to recompute. Chains move to it by an upgrade
(`versions.RULES["bucket_merkle"]`); the normative text is docs/APP_HASH.md, "Layout 2".

The tree over the sorted entry digests d0..d(m-1) is built level by level: neighbours
pair up as H(0x04 || left || right) and an unpaired last node moves up unchanged. The
bucket hash is H(0x03 || u32be(m) || top). Tags 0x03 and 0x04 differ from layout 1's
0x00-0x02, so no layout-1 preimage can pass for a layout-2 one, and a verifier may
accept proofs of either layout against one root. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import sha256

__all__ = [
    "audit_path",
    "bucket_top",
    "from_top",
    "merkle_bucket_hash",
    "path_length",
    "top_from_path",
]

_BUCKET_TAG = b"\x03"
_INNER_TAG = b"\x04"


def _pair(left: bytes, right: bytes) -> bytes:
    return sha256(_INNER_TAG + left + right).digest()


def bucket_top(digests: Sequence[bytes]) -> bytes:
    """The tree's top node over one bucket's entry digests (at least one)."""
    level = list(digests)
    if not level:
        raise ValueError("an empty bucket has no tree")
    while len(level) > 1:
        paired = [_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) & 1:
            paired.append(level[-1])
        level = paired
    return level[0]


def merkle_bucket_hash(digests: Sequence[bytes]) -> bytes:
    """Layout-2 bucket hash: the entry count and the tree's top, under their own tag."""
    return sha256(_BUCKET_TAG + len(digests).to_bytes(4, "big") + bucket_top(digests)).digest()


def from_top(count: int, top: bytes) -> bytes:
    """Bucket hash from a recomputed top node (what a verifier does last)."""
    return sha256(_BUCKET_TAG + count.to_bytes(4, "big") + top).digest()


def audit_path(digests: Sequence[bytes], index: int) -> list[bytes]:
    """Siblings of entry `index` from the bottom level up; promoted levels add none."""
    if not 0 <= index < len(digests):
        raise IndexError(index)
    path: list[bytes] = []
    level = list(digests)
    while len(level) > 1:
        mate = index ^ 1
        if mate < len(level):
            path.append(level[mate])
        paired = [_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) & 1:
            paired.append(level[-1])
        level, index = paired, index >> 1
    return path


def path_length(index: int, count: int) -> int:
    """How many siblings `audit_path` gives for `index` among `count` entries."""
    steps = 0
    while count > 1:
        if (index ^ 1) < count:
            steps += 1
        index, count = index >> 1, (count + 1) >> 1
    return steps


def top_from_path(digest: bytes, index: int, count: int, path: Sequence[bytes]) -> bytes | None:
    """Recompute the top from one entry's digest and path; None if the path cannot fit."""
    if not 0 <= index < count or len(path) != path_length(index, count):
        return None
    h = digest
    used = 0
    while count > 1:
        mate = index ^ 1
        if mate < count:
            sib = path[used]
            used += 1
            h = _pair(sib, h) if index & 1 else _pair(h, sib)
        index, count = index >> 1, (count + 1) >> 1
    return h
