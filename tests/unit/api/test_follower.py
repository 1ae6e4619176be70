"""The block follower answers each commit waiter from the block that holds its tx, and
only from a block the app committed."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from memledger.api import proving
from memledger.api.follower import MAX_CATCH_UP, BlockFollower, Waiters
from memledger.daemon.home import NodeHome
from memledger.devtools.chain import LocalChain
from memledger.protocol.pb import abci_pb2 as pb


def _b64(tx: bytes) -> str:
    return base64.b64encode(tx).decode()


def _hash(tx: bytes) -> str:
    return hashlib.sha256(tx).hexdigest()


class FakeRpc:
    """A chain whose app committed `height`; blocks hold the txs given per height."""

    def __init__(self) -> None:
        self.height = 0
        self.blocks: dict[int, list[bytes]] = {}
        self.reads: list[int] = []

    def commit(self, *txs: bytes) -> None:
        self.height += 1
        self.blocks[self.height] = list(txs)

    async def app_height(self) -> int:
        return self.height

    async def block(self, height: int) -> dict[str, Any]:
        assert height <= self.height, "a block the app has not committed was read"
        self.reads.append(height)
        return {"block": {"data": {"txs": [_b64(t) for t in self.blocks[height]]}}}

    async def block_results(self, height: int) -> dict[str, Any]:
        return {"txs_results": [{"code": 7 if t.startswith(b"bad") else 0, "log": t.decode()}
                                for t in self.blocks[height]]}


def test_waiters_are_answered_by_their_own_tx_and_result() -> None:
    async def go() -> None:
        waiters = Waiters()
        a, b = waiters.add(_hash(b"tx-a")), waiters.add(_hash(b"bad-b"))
        other = waiters.add(_hash(b"tx-elsewhere"))
        answered = waiters.resolve(5, [_b64(b"tx-x"), _b64(b"bad-b"), _b64(b"tx-a")],
                                   [{"code": 0}, {"code": 7}, {"code": 0, "log": "a"}])
        assert answered == 2
        assert a.result() == {"hash": _hash(b"tx-a"), "height": 5, "index": 2,
                              "tx_result": {"code": 0, "log": "a"}}
        assert b.result()["tx_result"]["code"] == 7
        assert not other.done() and len(waiters) == 1
        waiters.discard(_hash(b"tx-elsewhere"), other)
        assert len(waiters) == 0
    asyncio.run(go())


def test_two_waiters_of_one_tx_both_hear() -> None:
    async def go() -> None:
        waiters = Waiters()
        first, second = waiters.add(_hash(b"t")), waiters.add(_hash(b"t"))
        waiters.resolve(1, [_b64(b"t")], [{"code": 0}])
        assert first.result() == second.result()
    asyncio.run(go())


def test_follower_reads_each_committed_block_once_and_no_further() -> None:
    async def go() -> None:
        rpc = FakeRpc()
        rpc.commit(b"old")
        follower = BlockFollower(rpc)  # type: ignore[arg-type]
        await follower.step()
        assert follower.healthy and follower.height == 1 and rpc.reads == []  # starts at top
        waiter = follower.waiters.add(_hash(b"mine"))
        await follower.step()
        assert not waiter.done()  # nothing committed yet: never answered early
        rpc.commit(b"other")
        rpc.commit(b"x", b"mine")
        seen: list[int] = []
        follower.on_height.append(seen.append)
        await follower.step()
        assert waiter.result()["height"] == 3 and rpc.reads == [2, 3] and seen == [3]
        await follower.step()
        assert rpc.reads == [2, 3]  # per block, not per step nor per waiter
    asyncio.run(go())


def test_after_a_long_outage_the_follower_jumps_and_waiters_look_for_themselves() -> None:
    async def go() -> None:
        rpc = FakeRpc()
        follower = BlockFollower(rpc)  # type: ignore[arg-type]
        await follower.step()
        for _ in range(MAX_CATCH_UP + 1):
            rpc.commit(b"t")
        await follower.step()
        assert follower.height == rpc.height and rpc.reads == []
    asyncio.run(go())


def test_a_failing_rpc_marks_the_follower_unhealthy() -> None:
    class Down(FakeRpc):
        async def app_height(self) -> int:
            import httpx
            raise httpx.ConnectError("down")

    async def go() -> None:
        follower = BlockFollower(Down(), poll_s=0.001)  # type: ignore[arg-type]
        follower.healthy = True
        follower.start()
        await asyncio.sleep(0.05)
        assert not follower.healthy
        await follower.stop()
    asyncio.run(go())


@pytest.mark.parametrize("before,limit,ok", [(0, 4, True), (2, 4, True), (3, 4, True),
                                              (4, 4, False)])
def test_backlog_view_lets_through_only_what_the_app_would(before: int, limit: int,
                                                           ok: bool) -> None:
    """The app answered "ok" with `before` pending txs, CheckTx then took the tx: the
    next one passes the count while the signer's pending txs stay within the limit."""
    from memledger.api.backlog import MAX_AGE_BLOCKS, BacklogView
    from memledger.consensus.families.accounts.nonces import backlog
    view = BacklogView()
    view.new_height(9)
    view.answered(b"k", 100, 9, pending=before, newer=0, limit=limit, verdict="ok")
    view.admitted(b"k", 100)
    pending = list(range(50, 50 + before)) + [100]
    app_says = backlog([], pending, 101, window=4 * limit).verdict
    assert view.lets_through(b"k", 101) is ok is (app_says == "ok")
    assert not view.lets_through(b"k", 100)  # not above every known nonce: ask the app
    view.new_height(10)  # a block can only take pending txs away: the count stands
    assert view.lets_through(b"k", 101) is ok
    view.new_height(9 + MAX_AGE_BLOCKS + 1)
    assert not view.lets_through(b"k", 101)  # too old: ask again


def test_backlog_view_never_counts_from_a_refusal_or_a_behind_answer() -> None:
    from memledger.api.backlog import BacklogView
    view = BacklogView()
    view.new_height(3)
    view.answered(b"k", 5, 3, pending=0, newer=2, limit=4, verdict="ok")
    assert not view.lets_through(b"k", 6)
    view.answered(b"k", 5, 3, pending=9, newer=0, limit=4, verdict="full")
    assert not view.lets_through(b"k", 6)
    view.answered(b"k", 5, 4, pending=0, newer=0, limit=4, verdict="ok")
    assert not view.lets_through(b"k", 6)  # the follower has not seen that height yet
    view.new_height(4)
    assert view.lets_through(b"k", 6)


def test_follower_reads_the_committed_height_locally_where_it_can() -> None:
    async def go() -> None:
        rpc = FakeRpc()
        asked: list[int] = []
        ask = rpc.app_height

        async def counted() -> int:
            asked.append(1)
            return await ask()
        rpc.app_height = counted  # type: ignore[method-assign]
        local: list[int | None] = [None]
        follower = BlockFollower(rpc, committed=lambda: local[0])  # type: ignore[arg-type]
        rpc.commit(b"first")
        await follower.step()  # the store is not here (yet): abci_info is asked
        assert asked == [1] and follower.height == 1
        local[0] = 1  # the store is here now
        waiter = follower.waiters.add(_hash(b"second"))
        rpc.commit(b"second")
        await follower.step()  # cometbft would say 2, the store says 1: nothing is read
        assert not waiter.done() and rpc.reads == []
        local[0] = 2
        await follower.step()
        assert waiter.result()["height"] == 2 and rpc.reads == [2]
        assert asked == [1]  # once the store answers, cometbft is not asked
    asyncio.run(go())


def test_the_committed_height_read_from_the_store_is_the_apps(tmp_path: Path) -> None:
    committed = proving.CommittedHeight(tmp_path)
    assert committed() is None  # no store here
    chain = LocalChain(tmp_path / "data")  # the store of a node home at tmp_path
    try:
        for _ in range(3):
            chain.block([])
        info = chain.app.info(pb.RequestInfo())
    finally:
        chain.close()
    state_dir = NodeHome(tmp_path).state_dir
    try:
        assert committed() == info.last_block_height == 3
    finally:
        proving._stores.pop(state_dir).close()
