"""Decoded-tx reuse: CheckTx, recheck and the block decode a tx once, outcomes unchanged."""

from __future__ import annotations

from pathlib import Path

from memledger.consensus.gate.envelope import decode_tx
from memledger.consensus.gate.txcache import DecodedTxCache
from memledger.protocol.codes import Code
from tests.support.chain import LocalChain, seeded_key

AGENT = seeded_key("txcache-agent")


def _txs(chain: LocalChain, count: int) -> list[bytes]:
    b = chain.builder(AGENT)
    return [b.submit(n + 1, f"tc-{n}", f"content {n}") for n in range(count)]


def test_block_after_checktx_equals_cold_block(tmp_path: Path) -> None:
    warm = LocalChain(tmp_path / "warm")
    cold = LocalChain(tmp_path / "cold")
    try:
        txs = _txs(warm, 20)
        txs.append(txs[3])  # a replay inside the block
        for tx in txs[:-1]:
            assert warm.check(tx).code == Code.OK
        assert len(warm.app.decoded) == 20
        hits_before = warm.app.decoded.hits
        warm_codes = [r.code for r in warm.block(txs)]
        assert warm.app.decoded.hits - hits_before == 21
        cold_codes = [r.code for r in cold.block(txs)]
        assert warm_codes == cold_codes
        assert warm_codes[-1] == Code.NONCE_REPLAYED
        assert warm.app_hashes[1] == cold.app_hashes[1]
    finally:
        warm.close()
        cold.close()


def test_recheck_still_applies_state_checks(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path)
    try:
        tx = _txs(chain, 1)[0]
        assert chain.check(tx).code == Code.OK
        assert chain.block([tx])[0].code == Code.OK
        # Same bytes, decoded from the cache: the nonce is now spent.
        assert chain.check(tx).code == Code.NONCE_REPLAYED
    finally:
        chain.close()


def test_rejected_txs_are_not_kept(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path)
    try:
        assert chain.check(b"\x0a\x05ab").code == Code.TX_DECODE
        other = LocalChain(tmp_path / "other", chain_id="other-chain")
        try:
            foreign = _txs(other, 1)[0]
        finally:
            other.close()
        assert chain.check(foreign).code == Code.WRONG_CHAIN_ID
        assert len(chain.app.decoded) == 0
    finally:
        chain.close()


def test_bounds_evict_least_recently_used(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path)
    try:
        txs = _txs(chain, 6)
        signed = [decode_tx(tx, chain.chain_id) for tx in txs]
    finally:
        chain.close()
    by_count = DecodedTxCache(max_entries=3)
    for tx, s in zip(txs, signed, strict=True):
        by_count.put(tx, s, chain.chain_id)
    assert len(by_count) == 3 and txs[2] not in by_count and txs[5] in by_count
    by_bytes = DecodedTxCache(max_bytes=2 * len(txs[0]) + 1)
    by_bytes.put(txs[0], signed[0], chain.chain_id)
    by_bytes.put(txs[1], signed[1], chain.chain_id)
    assert by_bytes.get(txs[0]) is signed[0]  # refreshes txs[0]
    by_bytes.put(txs[2], signed[2], chain.chain_id)
    assert txs[0] in by_bytes and txs[1] not in by_bytes and txs[2] in by_bytes


def test_an_entry_serves_only_the_chain_id_it_passed_under(tmp_path: Path) -> None:
    """State sync gives a node its chain id after CheckTx may have let txs in under none:
    what passed under one chain id is not taken as passed under another."""
    chain = LocalChain(tmp_path)
    try:
        tx = _txs(chain, 1)[0]
        signed = decode_tx(tx, chain.chain_id)
    finally:
        chain.close()
    cache = DecodedTxCache()
    cache.put(tx, signed, "")
    assert cache.get(tx, chain.chain_id) is None and cache.get(tx, "") is signed
    assert cache.get(tx) is signed  # signer and nonce: the same under any chain id
    cache.put(tx, signed, chain.chain_id)  # passed again under the real one: replaced
    assert cache.get(tx, "") is None and cache.get(tx, chain.chain_id) is signed
    assert len(cache) == 1
