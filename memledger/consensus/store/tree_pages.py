"""The Merkle tree's nodes as LMDB values: four levels of a subtree to one value.

Why: a block's changes touch about 16 nodes per changed bucket, one on each level, and
with one LMDB entry per node those entries were spread over most of the tree's pages:
a block of 250 changed buckets copied and wrote ~700 pages of the tree alone, two
thirds of the canonical store's Commit CPU on a state of 300,000 keys. Keeping each
4-level subtree in one value puts a path's nodes on 4 values instead of 17 entries, and
a block touches ~280 pages.

Layout (docs/APP_HASH.md, "Storage mapping"): the tree's levels 0..16 (root 1, bucket
b's leaf NUM_BUCKETS + b) are cut below levels 0, 4, 8 and 12. A *group* is named by
the node it hangs from (1; 16..31; 256..511; 4096..8191) and holds the 30 nodes 1 to
4 levels below it, level by level, left to right, after one slot that holds the root
in group 1 and zeros elsewhere: 31 slots of 32 bytes. A group of zeros is not stored.
Nothing here is consensus: it is how the nodes are kept, not what they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memledger.protocol.commitment import (
    BUCKET_BITS,
    NUM_BUCKETS,
    TREE_SIZE,
    ZERO_HASH,
    MerkleTree,
)

#: levels of nodes one group holds below the node it hangs from
DEPTH = 4
#: slot 0 (the root, in group 1 only), then 2 + 4 + 8 + 16 nodes
SLOTS = 1 + sum(1 << d for d in range(1, DEPTH + 1))
GROUP_BYTES = 32 * SLOTS
ZERO_GROUP = bytes(GROUP_BYTES)
#: the levels groups hang from (level 0 is the root's own)
GROUP_LEVELS = tuple(range(0, BUCKET_BITS, DEPTH))


def is_group(index: int) -> bool:
    """Whether a heap index names a group (a valid key of the tree db)."""
    return 1 <= index < TREE_SIZE and index.bit_length() - 1 in GROUP_LEVELS


def group_of(index: int) -> int:
    """The group holding node `index` (the root is in group 1)."""
    level = index.bit_length() - 1
    if level == 0:
        return 1
    return index >> (level - (level - 1) // DEPTH * DEPTH)


def slot_of(index: int) -> int:
    """Node `index`'s slot in its group."""
    level = index.bit_length() - 1
    if level == 0:
        return 0
    depth = level - (level - 1) // DEPTH * DEPTH
    return (1 << depth) - 1 + index - (index >> depth << depth)


def groups_over(leaves: Iterable[int]) -> list[int]:
    """The groups a change to these leaf indices touches, ascending (every node a plan
    recomputes lies on a changed leaf's path, and a path crosses one group per level
    of GROUP_LEVELS)."""
    touched = {1}
    shifts = [BUCKET_BITS - level for level in GROUP_LEVELS if level]
    for leaf in leaves:
        for shift in shifts:
            touched.add(leaf >> shift)
    return sorted(touched)


ALL_GROUPS = tuple(g for level in GROUP_LEVELS for g in range(1 << level, 2 << level))


def encode_group(group: int, tree: MerkleTree) -> bytes | None:
    """Group `group`'s value as `tree` holds it; None when all zero (not stored)."""
    parts = [tree.root if group == 1 else ZERO_HASH]
    for depth in range(1, DEPTH + 1):
        parts.extend(tree.span(group << depth, (group + 1) << depth))
    value = b"".join(parts)
    return None if value == ZERO_GROUP else value


def decode_group(group: int, value: bytes, nodes: list[bytes]) -> bool:
    """Write a stored group's nodes into a full node list; False if the entry is not a
    group of this layout (then nothing was written)."""
    if not is_group(group) or len(value) != GROUP_BYTES:
        return False
    if group == 1:
        nodes[1] = value[:32]
    slot = 1
    for depth in range(1, DEPTH + 1):
        first = group << depth
        for i in range(1 << depth):
            nodes[first + i] = value[32 * slot:32 * slot + 32]
            slot += 1
    return True


def read_node(get_group: Callable[[int], bytes | None], index: int) -> bytes:
    """One node from the stored groups (`get_group(group)` returns a value or None)."""
    value = get_group(group_of(index))
    if value is None:
        return ZERO_HASH
    slot = slot_of(index)
    return value[32 * slot:32 * slot + 32]


def changed_groups(tree: MerkleTree, changed: Iterable[int]) -> list[tuple[int, bytes | None]]:
    """(group, value or None to delete) for every group a plan's changed nodes fall in,
    ascending, from `tree` with the plan applied."""
    leaves = [i for i in changed if i >= NUM_BUCKETS]
    if not leaves:
        return []
    return [(g, encode_group(g, tree)) for g in groups_over(leaves)]


def all_groups(tree: MerkleTree) -> list[tuple[int, bytes]]:
    """(group, value) of every group that is not all zero, ascending."""
    out = []
    for group in ALL_GROUPS:
        value = encode_group(group, tree)
        if value is not None:
            out.append((group, value))
    return out
