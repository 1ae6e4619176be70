"""`AsyncClient`: the asyncio SDK client, with the same methods as `Client` (awaitable)."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping, Sequence
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
from memledger.sdk.plainhttp import AsyncPlainHttp, PlainHttp
from memledger.sdk.private import EpochKeyMissing
from memledger.sdk.private_client import (
    RESEAL_CODES,
    SHARED_BY_DEFAULT,
    PrivateDomains,
    domain_query,
)
from memledger.sdk.retry import RESIGN_CODES, NonceSource, Resigning, RetryPolicy
from memledger.sdk.txbuilder import DECISIONS, LEVELS, TxBuilder

__all__ = ["AsyncClient"]


class AsyncClient(ClientCore):
    """asyncio client with the same methods as `Client` (awaitable)."""

    def __init__(self, base_url: str = DEFAULT_URL, key: Agent | SigningKey | None = None,
                 chain_id: str | None = None, *, timeout: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        super().__init__(base_url, key, chain_id, nonces, retry, trust, trust_store, light_rpc)
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout,
                                       transport=transport)
        #: requests and their whole answers to a plain-http node skip httpx's own cost
        #: (memledger.sdk.plainhttp); streams, https, proxies and transports use `_http`
        self._plain = (AsyncPlainHttp(self.base_url, timeout)
                       if PlainHttp.serves(self.base_url, transport) else None)
        self._chain_lock: asyncio.Lock | None = None
        # private domains (v10+): the same steps as Client's, fed records fetched here
        self.private = PrivateDomains(self._key, None,
                                      self._record_value if trust is not None else None)

    async def _give_domain(self, domain: str, fresh: bool = True) -> None:
        """Fetch a domain's record for the next private-domain step (see Client)."""
        try:
            doc = await self._request("GET", "/v1/proofs/domain",
                                      params=domain_query(domain, fresh))
        except MemLedgerError as err:
            if self._trust[0] is not None or err.status != 404:
                raise
            self.private.give(domain, None)
            return
        self.private.give(domain, await asyncio.to_thread(self.private.decode, domain, doc))

    async def _opened(self, memory: Memory) -> Memory:
        if self.private.needs_record(memory):
            await self._give_domain(memory.domain)
        return self.private.open(memory)

    async def aclose(self) -> None:
        if self._plain is not None:
            await self._plain.aclose()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, method: str, path: str, wait_backlog: bool = True,
                    resend: bool = False, **kwargs: Any) -> tuple[httpx.Response, int]:
        attempt, started = 0, time.monotonic()
        while True:
            try:
                resp = await (self._http if self._plain is None else self._plain).request(
                    method, path, **kwargs)
            except httpx.HTTPError as exc:
                lost = self._retry.resend_delay(exc, attempt) if resend else None
                if lost is None:
                    raise connection_error(self.base_url, exc) from None
                await asyncio.sleep(lost)
                attempt += 1
                continue
            delay = self._retry.delay(resp, attempt, time.monotonic() - started, wait_backlog)
            if delay is None:
                return resp, attempt + 1
            await asyncio.sleep(delay)
            attempt += 1

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        resp, _ = await self._call(method, path, **kwargs)
        return self._raise_for(resp)

    async def _post_tx(self, path: str, tx: bytes, wait: str, wait_backlog: bool = True) -> Any:
        resp, sent = await self._call("POST", path, wait_backlog, resend=True,
                                      params={"wait": wait}, json=self._tx_json(tx))
        try:
            return self._raise_for(resp)
        except MemLedgerError as err:
            if sent > 1 and err.code in RESIGN_CODES:
                found = await self._landed(self._tx_hash(tx))
                if found is not None:
                    return found
            raise

    async def _landed(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            doc: dict[str, Any] = await self._request("GET", f"/v1/txs/{tx_hash}")
        except MemLedgerError:
            return None
        return doc if doc.get("status") in ("included", "committed") else None

    async def chain_id(self) -> str:
        if self._chain_lock is None:
            self._chain_lock = asyncio.Lock()
        async with self._chain_lock:
            if self._chain_id is None:
                self._chain_id = (await self.status()).chain_id
            return self._chain_id

    async def _send(self, path: str, make: MakeTx, wait: str,
                    memory_id: str | None = None) -> TxReceipt:
        key = self._require_key()
        builder = TxBuilder(key, await self.chain_id())
        refusals = Resigning(self._retry)
        while True:
            tx = make(builder, self._nonces.next())
            try:
                doc = await self._post_tx(path, tx, wait, wait_backlog=False)
            except MemLedgerError as err:
                step = refusals.after(err)
                if step is None:
                    raise
                if step.resync:
                    self._nonces.at_least((await self.account()).last_nonce)
                if step.pause:
                    await asyncio.sleep(step.pause)
                continue
            return TxReceipt.from_json({**doc, "memory_id": doc.get("memory_id") or memory_id})

    async def send(self, kind: str, *, wait: str = "commit", **fields: Any) -> TxReceipt:
        """Sign and submit a transaction of any kind with this client's key and nonces,
        e.g. `send("memory_challenge", memory_id="m-1", reason="stale")`.

        `kind` is a row of memledger.protocol.txkinds (a TxBody oneof field) and `fields`
        are its fields, by their message names (memory_type, confidence_ppm); an unknown
        or missing one is a TypeError. The typed methods (submit, vote, ...) check and
        derive more (a memory id, a confidence as a fraction); this reaches every kind."""
        make, memory_id = self._kind_maker(kind, fields, "AsyncClient.send")
        return await self._send("/v1/txs", make, wait, memory_id)

    async def broadcast_many(self, txs: Sequence[bytes], *, wait: str = "sync"
                       ) -> list[TxReceipt | MemLedgerError]:
        """As `Client.broadcast_many`."""
        body = {"txs": [base64.b64encode(tx).decode() for tx in txs]}
        return batch_outcomes(await self._request("POST", "/v1/txs", params={"wait": wait},
                                                json=body))

    async def broadcast(self, tx: bytes, *, wait: str = "commit") -> TxReceipt:
        """Send already-signed tx bytes."""
        return TxReceipt.from_json(await self._post_tx("/v1/txs", tx, wait))

    async def submit(self, memory_id: str | None, content: str, *, domain: str = "general",
                     type: str = "fact", confidence: float | int = 0.9,  # noqa: A002
                     tags: Sequence[str] = (), wait: str = "commit",
                     decide_timeout: float = 30.0, supersedes: str = "",
                     origin: Mapping[str, Any] | None = None) -> TxReceipt:
        """As `Client.submit` (also `wait="decided"`, `supersedes` and `origin`; sealed
        in a private domain)."""
        self._submit_maker(memory_id, content, domain, type, confidence, tags, supersedes,
                           origin)
        given_id, plain = memory_id, content
        for fresh in (False, True):  # settled lookup first, as Client.submit
            if domain not in SHARED_BY_DEFAULT:
                await self._give_domain(domain, fresh)
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
                receipt = await self._send("/v1/memories", make,
                                           "commit" if wait == "decided" else wait, mid)
                break
            except MemLedgerError as refused:
                if refused.code in RESEAL_CODES and not fresh:
                    continue
                if refused.code != Code.MEMORY_TERMINAL:
                    raise
                return self._earlier_write(refused, await self._memory_or_none(mid), fields)
        if wait != "decided" or not receipt.included:
            return receipt
        try:
            status = (await self.wait_decided(mid, timeout=decide_timeout)).status
        except MemLedgerError as err:
            if err.name != "decision_timeout":
                raise
            status = "proposed"
        return dataclasses.replace(receipt, memory_status=status)

    async def vote(self, memory_id: str, decision: str = "accept", *, reason: str = "",
                   wait: str = "commit") -> TxReceipt:
        one_of("decision", decision, DECISIONS)
        return await self._send("/v1/txs", lambda b, n: b.vote(n, memory_id, decision, reason),
                                wait, memory_id)

    async def challenge(self, memory_id: str, reason: str = "", *,
                        wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.challenge(n, memory_id, reason), wait,
                                memory_id)

    async def corroborate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.corroborate(n, memory_id), wait,
                                memory_id)

    async def reinstate(self, memory_id: str, *, wait: str = "commit") -> TxReceipt:
        return await self._send("/v1/txs", lambda b, n: b.reinstate(n, memory_id), wait,
                                memory_id)

    async def grant(self, domain: str, grantee: bytes | str, level: str = "write", *,
                    expires_height: int = 0, wait: str = "commit") -> TxReceipt:
        """As `Client.grant` (with the sealed key in a private domain)."""
        pk = grantee_bytes(grantee)
        one_of("level", level, LEVELS)
        receipt = await self._send(
            "/v1/txs", lambda b, n: b.grant(n, domain, pk, level, expires_height), wait)
        await self._give_domain(domain)
        epoch, keys = self.private.grant_keys(domain, pk)
        if not epoch:
            return receipt
        return await self._send("/v1/txs", lambda b, n: b.build(
            "domain_keys", n, domain=domain, epoch=epoch, keys=keys), wait)

    async def revoke(self, domain: str, grantee: bytes | str, *,
                     wait: str = "commit") -> TxReceipt:
        """As `Client.revoke` (a new epoch in a private domain)."""
        pk = grantee_bytes(grantee)
        await self._give_domain(domain)
        epoch, keys = self.private.revoke_keys(domain, pk)
        if epoch:
            return await self._send("/v1/txs", lambda b, n: b.build(
                "domain_keys", n, domain=domain, epoch=epoch, keys=keys, revoke=[pk]), wait)
        return await self._send("/v1/txs", lambda b, n: b.revoke(n, domain, pk), wait)

    async def make_private(self, domain: str, *, wait: str = "commit") -> TxReceipt:
        """As `Client.make_private`."""
        me = bytes(self._require_key().verify_key)
        await self._give_domain(domain)
        keys = self.private.make_private_keys(domain, me)
        return await self._send("/v1/txs", lambda b, n: b.build(
            "domain_private", n, domain=domain, keys=keys), wait)

    async def cocommit(self, core: bytes, signatures: Sequence[tuple[bytes, bytes]], *,
                       wait: str = "commit") -> TxReceipt:
        ordered = sorted(signatures)
        return await self._send("/v1/txs", lambda b, n: b.cocommit(n, core, ordered), wait)

    async def status(self) -> Status:
        return Status.from_json(await self._request("GET", "/v1/status"))

    async def ready(self) -> dict[str, Any]:
        doc: dict[str, Any] = await self._request("GET", "/ready")
        return doc

    async def get_memory(self, memory_id: str) -> Memory:
        return await self._opened(Memory.from_json(the_memory(
            await self._request("GET", f"/v1/memories/{quote_id(memory_id)}"), memory_id)))

    async def _memory_or_none(self, memory_id: str) -> Memory | None:
        try:
            return await self.get_memory(memory_id)
        except MemLedgerError:
            return None

    async def get(self, memory_id: str, *, verify: bool = False, fresh: bool = False
                  ) -> Memory:
        """As `Client.get`; verification runs in a worker thread."""
        if not verify:
            return await self.get_memory(memory_id)
        try:
            doc = await self._request("GET", f"/v1/memories/{quote_id(memory_id)}",
                                      params=prove_params(fresh))
        except MemLedgerError as exc:
            if exc.status != 404:
                raise
            proof = await self._request("GET", "/v1/proofs/memory", params={"id": memory_id})
            height = await asyncio.to_thread(self._absent, memory_id, proof)
            raise ProvenAbsent(exc, height) from None
        try:
            return await self._opened(await asyncio.to_thread(
                self._verified, memory_id, served_memory(doc, memory_id), doc.get("proof")))
        except ProofError as exc:
            if exc.reason != "served_differs":
                raise
        if fresh:
            await asyncio.sleep(SERVED_RETRY_S)  # see Client.get
        doc = await self._request("GET", f"/v1/memories/{quote_id(memory_id)}",
                                  params=prove_params(True))
        return await self._opened(await asyncio.to_thread(
            self._verified, memory_id, served_memory(doc, memory_id), doc.get("proof")))

    async def verified_record(self, kind: str, ident: str = "") -> tuple[Any, int]:
        doc = await self._request("GET", f"/v1/proofs/{quote_id(kind)}", params={"id": ident})
        return await asyncio.to_thread(self._record_value, kind, ident, doc)

    async def verify_memory(self, memory: Memory) -> Memory:
        for fresh in (False, True):  # see Client.verify_memory
            doc = await self._request("GET", f"/v1/memories/{quote_id(memory.id)}",
                                      params=prove_params(fresh))
            served = (served_memory(doc, memory.id) if memory.epoch and not memory.sealed
                      else memory_doc(memory))
            try:
                return await self._opened(await asyncio.to_thread(
                    self._verified, memory.id, served, doc.get("proof")))
            except ProofError as exc:
                if fresh or exc.reason != "served_differs":
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def memory_page(self, *, domain: str | None = None, status: Statuses = None,
                          type: str | None = None, author: str | None = None,  # noqa: A002
                          tags: Sequence[str] = (), include_disputed: bool = False,
                          q: str | None = None, limit: int = 100,
                          cursor: str | None = None, mode: str | None = None) -> MemoryPage:
        """One page of memories (the REST listing as it is: `next_cursor` asks for the next)."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        return await self._page(where, q=q, mode=mode, limit=limit, cursor=cursor)

    async def _page(self, where: MemoryFilter, *, q: str | None, mode: str | None, limit: int,
                    cursor: str | None, freshness: float | None = None,
                    rerank: bool = False, min_score: float | None = None) -> MemoryPage:
        params = where.params(q=q, mode=mode, limit=limit, cursor=cursor)
        if freshness is not None:
            params["freshness"] = freshness
        if rerank:
            params["rerank"] = "true"
        if min_score is not None:
            params["min_score"] = min_score
        page = page_of(await self._request("GET", "/v1/memories", params=params))
        return replace(page, items=[await self._opened(m) for m in page.items])

    async def list_memories(self, *, q: str | None = None, mode: str | None = None,
                            domain: str | None = None, status: Statuses = None,
                            type: str | None = None, author: str | None = None,  # noqa: A002
                            tags: Sequence[str] = (), include_disputed: bool = False,
                            page_size: int = 100, max_items: int | None = None,
                            limit: int | None = None) -> AsyncIterator[Memory]:
        """Every matching memory, fetching cursor pages lazily; at most `max_items`, or
        `limit` (as `recall` and `memledger search --limit` take it)."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        async for memory in self._listing(where, q, mode, page_size,
                                          most_items(max_items, limit)):
            yield memory

    async def _listing(self, where: MemoryFilter, q: str | None, mode: str | None, page_size: int,
                       max_items: int | None) -> AsyncIterator[Memory]:
        cursor: str | None = None
        seen = 0
        while True:
            page = await self._page(where, q=q, mode=mode, limit=page_size, cursor=cursor)
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
               limit: int | None = None) -> AsyncIterator[Memory]:
        """Full-text search (all words must match), newest blocks last; the filters and
        limits are `list_memories`'.

        With `verify`, every returned memory is checked against the chain (raising on the
        first that fails); that the list is complete is NOT proven.
        """
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        hits = self._listing(where, q, "words", page_size, most_items(max_items, limit))
        return self._verify_each(hits) if verify else hits

    async def recall(self, q: str, *, mode: str | None = None, limit: int = 10,
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
        default, it would list every match unranked, oldest first."""
        where = MemoryFilter(domain=domain, status=status, type=type, author=author,
                             tags=tags, include_disputed=include_disputed)
        try:
            page = await self._page(where, q=q, mode=mode or "hybrid", limit=limit, cursor=None,
                              freshness=freshness, rerank=rerank, min_score=min_score)
        except MemLedgerError as err:
            if mode is not None or rerank or err.name != RECALL_UNAVAILABLE:
                raise
            page = await self._page(where, q=q, mode="text", limit=limit, cursor=None,
                              freshness=freshness)
        if not verify:
            return page.items
        return [replace(await self.verify_memory(m), score=m.score, mode=m.mode)
                for m in page.items]

    async def _verify_each(self, hits: AsyncIterator[Memory]) -> AsyncIterator[Memory]:
        async for memory in hits:
            yield await self.verify_memory(memory)

    async def votes(self, memory_id: str) -> list[Vote]:
        doc = await self._request("GET", f"/v1/memories/{quote_id(memory_id)}/votes")
        return [known(Vote, v) for v in doc["votes"]]

    async def challenges(self, memory_id: str) -> list[dict[str, Any]]:
        doc = await self._request("GET", f"/v1/memories/{quote_id(memory_id)}/challenges")
        return list(doc["challenges"])

    async def corroborations(self, memory_id: str) -> list[Corroboration]:
        doc = await self._request("GET", f"/v1/memories/{quote_id(memory_id)}/corroborations")
        return [known(Corroboration, c) for c in doc["corroborations"]]

    async def get_cocommit(self, cocommit_id: str) -> dict[str, Any]:
        doc = await self._request("GET", f"/v1/cocommits/{quote_id(cocommit_id)}")
        return dict(doc["record"])

    async def account(self, public_key: str | None = None) -> Account:
        key = public_key or self.public_key
        if key is None:
            raise MemLedgerError("no public key given and the client has no key", name="no_key")
        return known(Account, await self._request("GET", account_path(key)))

    async def validators(self) -> list[Validator]:
        doc = await self._request("GET", "/v1/validators")
        return [known(Validator, v) for v in doc["validators"]]

    async def proposals(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": 500}
        while True:
            doc = await self._request("GET", "/v1/proposals", params=params)
            items.extend(doc["items"])
            if doc.get("next_cursor") is None:
                return items
            params = {"limit": 500, "cursor": doc["next_cursor"]}

    async def tx(self, tx_hash: str) -> TxReceipt:
        return TxReceipt.from_json(await self._request("GET", tx_path(tx_hash)))

    async def wait_tx(self, tx_hash: str, *, timeout: float = 30.0,
                      poll: float = 0.25) -> TxReceipt:
        """Poll until a block holds the tx; raises the last 404 problem on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await self.tx(tx_hash)
            except MemLedgerError as err:
                if err.status != 404 or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(poll)

    async def export(self, path: str | Path, *, domain: str | None = None,
                     status: str | None = None, type: str | None = None,  # noqa: A002
                     author: str | None = None, tags: Sequence[str] = ()) -> int:
        """As `Client.export`: a verifiable bundle of the selected memories at `path`."""
        params = bundle_params(domain, status, type, author, tags)
        try:
            async with self._http.stream("GET", "/v1/export", params=params,
                                         timeout=None) as resp:
                if resp.status_code != 200:  # before the file is made: no empty bundle
                    await resp.aread()
                    self._raise_for(resp)
                with open(path, "wb") as out:
                    async for chunk in resp.aiter_bytes():
                        out.write(chunk)
        except httpx.HTTPError as exc:
            raise connection_error(self.base_url, exc) from None
        return bundle_count(path)

    async def import_bundle(self, path: str | Path, trust: TrustRoot, *,
                            wait: str = "sync") -> ImportResult:
        """As `Client.import_bundle` (verification runs in a worker thread)."""
        memories = await asyncio.to_thread(lambda: list(read_bundle_file(path, trust)))
        receipts: list[TxReceipt] = []
        skipped: list[str] = []
        for memory in memories:
            def make(b: TxBuilder, nonce: int, m: VerifiedMemory = memory) -> bytes:
                return import_tx(b, nonce, m)

            try:
                receipts.append(await self._send("/v1/txs", make, wait, memory.memory_id))
            except MemLedgerError as refused:
                if refused.code not in ALREADY_THERE:
                    raise
                skipped.append(memory.memory_id)
        if receipts and wait == "sync":
            await self.wait_tx(receipts[-1].hash)
        return ImportResult(receipts, skipped)

    async def wait_decided(self, memory_id: str, *, timeout: float = 30.0,
                           poll: float = 0.25) -> Memory:
        """As `Client.wait_decided`."""
        deadline = time.monotonic() + timeout
        while True:
            memory = await self.get_memory(memory_id)
            if memory.status != "proposed":
                return memory
            if time.monotonic() >= deadline:
                raise decision_timeout(f"timed out after {timeout:g}s waiting for a decision "
                                       f"on memory {memory_id!r}")
            await asyncio.sleep(poll)
