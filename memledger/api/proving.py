"""Proofs for REST reads: raw records and proof ops, as ABCI Query (prove=true) makes them.

When the REST process runs beside its node (a node home), it reads the canonical LMDB
store read-only and builds the same proof ops the app's Query would, both records of a
memory from one snapshot: two ABCI round trips through cometbft per read cost about
three times the read itself (BENCHMARKS.md, "Verified reads"). Without a node home it
asks cometbft (`abci_query` with `prove=true`). Either way the client trusts neither: it
checks the proofs against a header it verified. Light blocks
(`/commit` + `/validators`) are passed through untouched: they are self-authenticating,
so a client can verify everything through this one URL without trusting this node.
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import lmdb

from memledger.api.problems import Problem, not_found
from memledger.consensus.store.snapshot import Snapshot
from memledger.consensus.store.state import CanonicalStore
from memledger.daemon.home import NodeHome
from memledger.protocol.codes import QUERY_CODESPACE, QueryCode
from memledger.protocol.proofs import encode_ops, record_key
from memledger.sdk.light.provider import fetch_rpc_light_block, pruned_lowest
from memledger.sdk.light.reads import record_from_query
from memledger.sdk.rpc import RpcClient, RpcError

#: REST kind -> ABCI query path (the provable single-record paths).
KINDS = {"memory": "/memory", "content": "/content", "account": "/account",
         "domain": "/domain", "scope": "/scope", "proposal": "/proposal",
         "cocommit": "/cocommit", "validators": "/validators"}


def proven_record(rpc: RpcClient, path: str, data: bytes) -> dict[str, Any]:
    """One proven record document (docs/VERIFIED_READS.md); raises on RPC failure."""
    answer = rpc.abci_query(path, data, prove=True)
    if answer.code == QueryCode.BAD_REQUEST and answer.codespace == QUERY_CODESPACE:
        raise Problem(400, "bad_request", answer.log)
    if answer.code not in (0, 1) or answer.codespace not in ("", QUERY_CODESPACE):
        raise RpcError("abci_query", answer.code, f"query {path} failed", answer.log)
    return record_from_query(path, answer.raw)


_stores: dict[Path, CanonicalStore] = {}
_stores_lock = threading.Lock()


def local_store(home: Path | None) -> CanonicalStore | None:
    """The node's canonical store opened read-only (once per process), if it is here."""
    if home is None:
        return None
    path = NodeHome(home).state_dir
    with _stores_lock:
        store = _stores.get(path)
        if store is None and path.exists():
            store = _stores[path] = CanonicalStore(str(path), readonly=True)
        return store


class CommittedHeight:
    """The height the app last committed, read from the node's store where it is here
    (its projection is flushed up to it: the app flushes before LMDB commits). Called
    every few ms by the block follower, so the store is looked up once it exists."""

    def __init__(self, home: Path | None) -> None:
        self.home = home
        self._store: CanonicalStore | None = None

    def __call__(self) -> int | None:
        """The committed height; None where the store is elsewhere or unreadable now."""
        if self._store is None:
            self._store = local_store(self.home)
            if self._store is None:
                return None
        try:
            return self._store.last_height
        except lmdb.Error:
            return None


def _local_records(store: CanonicalStore, queries: list[tuple[str, bytes]]
                   ) -> list[dict[str, Any]]:
    """Proven-record documents for (path, data) pairs, all from one snapshot."""
    with store.snapshot() as snap:
        return _records_from(snap, queries)


def _records_from(snap: Snapshot, queries: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
    out = []
    height = snap.last_height
    for path, data in queries:
        key = record_key(path, data)
        value = snap.get(key)
        ops = encode_ops(key, snap.prove(key))
        out.append({"path": path, "key": _b64(key),
                    "value": None if value is None else _b64(value), "height": height,
                    "proof_ops": [{"type": o.type, "key": _b64(o.key),
                                   "data": _b64(o.data)} for o in ops]})
    return out


class SettledViews:
    """Read views of the last few committed heights, kept open so a proof can be made at
    the newest height H whose next header exists (the app committed H+1, so block H+1,
    whose header carries state H's app hash, is committed). A client then verifies at
    once instead of waiting a block for header H+1 (docs/VERIFIED_READS.md). Refreshed
    by the block follower at each new height; at most KEEP views (LMDB read txns) open."""

    KEEP = 3

    def __init__(self, store: CanonicalStore) -> None:
        self.store = store
        self._lock = threading.Lock()  # one LMDB txn is not used by two threads at once
        self._views: list[Snapshot] = []

    def refresh(self) -> None:
        snap = self.store.open_snapshot()
        with self._lock:
            if self._views and self._views[-1].last_height == snap.last_height:
                snap.close()
                return
            self._views.append(snap)
            while len(self._views) > self.KEEP:
                self._views.pop(0).close()

    def records(self, queries: list[tuple[str, bytes]]) -> list[dict[str, Any]] | None:
        """The records proven at the newest settled height, or None (no such view)."""
        with self.store.snapshot() as now:
            top = now.last_height
        with self._lock:
            for snap in reversed(self._views):
                if snap.last_height < top:
                    return _records_from(snap, queries)
        return None

    def close(self) -> None:
        with self._lock:
            for snap in self._views:
                snap.close()
            self._views.clear()


_settled: dict[Path, SettledViews] = {}


def settled_views(home: Path | None) -> SettledViews | None:
    """The process's settled views of the node's store, if the store is here."""
    store = local_store(home)
    if store is None or home is None:
        return None
    with _stores_lock:
        return _settled.setdefault(NodeHome(home).state_dir, SettledViews(store))


def _proven(store: CanonicalStore, home: Path | None, queries: list[tuple[str, bytes]],
            fresh: bool) -> list[dict[str, Any]]:
    if not fresh:
        views = settled_views(home)
        found = views.records(queries) if views is not None else None
        if found is not None:
            return found
    return _local_records(store, queries)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def record_proof(rpc: RpcClient, path: str, data: bytes,
                 home: Path | None = None, fresh: bool = True) -> dict[str, Any]:
    """One proven record (local store when there is one), for `?prove=true` routes;
    `fresh=False`: at the newest height whose next header exists (SettledViews)."""
    store = local_store(home)
    if store is not None:
        return _proven(store, home, [(path, data)], fresh)[0]
    return proven_record(rpc, path, data)


def memory_proof(rpc: RpcClient, memory_id: str, home: Path | None = None,
                 fresh: bool = True) -> dict[str, Any]:
    """Record and content proofs for one memory (local store when there is one)."""
    ident = memory_id.encode()
    store = local_store(home)
    if store is not None:
        return {"records": _proven(store, home, [("/memory", ident), ("/content", ident)],
                                   fresh)}
    return {"records": [proven_record(rpc, "/memory", ident),
                        proven_record(rpc, "/content", ident)]}


def light_block(rpc: RpcClient, height: int | None) -> dict[str, Any]:
    """`{"signed_header", "validators"}` at height (latest when None), unverified."""
    latest = rpc.latest_height()
    if height is None:
        height = latest
    elif height > latest:
        raise not_found("light block", str(height))
    try:
        return fetch_rpc_light_block(rpc, height)
    except RpcError as exc:
        lowest = pruned_lowest(exc)
        if lowest is None:
            raise
        raise Problem(410, "height_pruned", f"this node pruned block {height} (block pruning: "
                      f"its lowest block is {lowest})", lowest_height=lowest) from None
