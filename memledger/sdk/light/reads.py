"""Verified reads: a record proof checked against a light-client-verified app hash.

The JSON shape of a proven record (REST `proof.records[]`, also built from RPC
`abci_query` answers by `record_from_query`):
`{"path", "key": b64, "value": b64 | null, "height": H, "proof_ops": [{"type", "key",
"data"} (b64)]}`. The app hash that covers state at H is in header H+1.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from pathlib import Path
from typing import Any

from memledger.protocol.proofs import ProofOp, record_key, verify_ops
from memledger.sdk.light.client import LightClient, TrustRoot, check_height
from memledger.sdk.light.errors import ProofError
from memledger.sdk.light.header import LightBlock
from memledger.sdk.light.provider import Provider
from memledger.sdk.light.store import TrustedStore
from memledger.sdk.light.verify import TrustOptions

#: Fields of the API's memory object that come from the canonical record, checked one by
#: one against the proven record (content is checked against the proven content).
MEMORY_FIELDS = ("id", "domain", "author", "type", "content_hash", "confidence_ppm", "tags",
                 "status", "submitted_height", "submitted_time_ns", "decided_height",
                 "cocommit", "tx", "history", "ballot",
                 # v10+ (absent from older records: None)
                 "supersedes", "superseded_by", "pending_correction", "origin", "epoch")


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise ProofError("malformed", f"{what} is not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProofError("malformed", f"{what} is not base64") from exc


def record_from_query(path: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A proven-record document from an RPC `abci_query` response (`response` object)."""
    ops = (raw.get("proofOps") or raw.get("proof_ops") or {}).get("ops") or []
    code = int(raw.get("code", 0))
    return {"path": path, "key": raw.get("key") or "",
            "value": (raw.get("value") or "") if code == 0 else None,
            "height": int(raw.get("height", 0)),
            "proof_ops": [{"type": o.get("type", ""), "key": o.get("key") or "",
                           "data": o.get("data") or ""} for o in ops]}


def verify_record(lc: LightClient, doc: Any, path: str, data: bytes) -> tuple[bytes | None, int]:
    """Check one proven record for the query (`path`, `data`) the client meant to ask.

    The key is derived here from what the caller asked, never taken from the response, so
    a node cannot answer with a proof about some other record. Returns (value or None for
    a proven absence, height H).
    """
    if not isinstance(doc, dict):
        raise ProofError("missing", f"no proof for {path}")
    key = record_key(path, data)
    height = doc.get("height")
    if isinstance(height, bool) or not isinstance(height, int) or height < 1:
        raise ProofError("malformed", f"proof for {path} has no valid height")
    value = None if doc.get("value") is None else _b64(doc["value"], "value")
    ops_doc = doc.get("proof_ops")
    if not isinstance(ops_doc, list):
        raise ProofError("malformed", f"proof for {path} has no proof ops")
    ops = [ProofOp(str(o.get("type", "")) if isinstance(o, dict) else "",
                   _b64(o.get("key", ""), "op key") if isinstance(o, dict) else b"",
                   _b64(o.get("data", ""), "op data") if isinstance(o, dict) else b"")
           for o in ops_doc]
    if len(ops) != 2 or ops[0].key != key:
        raise ProofError("malformed", f"proof for {path} is not two ops for the asked key")
    lb: LightBlock = lc.verify_to(height + 1)
    check_height(lb, height + 1)  # the app hash of state H is in header H+1, no other
    if not verify_ops(lb.header.app_hash, key, value, ops):
        raise ProofError("mismatch", f"{path} {data[:64]!r}: proof does not match the app hash "
                                     f"of height {height} (header {height + 1})")
    return value, height


def verify_memory(lc: LightClient, memory_id: str, served: dict[str, Any] | None,
                  proof: Any) -> dict[str, Any]:
    """The memory as proven (API object shape), or ProofError if the served one differs.

    `served` is the memory object the node returned (from its SQL projection); every
    field that the canonical record fixes must equal the proven value, and the content
    must be byte-for-byte the proven content.
    """
    if not isinstance(proof, dict) or not isinstance(proof.get("records"), list):
        raise ProofError("missing", f"memory {memory_id!r}: the node returned no proof")
    by_path = {r.get("path"): r for r in proof["records"] if isinstance(r, dict)}
    ident = memory_id.encode()
    rec_raw, height = verify_record(lc, by_path.get("/memory"), "/memory", ident)
    if rec_raw is None:
        if served is not None:
            raise ProofError("served_differs", f"memory {memory_id!r} is served but proven "
                                               f"absent at height {height}")
        raise ProofError("absent", f"memory {memory_id!r} is proven absent at height {height}")
    content_raw, _ = verify_record(lc, by_path.get("/content"), "/content", ident)
    if content_raw is None:
        raise ProofError("mismatch", f"memory {memory_id!r} has no proven content")
    record = json.loads(rec_raw)
    proven = proven_memory(record, content_raw)
    if served is not None:
        for name in (*MEMORY_FIELDS, "content", "scope", "corroborators", "coauthors"):
            if served.get(name) != proven.get(name):
                raise ProofError("served_differs",
                                 f"memory {memory_id!r}: served {name} differs from the "
                                 f"record committed at height {height}")
    proven["verified_height"] = height
    return proven


class ReadVerifier:
    """A light client plus the record checks: what a client needs for verified reads."""

    def __init__(self, root: TrustRoot, provider: Provider, *, store_path: Path | None = None,
                 options: TrustOptions | None = None, chain_id: str | None = None) -> None:
        self.light = LightClient(provider, root, chain_id=chain_id,
                                 store=TrustedStore(store_path), options=options)
        self._lock = threading.Lock()

    def memory(self, memory_id: str, served: dict[str, Any] | None,
               proof: Any) -> dict[str, Any]:
        with self._lock:  # one light client state; verification is CPU-bound anyway
            return verify_memory(self.light, memory_id, served, proof)

    def record(self, doc: Any, path: str, data: bytes) -> tuple[bytes | None, int]:
        with self._lock:
            return verify_record(self.light, doc, path, data)


def proven_memory(record: dict[str, Any], content: bytes) -> dict[str, Any]:
    """The API memory object built only from canonical bytes."""
    ballot = record.get("ballot")
    return {
        **{name: record.get(name) for name in MEMORY_FIELDS},
        "content": content.decode(),
        "confidence": record["confidence_ppm"] / 1_000_000,
        "scope": None if ballot is None else ballot.get("scope"),
        "corroborators": record.get("corroborators", []),
        "coauthors": record.get("coauthors"),
    }


__all__ = ["MEMORY_FIELDS", "ReadVerifier", "proven_memory", "record_from_query",
           "verify_memory", "verify_record"]
