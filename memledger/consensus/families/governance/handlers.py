"""GovPropose / GovVote / GovCancel: validator-signed governance txs."""

from __future__ import annotations

from typing import Any

from memledger.consensus import params as chain_params
from memledger.consensus.families.context import TxContext
from memledger.consensus.families.governance import kinds, proposals, validators
from memledger.consensus.families.governance.record import ProposalRecord, load_proposal
from memledger.consensus.families.memory.record import DECISIONS
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_REASON_BYTES
from memledger.protocol.pb import tx_pb2


def _require_validator(ctx: TxContext) -> None:
    if validators.power_of(ctx.state, ctx.signer_hex) == 0:
        raise TxError(Code.GOV_NOT_VALIDATOR)


def _payload(msg: tx_pb2.GovPropose) -> tuple[str, dict[str, Any]]:
    kind = msg.WhichOneof("kind")
    if kind is None:
        raise TxError(Code.GOV_INVALID_PROPOSAL, "proposal has no kind")
    return kind, kinds.kind_of(kind).decode(getattr(msg, kind))


def propose(ctx: TxContext, msg: tx_pb2.GovPropose) -> None:
    _require_validator(ctx)
    if len(msg.title.encode()) > MAX_REASON_BYTES:
        raise TxError(Code.GOV_INVALID_PROPOSAL, "title longer than 4 KiB")
    kind, payload = _payload(msg)
    proposals.validate(ctx.state, kind, payload, ctx.block.height, ctx.block.app_version)
    payload = proposals.bind(ctx.state, kind, payload)
    gov = proposals.gov_state(ctx.state)
    proposal_id = f"p{gov['next_id']}"
    period = int(chain_params.value(ctx.state, "gov_voting_period"))
    proposal: ProposalRecord = {
        "id": proposal_id, "kind": kind, "payload": payload, "title": msg.title,
        "proposer": ctx.signer_hex, "submit_height": ctx.block.height,
        "voting_end": ctx.block.height + period, "votes": {}, "status": "open",
    }
    ctx.state.put_record(records.proposal_key(proposal_id), proposal)
    gov["next_id"] += 1
    gov["open"] = [*gov["open"], proposal_id]
    ctx.state.put_record(records.GOV_STATE, gov)
    ctx.emit("proposal", id=proposal_id, kind=kind, status="open")


def vote(ctx: TxContext, msg: tx_pb2.GovVote) -> None:
    key = records.proposal_key(msg.proposal_id)
    proposal = load_proposal(ctx.state, msg.proposal_id)
    if proposal is None:
        raise TxError(Code.GOV_PROPOSAL_NOT_FOUND)
    _require_validator(ctx)
    decision = DECISIONS.get(msg.decision)
    if decision is None:
        raise TxError(Code.INVALID_DECISION)
    if proposal["status"] != "open" or ctx.block.height > proposal["voting_end"]:
        raise TxError(Code.GOV_PROPOSAL_CLOSED, f"proposal is {proposal['status']}")
    last = proposals.last_vote_height(proposal, ctx.block.app_version)
    if ctx.block.height > last:  # v8+: an upgrade past the block before its activation
        raise TxError(Code.GOV_PROPOSAL_CLOSED,
                      f"voting ended at height {last}, before the activation height")
    if ctx.signer_hex in proposal["votes"]:
        raise TxError(Code.GOV_ALREADY_VOTED)
    proposal["votes"][ctx.signer_hex] = [decision, ctx.block.height]
    ctx.state.put_record(key, proposal)
    ctx.emit("proposal_vote", id=msg.proposal_id, voter=ctx.signer_hex, decision=decision)


def cancel(ctx: TxContext, msg: tx_pb2.GovCancel) -> None:
    key = records.proposal_key(msg.proposal_id)
    proposal = load_proposal(ctx.state, msg.proposal_id)
    if proposal is None:
        raise TxError(Code.GOV_PROPOSAL_NOT_FOUND)
    if proposal["proposer"] != ctx.signer_hex:
        raise TxError(Code.GOV_CANCEL_DENIED)
    if proposal["status"] != "open":
        raise TxError(Code.GOV_PROPOSAL_CLOSED, f"proposal is {proposal['status']}")
    proposal["status"] = "cancelled"
    proposal["closed_height"] = ctx.block.height
    ctx.state.put_record(key, proposal)
    gov = proposals.gov_state(ctx.state)
    gov["open"] = [p for p in gov["open"] if p != msg.proposal_id]
    ctx.state.put_record(records.GOV_STATE, gov)
    ctx.emit("proposal", id=msg.proposal_id, status="cancelled")
