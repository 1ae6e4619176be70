"""The bundle's line format, in one canonical encoding.

Every line is compact JSON with sorted keys and ASCII only, and a reader re-encodes what
it parsed and requires the very same bytes. So every byte of a bundle either carries
meaning that is checked (an id, a proof, a signature) or breaks the line: there is no
slack (whitespace, key order, hex case, base64 padding bits, a field the verifier
ignores) in which a changed byte could go unnoticed.

Lines: 1 the header (`format`, `chain_id`, `height` H, `light_block` at H+1), then one
line per memory (`n` from 0, `id` ascending, `record`, `content`, `proof`), then the end
line (`end`: true, `count`).
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from typing import Any

from memledger.protocol.proofs import ProofOp
from memledger.sdk.light.header import (
    ED25519_TYPE,
    FLAG_ABSENT,
    BlockId,
    Commit,
    Header,
    LightBlock,
    ValidatorSet,
)

FORMAT = "memledger-bundle/1"
MEMORY_FIELDS = frozenset({"n", "id", "record", "content", "proof"})


class BundleError(Exception):
    """A bundle that does not verify; `line` is the 1-based line at fault (0: the file)."""

    def __init__(self, line: int, message: str, memory_id: str | None = None) -> None:
        where = f"line {line}" + (f" (memory {memory_id})" if memory_id else "")
        super().__init__(f"{where}: {message}")
        self.line = line
        self.memory_id = memory_id
        self.message = message


def encode(doc: Any) -> bytes:
    """One line's canonical bytes, without the newline."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(value: Any) -> bytes:
    """Strict base64 (canonical form is checked by re-encoding the line)."""
    if not isinstance(value, str):
        raise ValueError("not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"not base64: {exc}") from exc


def ops_doc(ops: list[ProofOp]) -> list[dict[str, str]]:
    return [{"type": o.type, "key": b64(o.key), "data": b64(o.data)} for o in ops]


def ops_from(doc: Any) -> list[ProofOp]:
    if not isinstance(doc, list):
        raise ValueError("proof ops are not a list")
    out = []
    for op in doc:
        if not isinstance(op, dict) or set(op) != {"type", "key", "data"} \
                or not isinstance(op["type"], str):
            raise ValueError("a proof op is not {type, key, data}")
        out.append(ProofOp(op["type"], unb64(op["key"]), unb64(op["data"])))
    return out


def memory_line(n: int, memory_id: str, record: bytes, content: bytes,
                memory_ops: list[ProofOp], content_ops: list[ProofOp]) -> bytes:
    return encode({"n": n, "id": memory_id, "record": b64(record), "content": b64(content),
                   "proof": {"memory": ops_doc(memory_ops), "content": ops_doc(content_ops)}})


def header_line(chain_id: str, height: int, lb: LightBlock) -> bytes:
    return encode({"format": FORMAT, "chain_id": chain_id, "height": height,
                   "light_block": light_block_doc(lb)})


def end_line(count: int) -> bytes:
    return encode({"end": True, "count": count})


# --- light blocks in canonical form: exactly the fields the light client reads ----------


def _time(seconds: int, nanos: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{nanos:09d}Z"


def _hex(data: bytes) -> str:
    return data.hex().upper()


def _block_id(bid: BlockId) -> dict[str, Any]:
    return {"hash": _hex(bid.hash), "parts": {"total": bid.parts_total,
                                              "hash": _hex(bid.parts_hash)}}


def _header(h: Header) -> dict[str, Any]:
    return {
        "version": {"block": str(h.version_block), "app": str(h.version_app)},
        "chain_id": h.chain_id, "height": str(h.height), "time": _time(h.time_s, h.time_nanos),
        "last_block_id": _block_id(h.last_block_id),
        "last_commit_hash": _hex(h.last_commit_hash), "data_hash": _hex(h.data_hash),
        "validators_hash": _hex(h.validators_hash),
        "next_validators_hash": _hex(h.next_validators_hash),
        "consensus_hash": _hex(h.consensus_hash), "app_hash": _hex(h.app_hash),
        "last_results_hash": _hex(h.last_results_hash), "evidence_hash": _hex(h.evidence_hash),
        "proposer_address": _hex(h.proposer_address),
    }


def _commit(c: Commit) -> dict[str, Any]:
    sigs: list[dict[str, Any]] = []
    for s in c.signatures:
        if s.flag == FLAG_ABSENT:
            sigs.append({"block_id_flag": s.flag})
        else:
            sigs.append({"block_id_flag": s.flag, "validator_address": _hex(s.validator_address),
                         "timestamp": _time(s.time_s, s.time_nanos),
                         "signature": b64(s.signature)})
    return {"height": str(c.height), "round": c.round, "block_id": _block_id(c.block_id),
            "signatures": sigs}


def _validators(vs: ValidatorSet) -> list[dict[str, Any]]:
    return [{"address": _hex(v.address), "pub_key": {"type": ED25519_TYPE, "value": b64(v.pub_key)},
             "voting_power": str(v.power)} for v in vs.validators]


def light_block_doc(lb: LightBlock) -> dict[str, Any]:
    """The light block as the bundle carries it (parse_light_block reads it back)."""
    return {"signed_header": {"header": _header(lb.header), "commit": _commit(lb.commit)},
            "validators": _validators(lb.validators)}


