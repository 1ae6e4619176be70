"""Domain ownership and grants: who may write where (DESIGN §4)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.families.context import TxBuffer
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError
from memledger.protocol.limits import MAX_ID_BYTES

if TYPE_CHECKING:
    from memledger.consensus.families.governance.record import ScopeRecord

LEVELS = {"read": 1, "write": 2, "modify": 3}
_NAME = re.compile(r"[A-Za-z0-9._:/@-]+")


def check_name(value: str, code: Code, what: str) -> None:
    """Ids and domains: 1..128 bytes of a conservative, URL-safe alphabet."""
    size = len(value.encode())
    if size == 0 or size > MAX_ID_BYTES or _NAME.fullmatch(value) is None:
        raise TxError(
            code, f"invalid {what} {value[:40]!r}: 1..{MAX_ID_BYTES} of [A-Za-z0-9._:/@-]"
        )


class DomainRecord(TypedDict):
    """`dom/<name>`: who owns a domain, or which scope binds it (never both)."""

    owner: str | None
    scope: str | None
    created: int
    grantees: NotRequired[list[str]]  # sorted hex keys holding a grant (the grant index)
    private: NotRequired[Any]  # v10+: epochs and sealed keys (families/access/private.py)


class GrantRecord(TypedDict):
    """`grant/<domain>\0<hex>`: a level the owner gave, until `expires` (0 = never)."""

    level: str  # read | write | modify
    expires: int
    granted_by: str
    height: int


def params(state: TxBuffer) -> dict[str, Any]:
    return chain_params.current(state)


def is_shared(state: TxBuffer, domain: str) -> bool:
    return domain in params(state)["shared_domains"]


def grant_level(state: TxBuffer, domain: str, agent: bytes, height: int) -> int:
    """The agent's unexpired grant level in `domain` (0 = none)."""
    grant: GrantRecord | None = state.get_record(records.grant_key(domain, agent))
    if grant is None:
        return 0
    expires = int(grant["expires"])
    if expires and height >= expires:
        return 0
    return LEVELS[grant["level"]]


def scope_of(state: TxBuffer, domain: str) -> ScopeRecord | None:
    """The scope record governing `domain`, if any."""
    record: DomainRecord | None = state.get_record(records.domain_key(domain))
    scope_id = None if record is None else record.get("scope")
    if scope_id is None:
        return None
    scope: ScopeRecord | None = state.get_record(records.scope_key(scope_id))
    return scope


def released(record: DomainRecord, app_version: int) -> bool:
    """A record left by a scope that dropped the domain before v8 (neither owner nor
    scope), which from v8 is unclaimed like a never-used domain (before, nobody could
    write it or be granted it). From v8 a release deletes the record instead."""
    return (versions.active("scope_release_unclaims", app_version)
            and record.get("owner") is None and record.get("scope") is None)


def authorize_write(
    state: TxBuffer, domain: str, agent: bytes, height: int, app_version: int
) -> ScopeRecord | None:
    """Allow the write or raise; the first writer of an unclaimed domain becomes its owner.

    Shared domains are open to all. Scoped domains are writable by the scope's members.
    Other domains belong to their first writer; anyone else needs a write grant.
    Returns the (active) scope record of a scoped domain, so callers need not read it
    again, else None.
    """
    key = records.domain_key(domain)
    record: DomainRecord | None = state.get_record(key)
    agent_hex = agent.hex()
    scope_id = None if record is None else record.get("scope")
    if scope_id is not None:
        scope: ScopeRecord | None = state.get_record(records.scope_key(scope_id))
        if scope is None or scope["state"] != "active":
            raise TxError(Code.SCOPE_NOT_ACTIVE, f"scope of domain {domain!r} is not active")
        if agent_hex not in {m for m, _ in scope["members"]}:
            raise TxError(Code.DOMAIN_WRITE_DENIED, f"not a member of scope {scope['id']!r}")
        return scope
    if is_shared(state, domain):
        if record is None:
            state.put_record(key, {"owner": None, "scope": None, "created": height})
        return None
    if record is None or released(record, app_version):
        state.put_record(key, {"owner": agent_hex, "scope": None, "created": height})
        return None
    if record["owner"] == agent_hex:
        return None
    if grant_level(state, domain, agent, height) < LEVELS["write"]:
        raise TxError(Code.DOMAIN_WRITE_DENIED, f"domain {domain!r} needs a write grant")
    return None


def can_modify(state: TxBuffer, domain: str, agent: bytes, height: int) -> bool:
    """Owner or modify-grant holder (the challenge right)."""
    record = state.get_record(records.domain_key(domain))
    if record is not None and record.get("owner") == agent.hex():
        return True
    return grant_level(state, domain, agent, height) >= LEVELS["modify"]


def may_write(state: TxBuffer, domain: str, agent: bytes, height: int) -> bool:
    """Whether `agent` may write the existing `domain` now (v10+ peer disputes): a member
    of its active scope, anyone in a shared domain, its owner or a write-grant holder. No
    side effects: unlike authorize_write, it never claims the domain."""
    record: DomainRecord | None = state.get_record(records.domain_key(domain))
    scope = scope_of(state, domain)
    if scope is not None:
        return scope["state"] == "active" and agent.hex() in {m for m, _ in scope["members"]}
    if is_shared(state, domain):
        return True
    if record is None or record.get("owner") is None:
        return False
    return record["owner"] == agent.hex() or (
        grant_level(state, domain, agent, height) >= LEVELS["write"])


def write_right_hint(state: TxBuffer, domain: str) -> str:
    """How a key gets the right to write `domain` (a refusal's last words)."""
    scope = scope_of(state, domain)
    if scope is not None:
        return (f"it belongs to scope {scope['id']!r}, whose members governance sets "
                f"(`memledger gov propose scope revise {scope['id']} --member KEY:WEIGHT`)")
    record: DomainRecord | None = state.get_record(records.domain_key(domain))
    owner = None if record is None else record.get("owner")
    if owner is None:
        return "the domain has no owner to grant access"
    return (f"its owner {owner[:16]}... grants access (`memledger grant {domain} KEY "
            "--level write`, or `--level modify`)")
