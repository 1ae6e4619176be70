"""Fuzz every handler through FinalizeBlock, on two independent copies of the world.

For random well-signed txs of each kind (random and extreme field values, huge and empty
strings, invalid UTF-8 smuggled into string fields, extreme nonces):
- no exception and no halt: every tx gets a result code from the Code table;
- determinism: the same block on two fresh copies gives identical results, app hash and
  projection;
- CheckTx on the same committed state answers the same code as FinalizeBlock (co-commits
  excepted: CheckTx uses the wall clock for their validity window);
- a block in which every tx was rejected changes nothing (app hash, projection).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from memledger.protocol.codes import CODESPACE, Code
from memledger.protocol.pb import abci_pb2 as pb
from tests.fuzz import corpus_gen, world
from tests.fuzz.common import ALL_CODES, budget
from tests.fuzz.strategies import MESSAGES, mutation, signed_tx
from tests.support.chain import HaltCalled

KINDS = sorted(MESSAGES)
SEEDS = list(corpus_gen.load().values())
_BASELINE: dict[Path, dict[str, Any]] = {}


def _baseline(template: world.Template) -> dict[str, Any]:
    if template.home not in _BASELINE:
        with tempfile.TemporaryDirectory() as tmp:
            w = world.clone(template, Path(tmp) / "w")
            _BASELINE[template.home] = w.chain.app.projection.dump()
            w.close()
    return _BASELINE[template.home]


def _result(r: pb.ExecTxResult) -> tuple[Any, ...]:
    return (r.code, r.log, r.codespace, r.SerializeToString(deterministic=True))


def run_block(template: world.Template, txs: list[bytes], check_kinds: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a = world.clone(template, Path(tmp) / "a")
        b = world.clone(template, Path(tmp) / "b")
        try:
            checked = [a.chain.check(tx) for tx in txs] if len(txs) == 1 else []
            try:
                ra, rb = a.chain.block(txs), b.chain.block(txs)
            except HaltCalled as exc:
                pytest.fail(f"a valid block halted the app: {exc}")
            assert len(ra) == len(txs)
            for r in ra:
                event(f"code {Code(r.code).name}")
                assert r.code in ALL_CODES, r.code
                assert r.codespace == (CODESPACE if r.code else "")
                assert r.code == 0 or r.log
            assert [_result(r) for r in ra] == [_result(r) for r in rb]
            hash_a = a.chain.app_hashes[a.chain.height]
            assert hash_a == b.chain.app_hashes[b.chain.height]
            dump = a.chain.app.projection.dump()
            assert dump == b.chain.app.projection.dump()
            for c, kind in zip(checked, check_kinds, strict=False):
                if kind != "cocommit_submit":
                    assert c.code == ra[0].code, (kind, c.code, c.log, ra[0].code, ra[0].log)
            if all(r.code != Code.OK for r in ra):
                assert hash_a == template.app_hash, "rejected txs changed the app hash"
                assert dump == _baseline(template), "rejected txs changed the projection"
        finally:
            a.close()
            b.close()


@pytest.mark.parametrize("kind", KINDS)
@budget(18)
@given(data=st.data())
def test_every_handler_via_finalize_block(kind: str, data: st.DataObject,
                                          world_template: world.Template) -> None:
    nonces = dict(world_template.nonces)
    raw, invalid_utf8 = data.draw(signed_tx(kind, nonces), label="tx")
    if invalid_utf8:
        data.draw(st.just(True), label="invalid utf-8 injected")
    run_block(world_template, [raw], [kind])


@budget(40)
@given(data=st.data())
def test_mixed_blocks(data: st.DataObject, world_template: world.Template) -> None:
    """Blocks of several txs: random kinds, corpus seeds and mutants, in any order."""
    nonces = dict(world_template.nonces)
    txs: list[bytes] = []
    for _ in range(data.draw(st.integers(2, 6), label="size")):
        source = data.draw(st.sampled_from(["random", "random", "seed", "mutant", "dup"]))
        if source == "random":
            txs.append(data.draw(signed_tx(data.draw(st.sampled_from(KINDS)), nonces))[0])
        elif source == "seed":
            txs.append(data.draw(st.sampled_from(SEEDS)))
        elif source == "mutant":
            txs.append(data.draw(mutation(data.draw(st.sampled_from(SEEDS)))))
        elif txs:
            txs.append(data.draw(st.sampled_from(txs)))
    run_block(world_template, txs, [])
