"""Governance: proposal validation, tallies and execution (DESIGN §5).

Proposals are opened and voted by txs (`memledger.consensus.families.governance.handlers`);
everything time-driven —
tallying, passing, rejecting, expiring, executing, validator-set changes taking effect,
and upgrade activation — happens here, at fixed points of FinalizeBlock, in id order.
"""

from __future__ import annotations

from typing import Any

from memledger.consensus import versions
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.governance import kinds, validators
from memledger.consensus.families.governance.kinds import BlockEffects, Execution
from memledger.consensus.families.governance.record import GovState, ProposalRecord, UpgradePlan
from memledger.consensus.families.memory import quorum
from memledger.protocol import records
from memledger.protocol.codes import TxError


def gov_state(state: TxBuffer) -> GovState:
    stored: GovState | None = state.get_record(records.GOV_STATE)
    return stored if stored is not None else {"next_id": 1, "open": []}


def validate(state: TxBuffer, kind: str, payload: dict[str, Any], height: int,
             app_version: int) -> None:
    """Raise TxError when the proposal cannot be executed as of now."""
    kinds.kind_of(kind).validate(state, payload, height, app_version)


def bind(state: TxBuffer, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload a validated proposal is recorded with (`ProposalKind.bind`)."""
    return kinds.kind_of(kind).bind(state, payload)


def last_vote_height(proposal: ProposalRecord, app_version: int) -> int:
    """The last height whose votes count: the end of the voting period, and from v8, for
    an upgrade, no later than the block before its activation height, the last block in
    which it can pass (`kinds._execute_upgrade` fails it at its activation height or
    later). Before v8 it kept taking votes after that, only to fail."""
    end = int(proposal["voting_end"])
    if (proposal["kind"] == "upgrade"
            and versions.active("upgrade_votes_end_before_activation", app_version)):
        end = min(end, int(proposal["payload"]["activation_height"]) - 1)
    return end


def expiry_reason(proposal: ProposalRecord, app_version: int) -> str | None:
    """Why a proposal that expires now expired, when it is not the end of its voting
    period: an upgrade not passed before its activation height (v8+)."""
    if last_vote_height(proposal, app_version) < int(proposal["voting_end"]):
        return (f"not passed before its activation height "
                f"{proposal['payload']['activation_height']}")
    return None


# ------------------------------------------------------------------ block hooks
def begin_block(state: TxBuffer, height: int) -> None:
    """Apply validator-set changes whose effective height has come."""
    pending = state.get_record(records.VALSET_PENDING)
    if pending is None:
        return
    due = [p for p in pending["pending"] if p[0] <= height]
    if not due:
        return
    members = dict(validators.load(state))
    for _, member, power in due:
        if power:
            members[member] = power
        else:
            members.pop(member, None)
    validators.store(state, sorted(members.items()))
    rest = [p for p in pending["pending"] if p[0] > height]
    if rest:
        state.put_record(records.VALSET_PENDING, {"pending": rest})
    else:
        state.delete(records.VALSET_PENDING)


def end_block(state: TxBuffer, height: int, app_version: int) -> BlockEffects:
    """Tally open proposals in id order, execute passed ones, activate upgrades."""
    effects = BlockEffects()
    gov = gov_state(state)
    still_open = []
    electorate = validators.load(state)
    for proposal_id in gov["open"]:
        key = records.proposal_key(proposal_id)
        proposal: ProposalRecord = state.get_record(key)
        result = quorum.tally({m: v[0] for m, v in proposal["votes"].items()}, electorate)
        unvoted = result.total - result.accept - result.reject - result.abstain
        if quorum.has_supermajority(result.accept, result.total):
            _execute(state, proposal, height, app_version, effects)
        elif not quorum.has_supermajority(result.accept + unvoted, result.total):
            proposal["status"] = "rejected"
        elif height >= last_vote_height(proposal, app_version):
            proposal["status"] = "expired"
            reason = expiry_reason(proposal, app_version)
            if reason is not None:
                proposal["failure"] = reason
        else:
            still_open.append(proposal_id)
            continue
        proposal["closed_height"] = height
        state.put_record(key, proposal)
        effects.events.append(("proposal", [("id", proposal_id), ("status", proposal["status"])]))
    if still_open != gov["open"]:
        gov["open"] = still_open
        state.put_record(records.GOV_STATE, gov)
    plan: UpgradePlan | None = state.get_record(records.UPGRADE)
    if plan is not None and plan["activation_height"] == height:
        effects.new_app_version = int(plan["app_version"])
        state.put_record(records.APP_VERSION, {"version": plan["app_version"],
                                               "name": plan["name"], "since": height + 1})
        state.delete(records.UPGRADE)
        effects.events.append(("upgrade", [("name", plan["name"]),
                                           ("app_version", str(plan["app_version"]))]))
    return effects


def _execute(state: TxBuffer, proposal: ProposalRecord, height: int, app_version: int,
             effects: BlockEffects) -> None:
    """Re-validate against today's state, then apply; a stale proposal fails cleanly."""
    kind, payload = kinds.kind_of(proposal["kind"]), proposal["payload"]
    try:
        kind.validate(state, payload, proposal["submit_height"], app_version)
        kind.execute(Execution(state, height, effects, proposal["id"], app_version), payload)
    except TxError as err:
        proposal["status"] = "failed"
        proposal["failure"] = err.log
        return
    proposal["status"] = "executed"
    proposal["executed_height"] = height
