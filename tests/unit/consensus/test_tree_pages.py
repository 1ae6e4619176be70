"""The tree db's groups: every node has exactly one place, and a plan's changes are
found in exactly the groups it names."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from memledger.consensus.store.tree_pages import (
    ALL_GROUPS,
    GROUP_BYTES,
    SLOTS,
    all_groups,
    changed_groups,
    decode_group,
    encode_group,
    group_of,
    groups_over,
    is_group,
    read_node,
    slot_of,
)
from memledger.protocol.commitment import NUM_BUCKETS, TREE_SIZE, ZERO_HASH, MerkleTree


def _tree(buckets: list[int], salt: bytes = b"") -> MerkleTree:
    return MerkleTree.from_leaves({b: hashlib.sha256(salt + b.to_bytes(4, "big")).digest()
                                   for b in buckets})


def test_every_node_has_one_place_and_groups_are_what_is_group_says() -> None:
    places = {(group_of(i), slot_of(i)) for i in range(1, TREE_SIZE)}
    assert len(places) == TREE_SIZE - 1
    assert {g for g, _ in places} == set(ALL_GROUPS) == {
        g for g in range(TREE_SIZE) if is_group(g)}
    assert all(0 <= slot < SLOTS for _, slot in places)
    assert [(g, s) for g, s in places if s == 0] == [(1, 0)]  # slot 0: the root only
    assert len(ALL_GROUPS) == 1 + 16 + 256 + 4096


def test_a_tree_written_as_groups_reads_back_node_for_node() -> None:
    tree = _tree(list(range(0, NUM_BUCKETS, 7)))
    stored = dict(all_groups(tree))
    assert all(len(v) == GROUP_BYTES for v in stored.values())
    nodes = [ZERO_HASH] * TREE_SIZE
    assert all(decode_group(g, v, nodes) for g, v in stored.items())
    assert MerkleTree(nodes).span(0, TREE_SIZE) == tree.span(0, TREE_SIZE)
    for i in (1, 2, 3, 17, 300, 5000, NUM_BUCKETS, TREE_SIZE - 1):
        assert read_node(stored.get, i) == tree.node(i)
    assert encode_group(4096, MerkleTree()) is None  # zeros are not stored


def test_entries_that_are_not_groups_are_refused() -> None:
    nodes = [ZERO_HASH] * TREE_SIZE
    assert not decode_group(3, bytes(GROUP_BYTES), nodes)  # not a group
    assert not decode_group(1, bytes(32), nodes)  # schema 1's one node per entry
    assert not decode_group(TREE_SIZE, bytes(GROUP_BYTES), nodes)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, NUM_BUCKETS - 1), max_size=40),
       st.lists(st.integers(0, NUM_BUCKETS - 1), min_size=1, max_size=40))
def test_a_plan_changes_exactly_the_groups_it_names(before: list[int],
                                                      changed: list[int]) -> None:
    tree = _tree(before)
    plan = tree.plan({b: hashlib.sha256(b"new" + bytes([b % 256])).digest() for b in changed})
    after = tree.copy()
    after.apply(plan)
    named = dict(changed_groups(after, plan))
    assert set(named) == {group_of(i) for i in plan}
    assert set(named) == set(groups_over([NUM_BUCKETS + b for b in changed]))
    old, new = dict(all_groups(tree)), dict(all_groups(after))
    assert {g for g in set(old) | set(new) if old.get(g) != new.get(g)} <= set(named)
    assert all(new.get(g) == v for g, v in named.items())
