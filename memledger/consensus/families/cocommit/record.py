"""The co-commit family's record, as stored (canonical JSON)."""

from __future__ import annotations

from typing import TypedDict

from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records


class CoCommitRecord(TypedDict):
    """`cc/<shared id>`: the agreement behind a co-committed memory (`mem/<shared id>`)."""

    id: str  # the shared id, `cc-` + hex SHA-256 (handlers.shared_id)
    coauthors: list[str]  # hex keys, ascending (the order they signed in)
    submitter: str  # hex key of the coauthor who sent the tx
    agreement_nonce: int
    window: list[int]  # JSON pair [not_before_unix_ns, not_after_unix_ns)
    height: int  # the block that included it
    core_sha256: str  # hex SHA-256 of the signed CoCommitCore bytes


def load(state: TxBuffer, shared_id: str) -> CoCommitRecord | None:
    record: CoCommitRecord | None = state.get_record(records.cocommit_key(shared_id))
    return record
