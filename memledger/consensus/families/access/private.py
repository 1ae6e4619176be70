"""Private domains (app version 10+): epoch keys sealed to members, sealed content.

The domain record carries `private`: the epochs, oldest first, each with the height it
began and its key sealed to each member (`{"epoch", "since", "keys": {hex: sealed hex}}`).
Consensus never sees an epoch key, only the sealed copies, and checks a private memory's
envelope (memledger.protocol.sealed), never its plaintext. Every check runs before the
first write, and every list is walked in a fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from memledger.consensus.families.access.domains import DomainRecord, check_name, is_shared
from memledger.consensus.families.context import TxBuffer, TxContext
from memledger.protocol import records, sealed
from memledger.protocol.codes import Code, TxError
from memledger.protocol.pb import tx_pb2


class Epoch(TypedDict):
    epoch: int
    since: int
    keys: dict[str, str]  # member hex -> sealed key hex


class Private(TypedDict):
    since: int
    epochs: list[Epoch]
    revoked: NotRequired[list[list[Any]]]  # [height, hex] of grants ended by a new epoch


def private_of(record: DomainRecord | None) -> Private | None:
    if record is None:
        return None
    value: Private | None = record.get("private")
    return value


def current_epoch(record: DomainRecord | None) -> int:
    """The domain's current epoch (0: not private)."""
    private = private_of(record)
    return 0 if private is None else private["epochs"][-1]["epoch"]


def members(record: DomainRecord) -> list[str]:
    """Who holds the domain's keys, sorted: its owner and every grantee in its grant index.
    An expired grant ends writing, not reading: only a revoke (a new epoch) does that, so
    the members are read off the domain record alone, as the owner's client reads them."""
    owner = record.get("owner")
    found = {owner} if owner else set()
    found.update(record.get("grantees", []))
    return sorted(found)


def _sealed_keys(keys: Sequence[tx_pb2.SealedKey]) -> dict[str, str]:
    """Shape check: 32-byte recipients, strictly ascending, 80-byte sealed boxes."""
    out: dict[str, str] = {}
    last = b""
    for key in keys:
        if len(key.recipient) != 32 or len(key.sealed) != sealed.SEALED_KEY_BYTES:
            raise TxError(Code.SEALED_KEYS_INVALID)
        if key.recipient <= last:
            raise TxError(Code.SEALED_KEYS_INVALID, "recipients must be strictly ascending")
        last = key.recipient
        out[key.recipient.hex()] = key.sealed.hex()
    return out


def _must_cover(keys: dict[str, str], who: list[str]) -> None:
    if sorted(keys) != who:
        raise TxError(Code.SEALED_KEYS_MEMBERS,
                      f"a new epoch needs a sealed key for each of the {len(who)} members "
                      "(the owner and every grantee) and nobody else")


def _owned(ctx: TxContext, domain: str, claim: bool) -> DomainRecord:
    """The domain's record if the signer owns it (or, with `claim`, it is unclaimed)."""
    check_name(domain, Code.INVALID_DOMAIN, "domain")
    if is_shared(ctx.state, domain):
        raise TxError(Code.PRIVATE_DOMAIN_DENIED, "a shared domain cannot be private")
    record: DomainRecord | None = ctx.state.get_record(records.domain_key(domain))
    if record is None or (record.get("owner") is None and record.get("scope") is None):
        if claim:
            return {"owner": ctx.signer_hex, "scope": None, "created": ctx.block.height}
        raise TxError(Code.PRIVATE_DOMAIN_DENIED, f"domain {domain!r} has no owner")
    if record.get("owner") != ctx.signer_hex:
        raise TxError(Code.PRIVATE_DOMAIN_DENIED,
                      f"signer does not own domain {domain!r} (scoped domains have no owner)")
    return record


def make_private(ctx: TxContext, msg: tx_pb2.DomainPrivate) -> None:
    """Create the domain private (or make the owner's domain private): epoch 1."""
    record = _owned(ctx, msg.domain, claim=True)
    if private_of(record) is not None:
        raise TxError(Code.DOMAIN_ALREADY_PRIVATE)
    keys = _sealed_keys(msg.keys)
    _must_cover(keys, members(record))
    height = ctx.block.height
    record["private"] = {
        "since": height, "epochs": [{"epoch": 1, "since": height, "keys": keys}]}
    ctx.state.put_record(records.domain_key(msg.domain), record)
    ctx.emit("private", domain=msg.domain, epoch=1, members=len(keys))


def hand_keys(ctx: TxContext, msg: tx_pb2.DomainKeys) -> None:
    """More sealed copies of an existing epoch, or a new epoch (ending grants with it)."""
    record = _owned(ctx, msg.domain, claim=False)
    private = private_of(record)
    if private is None:
        raise TxError(Code.EPOCH_UNKNOWN, f"domain {msg.domain!r} is not private")
    current = private["epochs"][-1]["epoch"]
    keys = _sealed_keys(msg.keys)
    revoke = [bytes(r) for r in msg.revoke]
    height = ctx.block.height
    if 1 <= msg.epoch <= current:
        if revoke:
            raise TxError(Code.PRIVATE_REVOKE_NEEDS_EPOCH,
                          "revoke ends grants only with a new epoch (epoch = current + 1)")
        who = set(members(record))
        if not keys or not set(keys) <= who:
            raise TxError(Code.SEALED_KEYS_MEMBERS, "sealed keys go to current members only")
        epoch = private["epochs"][msg.epoch - 1]
        epoch["keys"] = dict(sorted({**epoch["keys"], **keys}.items()))
        ctx.state.put_record(records.domain_key(msg.domain), record)
        ctx.emit("epoch_keys", domain=msg.domain, epoch=msg.epoch, added=len(keys))
        return
    if msg.epoch != current + 1:
        raise TxError(Code.EPOCH_UNKNOWN,
                      f"epoch {msg.epoch}: the domain's epochs are 1..{current}, "
                      f"the next is {current + 1}")
    last = b""
    for grantee in revoke:
        if len(grantee) != 32 or grantee <= last:
            raise TxError(Code.INVALID_GRANTEE, "revoke: distinct 32-byte keys, ascending")
        last = grantee
        if ctx.state.get(records.grant_key(msg.domain, grantee)) is None:
            raise TxError(Code.GRANT_NOT_FOUND, f"no grant for {grantee.hex()[:16]}...")
    gone = {g.hex() for g in revoke}
    remaining = [m for m in members(record) if m not in gone]
    _must_cover(keys, remaining)
    # validated: write
    for grantee in revoke:
        ctx.state.delete(records.grant_key(msg.domain, grantee))
    if revoke:
        record["grantees"] = sorted(set(record.get("grantees", [])) - gone)
        private.setdefault("revoked", []).extend([height, g] for g in sorted(gone))
    private["epochs"].append({"epoch": msg.epoch, "since": height, "keys": keys})
    ctx.state.put_record(records.domain_key(msg.domain), record)
    for grantee in revoke:
        ctx.emit("revoke", domain=msg.domain, grantee=grantee.hex())
    ctx.emit("epoch", domain=msg.domain, epoch=msg.epoch, members=len(keys))


def check_submit(state: TxBuffer, domain: str, msg: tx_pb2.MemorySubmit,
                 tags: list[str]) -> int:
    """A submit's private envelope: the epoch it names (0 outside private domains), or
    raise. Checks shape only; the plaintext is never seen."""
    record: DomainRecord | None = state.get_record(records.domain_key(domain))
    current = current_epoch(record)
    if current == 0:
        if msg.epoch:
            raise TxError(Code.PRIVATE_EPOCH_NOT_CURRENT, f"domain {domain!r} is not private")
        return 0
    if msg.epoch == 0 or sealed.parse_envelope(msg.content) is None:
        raise TxError(Code.PRIVATE_CONTENT_NOT_SEALED,
                      f"domain {domain!r} is private: content must be sealed for epoch {current}")
    if msg.epoch != current:
        raise TxError(Code.PRIVATE_EPOCH_NOT_CURRENT,
                      f"epoch {msg.epoch}; domain {domain!r} is at epoch {current}")
    if tags:
        raise TxError(Code.PRIVATE_TAGS)
    return current


def refuse_revoke(state: TxBuffer, domain: str) -> None:
    """From v10 a grant in a private domain ends only with a new epoch (domain_keys)."""
    if current_epoch(state.get_record(records.domain_key(domain))):
        raise TxError(Code.PRIVATE_REVOKE_NEEDS_EPOCH)


def refuse_cocommit(state: TxBuffer, domain: str) -> None:
    if current_epoch(state.get_record(records.domain_key(domain))):
        raise TxError(Code.PRIVATE_COCOMMIT)
