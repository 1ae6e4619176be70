"""Co-commits: a memory jointly signed by several agents, committed on block inclusion.

BFT inclusion is the agreement, so the voter is bypassed. Coauthors sign the canonical
CoCommitCore; the shared memory id is derived from the content hash, the sorted coauthor
keys and the agreement nonce, so the same agreement can never be committed twice.
"""

from __future__ import annotations

import hashlib

from memledger.consensus import versions
from memledger.consensus.families.access import private
from memledger.consensus.families.access.domains import authorize_write, scope_of
from memledger.consensus.families.cocommit.record import CoCommitRecord, load
from memledger.consensus.families.context import BlockInfo, TxContext
from memledger.consensus.families.memory.record import (
    COCOMMIT_ID_PREFIX,
    new_record,
    validate_fields,
)
from memledger.consensus.gate.envelope import parse_canonical, verify_signature
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_COAUTHORS, MIN_COAUTHORS
from memledger.protocol.pb import tx_pb2

COCOMMIT_SIGN_PREFIX = b"memledger/cocommit/v1\x00"
SHARED_ID_PREFIX = b"memledger/cocommit-id/v1\x00"


def shared_id(content_hash: bytes, coauthors: list[bytes], agreement_nonce: int) -> str:
    """`cc-` + hex SHA-256 over content hash, sorted keys and the nonce (8 bytes, BE)."""
    digest = hashlib.sha256(
        SHARED_ID_PREFIX + content_hash + b"".join(sorted(coauthors))
        + agreement_nonce.to_bytes(8, "big")
    ).hexdigest()
    return f"{COCOMMIT_ID_PREFIX}{digest}"


def _check_coauthors(ctx: TxContext, coauthors: list[bytes]) -> None:
    if len(coauthors) < MIN_COAUTHORS:
        raise TxError(Code.COCOMMIT_TOO_FEW_COAUTHORS)
    if len(coauthors) > MAX_COAUTHORS:
        raise TxError(Code.COCOMMIT_COAUTHORS_UNSORTED, f"at most {MAX_COAUTHORS} coauthors")
    for i, key in enumerate(coauthors):
        if len(key) != 32 or (i and coauthors[i - 1] >= key):
            raise TxError(Code.COCOMMIT_COAUTHORS_UNSORTED)
    if ctx.signer not in coauthors:
        raise TxError(Code.COCOMMIT_SUBMITTER_NOT_COAUTHOR)


def submit(ctx: TxContext, msg: tx_pb2.CoCommitSubmit) -> None:
    core = parse_canonical(tx_pb2.CoCommitCore, msg.core, Code.COCOMMIT_CORE_DECODE,
                           Code.COCOMMIT_CORE_NOT_CANONICAL)
    assert isinstance(core, tx_pb2.CoCommitCore)
    if core.chain_id != ctx.block.chain_id:
        raise TxError(Code.COCOMMIT_WRONG_CHAIN)
    data, tags = validate_fields(core.domain, core.memory_type, core.content, core.content_hash,
                                 core.confidence_ppm, list(core.tags))
    coauthors = [bytes(k) for k in core.coauthors]
    _check_coauthors(ctx, coauthors)
    if [bytes(s.public_key) for s in msg.signatures] != coauthors:
        raise TxError(Code.COCOMMIT_SIGNATURE_MISMATCH, "one signature per coauthor, in order")
    signed = COCOMMIT_SIGN_PREFIX + msg.core
    for sig in msg.signatures:
        if not verify_signature(sig.public_key, signed, sig.signature):
            raise TxError(Code.COCOMMIT_BAD_SIGNATURE,
                          f"signature of coauthor {sig.public_key.hex()[:16]}… fails")
    # In a block both ends meet its one time; in CheckTx the window must already be open
    # at the earliest time the next block can carry, and still open at the latest.
    if not (core.not_before_unix_ns <= ctx.block.earliest_ns
            and ctx.block.time_ns < core.not_after_unix_ns):
        raise TxError(Code.COCOMMIT_OUTSIDE_WINDOW, _window_log(ctx.block, core))
    if scope_of(ctx.state, core.domain) is not None:
        raise TxError(Code.COCOMMIT_SCOPED_DOMAIN)
    if versions.active("private_domains", ctx.block.app_version):
        private.refuse_cocommit(ctx.state, core.domain)
    memory_id = shared_id(core.content_hash, coauthors, core.agreement_nonce)
    if load(ctx.state, memory_id) is not None or ctx.state.get(records.memory_key(memory_id)):
        raise TxError(Code.COCOMMIT_DUPLICATE)
    authorize_write(ctx.state, core.domain, ctx.signer, ctx.block.height,
                    ctx.block.app_version)
    record = new_record(ctx, memory_id, core.domain, core.memory_type, core.content_hash,
                        core.confidence_ppm, tags, records.STATUS_COMMITTED)
    record["cocommit"] = memory_id
    record["coauthors"] = [k.hex() for k in coauthors]
    ctx.state.put_record(records.memory_key(memory_id), record)
    ctx.state.put(records.content_key(memory_id), data)
    cocommit: CoCommitRecord = {
        "id": memory_id,
        "coauthors": [k.hex() for k in coauthors],
        "submitter": ctx.signer_hex,
        "agreement_nonce": int(core.agreement_nonce),
        "window": [int(core.not_before_unix_ns), int(core.not_after_unix_ns)],
        "height": ctx.block.height,
        "core_sha256": hashlib.sha256(msg.core).hexdigest(),
    }
    ctx.state.put_record(records.cocommit_key(memory_id), cocommit)
    ctx.emit("cocommit", id=memory_id, coauthors=len(coauthors))
    ctx.emit("memory", id=memory_id, status=records.STATUS_COMMITTED)


def _window_log(block: BlockInfo, core: tx_pb2.CoCommitCore) -> str:
    """A block keeps the code's own text; CheckTx says which end failed and why."""
    if block.earliest_time_ns is None:
        return ""
    if core.not_before_unix_ns > block.earliest_ns:
        return (f"the window opens at {core.not_before_unix_ns} ns, after the last block's "
                f"time ({block.earliest_ns - 1} ns): a block could not take it yet; send "
                "it again after the next block")
    return f"the window closed at {core.not_after_unix_ns} ns"

