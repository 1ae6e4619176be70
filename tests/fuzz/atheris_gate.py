"""Optional coverage-guided fuzzing of the tx gate and processTx with atheris (libFuzzer).

Not a pytest module (CI runs the hypothesis fuzzers); run it by hand for long sessions:

    .venv/bin/pip install atheris
    .venv/bin/python -m tests.fuzz.atheris_gate -atheris_runs=2000000 -max_len=4096

The checked-in corpus (tests/fuzz/corpus/*.hex) seeds libFuzzer's corpus directory. The
target fails on anything but a clean answer: a SignedTx or a TxError with a gate code,
the same twice, and processTx (CheckTx path) agreeing with the gate.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import cast

import atheris

with atheris.instrument_imports(include=["memledger"]):
    from memledger.consensus.block.execute import process_tx
    from memledger.consensus.families.context import BlockInfo, KeyValueView
    from memledger.consensus.gate.envelope import decode_tx
    from memledger.protocol.codes import TxError

from tests.fuzz.common import GATE_CODES  # noqa: E402
from tests.fuzz.corpus_gen import load  # noqa: E402
from tests.support.chain import CHAIN_ID  # noqa: E402

BLOCK = BlockInfo(height=100, time_ns=1_780_000_100 * 10**9, chain_id=CHAIN_ID, app_version=1)


class _NoState:
    def get(self, key: bytes) -> bytes | None:
        return None

    def put(self, key: bytes, value: bytes) -> None:
        raise AssertionError("a gate-rejected tx wrote state")

    delete = put  # type: ignore[assignment]


def _answer(raw: bytes) -> object:
    try:
        return decode_tx(raw, CHAIN_ID).tx_hash
    except TxError as err:
        assert err.code in GATE_CODES, err.code
        return err.code


def target(raw: bytes) -> None:
    first = _answer(raw)
    assert _answer(raw) == first
    if not isinstance(first, bytes):
        assert process_tx(cast("KeyValueView", _NoState()), BLOCK, raw, apply=False).code == first


def main() -> None:
    corpus = Path(tempfile.mkdtemp(prefix="memledger-atheris-"))
    for name, raw in load().items():
        (corpus / name).write_bytes(raw)
    atheris.Setup([*sys.argv, str(corpus)], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
