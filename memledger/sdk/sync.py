"""`Client`: the blocking SDK client, safe to share between threads."""

from __future__ import annotations

import base64
import dataclasses
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.sdk.bundle.importing import ALREADY_THERE, ImportResult, import_tx
from memledger.sdk.bundle.verify import (
    VerifiedMemory,
    bundle_count,
    bundle_params,
    read_bundle_file,
)
from memledger.sdk.checks import MemoryFilter, Statuses, grantee_bytes, most_items, one_of
from memledger.sdk.core import (
    DEFAULT_URL,
    SERVED_RETRY_S,
    ClientCore,
    MakeTx,
    batch_outcomes,
    memory_doc,
    prove_params,
    served_memory,
    the_memory,
)
from memledger.sdk.errors import (
    RECALL_UNAVAILABLE,
    MemLedgerError,
    ProvenAbsent,
    connection_error,
    decision_timeout,
)
from memledger.sdk.keys import Agent
from memledger.sdk.light.client import TrustRoot
from memledger.sdk.light.errors import ProofError
from memledger.sdk.local_recall import LocalRecall, merge, wanted_statuses
from memledger.sdk.models import (
    Account,
    Corroboration,
    Memory,
    MemoryPage,
    Status,
    TxReceipt,
    Validator,
    Vote,
    known,
    page_of,
)
from memledger.sdk.paths import account_path, quote_id, tx_path
from memledger.sdk.plainhttp import PlainHttp
from memledger.sdk.private import EpochKeyMissing
from memledger.sdk.private_client import RESEAL_CODES, PrivateDomains
from memledger.sdk.retry import RESIGN_CODES, NonceSource, Resigning, RetryPolicy
from memledger.sdk.txbuilder import DECISIONS, LEVELS, TxBuilder

__all__ = ["Client"]


class Client(ClientCore):
    """Blocking client; safe to share between threads.

    Clients for one key (e.g. one per node) should share a `NonceSource` (`nonces=`), so
    that no two of them can hand out the same nonce.
    """

    def __init__(self, base_url: str = DEFAULT_URL, key: Agent | SigningKey | None = None,
                 chain_id: str | None = None, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        super().__init__(base_url, key, chain_id, nonces, retry, trust, trust_store, light_rpc)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        #: requests and their whole answers to a plain-http node skip httpx's own cost;
        #: streams, https, proxies and custom transports go through `_http`
        self._plain = (PlainHttp(self.base_url, timeout)
                       if PlainHttp.serves(self.base_url, transport) else None)
        self._chain_lock = threading.Lock()
        self.private = PrivateDomains(
            self._key, lambda path, params: self._request("GET", path, params=params),
            self._record_value if trust is not None else None)
        #: local recall over the private domains this key reads (memledger.sdk.local_recall)
        self.local = LocalRecall(self)

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, wait_backlog: bool = True, resend: bool = False,
              **kwargs: Any) -> tuple[httpx.Response, int]:
        """The answer after retrying 429/503 per the policy (and, with `resend`, a lost
        answer: see RetryPolicy.resend_delay), and how often it was sent."""
        attempt, started = 0, time.monotonic()
        while True:
            try:
                resp = (self._http if self._plain is None else self._plain).request(
                    method, path, **kwargs)
            except httpx.HTTPError as exc:
                lost = self._retry.resend_delay(exc, attempt) if resend else None
                if lost is None:
                    raise connection_error(self.base_url, exc) from None
                time.sleep(lost)
                attempt += 1
                continue
            delay = self._retry.delay(resp, attempt, time.monotonic() - started, wait_backlog)
            if delay is None:
                return resp, attempt + 1
            time.sleep(delay)
            attempt += 1

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp, _ = self._call(method, path, **kwargs)
        return self._raise_for(resp)

    def _post_tx(self, path: str, tx: bytes, wait: str, wait_backlog: bool = True) -> Any:
        """POST signed bytes (the same bytes on every retry, after a 429/503 or a lost
        answer). If a retried copy is then refused for its nonce, an earlier copy got
        through: answer with it, found by hash."""
        resp, sent = self._call("POST", path, wait_backlog, resend=True,
                                params={"wait": wait}, json=self._tx_json(tx))
        try:
            return self._raise_for(resp)
        except MemLedgerError as err:
            if sent > 1 and err.code in RESIGN_CODES:
                found = self._landed(self._tx_hash(tx))
                if found is not None:
                    return found
            raise

    def _landed(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = self._request("GET", f"/v1/txs/{tx_hash}")
        except MemLedgerError:
            return None
        return doc if doc.get("status") in ("included", "committed") else None

    @property
    def chain_id(self) -> str:
        """Given at construction, else discovered once from /v1/status."""
        with self._chain_lock:
            if self._chain_id is None:
                self._chain_id = self.status().chain_id
            return self._chain_id

    # --- writes -----------------------------------------------------------------
    def _send(self, path: str, make: MakeTx, wait: str, memory_id: str | None = None) -> TxReceipt:
        key = self._require_key()
        builder = TxBuilder(key, self.chain_id)
        refusals = Resigning(self._retry)
        while True:
            tx = make(builder, self._nonces.next())
            try:
                doc = self._post_tx(path, tx, wait, wait_backlog=False)
            except MemLedgerError as err:
                step = refusals.after(err)
                if step is None:
                    raise
                if step.resync:
                    self._nonces.at_least(self.account().last_nonce)
                if step.pause:
                    time.sleep(step.pause)
                continue
            return TxReceipt.from_json({**doc, "memory_id": doc.get("memory_id") or memory_id})

    def send(self, kind: str, *, wait: str = "commit", **fields: Any) -> TxReceipt:
        """Sign and submit a transaction of any kind with this client's key and nonces,
        e.g. `send("memory_challenge", memory_id="m-1", reason="stale")`.

        `kind` is a row of memledger.protocol.txkinds (a TxBody oneof field) and `fields`
        are its fields, by their message names (memory_type, confidence_ppm); an unknown
        or missing one is a TypeError. The typed methods (submit, vote, ...) check and
        derive more (a memory id, a confidence as a fraction); this reaches every kind."""
        make, memory_id = self._kind_maker(kind, fields, "Client.send")
        return self._send("/v1/txs", make, wait, memory_id)

    def broadcast_many(self, txs: Sequence[bytes], *, wait: str = "sync"
                       ) -> list[TxReceipt | MemLedgerError]:
        """Send many already-signed txs in one request (POST /v1/txs with `txs`): one
        receipt or MemLedgerError per tx, in the order given; a refused tx does not stop
        the others. Each signer's txs are sent in the order given. At most 256 per call."""
        body = {"txs": [base64.b64encode(tx).decode() for tx in txs]}
        return batch_outcomes(self._request("POST", "/v1/txs", params={"wait": wait},
                                                json=body))

    def broadcast(self, tx: bytes, *, wait: str = "commit") -> TxReceipt:
        """Send already-signed tx bytes."""
        return TxReceipt.from_json(self._post_tx("/v1/txs", tx, wait))

    def submit(self, memory_id: str | None, content: str, *, domain: str = "general",
               type: str = "fact", confidence: float | int = 0.9,  # noqa: A002
               tags: Sequence[str] = (), wait: str = "commit",
               decide_timeout: float = 30.0, supersedes: str = "",
               origin: Mapping[str, Any] | None = None) -> TxReceipt:
        """Propose a memory. `wait="commit"` returns once its tx is in a block (the memory
        is then `proposed`); `wait="decided"` also waits up to `decide_timeout` seconds for
        the validators' decision: `memory_status` is then `committed` or `deprecated`, or
        still `proposed` if they have not decided by then.

        `supersedes` names the committed memory this one corrects (app version 10+): once
        this one is committed, that one is `superseded`. `origin` (chain_id, height,
        memory_id, author) records where an imported memory came from (10+).

        `confidence` is a fraction from 0 to 1 (0.9 means 90%) and `tags` a list of
        strings; other values (an int above 1, a str for tags) are refused before signing,
        as is content that is not text (MemLedgerError).

        In a private domain (app version 10+) the content is sealed here with the domain's
        current epoch key before it is signed; nodes see only the envelope. A key without
        that epoch's key gets EpochKeyMissing naming it; tags are refused there."""
        # every input check first (nothing is sent for a bad input), then sealing
        self._submit_maker(memory_id, content, domain, type, confidence, tags, supersedes,
                           origin)
        given_id, plain = memory_id, content
        for fresh in (False, True):
            try:
                memory_id, content, epoch = self.private.seal(domain, given_id, plain,
                                                              tags, self.public_key or "",
                                                              fresh)
            except EpochKeyMissing:
                if fresh:
                    raise
                continue  # the grant handing this key over may be in the newest block
            mid, make, fields = self._submit_maker(memory_id, content, domain, type,
                                                   confidence, tags, supersedes, origin, epoch)
            try:
                receipt = self._send("/v1/memories", make,
                                     "commit" if wait == "decided" else wait, mid)
                break
            except MemLedgerError as refused:
                if refused.code in RESEAL_CODES and not fresh:
                    continue  # the domain changed in the newest block: look it up afresh
                if refused.code != Code.MEMORY_TERMINAL:
                    raise
                return self._earlier_write(refused, self._memory_or_none(mid), fields)
        if wait != "decided" or not receipt.included:
            return receipt
        try:
            status = self.wait_decided(mid, timeout=decide_timeout).status
        except MemLedgerError as err:
            if err.name != "decision_timeout":
                raise
            status = "proposed"  # included, not decided yet: the receipt says so
        return dataclasses.replace(receipt, memory_status=status)

    def vote(self, memory_id: str, decision: str = "accept", *, reason: str = "",
             wait: str = "commit") -> TxReceipt:
        """Vote on a proposed memory; `reason` is kept on chain with the vote (app version
        5+; an older chain refuses a vote that gives one)."""
        one_of("decision", decision, DECISIONS)
        return self._send("/v1/txs", lambda b, n: b.vote(n, memory_id, decision, reason), wait,
                          memory_id)

    def challenge(self, memory_id: str, reason: str = "", *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.challenge(n, memory_id, reason), wait,
                          memory_id)

    def corroborate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.corroborate(n, memory_id), wait, memory_id)

    def reinstate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return self._send("/v1/txs", lambda b, n: b.reinstate(n, memory_id), wait, memory_id)

    def grant(self, domain: str, grantee: bytes | str, level: str = "write", *,
              expires_height: int = 0, wait: str = "commit") -> TxReceipt:
        """Grant `grantee` a level in a domain this key owns; in a private domain also hand
        it the current epoch's key sealed to it (a second tx, after the grant commits)."""
        pk = grantee_bytes(grantee)
        one_of("level", level, LEVELS)
        receipt = self._send("/v1/txs",
                             lambda b, n: b.grant(n, domain, pk, level, expires_height), wait)
        epoch, keys = self.private.grant_keys(domain, pk)
        if not epoch:
            return receipt
        return self._send("/v1/txs", lambda b, n: b.build(
            "domain_keys", n, domain=domain, epoch=epoch, keys=keys), wait)

    def revoke(self, domain: str, grantee: bytes | str, *, wait: str = "commit") -> TxReceipt:
        """End a grant. In a private domain this starts a new epoch in the same tx, its key
        sealed to every remaining member: the revoked key cannot read what is written
        after, and keeps what it could read before (docs/SECURITY.md)."""
        pk = grantee_bytes(grantee)
        epoch, keys = self.private.revoke_keys(domain, pk)
        if epoch:
            return self._send("/v1/txs", lambda b, n: b.build(
                "domain_keys", n, domain=domain, epoch=epoch, keys=keys, revoke=[pk]), wait)
        return self._send("/v1/txs", lambda b, n: b.revoke(n, domain, pk), wait)

    def make_private(self, domain: str, *, wait: str = "commit") -> TxReceipt:
        """Make a domain private (app version 10+): claim it if nobody has, else this key
        must own it. Memories written from then on are sealed; earlier ones stay public."""
        me = bytes(self._require_key().verify_key)
        keys = self.private.make_private_keys(domain, me)
        return self._send("/v1/txs", lambda b, n: b.build(
            "domain_private", n, domain=domain, keys=keys), wait)

    def cocommit(self, core: bytes, signatures: Sequence[tuple[bytes, bytes]], *,
                 wait: str = "commit") -> TxReceipt:
        """Submit a co-commit: `core` from `cocommit_core`, one signature per coauthor."""
        ordered = sorted(signatures)
        return self._send("/v1/txs", lambda b, n: b.cocommit(n, core, ordered), wait)

    # --- reads ------------------------------------------------------------------
    def status(self) -> Status:
        return Status.from_json(self._request("GET", "/v1/status"))

    def ready(self) -> dict[str, Any]:
        doc: dict[str, Any] = self._request("GET", "/ready")
        return doc

    def get_memory(self, memory_id: str) -> Memory:
        return self.private.open(Memory.from_json(the_memory(
            self._request("GET", f"/v1/memories/{quote_id(memory_id)}"), memory_id)))

    def _memory_or_none(self, memory_id: str) -> Memory | None:
        try:
            return self.get_memory(memory_id)
        except MemLedgerError:
            return None

    def get(self, memory_id: str, *, verify: bool = False, fresh: bool = False) -> Memory:
        """One memory; with `verify`, only if its record and content prove against a
        light-client-verified app hash and match what the node served (else
        VerificationError saying which check failed).

        A verified read is proven at the newest height whose next header exists, so it
        needs no wait (`verified_height` says which height); `fresh=True` proves at the
        latest height instead and waits for the next block's header. A memory that
        changed in the latest block is read fresh."""
        if not verify:
            return self.get_memory(memory_id)
        try:
            doc = self._request("GET", f"/v1/memories/{quote_id(memory_id)}",
                                params=prove_params(fresh))
        except MemLedgerError as exc:
            if exc.status != 404:
                raise
            # A node could hide a record behind a 404: ask for the proof of absence.
            proof = self._request("GET", "/v1/proofs/memory", params={"id": memory_id})
            raise ProvenAbsent(exc, self._absent(memory_id, proof)) from None
        try:
            return self.private.open(
                self._verified(memory_id, served_memory(doc, memory_id), doc.get("proof")))
        except ProofError as exc:
            if exc.reason != "served_differs":
                raise
        # The node serves its latest projection: a memory changed in the latest block
        # (or read while the projection is flushed, just before the store at Commit)
        # differs honestly from a settled proof. Ask once more at the latest height; a
        # second difference stands.
        if fresh:
            time.sleep(SERVED_RETRY_S)
        doc = self._request("GET", f"/v1/memories/{quote_id(memory_id)}", params=prove_params(True))
        return self.private.open(
            self._verified(memory_id, served_memory(doc, memory_id), doc.get("proof")))

    def verified_record(self, kind: str, ident: str = "") -> tuple[Any, int]:
        """One canonical record checked against the chain: (value, height H).

        `kind` is memory, content, account (hex key), domain, scope, proposal, cocommit
        or validators. The value is the decoded JSON record (text for content), or None when
        the chain proves it absent.
        """
        doc = self._request("GET", f"/v1/proofs/{quote_id(kind)}", params={"id": ident})
        return self._record_value(kind, ident, doc)

    def verify_memory(self, memory: Memory) -> Memory:
        """Check a memory obtained from any read (e.g. a search hit) against the chain."""
        for fresh in (False, True):
            doc = self._request("GET", f"/v1/memories/{quote_id(memory.id)}",
                                params=prove_params(fresh))
            # an opened private memory is checked as the node served it: the envelope
            served = (served_memory(doc, memory.id) if memory.epoch and not memory.sealed
                      else memory_doc(memory))
            try:
                return self.private.open(self._verified(memory.id, served, doc.get("proof")))
            except ProofError as exc:
                if fresh or exc.reason != "served_differs":
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def memory_page(self, *, domain: str | None = None, status: Statuses = None,
                    type: str | None = None, author: str | None = None,  # noqa: A002
                    tags: Sequence[str] = (), include_disputed: bool = False,
                    q: str | None = None, limit: int = 100,
                    cursor: str | None = None, mode: str | None = None) -> MemoryPage:
        """One page of memories (the REST listing as it is: `next_cursor` asks for the next)."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        return self._page(where, q=q, mode=mode, limit=limit, cursor=cursor)

    def _page(self, where: MemoryFilter, *, q: str | None, mode: str | None, limit: int,
              cursor: str | None, freshness: float | None = None,
              rerank: bool = False, min_score: float | None = None) -> MemoryPage:
        params = where.params(q=q, mode=mode, limit=limit, cursor=cursor)
        if freshness is not None:
            params["freshness"] = freshness
        if rerank:
            params["rerank"] = "true"
        if min_score is not None:
            params["min_score"] = min_score
        page = page_of(self._request("GET", "/v1/memories", params=params))
        return replace(page, items=[self.private.open(m) for m in page.items])

    def list_memories(self, *, q: str | None = None, mode: str | None = None,
                      domain: str | None = None, status: Statuses = None,
                      type: str | None = None, author: str | None = None,  # noqa: A002
                      tags: Sequence[str] = (), include_disputed: bool = False,
                      page_size: int = 100, max_items: int | None = None,
                      limit: int | None = None) -> Iterator[Memory]:
        """Every matching memory, fetching cursor pages lazily; at most `max_items`, or
        `limit` (as `recall` and `memledger search --limit` take it)."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        yield from self._listing(where, q, mode, page_size, most_items(max_items, limit))

    def _listing(self, where: MemoryFilter, q: str | None, mode: str | None, page_size: int,
                 max_items: int | None) -> Iterator[Memory]:
        cursor: str | None = None
        seen = 0
        while True:
            page = self._page(where, q=q, mode=mode, limit=page_size, cursor=cursor)
            for memory in page.items:
                if max_items is not None and seen >= max_items:
                    return
                seen += 1
                yield memory
            if page.next_cursor is None or (max_items is not None and seen >= max_items):
                return  # no page more than needed
            cursor = page.next_cursor

    def search(self, q: str, *, verify: bool = False,
               domain: str | None = None, status: Statuses = None,
               type: str | None = None, author: str | None = None,  # noqa: A002
               tags: Sequence[str] = (), include_disputed: bool = False,
               page_size: int = 100, max_items: int | None = None,
               limit: int | None = None) -> Iterator[Memory]:
        """Full-text search (all words must match), newest blocks last; the filters and
        limits are `list_memories`'.

        With `verify`, every returned memory is checked against the chain (raising on the
        first that fails); that the list is complete is NOT proven.
        """
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        hits = self._listing(where, q, "words", page_size, most_items(max_items, limit))
        return (self.verify_memory(m) for m in hits) if verify else hits

    def recall(self, q: str, *, mode: str | None = None, limit: int = 10,
               verify: bool = False, domain: str | None = None, status: Statuses = None,
               type: str | None = None, author: str | None = None,  # noqa: A002
               tags: Sequence[str] = (), include_disputed: bool = False,
               freshness: float | None = None, rerank: bool = False,
               min_score: float | None = None) -> list[Memory]:
        """The `limit` best memories for `q`, ranked: by meaning and words fused
        (`hybrid`, the node's default when it has an embedder), by meaning alone
        (`semantic`) or by words alone (`text`, all words must match). Each hit carries
        `score` and `mode`. The filters (domain, status, type, author, tags,
        include_disputed) apply before the top-k cut. `freshness`, a half-life in days,
        weighs each hit by its age and corroborations before the cut (docs/RECALL.md;
        off by default). `rerank` (hybrid and semantic; off by default) has the node
        rescore its first 30 hits by late interaction over token states: each hit's
        `score` is then a relevance in -1..1, and `min_score` (rerank only) leaves out
        hits scored lower (docs/RECALL.md, Rerank). With `verify`, each hit is checked
        against the chain; that the ranking is complete is NOT proven.

        Without `mode`, a node with no embedder ranks by words (`text`): left to its
        default, it would list every match unranked, oldest first.

        Private domains (v10+) are ranked here, not by the node: after `client.local.sync()`
        the local index's hits (mode `local`) are merged with the node's before the cut
        (by rank: they are not reranked, and `min_score` does not apply to them)."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        try:
            page = self._page(where, q=q, mode=mode or "hybrid", limit=limit, cursor=None,
                              freshness=freshness, rerank=rerank, min_score=min_score)
        except MemLedgerError as err:
            if mode is not None or rerank or err.name != RECALL_UNAVAILABLE:
                raise
            page = self._page(where, q=q, mode="text", limit=limit, cursor=None,
                              freshness=freshness)
        hits = page.items
        if len(self.local.index) and not tags:  # private memories carry no tags
            hits = merge(hits, self.local.search(
                q, limit, domain=domain, statuses=wanted_statuses(status, include_disputed),
                type=type, author=author), limit)
        return [self._rescored(self.verify_memory(m), m) for m in hits] if verify else hits

    @staticmethod
    def _rescored(verified: Memory, hit: Memory) -> Memory:
        return replace(verified, score=hit.score, mode=hit.mode)

    def votes(self, memory_id: str) -> list[Vote]:
        doc = self._request("GET", f"/v1/memories/{quote_id(memory_id)}/votes")
        return [known(Vote, v) for v in doc["votes"]]

    def challenges(self, memory_id: str) -> list[dict[str, Any]]:
        doc = self._request("GET", f"/v1/memories/{quote_id(memory_id)}/challenges")
        return list(doc["challenges"])

    def corroborations(self, memory_id: str) -> list[Corroboration]:
        doc = self._request("GET", f"/v1/memories/{quote_id(memory_id)}/corroborations")
        return [known(Corroboration, c) for c in doc["corroborations"]]

    def get_cocommit(self, cocommit_id: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/v1/cocommits/{quote_id(cocommit_id)}")["record"])

    def account(self, public_key: str | None = None) -> Account:
        key = public_key or self.public_key
        if key is None:
            raise MemLedgerError("no public key given and the client has no key", name="no_key")
        return known(Account, self._request("GET", account_path(key)))

    def validators(self) -> list[Validator]:
        return [known(Validator, v)
                for v in self._request("GET", "/v1/validators")["validators"]]

    def proposals(self) -> list[dict[str, Any]]:
        """Every governance proposal, by id, following the cursor pages."""
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 500}
        while True:
            doc = self._request("GET", "/v1/proposals", params=params)
            items.extend(doc["items"])
            if doc.get("next_cursor") is None:
                return items
            params = {"limit": 500, "cursor": doc["next_cursor"]}

    def tx(self, tx_hash: str) -> TxReceipt:
        return TxReceipt.from_json(self._request("GET", tx_path(tx_hash)))

    def wait_tx(self, tx_hash: str, *, timeout: float = 30.0, poll: float = 0.25) -> TxReceipt:
        """Poll until a block holds the tx; raises the last 404 problem on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.tx(tx_hash)
            except MemLedgerError as err:
                if err.status != 404 or time.monotonic() >= deadline:
                    raise
            time.sleep(poll)

    def export(self, path: str | Path, *, domain: str | None = None,
               status: str | None = None, type: str | None = None,  # noqa: A002
               author: str | None = None, tags: Sequence[str] = ()) -> int:
        """Write a verifiable bundle of the memories the filter selects (all statuses
        unless `status` is given) to `path` (docs/EXPORT.md); returns its memory count.
        The node is not trusted for it: check the file with `verify_bundle`."""
        params = bundle_params(domain, status, type, author, tags)
        try:
            with self._http.stream("GET", "/v1/export", params=params, timeout=None) as resp:
                if resp.status_code != 200:  # before the file is made: no empty bundle
                    resp.read()
                    self._raise_for(resp)
                with open(path, "wb") as out:
                    for chunk in resp.iter_bytes():
                        out.write(chunk)
        except httpx.HTTPError as exc:
            raise connection_error(self.base_url, exc) from None
        return bundle_count(path)

    def import_bundle(self, path: str | Path, trust: TrustRoot, *,
                      wait: str = "sync") -> ImportResult:
        """Verify the bundle at `path` against `trust` (offline), then submit each memory,
        signed by this client's key, with its origin chain, height, id and author as
        provenance (needs app version 10). Nothing is sent if the bundle does not verify.
        `wait="sync"` (default) returns once each tx passed CheckTx; the last is then
        waited for, so all are in blocks when this returns."""
        memories = list(read_bundle_file(path, trust))
        receipts: list[TxReceipt] = []
        skipped: list[str] = []
        for memory in memories:
            def make(b: TxBuilder, nonce: int, m: VerifiedMemory = memory) -> bytes:
                return import_tx(b, nonce, m)

            try:
                receipts.append(self._send("/v1/txs", make, wait, memory.memory_id))
            except MemLedgerError as refused:
                if refused.code not in ALREADY_THERE:
                    raise
                skipped.append(memory.memory_id)
        if receipts and wait == "sync":
            self.wait_tx(receipts[-1].hash)
        return ImportResult(receipts, skipped)

    def wait_decided(self, memory_id: str, *, timeout: float = 30.0,
                     poll: float = 0.25) -> Memory:
        """Poll until validators decided the memory (any status but `proposed`) and return
        it, with `status_reason`; MemLedgerError `decision_timeout` if still proposed."""
        from memledger.sdk.waiting import wait_until

        def decided() -> Memory | None:
            memory = self.get_memory(memory_id)
            return memory if memory.status != "proposed" else None

        return wait_until(decided, timeout, poll, what=f"a decision on memory {memory_id!r}",
                          error=decision_timeout)
