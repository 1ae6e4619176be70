"""Scope records: exact domains bound to a weighted member list (DESIGN §4).

One code path (`apply_scope`) writes a scope, whether it comes from genesis or from a
passed governance proposal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memledger.consensus import params as chain_params
from memledger.consensus import versions
from memledger.consensus.families.access.domains import check_name
from memledger.consensus.families.context import TxBuffer
from memledger.consensus.families.governance.record import ScopeRecord
from memledger.protocol import records
from memledger.protocol.codes import Code, TxError

MAX_MEMBERS = 256
MAX_SCOPE_DOMAINS = 64
MAX_WEIGHT = 1 << 40


class ScopeError(ValueError):
    pass


@dataclass(frozen=True)
class ScopeSpec:
    scope_id: str
    domains: tuple[str, ...]
    members: tuple[tuple[str, int], ...]  # sorted by key


def parse_spec(spec: Any) -> ScopeSpec:
    """Validate a scope spec from JSON (genesis) form.

    A genesis file is hand-written, so each field's JSON type is checked before make_spec
    reads it: a wrong shape is a ScopeError naming the field (a clean halt), never a
    TypeError from iterating or sorting it.
    """
    if not isinstance(spec, dict) or set(spec) != {"id", "domains", "members"}:
        raise ScopeError("scope needs exactly the keys id, domains, members")
    if not isinstance(spec["id"], str):
        raise ScopeError(f"scope id must be a string, not {chain_params.json_type(spec['id'])}")
    domains = spec["domains"]
    if not isinstance(domains, list):
        raise ScopeError(f"scope {spec['id']!r}: domains must be a list of strings, not "
                         f"{chain_params.json_type(domains)}")
    for domain in domains:
        if not isinstance(domain, str):
            raise ScopeError(f"scope {spec['id']!r}: domains must be strings, not "
                             f"{chain_params.json_type(domain)}")
    if not isinstance(spec["members"], list):
        raise ScopeError(f"scope {spec['id']!r}: members must be a list of [hex key, weight], "
                         f"not {chain_params.json_type(spec['members'])}")
    members = []
    for entry in spec["members"]:
        if not (isinstance(entry, list) and len(entry) == 2):
            raise ScopeError("member must be [hex key, weight]")
        members.append((entry[0], entry[1]))
    return make_spec(spec["id"], domains, members)


def make_spec(scope_id: Any, domains: list[Any], members: list[tuple[Any, Any]]) -> ScopeSpec:
    """Check ids, domains, keys and weights; normalise ordering."""
    try:
        check_name(str(scope_id), Code.GOV_INVALID_PROPOSAL, "scope id")
        for domain in domains:
            check_name(str(domain), Code.GOV_INVALID_PROPOSAL, "domain")
    except TxError as exc:
        raise ScopeError(exc.log) from None
    if not isinstance(scope_id, str) or not domains or len(domains) > MAX_SCOPE_DOMAINS:
        raise ScopeError("scope needs 1..64 domains")
    if len(set(domains)) != len(domains):
        raise ScopeError("duplicate scope domains")
    if not members or len(members) > MAX_MEMBERS:
        raise ScopeError("scope needs 1..256 members")
    seen = set()
    for key, weight in members:
        if not isinstance(key, str) or len(key) != 64 or key != key.lower():
            raise ScopeError("member key must be 64 lowercase hex chars")
        try:
            bytes.fromhex(key)
        except ValueError:
            raise ScopeError("member key must be hex") from None
        if type(weight) is not int or weight <= 0 or weight > MAX_WEIGHT:
            raise ScopeError("member weight must be a positive integer")
        if key in seen:
            raise ScopeError("duplicate scope member")
        seen.add(key)
    return ScopeSpec(scope_id, tuple(sorted(domains)), tuple(sorted(members)))


def check_domains_free(state: TxBuffer, spec: ScopeSpec) -> None:
    """Raise ScopeError unless every domain of the spec is unshared, unowned, and unbound or
    bound to this same scope. The one binding check, for genesis and for proposals."""
    shared = set(chain_params.value(state, "shared_domains"))
    for domain in spec.domains:
        bound = state.get_record(records.domain_key(domain))
        if domain in shared or (bound is not None and (
                bound.get("owner") is not None
                or bound.get("scope") not in (None, spec.scope_id))):
            raise ScopeError(f"domain {domain!r} is shared, owned or in another scope")


def apply_scope(state: TxBuffer, spec: ScopeSpec, height: int,
                app_version: int) -> ScopeRecord:
    """Create or revise a scope and bind its domains. Domains owned by someone else, or
    bound to another scope, are refused.

    A revise releases the domains it drops. From v8 a released domain's record is deleted
    (it is unclaimed again, exactly like a never-used domain) and the domains it keeps
    keep their record, `created` included. Before v8 a released domain kept a record
    with neither owner nor scope, and every kept domain was written again as created now.
    """
    check_domains_free(state, spec)
    unclaims = versions.active("scope_release_unclaims", app_version)
    key = records.scope_key(spec.scope_id)
    current: ScopeRecord | None = state.get_record(key)
    kept: set[str] = set()
    if current is not None:
        for domain in current["domains"]:
            if domain in spec.domains:
                kept.add(domain)
            elif unclaims:
                state.delete(records.domain_key(domain))
            else:
                state.put_record(records.domain_key(domain),
                                 {"owner": None, "scope": None, "created": height})
    record: ScopeRecord = {
        "id": spec.scope_id,
        "domains": list(spec.domains),
        "members": [[m, w] for m, w in spec.members],
        "revision": 1 if current is None else int(current["revision"]) + 1,
        "state": "active" if current is None else current["state"],
        "updated_height": height,
    }
    state.put_record(key, record)
    for domain in spec.domains:
        if unclaims and domain in kept:
            continue
        state.put_record(records.domain_key(domain),
                         {"owner": None, "scope": spec.scope_id, "created": height})
    return record


def set_state(state: TxBuffer, scope_id: str, new_state: str, height: int) -> None:
    """Pause, resume or retire a scope (retired is final)."""
    key = records.scope_key(scope_id)
    record = state.get_record(key)
    if record is None:
        raise ScopeError(f"unknown scope {scope_id!r}")
    if record["state"] == "retired":
        raise ScopeError("scope is retired")
    record["state"] = new_state
    record["updated_height"] = height
    state.put_record(key, record)
