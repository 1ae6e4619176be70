"""ABCI Query: reads of committed state, answered with codes from `codes.QueryCode`.

Off the consensus path (the query connection), but served from the same committed LMDB
snapshot the app hash covers, so an answer can be checked against a block's app hash.
Paths:

- `/key`: data is a raw state key (docs/APP_HASH.md); value is the canonical record bytes.
- `/account`: data is a hex public key; value is `{"nonce": n}` (0 for an unknown key).
- `/memory`, `/content`, `/domain`, `/scope`, `/proposal`, `/cocommit` (data: the id or name) and
  `/validators` (no data): the raw canonical record under that key.

With `prove=true` every path above answers the raw record bytes (empty and `NOT_FOUND`
for an absent key, `/account` included), the height H whose app hash (in header H+1)
covers them, and a proof of inclusion or exclusion in `proof_ops`
(`memledger.protocol.proofs`). Value, height and proof come from one LMDB snapshot.

`/mempool/backlog` (data `<signer hex>/<nonce>`) is the exception: it reads this node's
mempool view, not committed state, and is answered by the app itself. The REST API asks it
before it lets a client's tx in (`memledger.consensus.families.accounts.nonces.backlog`).

`/debug/phase_cpu` (no data) is answered by the app too: the CPU time its thread spent
per ABCI method since start (memledger.consensus.wire.phases), for benches; never proven.

A query never takes the node down: any failure inside is answered with `FAILED`.
"""

from __future__ import annotations

import json
import logging

from memledger.consensus.store.state import CanonicalStore
from memledger.protocol import proofs, records
from memledger.protocol.codes import QUERY_CODESPACE, QueryCode
from memledger.protocol.pb import abci_pb2 as pb

log = logging.getLogger(__name__)

BACKLOG_PATH = "/mempool/backlog"
#: The longest key any record has (prefix + 128-byte id + NUL + 64 hex chars, with room).
MAX_QUERY_KEY = 509


def answer(code: QueryCode, height: int, log_line: str = "") -> pb.ResponseQuery:
    """A non-OK answer in the query codespace."""
    return pb.ResponseQuery(code=int(code), log=log_line or code.description, height=height,
                            codespace=QUERY_CODESPACE)


class QueryService:
    """Answers RequestQuery from the committed store."""

    def __init__(self, store: CanonicalStore) -> None:
        self.store = store

    def query(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        """Dispatch by path; never lets a malformed query take the node down."""
        try:
            if req.prove:
                return self.proven(req)
            handler = PATHS.get(req.path)
            if handler is None:
                return answer(QueryCode.UNKNOWN_PATH, self.store.last_height,
                              f"unknown query path {req.path[:64]!r}")
            return handler(self, req)
        except Exception as exc:  # noqa: BLE001 - public RPC input must not kill the node
            log.warning("query %r failed: %r", req.path[:64], exc)
            return answer(QueryCode.FAILED, self.store.last_height)

    def proven(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        """Raw record, height and proof ops for a record path, read from one snapshot."""
        if req.path not in proofs.RECORD_PATHS:
            return answer(QueryCode.UNKNOWN_PATH, self.store.last_height,
                          f"no proofs for query path {req.path[:64]!r}")
        try:
            key = proofs.record_key(req.path, bytes(req.data))
        except ValueError:
            return answer(QueryCode.BAD_REQUEST, self.store.last_height, "malformed query data")
        with self.store.snapshot() as snap:
            height = snap.last_height
            if not 1 <= len(key) <= MAX_QUERY_KEY:
                return answer(QueryCode.BAD_REQUEST, height,
                              f"key must be 1..{MAX_QUERY_KEY} bytes")
            if req.height not in (0, height):
                return answer(QueryCode.NO_SUCH_HEIGHT, height)
            value = snap.get(key)
            proof = snap.prove(key)
        ops = pb.ProofOps(ops=[pb.ProofOp(type=op.type, key=op.key, data=op.data)
                               for op in proofs.encode_ops(key, proof)])
        if value is None:
            resp = answer(QueryCode.NOT_FOUND, height)
            resp.key = key
            resp.proof_ops.CopyFrom(ops)
            return resp
        return pb.ResponseQuery(key=key, value=value, height=height, proof_ops=ops)

    def raw(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        """Unproven read of a named record path (same key mapping as the proven one)."""
        try:
            key = proofs.record_key(req.path, bytes(req.data))
        except ValueError:
            return answer(QueryCode.BAD_REQUEST, self.store.last_height, "malformed query data")
        return self.key(pb.RequestQuery(path="/key", data=key))

    def key(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        height = self.store.last_height
        if not 1 <= len(req.data) <= MAX_QUERY_KEY:
            return answer(QueryCode.BAD_REQUEST, height, f"key must be 1..{MAX_QUERY_KEY} bytes")
        value = self.store.get(bytes(req.data))
        if value is None:
            return answer(QueryCode.NOT_FOUND, height)
        return pb.ResponseQuery(key=req.data, value=value, height=height)

    def account(self, req: pb.RequestQuery) -> pb.ResponseQuery:
        height = self.store.last_height
        try:
            key = bytes.fromhex(req.data.decode())
        except ValueError:
            return answer(QueryCode.BAD_REQUEST, height, "account must be hex")
        raw = self.store.get(records.account_key(key))
        nonce = 0 if raw is None else int(json.loads(raw)["nonce"])
        return pb.ResponseQuery(value=json.dumps({"nonce": nonce}).encode(), height=height)


#: path -> handler; one line per query path.
PATHS = {
    "/key": QueryService.key,
    "/account": QueryService.account,
    "/memory": QueryService.raw,
    "/content": QueryService.raw,
    "/domain": QueryService.raw,
    "/scope": QueryService.raw,
    "/proposal": QueryService.raw,
    "/cocommit": QueryService.raw,
    "/validators": QueryService.raw,
}
