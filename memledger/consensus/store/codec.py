"""Canonical record encoding for state values.

Why: state values feed the app hash, so every node (and any second implementation) must
produce the same bytes for the same record. The encoding is JSON with keys sorted by
Unicode code point, separators "," and ":", non-ASCII emitted as raw UTF-8, and only these
types: dict (str keys), list, str, int (bool allowed), None.

Floats are refused (their text form and arithmetic are not portable), as are tuples, sets,
bytes and subclasses of the allowed types. Ints must lie in [-2^63, 2^64-1] so every value
fits a 64-bit field elsewhere and Python's environment-tunable int-to-str digit limit can
never trigger. Nesting is capped at MAX_DEPTH, which also rejects cyclic structures.
Strings with lone surrogates cannot be UTF-8 encoded and raise TypeError.

The bytes are produced by orjson (sorted keys, compact, raw UTF-8): for exactly the
types `_check` admits it emits the same bytes as the standard library encoder configured
as above, about ten times faster. `tests/unit/consensus/test_codec_equivalence.py` holds the two to
byte equality over generated records, so the standard library remains the reference.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["INT_MAX", "INT_MIN", "MAX_DEPTH", "decode", "decode_strict", "encode",
           "reference_encode"]

INT_MIN = -(1 << 63)
INT_MAX = (1 << 64) - 1
MAX_DEPTH = 64

#: The reference encoder (standard library); `encode` must equal it byte for byte.
_REFERENCE = json.JSONEncoder(
    sort_keys=True,
    separators=(",", ":"),
    ensure_ascii=False,
    check_circular=False,
    allow_nan=False,
)


def _reject_float(text: str) -> Any:
    raise ValueError(f"non-canonical record: float {text!r}")


def _reject_constant(text: str) -> Any:
    raise ValueError(f"non-canonical record: {text}")


_DECODER = json.JSONDecoder(parse_float=_reject_float, parse_constant=_reject_constant)


#: element types a list may hold without a walk: leaves with nothing more to check
_LEAF_TYPES = frozenset((str, bool, type(None)))
_INT_TYPE = frozenset((int,))


def _check(obj: Any) -> None:
    """Iterative type walk (no recursion limit dependence); raises TypeError on a bad value."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        o, depth = pop()
        t = type(o)
        if t is str or t is bool or o is None:
            continue
        if t is int:
            if not INT_MIN <= o <= INT_MAX:
                raise TypeError(f"int out of range [-2^63, 2^64-1]: {o}")
            continue
        if depth >= MAX_DEPTH:
            raise TypeError(f"record nested deeper than {MAX_DEPTH}")
        if t is dict:
            for k, v in o.items():
                if type(k) is not str:
                    raise TypeError(f"dict keys must be str, got {type(k).__name__}")
                tv = type(v)
                if tv is str or tv is bool or v is None:
                    continue
                if tv is int and INT_MIN <= v <= INT_MAX:  # a leaf: no trip through the stack
                    continue
                push((v, depth + 1))
        elif t is list:
            # fast path, same verdict: a list of leaves only (a nonce window holds 256
            # ints, checked on every tx) needs no walk; anything else is walked below
            kinds = set(map(type, o))
            if kinds <= _LEAF_TYPES:
                continue
            if kinds == _INT_TYPE and INT_MIN <= min(o) and max(o) <= INT_MAX:
                continue
            for v in o:
                push((v, depth + 1))
        else:
            raise TypeError(f"type not allowed in a record: {t.__name__}")


def encode(obj: Any) -> bytes:
    """Canonical bytes for a record; raises TypeError for any disallowed value."""
    _check(obj)
    try:
        return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError as exc:  # lone surrogates: not encodable as UTF-8
        raise TypeError(f"record not encodable: {exc}") from None


def reference_encode(obj: Any) -> bytes:
    """The same canonical bytes through the standard library (the spec, for tests)."""
    _check(obj)
    return _REFERENCE.encode(obj).encode("utf-8")


def decode(data: bytes) -> Any:
    """Parse record bytes read back from the state, which only `encode` ever wrote.

    It does not re-check canonical form or types: checking again would double the cost
    of every read, and state values are covered by the app hash. Untrusted JSON goes
    through `decode_strict`.
    """
    return orjson.loads(data)


def decode_strict(data: bytes) -> Any:
    """Parse untrusted JSON; floats and NaN/Infinity are rejected with ValueError."""
    return _DECODER.decode(data.decode("utf-8"))
