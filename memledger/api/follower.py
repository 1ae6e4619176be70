"""One block follower per API process: every commit waiter answered from each block.

Before, each `wait=commit` request polled cometbft's tx index on its own, backing off to
0.5 s: latency up to half a second above the block and polling work that grew with the
number of waiters. Here one task watches the app's committed height (the app has
committed the block and flushed its projection, so a reader sees the memory) and reads
each new block once (`block` for the tx bytes, `block_results` for their results); every
waiter whose tx is in it is answered at once. Cost per block, not per waiter.

The committed height is read from the node's canonical store where it is on this machine
(`committed`: the app flushes its projection before LMDB commits, so the store's height
is the app's): asking `abci_info` every 15 ms went REST process -> cometbft -> app and
back ~67 times a second, on an idle node ~7% of a core over the three processes. Where
the store is not here (an API in front of a remote node), `abci_info` is asked.

Correctness does not rest on the follower: a waiter only ever hears of a tx from a block
the app committed, and while the follower is down (or behind) waiters fall back to
looking the tx up themselves (broadcast.wait_for_block).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import httpx

from memledger.sdk.rpc import AsyncRpcClient, RpcError

log = logging.getLogger("memledger.api")

#: how often the committed height is looked at (a read of the local store, or one
#: `abci_info` where the store is elsewhere)
POLL_S = 0.015
#: at most this many missed heights are read back after an outage; older waiters find
#: their tx by their own lookups
MAX_CATCH_UP = 64


class Waiters:
    """tx hash (lower hex) -> futures of the requests waiting for its block."""

    def __init__(self) -> None:
        self._by_hash: dict[str, list[asyncio.Future[dict[str, Any]]]] = {}

    def add(self, tx_hash: str) -> asyncio.Future[dict[str, Any]]:
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._by_hash.setdefault(tx_hash, []).append(fut)
        return fut

    def discard(self, tx_hash: str, fut: asyncio.Future[dict[str, Any]]) -> None:
        futs = self._by_hash.get(tx_hash)
        if futs is None:
            return
        if fut in futs:
            futs.remove(fut)
        if not futs:
            del self._by_hash[tx_hash]

    def resolve(self, height: int, txs_b64: list[str], results: list[dict[str, Any]]) -> int:
        """Answer every waiter of a tx in block `height` with a /tx-shaped document (the
        block's i-th tx and i-th result); the number of waiters answered."""
        answered = 0
        if not self._by_hash:
            return 0
        for i, tx_b64 in enumerate(txs_b64):
            tx_hash = hashlib.sha256(base64.b64decode(tx_b64)).hexdigest()
            futs = self._by_hash.pop(tx_hash, None)
            if not futs:
                continue
            result = results[i] if i < len(results) else {}
            found = {"hash": tx_hash, "height": height, "index": i, "tx_result": result}
            for fut in futs:
                if not fut.done():
                    fut.set_result(found)
                    answered += 1
        return answered

    def __len__(self) -> int:
        return sum(len(f) for f in self._by_hash.values())


class BlockFollower:
    """The committed height and each committed block's tx outcomes, for waiters and for
    whoever needs to know a block went by (`on_height`)."""

    def __init__(self, rpc: AsyncRpcClient, *, poll_s: float = POLL_S,
                 committed: Callable[[], int | None] | None = None) -> None:
        self.rpc = rpc
        self.poll_s = poll_s
        #: the app's committed height read locally, or None (then `abci_info` is asked)
        self.committed = committed
        self.waiters = Waiters()
        self.height = 0  # the last height whose block was read (0: not following)
        self.healthy = False
        self.on_height: list[Callable[[int], None]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        self.healthy = False

    async def step(self) -> None:
        """Read every block the app committed since the last step (raises on RPC failure)."""
        top = None if self.committed is None else self.committed()
        if top is None:
            top = await self.rpc.app_height()
        if self.height == 0 or top - self.height > MAX_CATCH_UP:
            self.height = top  # waiters of skipped heights find their tx themselves
        while self.height < top:
            height = self.height + 1
            block, results = await asyncio.gather(self.rpc.block(height),
                                                  self.rpc.block_results(height))
            txs = ((block.get("block") or {}).get("data") or {}).get("txs") or []
            self.waiters.resolve(height, txs, results.get("txs_results") or [])
            self.height = height
        self.healthy = True
        for listener in self.on_height:
            listener(self.height)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self.step()
                failures = 0
                await asyncio.sleep(self.poll_s)
            except asyncio.CancelledError:
                raise
            except (httpx.HTTPError, RpcError, ValueError, KeyError, TypeError) as exc:
                self.healthy = False
                failures += 1
                if failures == 1:
                    log.warning("block follower: %s; commit waits poll until it recovers",
                                exc)
                await asyncio.sleep(min(0.1 * failures, 2.0))
