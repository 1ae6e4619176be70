"""Chain params are decoded once per distinct `sys/params` bytes, and every reader gets
its own copy: what a block reads cannot depend on what an earlier reader did."""

from __future__ import annotations

from typing import Any

import pytest

from memledger.consensus import params
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.store import codec
from memledger.protocol import records


class _Dict:
    """A bare key-value store, as a block overlay is to a TxBuffer."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)

    def iter_prefix(self, prefix: bytes) -> Any:
        return iter(())


def test_same_bytes_decode_once_and_readers_get_copies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    decodes: list[bytes] = []
    real = codec.decode

    def counting(raw: bytes) -> Any:
        decodes.append(raw)
        return real(raw)

    monkeypatch.setattr(codec, "decode", counting)
    state = TxBuffer(_Dict())
    assert params.value(state, "nonce_window") == 256  # nothing stored: defaults
    state.put_record(records.PARAMS, {**params.genesis_defaults(), "nonce_window": 77,
                                      "shared_domains": ["general", "memo-test"]})
    for _ in range(5):
        assert params.value(state, "nonce_window") == 77
        shared = params.value(state, "shared_domains")
        assert shared == ["general", "memo-test"]
        shared.append("leaked")  # a reader's copy
        params.current(state)["shared_domains"].append("leaked too")
    assert len(decodes) == 1
    params.set_value(state, "nonce_window", 99)  # a passed proposal: new bytes
    assert params.value(state, "nonce_window") == 99
    assert params.value(state, "shared_domains") == ["general", "memo-test"]
    assert len(decodes) == 2
