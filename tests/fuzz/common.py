"""Shared fuzzing helpers: budgets, keys, protobuf wire-format surgery.

Budgets: every fuzzer takes `budget(n)`, n examples by default (CI: the whole fuzz
directory runs in well under three minutes on two slow vCPUs). `MEMLEDGER_FUZZ_EXAMPLES`
replaces n everywhere for long runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from nacl.signing import SigningKey

from memledger.consensus.wire.server import encode_uvarint
from memledger.protocol.codes import Code
from tests.fuzz import world
from tests.support.chain import seeded_key

FUZZ_EXAMPLES = int(os.environ.get("MEMLEDGER_FUZZ_EXAMPLES", "0") or 0)

#: codes the stateless gate (memledger.consensus.gate.envelope.decode_tx) may answer with
GATE_CODES = frozenset({
    Code.TX_TOO_LARGE, Code.TX_DECODE, Code.TX_NOT_CANONICAL, Code.BODY_DECODE,
    Code.BODY_NOT_CANONICAL, Code.WRONG_CHAIN_ID, Code.BAD_PUBLIC_KEY, Code.BAD_SIGNATURE,
    Code.NONCE_ZERO, Code.EMPTY_MESSAGE,
})
ALL_CODES = frozenset(int(c) for c in Code)

VALIDATORS = [seeded_key(f"validator-{i}") for i in range(4)]
#: every key the world and the corpus sign with, by public key (for re-signing mutants)
KEYS: dict[bytes, SigningKey] = {
    bytes(k.verify_key): k for k in [*world.AGENTS.values(), *VALIDATORS]
}


def budget(examples: int, **overrides: object) -> settings:
    """Hypothesis settings for one fuzzer: `examples` by default, env-scalable."""
    return settings(
        max_examples=FUZZ_EXAMPLES or examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture,
                               HealthCheck.large_base_example, HealthCheck.filter_too_much],
        print_blob=True,
        **overrides,  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------ wire format
uvarint = encode_uvarint  # the ABCI server's own encoder (same LEB128 as protobuf varints)


def tag(field_no: int, wire_type: int) -> bytes:
    return uvarint((field_no << 3) | wire_type)


def len_field(field_no: int, payload: bytes) -> bytes:
    return tag(field_no, 2) + uvarint(len(payload)) + payload


@dataclass(frozen=True)
class Field:
    number: int
    wire_type: int
    raw: bytes  # the whole field: tag, (length) and payload


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("bad varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if byte < 0x80:
            return value, pos


def split_fields(data: bytes) -> list[Field] | None:
    """Top-level fields of a protobuf message, or None if it is not plain wire format."""
    fields: list[Field] = []
    pos = 0
    try:
        while pos < len(data):
            start = pos
            key, pos = _read_varint(data, pos)
            number, wire_type = key >> 3, key & 7
            if wire_type == 0:
                _, pos = _read_varint(data, pos)
            elif wire_type == 1:
                pos += 8
            elif wire_type == 2:
                length, pos = _read_varint(data, pos)
                pos += length
            elif wire_type == 5:
                pos += 4
            else:
                return None
            if pos > len(data) or number == 0:
                return None
            fields.append(Field(number, wire_type, data[start:pos]))
    except ValueError:
        return None
    return fields
