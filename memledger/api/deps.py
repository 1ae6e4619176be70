"""Per-app shared resources (engine, RPC clients, metrics) and their FastAPI dependencies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
import httpx
import sqlalchemy as sa
from fastapi import Depends, Request
from sqlalchemy.engine import Engine

from memledger.api import proving
from memledger.api.backlog import BacklogView
from memledger.api.follower import BlockFollower
from memledger.api.metrics import ApiMetrics
from memledger.api.problems import Problem
from memledger.api.read_process import THE_STATE, ReadProcess
from memledger.api.readgate import ReadGate
from memledger.api.settings import ApiSettings
from memledger.api.signer_locks import SignerLocks
from memledger.recall.indexer import Indexer
from memledger.recall.text_indexer import TextIndexer
from memledger.sdk.rpc import AsyncRpcClient, RpcClient, RpcError
from memledger.sqlite_damage import is_damaged

T = TypeVar("T")


@dataclass
class ApiState:
    """Everything routes share; built once by the app factory."""

    settings: ApiSettings
    engine: Engine
    rpc: RpcClient
    probe: RpcClient  # short timeout, for /ready and /status
    metrics: ApiMetrics
    recall: Indexer | None = None  # the vector index follower, when an embedder is set
    words: TextIndexer | None = None  # the word index follower (ranked text search)
    admissions: SignerLocks = field(default_factory=SignerLocks)
    backlog: BacklogView = field(default_factory=BacklogView)
    reads: ReadGate = field(default_factory=lambda: ReadGate(4, 16))
    follower: BlockFollower | None = None  # running while the app's lifespan runs
    #: the child that holds the indexes and runs projection reads (settings.read_process);
    #: recall and words are then None here and live there
    read_process: ReadProcess | None = None
    _aio: tuple[Any, AsyncRpcClient] | None = None

    @property
    def has_recall(self) -> bool:
        """Whether this node searches by meaning (it has an embedder's index)."""
        if self.read_process is not None:
            return self.read_process.ready.has_recall
        return self.recall is not None

    def aio(self) -> AsyncRpcClient:
        """The async RPC client of the running event loop (a pool is bound to its loop;
        a test client may run the app on more than one loop in turn)."""
        loop = asyncio.get_running_loop()
        if self._aio is None or self._aio[0] is not loop:
            self._aio = (loop, AsyncRpcClient(self.settings.rpc_url,
                                              timeout=self.settings.rpc_timeout_s))
        return self._aio[1]

    def following(self) -> BlockFollower | None:
        """The block follower, when it runs on this loop and is keeping up."""
        f = self.follower
        if f is None or not f.healthy or self._aio is None or f.rpc is not self._aio[1]:
            return None
        return f

    async def start_follower(self) -> None:
        self.follower = BlockFollower(self.aio(),
                                      committed=proving.CommittedHeight(self.settings.home))
        self.follower.on_height.append(self.backlog.new_height)
        views = proving.settled_views(self.settings.home)
        if views is not None:
            seen = [0]

            def refresh(height: int) -> None:
                if height != seen[0]:
                    seen[0] = height
                    views.refresh()
            self.follower.on_height.append(refresh)
        self.follower.start()

    async def stop_follower(self) -> None:
        if self.follower is not None:
            await self.follower.stop()
        views = proving.settled_views(self.settings.home)
        if views is not None:
            views.close()
        if self._aio is not None:
            await self._aio[1].aclose()
            self._aio = None

    def close(self) -> None:
        self.reads.close()
        if self.read_process is not None:
            self.read_process.close()
        if self.recall is not None:
            self.recall.stop()
        if self.words is not None:
            self.words.stop()
        self.rpc.close()
        self.probe.close()
        self.engine.dispose()


async def get_state(request: Request) -> ApiState:
    """Async on purpose: a sync dependency would cost a worker-thread hop per request."""
    state: ApiState = request.app.state.memledger
    return state


State = Annotated[ApiState, Depends(get_state)]


def _with_connection(state: ApiState, func: Callable[..., T], *args: Any) -> T:
    """A projection outage (file missing, server down, connection lost) is a 503, and so
    is a damaged SQLite file (the node moves it aside and rebuilds it at its next start):
    neither is the client's fault nor a bug of this code, which a 500 would say."""
    try:
        with state.engine.connect() as conn:
            return func(conn, *args)
    except sa.exc.DatabaseError as exc:
        if not isinstance(exc, sa.exc.OperationalError) and not is_damaged(exc):
            raise
        raise Problem(503, "projection_unavailable",
                      f"the SQL projection is not readable: {exc.orig}") from None


async def read(state: ApiState, func: Callable[..., T], *args: Any) -> T:
    """Run `func(conn, *args)` on a pooled read connection in one worker-thread hop.

    Routes are async and do all their blocking work here, instead of paying a thread
    hop for every sync dependency, the endpoint and response validation separately.
    With a read process, the read runs there, on its connections and indexes; `state`
    among `args` stands for its state.
    """
    if state.read_process is None:
        return await state.reads.run(_with_connection, state, func, *args)
    remote = tuple(THE_STATE if a is state else a for a in args)
    return await state.reads.run(state.read_process.run, _with_connection, THE_STATE,
                                 func, *remote)


async def rpc_call(func: Callable[..., T], *args: Any, reads: ReadGate | None = None) -> T:
    """Run a blocking RPC call off the event loop (on the reads' threads when `reads` is
    given, else on the shared worker threads); unreachable cometbft becomes a 503."""
    try:
        if reads is not None:
            return await reads.run(func, *args)
        return await anyio.to_thread.run_sync(partial(func, *args))
    except httpx.HTTPError as exc:
        raise Problem(503, "cometbft_unavailable",
                      f"cometbft RPC is not reachable: {type(exc).__name__}") from None
    except RpcError as exc:
        raise Problem(502, "cometbft_error", f"cometbft RPC error: {exc.message} {exc.data}"
                      .strip()) from None
