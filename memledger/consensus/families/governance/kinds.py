"""Proposal kinds: one table row per kind, with its decoding, validation and execution.

Adding a kind means one row here (and its message in tx.proto): the propose handler
decodes through `decode`, proposing and executing both re-check through `validate`, and
a passed proposal runs `execute`. Every check runs before any write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.families.access.domains import check_name
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.governance import scopes, validators
from memledger.consensus.families.memory import ballots
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError

MAX_POWER = 1 << 40
VALIDATOR_DELAY = 2  # CometBFT applies ValidatorUpdates returned at H from H+2


@dataclass
class BlockEffects:
    """What the end of a block hands back to CometBFT."""

    validator_updates: list[tuple[bytes, int]] = field(default_factory=list)
    new_app_version: int | None = None
    events: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)

    def final_validator_updates(self) -> list[tuple[bytes, int]]:
        """The block's validator changes as CometBFT takes them: one per key, its last
        (the power the app's own table holds once the block's pending changes apply), in
        the order keys first changed. Two passed proposals may change one key in one
        block, and CometBFT refuses a response that names a key twice: it would halt on
        every node, and again on every replay of the block."""
        last: dict[bytes, int] = {}
        for key, power in self.validator_updates:
            last[key] = power
        return list(last.items())


@dataclass(frozen=True)
class Execution:
    """Where a passed proposal runs: the state, the block height and what it hands back."""

    state: TxBuffer
    height: int
    effects: BlockEffects
    proposal_id: str
    app_version: int


Payload = dict[str, Any]


def _as_proposed(state: TxBuffer, payload: Payload) -> Payload:
    return payload


@dataclass(frozen=True)
class ProposalKind:
    decode: Callable[[Any], Payload]
    validate: Callable[[TxBuffer, Payload, int, int], None]  # state, payload, height, version
    execute: Callable[[Execution, Payload], None]
    #: the payload the proposal record keeps, from the validated one and the state it was
    #: proposed in: what the voters are shown, and what execution is held to
    bind: Callable[[TxBuffer, Payload], Payload] = _as_proposed


def _invalid(reason: str) -> TxError:
    return TxError(Code.GOV_INVALID_PROPOSAL, reason)


# ------------------------------------------------------------------ validator
def _decode_validator(msg: Any) -> Payload:
    if len(msg.public_key) != 32:
        raise _invalid("validator key must be 32 bytes")
    return {"public_key": msg.public_key.hex(), "power": int(msg.power)}


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


def _validate_validator(state: TxBuffer, payload: Payload, height: int, version: int) -> None:
    member, power = payload["public_key"], payload["power"]
    if len(member) != 64 or power > MAX_POWER:
        raise _invalid("validator needs a 32-byte key, power <= 2^40")
    current = effective_set(state)
    total = sum(current.values())
    if power == 0 and member not in current:
        raise _invalid("cannot remove a non-validator")
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
    # Before v4 an open pinned ballot naming the member blocked its removal, which let a
    # member keep itself in the set by never voting; from v4 ballots expire instead.
    pinned_blocks_removal = not versions.active("ballot_expiry", version)
    if power == 0 and pinned_blocks_removal and ballots.open_count(state, member) > 0:
        raise TxError(Code.GOV_VALIDATOR_PINNED)


def _execute_validator(run: Execution, payload: Payload) -> None:
    pending = run.state.get_record(records.VALSET_PENDING) or {"pending": []}
    pending["pending"].append([run.height + VALIDATOR_DELAY, payload["public_key"],
                               payload["power"]])
    run.state.put_record(records.VALSET_PENDING, pending)
    run.effects.validator_updates.append((bytes.fromhex(payload["public_key"]),
                                          payload["power"]))


# ------------------------------------------------------------------ scopes
def _decode_scope_spec(msg: Any) -> Payload:
    for member in msg.members:
        if len(member.public_key) != 32:
            raise _invalid("member key must be 32 bytes")
    return {"id": msg.scope_id, "domains": list(msg.domains),
            "members": [[m.public_key.hex(), int(m.weight)] for m in msg.members]}


def _spec(payload: Payload) -> scopes.ScopeSpec:
    try:
        return scopes.make_spec(payload["id"], payload["domains"],
                                [(m, w) for m, w in payload["members"]])
    except scopes.ScopeError as exc:
        raise _invalid(str(exc)) from None


def _scope_writer(creating: bool) -> Callable[[TxBuffer, Payload, int, int], None]:
    def validate(state: TxBuffer, payload: Payload, height: int, version: int) -> None:
        spec = _spec(payload)
        current = state.get_record(records.scope_key(spec.scope_id))
        if creating and current is not None:
            raise TxError(Code.GOV_SCOPE_EXISTS)
        if not creating and current is None:
            raise TxError(Code.GOV_UNKNOWN_SCOPE)
        # From v8 retired is final for a revise too (refused when proposed; a scope
        # retired while the revise was open fails it when it passes). Before, a revise
        # could give a retired scope new domains, which then refused every write.
        if (not creating and versions.active("retired_scope_final", version)
                and current["state"] == "retired"):
            raise _invalid("scope is retired")
        try:
            scopes.check_domains_free(state, spec)
        except scopes.ScopeError as exc:
            raise _invalid(str(exc)) from None
    return validate


def _execute_scope_spec(run: Execution, payload: Payload) -> None:
    scopes.apply_scope(run.state, _spec(payload), run.height, run.app_version)


def _decode_scope_id(msg: Any) -> Payload:
    return {"id": msg}


def _validate_scope_change(state: TxBuffer, payload: Payload, height: int, version: int) -> None:
    scope = state.get_record(records.scope_key(payload["id"]))
    if scope is None:
        raise TxError(Code.GOV_UNKNOWN_SCOPE)
    if scope["state"] == "retired":
        raise _invalid("scope is retired")


def _scope_state(new_state: str) -> Callable[[Execution, Payload], None]:
    def execute(run: Execution, payload: Payload) -> None:
        scopes.set_state(run.state, payload["id"], new_state, run.height)
    return execute


# ------------------------------------------------------------------ params
def _decode_param(msg: Any) -> Payload:
    return {"key": msg.key, "value": int(msg.value)}


def _validate_param(state: TxBuffer, payload: Payload, height: int, version: int) -> None:
    chain_params.check_proposal(payload["key"], payload["value"], version)


def _execute_param(run: Execution, payload: Payload) -> None:
    chain_params.set_value(run.state, payload["key"], payload["value"])


# ------------------------------------------------------------------ upgrades
def _decode_upgrade(msg: Any) -> Payload:
    return {"name": msg.name, "app_version": int(msg.app_version),
            "activation_height": int(msg.activation_height),
            "binary_sha256": msg.binary_sha256}


def _validate_upgrade(state: TxBuffer, payload: Payload, height: int, version: int) -> None:
    check_name(payload["name"], Code.GOV_INVALID_PROPOSAL, "upgrade name")
    if payload["app_version"] <= version:
        raise TxError(Code.GOV_UNSUPPORTED_VERSION,
                      f"target version {payload['app_version']} <= current {version}")
    delay = int(chain_params.value(state, "gov_min_upgrade_delay"))
    if payload["activation_height"] < height + delay:
        raise TxError(Code.GOV_ACTIVATION_TOO_SOON,
                      f"activation height must be >= {height + delay}")
    if state.get(records.UPGRADE) is not None:
        raise _invalid("another upgrade is already scheduled")
    sha = payload["binary_sha256"]
    if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
        raise _invalid("binary_sha256 must be 64 lowercase hex")


def _execute_upgrade(run: Execution, payload: Payload) -> None:
    if payload["activation_height"] <= run.height:
        raise TxError(Code.GOV_ACTIVATION_TOO_SOON, "passed after its activation height")
    run.state.put_record(records.UPGRADE, {**payload, "proposal": run.proposal_id})


def _decode_upgrade_cancel(msg: Any) -> Payload:
    return {"name": msg}


def _validate_upgrade_cancel(state: TxBuffer, payload: Payload, height: int,
                             version: int) -> None:
    """The upgrade scheduled now, by its name and, once proposed, by the proposal that
    scheduled it (`_bind_upgrade_cancel`): a cancel whose upgrade activated, or was
    called off and scheduled again under the same name while it was open, fails rather
    than remove a plan its voters were never shown."""
    if not versions.active("upgrade_cancel", version):  # the gate refuses it earlier
        raise _invalid("upgrade_cancel needs app version 9")
    plan = state.get_record(records.UPGRADE)
    if plan is None:
        raise _invalid(f"no upgrade is scheduled (asked to cancel {payload['name']!r})")
    if plan["name"] != payload["name"]:
        raise _invalid(f"the scheduled upgrade is {plan['name']!r}, not {payload['name']!r}")
    bound = payload.get("upgrade_proposal")
    if bound is not None and plan["proposal"] != bound:
        raise _invalid(f"the scheduled upgrade {plan['name']!r} is the one {plan['proposal']} "
                       f"scheduled, not the one {bound} scheduled that this cancel names")


def _bind_upgrade_cancel(state: TxBuffer, payload: Payload) -> Payload:
    """Name the plan by the proposal that scheduled it, as well as by its name."""
    plan = state.get_record(records.UPGRADE)
    return {**payload, "upgrade_proposal": plan["proposal"]}


def _execute_upgrade_cancel(run: Execution, payload: Payload) -> None:
    """Remove the plan. It runs at the end of the block, before activation is looked at,
    so a cancel that passes in the activation block itself still prevents it."""
    plan = run.state.get_record(records.UPGRADE)
    run.state.delete(records.UPGRADE)
    run.effects.events.append(("upgrade_cancelled", [
        ("name", plan["name"]), ("app_version", str(plan["app_version"])),
        ("activation_height", str(plan["activation_height"])),
        ("upgrade_proposal", plan["proposal"])]))


#: kind (the GovPropose oneof field) -> how it is decoded, validated and executed
KINDS: dict[str, ProposalKind] = {
    "validator": ProposalKind(_decode_validator, _validate_validator, _execute_validator),
    "scope_create": ProposalKind(_decode_scope_spec, _scope_writer(creating=True),
                                 _execute_scope_spec),
    "scope_revise": ProposalKind(_decode_scope_spec, _scope_writer(creating=False),
                                 _execute_scope_spec),
    "scope_pause": ProposalKind(_decode_scope_id, _validate_scope_change, _scope_state("paused")),
    "scope_resume": ProposalKind(_decode_scope_id, _validate_scope_change,
                                 _scope_state("active")),
    "scope_retire": ProposalKind(_decode_scope_id, _validate_scope_change,
                                 _scope_state("retired")),
    "param": ProposalKind(_decode_param, _validate_param, _execute_param),
    "upgrade": ProposalKind(_decode_upgrade, _validate_upgrade, _execute_upgrade),
    "upgrade_cancel": ProposalKind(_decode_upgrade_cancel, _validate_upgrade_cancel,
                                   _execute_upgrade_cancel, _bind_upgrade_cancel),
}


def kind_of(name: str) -> ProposalKind:
    entry = KINDS.get(name)
    if entry is None:
        raise _invalid(f"unknown proposal kind {name!r}")
    return entry
