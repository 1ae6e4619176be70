"""AccessGrant / AccessRevoke: the owner of a domain shares it (read < write < modify)."""

from __future__ import annotations

from memledger.consensus import versions
from memledger.consensus.families.access import private
from memledger.consensus.families.access.domains import DomainRecord, check_name, is_shared
from memledger.consensus.families.context import TxContext
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.pb import tx_pb2

_LEVELS = {
    tx_pb2.GRANT_LEVEL_READ: "read",
    tx_pb2.GRANT_LEVEL_WRITE: "write",
    tx_pb2.GRANT_LEVEL_MODIFY: "modify",
}


def _owned_domain(ctx: TxContext, domain: str) -> DomainRecord:
    """The signer must own `domain` (shared and scoped domains have no owner)."""
    check_name(domain, Code.INVALID_DOMAIN, "domain")
    if is_shared(ctx.state, domain):
        raise TxError(Code.SHARED_DOMAIN_GRANT)
    record: DomainRecord | None = ctx.state.get_record(records.domain_key(domain))
    if record is None or record.get("owner") != ctx.signer_hex:
        raise TxError(Code.GRANT_DENIED, f"signer does not own domain {domain!r}")
    return record


def _index_grantee(ctx: TxContext, domain: str, record: DomainRecord, grantee: str,
                   present: bool) -> None:
    """Keep the domain's sorted grantee index (dispute electorates are read from it)."""
    grantees = set(record.get("grantees", []))
    if present:
        grantees.add(grantee)
    else:
        grantees.discard(grantee)
    record["grantees"] = sorted(grantees)
    ctx.state.put_record(records.domain_key(domain), record)


def _grantee(ctx: TxContext, grantee: bytes) -> None:
    if len(grantee) != 32 or grantee == ctx.signer:
        raise TxError(Code.INVALID_GRANTEE)


def grant(ctx: TxContext, msg: tx_pb2.AccessGrant) -> None:
    """Create or replace a grant; optional expiry is a future block height."""
    level = _LEVELS.get(msg.level)
    if level is None:
        raise TxError(Code.INVALID_GRANT_LEVEL)
    domain = _owned_domain(ctx, msg.domain)
    _grantee(ctx, msg.grantee)
    if msg.expires_height and msg.expires_height <= ctx.block.height:
        raise TxError(Code.GRANT_EXPIRY_PAST)
    ctx.state.put_record(records.grant_key(msg.domain, msg.grantee), {
        "level": level,
        "expires": int(msg.expires_height),
        "granted_by": ctx.signer_hex,
        "height": ctx.block.height,
    })
    _index_grantee(ctx, msg.domain, domain, msg.grantee.hex(), present=True)
    ctx.emit("grant", domain=msg.domain, grantee=msg.grantee.hex(), level=level)


def revoke(ctx: TxContext, msg: tx_pb2.AccessRevoke) -> None:
    domain = _owned_domain(ctx, msg.domain)
    _grantee(ctx, msg.grantee)
    if versions.active("private_domains", ctx.block.app_version):
        private.refuse_revoke(ctx.state, msg.domain)
    key = records.grant_key(msg.domain, msg.grantee)
    if ctx.state.get(key) is None:
        raise TxError(Code.GRANT_NOT_FOUND)
    ctx.state.delete(key)
    _index_grantee(ctx, msg.domain, domain, msg.grantee.hex(), present=False)
    ctx.emit("revoke", domain=msg.domain, grantee=msg.grantee.hex())


# v10+: private domains (the rules in families/access/private.py)
make_private = private.make_private
hand_keys = private.hand_keys
