"""Rechecks answered from the last check: the handler runs again only when the block
wrote something the check read; the nonce rule runs every time."""

from __future__ import annotations

from pathlib import Path

import pytest

from memledger.consensus.families import registry
from memledger.consensus.gate.recheck import RecheckMemo
from memledger.consensus.versions import LATEST_APP_VERSION
from memledger.protocol.codes import Code
from memledger.protocol.pb import abci_pb2 as pb
from tests.support.chain import LocalChain, seeded_key

ALICE = seeded_key("recheck-alice")
BOB = seeded_key("recheck-bob")
CAROL = seeded_key("recheck-carol")


def recheck(chain: LocalChain, tx: bytes) -> pb.ResponseCheckTx:
    return chain.app.check_tx(pb.RequestCheckTx(tx=tx, type=pb.RECHECK))


def warm_chain(path: Path) -> LocalChain:
    """Past the genesis block (which writes what every check reads) and with the shared
    domain's record written (which the first memory in it does)."""
    chain = LocalChain(path, app_state={"app_version": LATEST_APP_VERSION})
    assert [r.code for r in chain.block([
        chain.builder(seeded_key("recheck-warm")).submit(1, "rm-warm", "first")])] == [0]
    return chain


@pytest.fixture
def handler_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every handler run (CheckTx, recheck or block), by kind."""
    calls: list[str] = []
    original = registry.handler_for

    def counting(kind: str, version: int):  # type: ignore[no-untyped-def]
        handler = original(kind, version)

        def run(ctx, msg):  # type: ignore[no-untyped-def]
            calls.append(kind)
            return handler(ctx, msg)
        return run

    monkeypatch.setattr(registry, "handler_for", counting)
    return calls


def test_a_recheck_the_block_left_alone_skips_the_handler(
        tmp_path: Path, handler_calls: list[str]) -> None:
    chain = warm_chain(tmp_path)
    try:
        a1, a2 = (chain.builder(ALICE).submit(n, f"rm-a{n}", "alice") for n in (1, 2))
        b1 = chain.builder(BOB).submit(1, "rm-b1", "bob")
        assert [chain.check(tx).code for tx in (a1, a2, b1)] == [0, 0, 0]
        # The block advances Alice's account: her other tx needs only the nonce rule again.
        assert [r.code for r in chain.block([a1])] == [0]
        handler_calls.clear()
        assert [recheck(chain, tx).code for tx in (a2, b1)] == [0, 0]
        assert handler_calls == [] and chain.app.rechecks.skipped == 2
        # The nonce rule still sees the mempool: a second copy of a2 is refused.
        assert recheck(chain, a2).code == Code.NONCE_PENDING
        # A failed recheck forgets the tx: were it checked again, it would run in full.
        assert [r.code for r in chain.block([b1])] == [0]
        assert recheck(chain, a2).code == 0 and handler_calls == ["memory_submit"] * 2
        assert chain.app.rechecks.skipped == 3
    finally:
        chain.close()


def test_a_block_that_wrote_what_the_check_read_reruns_it(
        tmp_path: Path, handler_calls: list[str]) -> None:
    chain = warm_chain(tmp_path)
    try:
        mine = chain.builder(ALICE).submit(1, "rm-contested", "alice's")
        theirs = chain.builder(CAROL).submit(1, "rm-contested", "carol's")
        assert chain.check(mine).code == 0
        assert [r.code for r in chain.block([theirs])] == [0]  # never in Alice's mempool
        handler_calls.clear()
        assert recheck(chain, mine).code == Code.MEMORY_ID_CONFLICT
        assert handler_calls == ["memory_submit"] and chain.app.rechecks.skipped == 0
        # And the nonce rule alone refuses what the chain spent.
        replayed = chain.builder(CAROL).submit(1, "rm-other", "carol again")
        assert chain.check(replayed).code == Code.NONCE_REPLAYED
    finally:
        chain.close()


def test_a_replayed_tx_is_dropped_by_the_nonce_rule(tmp_path: Path) -> None:
    chain = warm_chain(tmp_path)
    try:
        a1 = chain.builder(ALICE).submit(1, "rm-r1", "alice")
        assert chain.check(a1).code == 0
        assert [r.code for r in chain.block([a1])] == [0]
        # a1 is committed (CometBFT would not recheck it, but if asked): its nonce is spent.
        assert recheck(chain, a1).code == Code.NONCE_REPLAYED
    finally:
        chain.close()


def test_memo_entries_hold_for_the_next_height_and_version_only() -> None:
    memo = RecheckMemo(max_entries=2)
    memo.remember(b"t1", 5, 9, {b"mem/x"})
    memo.committed(6, [b"acct/y"])
    assert not memo.unchanged(b"t1", 6, 10)  # another app version
    assert memo.unchanged(b"t1", 6, 9)
    assert memo.unchanged(b"t1", 6, 9)  # again at the same height
    assert not memo.unchanged(b"t1", 8, 9)  # a height skipped
    memo.committed(7, [b"mem/x"])
    assert not memo.unchanged(b"t1", 7, 9)  # the block wrote what it read
    memo.remember(b"t2", 6, 9, set())
    memo.remember(b"t3", 6, 9, set())
    memo.remember(b"t4", 6, 9, set())
    assert len(memo) == 2 and not memo.unchanged(b"t2", 7, 9)  # evicted
    assert memo.unchanged(b"t4", 7, 9) and memo.skipped == 3
