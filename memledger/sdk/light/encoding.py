"""Protobuf primitives and time parsing for CometBFT's canonical encodings.

Hand-written on purpose: the light client hashes and signs over exact bytes, so every
byte is spelled out here instead of trusting a generated message's field presence rules.
Only the wire types CometBFT headers and votes use are needed.
"""

from __future__ import annotations

import calendar
import re

_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$")


def uvarint(n: int) -> bytes:
    """Unsigned LEB128; negative int64 values are encoded as their two's complement."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field: int, wire: int) -> bytes:
    return uvarint((field << 3) | wire)


def f_varint(field: int, n: int) -> bytes:
    """A varint field, omitted at its zero value (proto3)."""
    return b"" if n == 0 else key(field, 0) + uvarint(n)


def f_sfixed64(field: int, n: int) -> bytes:
    """An sfixed64 field (little-endian two's complement), omitted at zero."""
    return b"" if n == 0 else key(field, 1) + (n & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")


def f_bytes(field: int, data: bytes) -> bytes:
    """A length-delimited field, omitted when empty (proto3 scalar bytes/string)."""
    return b"" if not data else key(field, 2) + uvarint(len(data)) + data


def f_message(field: int, encoded: bytes) -> bytes:
    """An embedded message that is always present (gogoproto non-nullable), even if empty."""
    return key(field, 2) + uvarint(len(encoded)) + encoded


def timestamp(seconds: int, nanos: int) -> bytes:
    """google.protobuf.Timestamp."""
    return f_varint(1, seconds) + f_varint(2, nanos)


def parse_time(text: str) -> tuple[int, int]:
    """RFC 3339 UTC time as CometBFT prints it -> (unix seconds, nanoseconds), no floats."""
    m = _TIME.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 UTC time: {text[:40]!r}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    frac = m.group(7) or ""
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    return seconds, int(frac.ljust(9, "0")) if frac else 0


def time_ns(text: str) -> int:
    """RFC 3339 UTC time -> integer nanoseconds since the epoch."""
    s, n = parse_time(text)
    return s * 1_000_000_000 + n
