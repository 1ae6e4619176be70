"""Proofs for REST reads: raw records and proof ops fetched over ABCI Query (prove=true).

The REST process asks its own cometbft (`abci_query` with `prove=true`) rather than
reading LMDB itself, so what it serves is exactly what any CometBFT client would get,
and the app's one-snapshot rule (value, height and proof together) applies. Light blocks
(`/commit` + `/validators`) are passed through untouched: they are self-authenticating,
so a client can verify everything through this one URL without trusting this node.
"""

from __future__ import annotations

from typing import Any

from memledger.consensus.codes import QUERY_CODESPACE, QueryCode
from memledger.light.provider import fetch_rpc_light_block
from memledger.light.reads import record_from_query
from memledger.node.api.problems import Problem, not_found
from memledger.node.rpc import RpcClient, RpcError

#: REST kind -> ABCI query path (the provable single-record paths).
KINDS = {"memory": "/memory", "content": "/content", "account": "/account",
         "domain": "/domain", "scope": "/scope", "proposal": "/proposal",
         "validators": "/validators"}


def proven_record(rpc: RpcClient, path: str, data: bytes) -> dict[str, Any]:
    """One proven record document (docs/VERIFIED_READS.md); raises on RPC failure."""
    answer = rpc.abci_query(path, data, prove=True)
    if answer.code == QueryCode.BAD_REQUEST and answer.codespace == QUERY_CODESPACE:
        raise Problem(400, "bad_request", answer.log)
    if answer.code not in (0, 1) or answer.codespace not in ("", QUERY_CODESPACE):
        raise RpcError("abci_query", answer.code, f"query {path} failed", answer.log)
    return record_from_query(path, answer.raw)


def memory_proof(rpc: RpcClient, memory_id: str) -> dict[str, Any]:
    """Record and content proofs for one memory."""
    ident = memory_id.encode()
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
