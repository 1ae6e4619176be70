"""The fast record encoder (orjson) must emit exactly the reference (stdlib) bytes.

State values feed the app hash, so a single differing byte between the two would fork
any node whose encoder differs; this holds them equal over generated records that cover
the whole admitted type set: every Unicode scalar value (control characters, the
escapes, astral planes), the full integer range, booleans, null and nesting.
"""

from __future__ import annotations

from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from memledger.consensus.store import codec

_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)
_TEXT = st.text(st.characters(blacklist_categories=_SURROGATES), max_size=24)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=codec.INT_MIN, max_value=codec.INT_MAX)
    | _TEXT
)
_RECORDS = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=6),
    max_leaves=40,
)


@settings(max_examples=600, deadline=None)
@given(_RECORDS)
def test_fast_encoder_matches_reference_bytes(record: Any) -> None:
    fast = codec.encode(record)
    assert fast == codec.reference_encode(record)
    assert codec.decode(fast) == record


def test_edge_strings_match_reference() -> None:
    edge = {
        "\x00\x1f\x7f\u2028\u2029\"\\/\b\f\n\r\t": ["\ud7ff", "\ue000", "\uffff", "\U0010ffff"],
        "\U0001f600": codec.INT_MAX, "\uffff": codec.INT_MIN, "": True, "Z": None, "z": [],
    }
    assert codec.encode(edge) == codec.reference_encode(edge)
