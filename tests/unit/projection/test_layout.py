"""The state layout table is complete: every prefix has an owning family and a projection row,
and no prefix is a prefix of another (a key belongs to exactly one family)."""

from __future__ import annotations

from memledger.projection.mapping import PREFIXES, SYSTEM_KEYS
from memledger.protocol import records


def _prefixes() -> dict[str, bytes]:
    return {name: value for name, value in vars(records).items()
            if isinstance(value, bytes) and name.isupper() and value.endswith(b"/")}


def test_every_prefix_has_an_owner_and_a_projection_row() -> None:
    prefixes = _prefixes()
    assert set(prefixes.values()) == set(records.OWNERS)
    assert set(prefixes.values()) == set(PREFIXES)


def test_system_keys_are_served_and_prefixes_are_disjoint() -> None:
    for key in SYSTEM_KEYS:
        assert key.startswith(records.SYS)
    values = sorted(_prefixes().values())
    for a in values:
        for b in values:
            assert a == b or not b.startswith(a), (a, b)
