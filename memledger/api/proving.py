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

from memledger.api.problems import Problem, not_found
from memledger.consensus.store.state import CanonicalStore
from memledger.daemon.home import NodeHome
from memledger.protocol.codes import QUERY_CODESPACE, QueryCode
from memledger.protocol.proofs import encode_ops, record_key
from memledger.sdk.light.provider import fetch_rpc_light_block
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


def _local_records(store: CanonicalStore, queries: list[tuple[str, bytes]]
                   ) -> list[dict[str, Any]]:
    """Proven-record documents for (path, data) pairs, all from one snapshot."""
    out = []
    with store.snapshot() as snap:
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def record_proof(rpc: RpcClient, path: str, data: bytes,
                 home: Path | None = None) -> dict[str, Any]:
    """One proven record (local store when there is one), for `?prove=true` routes."""
    store = local_store(home)
    if store is not None:
        return _local_records(store, [(path, data)])[0]
    return proven_record(rpc, path, data)


def memory_proof(rpc: RpcClient, memory_id: str, home: Path | None = None) -> dict[str, Any]:
    """Record and content proofs for one memory (local store when there is one)."""
    ident = memory_id.encode()
    store = local_store(home)
    if store is not None:
        return {"records": _local_records(store, [("/memory", ident), ("/content", ident)])}
    return {"records": [proven_record(rpc, "/memory", ident),
                        proven_record(rpc, "/content", ident)]}


def light_block(rpc: RpcClient, height: int | None) -> dict[str, Any]:
    """`{"signed_header", "validators"}` at height (latest when None), unverified."""
    latest = rpc.latest_height()
    if height is None:
        height = latest
    elif height > latest:
        raise not_found("light block", str(height))
    return fetch_rpc_light_block(rpc, height)
