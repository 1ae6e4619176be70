"""The typed co-commit record (`cc/<id>`) over the canonical JSON the handler writes.

Like the other typed records (MemoryRecord, ProposalRecord, DomainRecord, ...) it is a
TypedDict read through `get_record` and written through `put_record`, so the codec is the
boundary: the stored bytes must decode to exactly the record's fields and encode back to
the same bytes, and a value the codec does not admit never reaches the state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.consensus.families.cocommit.record import CoCommitRecord, load
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.store import codec
from memledger.protocol import records
from memledger.sdk.txbuilder import cocommit_core, sign_cocommit
from tests.support.chain import LocalChain, seeded_key

A, B = seeded_key("cc-record-a"), seeded_key("cc-record-b")


class _View:
    """A committed-state stand-in: a dict of canonical bytes."""

    def __init__(self, data: dict[bytes, bytes]) -> None:
        self.data = data

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)

    def iter_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return iter(sorted((k, v) for k, v in self.data.items() if k.startswith(prefix)))


def _sample() -> CoCommitRecord:
    return {"id": "cc-" + "ab" * 32, "coauthors": ["01" * 32, "02" * 32],
            "submitter": "02" * 32, "agreement_nonce": 7, "window": [5, 9], "height": 3,
            "core_sha256": "cd" * 32}


def test_handler_written_record_round_trips_byte_identically(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain")
    try:
        keys = sorted([A, B], key=lambda k: bytes(k.verify_key))
        core = cocommit_core(chain.chain_id, "a record that round-trips",
                             [bytes(k.verify_key) for k in keys])
        sigs = sorted(sign_cocommit(k, core) for k in keys)
        result = chain.block([chain.builder(A).cocommit(chain.next_nonce(A), core, sigs)])[0]
        assert result.code == 0, result.log
        mid = next(a.value for e in result.events if e.type == "cocommit"
                   for a in e.attributes if a.key == "id")
        key = records.cocommit_key(mid)
        raw = chain.app.store.get(key)
    finally:
        chain.close()
    assert raw is not None

    record = load(TxBuffer(_View({key: raw})), mid)
    assert record is not None
    assert set(record) == CoCommitRecord.__required_keys__
    assert record["id"] == mid and record["submitter"] == bytes(A.verify_key).hex()
    assert record["coauthors"] == [bytes(k.verify_key).hex() for k in keys]
    assert codec.encode(record) == raw
    assert codec.reference_encode(record) == raw
    assert codec.decode_strict(raw) == record

    # Written back through the same path the handler uses: the same bytes.
    buffer = TxBuffer(_View({}))
    buffer.put_record(key, record)
    assert buffer.get(key) == raw


def test_record_bytes_are_the_canonical_form() -> None:
    record = _sample()
    raw = codec.encode(record)
    assert raw == (
        b'{"agreement_nonce":7,"coauthors":["' + b"01" * 32 + b'","' + b"02" * 32
        + b'"],"core_sha256":"' + b"cd" * 32 + b'","height":3,"id":"cc-' + b"ab" * 32
        + b'","submitter":"' + b"02" * 32 + b'","window":[5,9]}'
    )
    assert load(TxBuffer(_View({records.cocommit_key(record["id"]): raw})),
                record["id"]) == record


@pytest.mark.parametrize("field, value", [
    ("window", [5.0, 9]),        # floats are not canonical
    ("window", (5, 9)),          # nor tuples
    ("agreement_nonce", 1 << 64),  # ints beyond 64 bits
    ("coauthors", {"01" * 32}),  # nor sets
    ("core_sha256", b"\xcd" * 32),  # nor bytes
])
def test_malformed_record_is_refused_and_never_written(field: str, value: object) -> None:
    record = dict(_sample())
    record[field] = value
    key = records.cocommit_key(str(record["id"]))
    view = _View({})
    buffer = TxBuffer(view)
    with pytest.raises(TypeError):
        buffer.put_record(key, record)
    assert buffer.get(key) is None
    buffer.apply()
    assert view.data == {}


def test_malformed_record_bytes_are_refused_by_the_strict_decoder() -> None:
    raw = codec.encode(_sample()).replace(b'"window":[5,9]', b'"window":[5.0,9]')
    with pytest.raises(ValueError):
        codec.decode_strict(raw)
