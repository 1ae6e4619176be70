"""The governance family's records, as stored (canonical JSON)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records


class ProposalRecord(TypedDict):
    """`gov/<id>`: one proposal, open or closed."""

    id: str
    kind: str
    payload: dict[str, Any]  # the kind's payload (kinds.py decodes and checks it)
    title: str
    proposer: str
    submit_height: int
    voting_end: int
    votes: dict[str, list[Any]]  # validator hex -> JSON pair [decision, height]
    status: str  # open | executed | rejected | expired | cancelled | failed
    closed_height: NotRequired[int]
    executed_height: NotRequired[int]
    failure: NotRequired[str]


class GovState(TypedDict):
    """`sys/gov`: the next proposal number and the open proposals, in id order."""

    next_id: int
    open: list[str]


class ScopeRecord(TypedDict):
    """`scope/<id>`: exact domains bound to a weighted member list."""

    id: str
    domains: list[str]
    members: list[list[Any]]  # JSON pairs [hex key, weight], sorted by key
    revision: int
    state: str  # active | paused | retired
    updated_height: int


class UpgradePlan(TypedDict):
    """`sys/upgrade`: the scheduled upgrade, until it activates."""

    name: str
    app_version: int
    activation_height: int
    binary_sha256: str
    proposal: str


def load_proposal(state: TxBuffer, proposal_id: str) -> ProposalRecord | None:
    record: ProposalRecord | None = state.get_record(records.proposal_key(proposal_id))
    return record
