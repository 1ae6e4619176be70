"""The auto-voter: votes with the node's validator key on proposed memories.

Advisory and off the consensus path: it reads the SQL projection, decides with
deterministic baseline checks, and broadcasts signed votes over cometbft's RPC like any
client. Its opinion is not consensus state. A heartbeat file tells /ready it is alive.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from nacl.signing import SigningKey

from memledger.consensus import versions
from memledger.daemon.home import VOTER_HEARTBEAT_MAX_AGE_S
from memledger.daemon.nearcopy import DEFAULT_NEAR_COPY_COSINE, NeighbourSource, first_near_copy
from memledger.daemon.voter_notes import NotesWriter
from memledger.projection.schema import make_engine, memories, validators, votes
from memledger.sdk.rpc import RpcClient, RpcError
from memledger.sdk.txbuilder import TxBuilder

log = logging.getLogger("memledger.voter")

MIN_CONTENT_CHARS = 8
CONFIDENCE_FLOOR_PPM = 100_000
RESEND_AFTER_S = 10.0
#: what a call to cometbft's RPC may raise when the node is slow, down or restarting
RPC_FAILURES = (RpcError, httpx.HTTPError, OSError)
#: proposed memories one pass looks at, at most (most are not this key's to vote on
#: only when a pinned scope's members fall behind)
SCAN_ROWS = 5000


@dataclass(frozen=True)
class Candidate:
    """What the decision function looks at; all of it comes from the projection."""

    memory_id: str
    domain: str
    content: str
    content_hash: str
    confidence_ppm: int
    duplicate_of_committed: bool
    #: (id, cosine) of a committed memory of the same domain this one rewords, if any
    near_copy_of: tuple[str, float] | None = None
    #: the memory this one corrects (v10+): a correction rewords it on purpose
    supersedes: str | None = None
    #: v10+: the epoch of a private memory (its content is sealed: nothing to read)
    epoch: int = 0


#: The reason a private memory is accepted with: consensus already checked its envelope
#: (the epoch is current, the content a well-formed sealed box of bounded size); the
#: validators cannot read it, and do not try (docs/RULES.md, "Private domains").
PRIVATE_REASON = "private memory: sealed envelope checked by consensus, content not read"


def decide(c: Candidate) -> tuple[str, str]:
    """Baseline checks in a fixed order; returns (decision, reason). A private memory is
    judged on its envelope only: the content checks and the near-copy check would read
    ciphertext, so they are skipped."""
    if not c.domain.strip():
        return "reject", "no domain"
    if c.epoch:
        if c.confidence_ppm < CONFIDENCE_FLOOR_PPM:
            return "reject", "confidence below floor"
        return "accept", PRIVATE_REASON
    if len(c.content.strip()) < MIN_CONTENT_CHARS:
        return "reject", f"content shorter than {MIN_CONTENT_CHARS} characters"
    if c.confidence_ppm < CONFIDENCE_FLOOR_PPM:
        return "reject", "confidence below floor"
    if c.duplicate_of_committed:
        return "reject", "duplicates a committed memory"
    if c.near_copy_of is not None:
        other, cosine = c.near_copy_of
        return "reject", f"near-copy of committed memory {other} (cosine {cosine:.2f})"
    return "accept", "passes baseline checks"


def heartbeat_path(home: Path) -> Path:
    return home / "run" / "voter.heartbeat"


def is_alive(home: Path, max_age_s: float = VOTER_HEARTBEAT_MAX_AGE_S) -> bool:
    """True when the voter wrote its heartbeat recently (used by /ready)."""
    path = heartbeat_path(home)
    try:
        return time.time() - path.stat().st_mtime < max_age_s
    except FileNotFoundError:
        return False


class Voter:
    """One polling loop: find, decide, sign, broadcast."""

    def __init__(self, key: SigningKey, chain_id: str, db_url: str, rpc_url: str,
                 home: Path, batch: int = 200, *, neighbours: NeighbourSource | None = None,
                 near_copy_cosine: float = DEFAULT_NEAR_COPY_COSINE) -> None:
        self.neighbours = neighbours  # None: no near-copy check
        self.near_copy_cosine = near_copy_cosine
        self.builder = TxBuilder(key, chain_id)
        self.me = self.builder.public_key.hex()
        self.engine = make_engine(db_url)
        self.rpc = RpcClient(rpc_url, timeout=10)
        self.home = home
        self.batch = batch
        self.sent: dict[str, float] = {}  # memory id -> when its vote was last broadcast
        self._resume_after: tuple[int, str] | None = None  # where a capped scan stopped
        self.last_nonce = 0
        self.notes: NotesWriter | None = None  # opened on first use (the home may be new)

    def _nonce(self) -> int:
        """max(now_ns, last+1): unique across restarts without reading state."""
        self.last_nonce = max(time.time_ns(), self.last_nonce + 1)
        return self.last_nonce

    def pending(self) -> list[Candidate]:
        """Proposed memories this key may vote on and has not voted on: up to `batch`,
        oldest first, looking at most SCAN_ROWS proposed memories per pass.

        Memories this key may not vote on (pinned ballots it is not a member of, or all of
        them while it is not a validator) are skipped, not counted: if they filled the
        batch, a backlog of them (a scope whose members are slow) would starve every
        memory behind it. When a pass looks at SCAN_ROWS without filling the batch, the
        next pass goes on after the last one looked at, and from the oldest again once it
        reaches the end, so each proposed memory is looked at within a few passes."""
        mine = sa.select(votes.c.memory_id).where(votes.c.voter == self.me)
        # a weighted ballot has no scope, and whether this key votes on it needs no record
        pinned_record = sa.case((memories.c.scope.is_(None), sa.null()),
                                else_=memories.c.record).label("pinned_record")
        scan = (sa.select(memories.c.id, memories.c.submitted_height, pinned_record)
                .where(memories.c.status == "proposed", memories.c.id.not_in(mine))
                .order_by(memories.c.submitted_height, memories.c.id)
                .limit(SCAN_ROWS))
        after, self._resume_after = self._resume_after, None
        if after is not None:
            scan = scan.where(memories.c.submitted_height >= after[0], sa.or_(
                memories.c.submitted_height > after[0], memories.c.id > after[1]))
        with self.engine.connect() as conn:
            is_validator = conn.execute(
                sa.select(validators.c.power).where(validators.c.public_key == self.me)
            ).first() is not None
            rows = conn.execute(scan).all()
            chosen = [row.id for row in rows
                      if self._eligible(row.pinned_record, is_validator)][:self.batch]
            if len(chosen) < self.batch and len(rows) == SCAN_ROWS:
                self._resume_after = (int(rows[-1].submitted_height), str(rows[-1].id))
            if not chosen:
                return []
            details = conn.execute(
                sa.select(memories.c.id, memories.c.domain, memories.c.content,
                          memories.c.content_hash, memories.c.confidence_ppm,
                          memories.c.record)
                .where(memories.c.id.in_(chosen))
                .order_by(memories.c.submitted_height, memories.c.id)).all()
            return [self._candidate(conn, row) for row in details]

    @staticmethod
    def _candidate(conn: sa.Connection, row: Any) -> Candidate:
        dup = conn.execute(
            sa.select(memories.c.id).where(
                memories.c.content_hash == row.content_hash,
                memories.c.status == "committed", memories.c.id != row.id).limit(1)
        ).first() is not None
        record = json.loads(row.record) if row.record else {}
        return Candidate(row.id, row.domain, row.content or "", row.content_hash,
                         int(row.confidence_ppm), dup, supersedes=record.get("supersedes"),
                         epoch=int(record.get("epoch") or 0))

    def _eligible(self, pinned_record: str | None, is_validator: bool) -> bool:
        """Validators vote on weighted ballots; a pinned ballot's frozen members on it."""

        if pinned_record is None:
            return is_validator
        record: dict[str, Any] = json.loads(pinned_record)
        ballot = record.get("ballot")
        if ballot is None:
            return is_validator
        return any(member == self.me for member, _ in ballot["members"])

    def _reasons_on_chain(self) -> bool | None:
        """Whether the chain's rules keep a vote's reason (app version 5+): then the
        reason goes in the vote itself; before, only into this node's notes. None when
        the app version cannot be read (the pass waits rather than vote without reasons
        on a chain that keeps them)."""
        try:
            version = int(self.rpc.abci_info()["response"].get("app_version") or 0)
        except (*RPC_FAILURES, KeyError, ValueError) as exc:
            log.warning("could not read the app version: %s", exc)
            return None
        return versions.active("vote_reason", version)

    def step(self) -> int:
        """One pass; returns the number of votes broadcast."""
        now = time.monotonic()
        sent = 0
        # a vote older than RESEND_AFTER_S is resent if its memory is still proposed, so
        # its entry is no longer needed; keeping every entry would grow without bound
        self.sent = {m: t for m, t in self.sent.items() if now - t < RESEND_AFTER_S}
        candidates = [c for c in self.pending()
                      if now - self.sent.get(c.memory_id, -1e9) >= RESEND_AFTER_S]
        if not candidates:
            return 0
        on_chain = self._reasons_on_chain()
        if on_chain is None:
            return 0
        beaten = time.monotonic()
        for cand in candidates:
            if time.monotonic() - beaten >= 1.0:
                # near-copy checks cost a recall query each (BENCHMARKS.md, "Near-copy
                # check"): a long pass still tells /ready the voter is alive
                self.beat()
                beaten = time.monotonic()
            decision, reason = decide(cand)
            if decision == "accept":  # the near-copy check costs a recall query: last
                cand = self._near_copy(cand)
                decision, reason = decide(cand)
            tx = self.builder.vote(self._nonce(), cand.memory_id, decision,
                                   reason if on_chain else "")
            try:
                result = self.rpc.broadcast_tx_sync(tx)
            except RPC_FAILURES as exc:
                log.warning("broadcast failed for %s: %s", cand.memory_id, exc)
                break
            self.sent[cand.memory_id] = now
            if result.code != 0:
                log.info("vote on %s not accepted by CheckTx: code %d %s", cand.memory_id,
                         result.code, result.log)
            else:
                log.info("voted %s on %s (%s)", decision, cand.memory_id, reason)
                if not on_chain:
                    self._note(cand.memory_id, decision, reason)
                sent += 1
        return sent

    def _near_copy(self, cand: Candidate) -> Candidate:
        """The candidate with the committed memory it rewords, when the check is on (never
        for a private memory: its content is ciphertext)."""
        if self.neighbours is None or self.near_copy_cosine <= 0 or cand.epoch:
            return cand
        with self.engine.connect() as conn:  # a domain with nothing committed: no query
            if conn.execute(sa.select(memories.c.id).where(
                    memories.c.domain == cand.domain, memories.c.status == "committed"
            ).limit(1)).first() is None:
                return cand
        found = first_near_copy(
            cand.content,
            [n for n in self.neighbours.neighbours(cand.memory_id, cand.domain, cand.content)
             if n.memory_id != cand.supersedes],
            self.near_copy_cosine)
        return cand if found is None else replace(
            cand, near_copy_of=(found.memory_id, found.cosine))

    def _note(self, memory_id: str, decision: str, reason: str) -> None:
        """Why it voted, for the memory's status_reason (memledger.daemon.voter_notes)."""
        import sqlite3

        try:
            if self.notes is None:
                self.notes = NotesWriter(self.home)
            self.notes.record(memory_id, self.me, decision, reason)
        except sqlite3.Error as exc:  # a note is an explanation, never worth a lost vote
            log.warning("could not note the reason for %s: %s", memory_id, exc)

    def beat(self) -> None:
        path = heartbeat_path(self.home)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def run(self, interval_s: float, stop: list[int]) -> None:
        """Pass after pass until `stop`. A failed pass is logged and the next one tries
        again: the voter only advises, and its exit would stop the whole node."""
        while not stop:
            try:
                self.step()
            except sa.exc.OperationalError as exc:
                log.warning("projection not readable yet: %s", exc)
            except Exception:
                log.exception("voter pass failed; the next pass tries again")
            self.beat()
            time.sleep(interval_s)
