"""Governance: proposal validation, tallies and execution (DESIGN §5).

Proposals are opened and voted by txs (`memledger.consensus.families.governance.handlers`);
everything time-driven —
tallying, passing, rejecting, expiring, executing, validator-set changes taking effect,
and upgrade activation — happens here, at fixed points of FinalizeBlock, in id order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memledger.consensus import params as chain_params
from memledger.consensus.block.context import TxBuffer
from memledger.consensus.codes import Code, TxError
from memledger.consensus.families.access.domains import check_name, params
from memledger.consensus.families.governance import scopes, validators
from memledger.consensus.families.memory import ballots, quorum
from memledger.consensus.store import records
from memledger.consensus.versions import INITIAL_APP_VERSION

MAX_POWER = 1 << 40
VALIDATOR_DELAY = 2  # CometBFT applies ValidatorUpdates returned at H from H+2


@dataclass
class BlockEffects:
    """What the end of a block hands back to CometBFT."""

    validator_updates: list[tuple[bytes, int]] = field(default_factory=list)
    new_app_version: int | None = None
    events: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)


# ------------------------------------------------------------------ state helpers
def gov_state(state: TxBuffer) -> dict[str, Any]:
    return state.get_record(records.GOV_STATE) or {"next_id": 1, "open": []}  # type: ignore[no-any-return]


def app_version_record(state: TxBuffer) -> dict[str, Any]:
    return state.get_record(records.APP_VERSION) or {  # type: ignore[no-any-return]
        "version": INITIAL_APP_VERSION, "name": "genesis", "since": 0}


def effective_set(state: TxBuffer) -> dict[str, int]:
    """The validator set once every pending change has taken effect."""
    members = dict(validators.load(state))
    pending = state.get_record(records.VALSET_PENDING) or {"pending": []}
    for _, member, power in pending["pending"]:
        if power:
            members[member] = power
        else:
            members.pop(member, None)
    return members


# ------------------------------------------------------------------ validation
def validate(state: TxBuffer, kind: str, payload: dict[str, Any], height: int,
             app_version: int) -> None:
    """Raise TxError when the proposal cannot be executed as of now."""
    if kind == "validator":
        _validate_validator(state, payload)
    elif kind in ("scope_create", "scope_revise"):
        try:
            spec = scopes.make_spec(payload["id"], payload["domains"],
                                    [(m, w) for m, w in payload["members"]])
        except scopes.ScopeError as exc:
            raise TxError(Code.GOV_INVALID_PROPOSAL, str(exc)) from None
        exists = state.get(records.scope_key(spec.scope_id)) is not None
        if kind == "scope_create" and exists:
            raise TxError(Code.GOV_SCOPE_EXISTS)
        if kind == "scope_revise" and not exists:
            raise TxError(Code.GOV_UNKNOWN_SCOPE)
        shared = set(params(state)["shared_domains"])
        for domain in spec.domains:
            bound = state.get_record(records.domain_key(domain))
            if domain in shared or (bound is not None and (
                    bound.get("owner") is not None
                    or bound.get("scope") not in (None, spec.scope_id))):
                raise TxError(Code.GOV_INVALID_PROPOSAL,
                              f"domain {domain!r} is shared, owned or in another scope")
    elif kind in ("scope_pause", "scope_resume", "scope_retire"):
        scope = state.get_record(records.scope_key(payload["id"]))
        if scope is None:
            raise TxError(Code.GOV_UNKNOWN_SCOPE)
        if scope["state"] == "retired":
            raise TxError(Code.GOV_INVALID_PROPOSAL, "scope is retired")
    elif kind == "param":
        chain_params.check_proposal(payload["key"], payload["value"], app_version)
    elif kind == "upgrade":
        check_name(payload["name"], Code.GOV_INVALID_PROPOSAL, "upgrade name")
        if payload["app_version"] <= app_version:
            raise TxError(Code.GOV_UNSUPPORTED_VERSION,
                          f"target version {payload['app_version']} <= current {app_version}")
        delay = int(params(state)["gov_min_upgrade_delay"])
        if payload["activation_height"] < height + delay:
            raise TxError(Code.GOV_ACTIVATION_TOO_SOON,
                          f"activation height must be >= {height + delay}")
        if state.get(records.UPGRADE) is not None:
            raise TxError(Code.GOV_INVALID_PROPOSAL, "another upgrade is already scheduled")
        sha = payload["binary_sha256"]
        if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
            raise TxError(Code.GOV_INVALID_PROPOSAL, "binary_sha256 must be 64 lowercase hex")
    else:
        raise TxError(Code.GOV_INVALID_PROPOSAL, f"unknown proposal kind {kind!r}")


def _validate_validator(state: TxBuffer, payload: dict[str, Any]) -> None:
    member, power = payload["public_key"], payload["power"]
    if len(member) != 64 or power > MAX_POWER:
        raise TxError(Code.GOV_INVALID_PROPOSAL, "validator needs a 32-byte key, power <= 2^40")
    current = effective_set(state)
    total = sum(current.values())
    if power == 0 and member not in current:
        raise TxError(Code.GOV_INVALID_PROPOSAL, "cannot remove a non-validator")
    after = dict(current)
    if power:
        after[member] = power
    else:
        after.pop(member, None)
    if not after:
        raise TxError(Code.GOV_UNSAFE_VALIDATOR_CHANGE, "the validator set would be empty")
    removed = current.get(member, 0) - power
    if removed > 0 and 3 * removed >= total:
        raise TxError(Code.GOV_UNSAFE_VALIDATOR_CHANGE,
                      f"removes {removed} of {total} power (must be < 1/3)")
    if power == 0 and ballots.open_count(state, member) > 0:
        raise TxError(Code.GOV_VALIDATOR_PINNED)


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
        proposal = state.get_record(key)
        result = quorum.tally({m: v[0] for m, v in proposal["votes"].items()}, electorate)
        unvoted = result.total - result.accept - result.reject - result.abstain
        if quorum.has_supermajority(result.accept, result.total):
            _execute(state, proposal, height, app_version, effects)
        elif not quorum.has_supermajority(result.accept + unvoted, result.total):
            proposal["status"] = "rejected"
        elif height >= proposal["voting_end"]:
            proposal["status"] = "expired"
        else:
            still_open.append(proposal_id)
            continue
        proposal["closed_height"] = height
        state.put_record(key, proposal)
        effects.events.append(("proposal", [("id", proposal_id), ("status", proposal["status"])]))
    if still_open != gov["open"]:
        gov["open"] = still_open
        state.put_record(records.GOV_STATE, gov)
    plan = state.get_record(records.UPGRADE)
    if plan is not None and plan["activation_height"] == height:
        effects.new_app_version = int(plan["app_version"])
        state.put_record(records.APP_VERSION, {"version": plan["app_version"],
                                               "name": plan["name"], "since": height + 1})
        state.delete(records.UPGRADE)
        effects.events.append(("upgrade", [("name", plan["name"]),
                                           ("app_version", str(plan["app_version"]))]))
    return effects


def _execute(state: TxBuffer, proposal: dict[str, Any], height: int, app_version: int,
             effects: BlockEffects) -> None:
    """Re-validate against today's state, then apply; a stale proposal fails cleanly."""
    kind, payload = proposal["kind"], proposal["payload"]
    try:
        validate(state, kind, payload, proposal["submit_height"], app_version)
        if kind == "upgrade" and payload["activation_height"] <= height:
            raise TxError(Code.GOV_ACTIVATION_TOO_SOON, "passed after its activation height")
    except TxError as err:
        proposal["status"] = "failed"
        proposal["failure"] = err.log
        return
    if kind == "validator":
        pending = state.get_record(records.VALSET_PENDING) or {"pending": []}
        pending["pending"].append([height + VALIDATOR_DELAY, payload["public_key"],
                                   payload["power"]])
        state.put_record(records.VALSET_PENDING, pending)
        effects.validator_updates.append((bytes.fromhex(payload["public_key"]), payload["power"]))
    elif kind in ("scope_create", "scope_revise"):
        spec = scopes.make_spec(payload["id"], payload["domains"],
                                [(m, w) for m, w in payload["members"]])
        scopes.apply_scope(state, spec, height)
    elif kind in ("scope_pause", "scope_resume", "scope_retire"):
        new_state = {"scope_pause": "paused", "scope_resume": "active",
                     "scope_retire": "retired"}[kind]
        scopes.set_state(state, payload["id"], new_state, height)
    elif kind == "param":
        chain_params.set_value(state, payload["key"], payload["value"])
    elif kind == "upgrade":
        state.put_record(records.UPGRADE, {**payload, "proposal": proposal["id"]})
    proposal["status"] = "executed"
    proposal["executed_height"] = height
