"""Why a memory has its status: one sentence derived from what happened, for get/REST/SDK.

Rules that surprise (an author's own challenge deprecates at once; the auto-voter rejects
short or duplicate content) must explain themselves. Everything here is read, never
decided: the sentence is a pure function of the memory's canonical record (votes,
history, expiry, and since app version 5 the reason each voter gave with its vote), its
dispute rounds (opener, challengers, their stated reasons, k) and, for a vote cast
without an on-chain reason, the reason this node's auto-voter noted for it
(memledger.daemon.voter_notes; off-chain, so only the node whose voter cast the vote can
say why it did).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from memledger.api import queries
from memledger.daemon.voter_notes import VoterNote, read_notes

__all__ = ["annotate", "get_memory", "list_memories", "status_reason"]

# The two projection tables read here, by name (only the columns used).
memories = sa.table("memories", sa.column("id"), sa.column("record"))
documents = sa.table("documents", sa.column("kind"), sa.column("id"), sa.column("record"))


def _short(key: str) -> str:
    return key[:12]


def _tally(votes: Mapping[str, Sequence[Any]]) -> str:
    counts = {"accept": 0, "reject": 0, "abstain": 0}
    for decision, *_ in votes.values():
        counts[str(decision)] = counts.get(str(decision), 0) + 1
    return ", ".join(f"{n} {d}" for d, n in counts.items() if n) or "no votes"


def _last_height(record: Mapping[str, Any], status: str) -> int | None:
    for height, st in reversed(record.get("history") or []):
        if st == status:
            return int(height)
    return None


def _round_text(round_: Mapping[str, Any], author: str) -> tuple[str, str]:
    """(who and how, the reasons challengers gave) for a dispute round that deprecated."""
    opener = str(round_.get("opener", ""))
    k = int(round_.get("k", 0))
    stated = [str(r) for r in (round_.get("reasons") or {}).values() if r]
    said = f" (reason given: {'; '.join(repr(s) for s in stated)})" if stated else ""
    if k == 0 and opener == author:
        return ("withdrawn by its author: the author's own challenge deprecates a memory at "
                "once when no one else corroborated it (no one to dispute it)"), said
    if k == 0:
        return (f"deprecated by a challenge from {_short(opener)}: no corroborator was there "
                "to dispute it"), said
    challengers = len(round_.get("challengers") or [])
    return f"deprecated by {challengers} challengers ({k + 1} needed, k = {k})", said


def status_reason(record: Mapping[str, Any], rounds: Sequence[Mapping[str, Any]],
                  notes: Mapping[str, VoterNote] | None = None) -> str | None:
    """One sentence: why `record` has its current status (None if nothing to explain)."""
    status = record.get("status")
    votes: Mapping[str, Sequence[Any]] = record.get("votes") or {}
    author = str(record.get("author", ""))
    last_round = rounds[-1] if rounds else None
    note = "".join(f"; {_short(voter)} voted {entry[0]}: {entry[2]}"
                   for voter, entry in sorted(votes.items()) if len(entry) > 2 and entry[2])
    for voter, n in (notes or {}).items():
        if voter in votes and len(votes[voter]) <= 2:
            note += f"; this node's auto-voter ({_short(voter)}) voted {n.decision}: {n.reason}"
    if status == "proposed":
        return f"awaiting validator votes ({_tally(votes)} so far){note}"
    if status == "superseded":
        return (f"superseded by its correction {record.get('superseded_by')!r}, committed at "
                f"height {_last_height(record, 'superseded')}")
    if status == "challenged" and last_round is not None and last_round.get("kind") == "peer":
        return (f"disputed by {_short(str(last_round.get('opener', '')))} (a peer dispute): "
                "deprecated if 2/3 of its electorate's weight rejects it, back to committed "
                "if 2/3 accepts, everyone voted, or the dispute expires")
    if status == "challenged" and last_round is not None:
        k = int(last_round.get("k", 0))
        return (f"challenged by {_short(str(last_round.get('opener', '')))}: deprecated once "
                f"{k + 1} challengers agree, or back to committed if a member of the dispute "
                f"electorate reinstates it")
    if status == "committed":
        if record.get("cocommit"):
            signers = len(record.get("coauthors") or [])
            return f"co-committed: jointly signed by {signers} coauthors, committed on inclusion"
        if last_round is not None and last_round.get("outcome") == "reinstated":
            return f"reinstated by {_short(str(last_round.get('reinstated_by', '')))}"
        if last_round is not None and last_round.get("outcome") in ("kept", "expired"):
            how = ("its electorate kept it" if last_round["outcome"] == "kept"
                   else "the dispute expired undecided")
            return (f"peer dispute by {_short(str(last_round.get('opener', '')))} ended at "
                    f"height {last_round.get('closed_height')}: {how}")
        return f"accepted by validator votes at height {record.get('decided_height')}: " \
               f"{_tally(votes)}{note}"
    if status == "deprecated":
        height = record.get("decided_height")
        if record.get("expired_height") is not None:
            return (f"expired at height {record['expired_height']}: no quorum before its "
                    f"ballot closed ({_tally(votes)})")
        if _last_height(record, "challenged") is not None and last_round is not None \
                and last_round.get("outcome") == "deprecated" \
                and last_round.get("kind") == "peer":
            return (f"deprecated at height {height}: its electorate upheld a peer dispute by "
                    f"{_short(str(last_round.get('opener', '')))}")
        if _last_height(record, "challenged") is not None and last_round is not None \
                and last_round.get("outcome") == "deprecated":
            how, said = _round_text(last_round, author)
            return f"{how}, at height {height}{said}"
        return (f"rejected by validator votes at height {height}: {_tally(votes)}; more than "
                f"2/3 of the voting power can no longer accept it{note}")
    return None


# Built once (compiled once): one round trip per read, whatever the page size.
_RECORDS = sa.select(memories.c.id, memories.c.record).where(
    memories.c.id.in_(sa.bindparam("ids", expanding=True)))
_ROUNDS = sa.select(documents.c.id, documents.c.record).where(
    documents.c.kind == "challenge", documents.c.id.in_(sa.bindparam("ids", expanding=True)))


def _documents(conn: sa.Connection, stmt: sa.Select[Any], ids: list[str]
               ) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        rows = conn.execute(stmt, {"ids": ids[i:i + 500]})
        out.update((row.id, json.loads(row.record)) for row in rows)
    return out


def annotate(conn: sa.Connection, items: list[dict[str, Any]], home: Path | None,
             records: dict[str, dict[str, Any]] | None = None) -> None:
    """Set `status_reason` on API memory objects: their canonical records (read here
    unless given) and dispute rounds from the projection, and this node's voter notes
    (if `home` is known)."""
    if not items:
        return
    ids = [str(it["id"]) for it in items]
    if records is None:
        records = _documents(conn, _RECORDS, ids)
    disputed = [i for i in ids
                if any(st == "challenged" for _, st in records.get(i, {}).get("history", []))]
    rounds = {k: list(v.get("rounds", [v])) for k, v in
              _documents(conn, _ROUNDS, disputed).items()} if disputed else {}
    notes = read_notes(home, ids) if home is not None else {}
    for item in items:
        record = records.get(str(item["id"]))
        item["status_reason"] = None if record is None else status_reason(
            record, rounds.get(str(item["id"]), []), notes.get(str(item["id"])))


def get_memory(conn: sa.Connection, memory_id: str, home: Path | None) -> dict[str, Any] | None:
    """queries.get_memory's answer with its `status_reason`, from the same row (a second
    round trip only for a disputed memory)."""
    # queries.get_memory's own statement: the same row, shaped by the same function.
    row = conn.execute(queries.MEMORY_BY_ID, {"memory_id": memory_id}).first()
    if row is None:
        return None
    record = json.loads(row.record)
    found = queries.memory_json(row, record)
    annotate(conn, [found], home, {memory_id: record})
    found["corrections"] = correction_chain(conn, record)
    return found


#: Links followed each way at most: a chain is one memory corrected again and again.
MAX_CHAIN = 64
_LINK = sa.select(memories.c.record).where(memories.c.id == sa.bindparam("memory_id"))


def correction_chain(conn: sa.Connection, record: Mapping[str, Any]) -> list[str] | None:
    """The ids of `record`'s chain of corrections, oldest first (None: it has none)."""
    if not (record.get("supersedes") or record.get("superseded_by")
            or record.get("pending_correction")):
        return None
    chain = [str(record["id"])]
    for link, at_end in (("supersedes", False), ("superseded_by", True)):
        current: Mapping[str, Any] = record
        for _ in range(MAX_CHAIN):
            nxt = current.get(link)
            raw = None if nxt is None else conn.execute(_LINK, {"memory_id": nxt}).scalar()
            if raw is None:
                break
            current = json.loads(raw)
            if at_end:
                chain.append(str(nxt))
            else:
                chain.insert(0, str(nxt))
    return chain


def list_memories(conn: sa.Connection, flt: queries.MemoryFilter, limit: int,
                  cursor: str | None, home: Path | None
                  ) -> tuple[list[dict[str, Any]], str | None]:
    """queries.list_memories with each item's `status_reason`, from the records of the
    rows the page already read (a second round trip only for disputed memories)."""
    records: dict[str, dict[str, Any]] = {}
    items, next_cursor = queries.list_memories(conn, flt, limit, cursor, records)
    annotate(conn, items, home, records)
    return items, next_cursor
