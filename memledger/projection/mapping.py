"""How canonical records become projection rows: one table row per key family.

The projection is a pure function of canonical records: every changed key of a block
maps to rows here, so an incremental flush and a rebuild from canonical state produce the
same tables. A key family is found by its prefix (the bytes up to and including the
first "/"); a few system records are matched whole first. A key no row of the table
claims is a bug: the flush raises, and the node halts rather than serve a partial view.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _encode_str  # type: ignore[attr-defined]
from typing import Any

import sqlalchemy as sa

from memledger.consensus.store import codec
from memledger.projection.schema import (
    accounts,
    corroborations,
    documents,
    domains,
    grants,
    memories,
    memory_tags,
    validators,
    votes,
)
from memledger.protocol import records


class Batch:
    """Rows of one flush, grouped by table, in canonical key order."""

    def __init__(self) -> None:
        self.upserts: dict[str, list[dict[str, Any]]] = {}
        self.deletes: list[tuple[sa.Table, dict[str, Any]]] = []
        self.content: dict[str, str] = {}
        self.replace_children: list[tuple[sa.Table, str, list[dict[str, Any]]]] = []

    def upsert(self, table: sa.Table, row: dict[str, Any]) -> None:
        self.upserts.setdefault(table.name, []).append(row)


#: (batch, the key without its prefix, the new value or None for a delete)
Mapper = Callable[["Batch", bytes, bytes | None], None]


def _content(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    if value is not None:  # content is written once and never deleted
        batch.content[suffix.decode()] = value.decode()


def _memory(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    memory_id = suffix.decode()
    if value is None:
        batch.deletes.append((memories, {"id": memory_id}))
        return
    rec = codec.decode(value)
    batch.upsert(memories, _memory_row(rec, value))
    batch.replace_children.append(
        (memory_tags, memory_id, [{"memory_id": memory_id, "tag": t} for t in rec["tags"]])
    )
    batch.replace_children.append((votes, memory_id, [
        {"memory_id": memory_id, "voter": voter, "decision": d, "height": h}
        for voter, (d, h, *_reason) in sorted(rec["votes"].items())
    ]))


def _account(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    pk = suffix.decode()
    if value is None:
        batch.deletes.append((accounts, {"public_key": pk}))
    else:
        batch.upsert(accounts, {"public_key": pk, "nonce": str(codec.decode(value)["nonce"])})


def _domain(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    name = suffix.decode()
    if value is None:
        batch.deletes.append((domains, {"name": name}))
        return
    rec = codec.decode(value)
    batch.upsert(domains, {"name": name, "owner": rec["owner"], "scope": rec["scope"],
                           "created": rec["created"]})


def _grant(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    domain, grantee = records.split_compound(records.GRANT + suffix, records.GRANT)
    if value is None:
        batch.deletes.append((grants, {"domain": domain, "grantee": grantee}))
        return
    rec = codec.decode(value)
    batch.upsert(grants, {"domain": domain, "grantee": grantee, "level": rec["level"],
                          "expires": str(rec["expires"]), "record": value.decode()})


def _corroboration(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    memory_id, agent = records.split_compound(records.CORROBORATION + suffix,
                                              records.CORROBORATION)
    if value is None:
        batch.deletes.append((corroborations, {"memory_id": memory_id, "agent": agent}))
    else:
        batch.upsert(corroborations, {"memory_id": memory_id, "agent": agent,
                                      "height": codec.decode(value)["height"]})


def _validator_set(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    members = [] if value is None else codec.decode(value)["validators"]
    batch.replace_children.append((validators, "", [
        {"public_key": m, "power": p} for m, p in members
    ]))


def _document(kind: str) -> Mapper:
    """Records served whole, as a JSON document of this kind."""
    def add(batch: Batch, suffix: bytes, value: bytes | None) -> None:
        key = {"kind": kind, "id": suffix.decode()}
        if value is None:
            batch.deletes.append((documents, key))
        else:
            batch.upsert(documents, {**key, "record": value.decode()})
    return add


def _not_served(batch: Batch, suffix: bytes, value: bytes | None) -> None:
    """Consensus-only indexes (what the memory records already say, ordered for the
    state machine's own scans): nothing to serve."""


#: whole system keys -> mapper (matched before prefixes; the suffix passed is b"")
SYSTEM_KEYS: dict[bytes, Mapper] = {
    records.VALIDATORS: _validator_set,
    records.PARAMS: _document("params"),
    records.CHAIN: _document("chain"),
}

#: key family prefix -> mapper, grouped by the rule family that owns the keys
PREFIXES: dict[bytes, Mapper] = {
    # memory
    records.MEMORY: _memory,
    records.CONTENT: _content,
    records.BALLOT: _document("ballot"),
    records.BALLOT_EXPIRY: _not_served,
    # disputes
    records.CORROBORATION: _corroboration,
    records.CHALLENGE: _document("challenge"),
    records.PEER_EXPIRY: _not_served,
    records.PEER_CHALLENGER: _not_served,
    # co-commit
    records.COCOMMIT: _document("cocommit"),
    # access
    records.DOMAIN: _domain,
    records.GRANT: _grant,
    # accounts
    records.ACCOUNT: _account,
    # governance
    records.SCOPE: _document("scope"),
    records.PROPOSAL: _document("proposal"),
    records.SYS: _document("sys"),  # the other sys/ records: gov state, upgrade, versions
}


def add_change(batch: Batch, key: bytes, value: bytes | None) -> None:
    """Translate one canonical change into projection rows."""
    if key in SYSTEM_KEYS:
        SYSTEM_KEYS[key](batch, b"", value)
        return
    cut = key.find(b"/") + 1
    mapper = PREFIXES.get(key[:cut]) if cut else None
    if mapper is None:
        raise ValueError(f"no projection mapping for canonical key {key[:40]!r}")
    mapper(batch, key[cut:], value)


def tags_json(tags: list[str]) -> str:
    """json.dumps(tags), byte for byte, without the encoder's per-call setup (a rebuild
    encodes a million of these)."""
    if all(type(tag) is str for tag in tags):
        return "[" + ", ".join(map(_encode_str, tags)) + "]"
    return json.dumps(tags)


def _memory_row(rec: dict[str, Any], raw: bytes) -> dict[str, Any]:
    ballot = rec.get("ballot")
    return {
        "id": rec["id"],
        "domain": rec["domain"],
        "author": rec["author"],
        "type": rec["type"],
        "content_hash": rec["content_hash"],
        "confidence_ppm": rec["confidence_ppm"],
        "tags": tags_json(rec["tags"]),
        "status": rec["status"],
        "submitted_height": rec["submitted_height"],
        "submitted_time_ns": rec["submitted_time_ns"],
        "decided_height": rec["decided_height"],
        "scope": None if ballot is None else ballot["scope"],
        "cocommit": rec.get("cocommit"),
        "tx": rec["tx"],
        "record": raw.decode(),
    }
