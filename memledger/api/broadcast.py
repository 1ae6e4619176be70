"""Submit signed transactions to cometbft and report exactly what is known about them.

Three honest answers: rejected (a result code, from CheckTx or from the block),
accepted/included, or unknown. A tx is `included` in a block; a *memory* is `committed`
only when validators accept it, so a submit's outcome also carries `memory_status` (what
the block made of the memory: usually `proposed`). A timeout or a dropped connection
after the bytes went out is *unknown* — the tx may still be included — and is never
reported as failure or success;
the client polls GET /v1/txs/{hash}. Every cometbft call is made on the event loop
(AsyncRpcClient, no worker-thread hop), and a commit wait is answered by the block
follower (follower.py), so slow commits hold no worker thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any

import anyio
import httpx

from memledger.api.deps import ApiState
from memledger.api.problems import Problem, code_name, tx_rejected
from memledger.api.schemas import WaitMode
from memledger.consensus.gate.envelope import peek_signer_nonce
from memledger.consensus.query import BACKLOG_PATH
from memledger.protocol.codes import Code
from memledger.sdk.rpc import RpcError

ACCEPTED = 202
INCLUDED = 200


def tx_hash_hex(tx: bytes) -> str:
    return hashlib.sha256(tx).hexdigest()


def _events(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": str(ev.get("type", "")),
         "attributes": {str(a.get("key", "")): str(a.get("value") or "")
                        for a in ev.get("attributes") or []}}
        for ev in result.get("events") or []
    ]


def _memory_event(events: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """(memory id, memory status) from the block's last `memory` event of this tx."""
    for ev in reversed(events):
        attrs = ev["attributes"]
        if ev["type"] == "memory" and "id" in attrs:
            return attrs["id"], attrs.get("status") or None
    return None, None


def outcome_from_tx(found: dict[str, Any]) -> dict[str, Any]:
    """A /tx RPC answer as a TxOutcome body (code 0 -> included, else rejected)."""
    result = found.get("tx_result") or {}
    code = int(result.get("code") or 0)
    events = _events(result)
    memory_id, memory_status = _memory_event(events)
    body: dict[str, Any] = {
        "status": "included" if code == 0 else "rejected",
        "hash": str(found.get("hash", "")).lower(),
        "code": code,
        "name": "ok" if code == 0 else code_name(code),
        "log": str(result.get("log") or ""),
        "height": int(found.get("height") or 0),
        "events": events,
    }
    if code == 0 and memory_id is not None:
        body.update(memory_id=memory_id, memory_status=memory_status)
    return body


def _unknown(tx_hash: str, why: str) -> dict[str, Any]:
    return {"status": "unknown", "hash": tx_hash,
            "log": f"{why}; poll GET /v1/txs/{tx_hash} — it may still be included"}


def _rpc_problem(exc: RpcError, tx_hash: str) -> Problem | None:
    """Map cometbft's mempool refusals; None for 'already in cache' (not an error)."""
    text = f"{exc.message} {exc.data}".lower()
    if "already exists in cache" in text:
        return None
    if "mempool is full" in text:
        problem = Problem(503, "mempool_full", "cometbft's mempool is full; retry later",
                          hash=tx_hash)
        problem.headers["Retry-After"] = "1"
        return problem
    if "too large" in text:
        return tx_rejected(int(Code.TX_TOO_LARGE), exc.data or exc.message, tx_hash)
    return Problem(502, "cometbft_error", f"cometbft refused the tx: {exc.data or exc.message}",
                   hash=tx_hash)


async def _admit(state: ApiState, peeked: tuple[bytes, int] | None, tx_hash: str) -> None:
    """Refuse a client's tx while its signer's backlog in this node's mempool is full, or
    when it is so far behind that acknowledging it would be a promise the window may break.

    The app answers from its mempool view (docs/RULES.md, "Nonces"), asked once per signer
    per block: until the next block, the API counts from that answer (backlog.py). Anything
    that keeps the question from being answered lets the tx through: CheckTx still judges
    it. Called under the signer's admission lock (signer_locks.py).
    """
    if peeked is None:
        return
    signer, nonce = peeked
    if state.following() is not None and state.backlog.lets_through(signer, nonce):
        return
    try:
        result = await state.aio().abci_query(BACKLOG_PATH, f"{signer.hex()}/{nonce}".encode())
        if result.code != 0:
            return
        room = json.loads(result.value)
        verdict = room.get("verdict")
        state.backlog.answered(signer, nonce, result.height, pending=int(room["pending"]),
                               newer=int(room["newer"]), limit=int(room["limit"]),
                               verdict=str(verdict))
    except (httpx.HTTPError, RpcError, ValueError, AttributeError, KeyError, TypeError):
        state.backlog.forget(signer)
        return
    if verdict == "full":
        raise tx_rejected(
            int(Code.SIGNER_BACKLOG_FULL),
            f"this node holds {room['above_oldest']} pending txs of signer "
            f"{signer.hex()[:16]}… above its oldest pending one; the limit is "
            f"{room['limit']} (nonce_window / 4): send it again after the next block",
            tx_hash, stage="admission")
    if verdict == "behind":
        raise tx_rejected(
            int(Code.NONCE_BELOW_WINDOW),
            f"nonce {nonce} is behind {room['newer']} newer nonces of this signer; with "
            f"one more backlog ({room['limit']}) it could fall out of the window "
            f"({room['window']}), so it is not acknowledged: sign again with a fresh nonce",
            tx_hash, stage="admission")


#: what `_send` learnt: CheckTx's answer, or that cometbft already held the same bytes
_CACHED = object()


async def _send(state: ApiState, tx: bytes, tx_hash: str, wait: WaitMode
                ) -> Any | tuple[int, dict[str, Any]]:
    """Admit and broadcast `tx` under its signer's lock: CheckTx's result, `_CACHED`, or
    a final (status, body) for wait=none and a dropped connection; raises a Problem."""
    metrics = state.metrics
    peeked = peek_signer_nonce(tx)
    async with state.admissions.hold(peeked[0] if peeked else None):
        try:
            await _admit(state, peeked, tx_hash)
        except Problem as refused:
            metrics.count_tx(wait.value, refused.extra.get("code", ""), refused.name)
            raise
        try:
            # wait=none too waits for CheckTx (milliseconds): until it has answered, the
            # next admission of this signer would not count this tx
            checked = await state.aio().broadcast_tx_sync(tx)
            if checked.code == 0 and peeked is not None:
                state.backlog.admitted(*peeked)
            if wait is WaitMode.none and checked.code == 0:
                metrics.count_tx(wait.value, "", "submitted")
                return ACCEPTED, {"status": "submitted", "hash": tx_hash}
            return checked
        except (httpx.ConnectError, httpx.ConnectTimeout):
            metrics.count_tx(wait.value, "", "rpc_unavailable")
            raise Problem(503, "cometbft_unavailable", "cometbft RPC is not reachable; the "
                          "tx was not submitted", hash=tx_hash) from None
        except httpx.HTTPError as exc:
            metrics.count_tx(wait.value, "", "unknown")
            return ACCEPTED, _unknown(tx_hash, f"connection to cometbft failed mid-request "
                                      f"({type(exc).__name__})")
        except RpcError as exc:
            problem = _rpc_problem(exc, tx_hash)
            if problem is not None:
                metrics.count_tx(wait.value, problem.extra.get("code", ""), problem.name)
                raise problem from None
            if wait is WaitMode.none:
                metrics.count_tx(wait.value, "", "submitted")
                return ACCEPTED, {"status": "submitted", "hash": tx_hash,
                                  "log": "already in the mempool cache"}
            return _CACHED


async def submit(state: ApiState, tx: bytes, wait: WaitMode,
                 timeout_s: float | None = None) -> tuple[int, dict[str, Any]]:
    """Broadcast `tx`; returns (HTTP status, TxOutcome body) or raises a Problem."""
    tx_hash = tx_hash_hex(tx)
    if not tx:
        raise Problem(400, "empty_tx", "the transaction is empty")
    # registered before the broadcast: the block may come before CheckTx's answer does
    follower = state.following() if wait is WaitMode.commit else None
    waiter = follower.waiters.add(tx_hash) if follower is not None else None
    try:
        return await _submit(state, tx, tx_hash, wait, timeout_s, waiter)
    finally:
        if waiter is not None and follower is not None:
            follower.waiters.discard(tx_hash, waiter)


async def _submit(state: ApiState, tx: bytes, tx_hash: str, wait: WaitMode,
                  timeout_s: float | None, waiter: asyncio.Future[dict[str, Any]] | None
                  ) -> tuple[int, dict[str, Any]]:
    metrics = state.metrics
    sent = await _send(state, tx, tx_hash, wait)
    if isinstance(sent, tuple):
        return sent
    checked = sent
    if sent is _CACHED:
        # The same bytes are in cometbft's cache: still being checked (and perhaps about
        # to be refused), in the mempool, or in a block. Never taken as "passed CheckTx".
        # Waited for outside the signer's lock: a copy takes no new backlog room.
        checked, found = await _settle_cached(state, tx, tx_hash, wait)
        if found is not None:
            return _from_block(state, wait, tx_hash, found)
    if checked is not None and checked.code != 0:
        metrics.count_tx(wait.value, checked.code, code_name(checked.code))
        raise tx_rejected(checked.code, checked.log, tx_hash)
    if wait is WaitMode.sync:
        metrics.count_tx(wait.value, 0, "ok")
        log = ("passed CheckTx" if checked is not None else
               "an identical tx passed CheckTx here before: it is in this node's mempool")
        return ACCEPTED, {"status": "accepted", "hash": tx_hash, "code": 0, "name": "ok",
                          "log": log}
    found = await wait_for_block(state, tx_hash, timeout_s or state.settings.commit_timeout_s,
                                 waiter)
    if found is None:
        metrics.count_tx(wait.value, "", "unknown")
        return ACCEPTED, _unknown(tx_hash, "not in a block before the timeout")
    return _from_block(state, wait, tx_hash, found)


def _from_block(state: ApiState, wait: WaitMode, tx_hash: str, found: dict[str, Any]
                ) -> tuple[int, dict[str, Any]]:
    """The answer for a tx a block holds: included, or refused by FinalizeBlock."""
    body = outcome_from_tx(found)
    state.metrics.count_tx(wait.value, body["code"], body["name"])
    if body["code"] != 0:
        raise tx_rejected(body["code"], body["log"], tx_hash, body["height"],
                          stage="finalize_block")
    return INCLUDED, body


#: how long a cached tx's fate is looked for before it counts as in the mempool: a
#: CheckTx takes milliseconds, and cometbft drops a refused tx from its cache at once
CACHED_SETTLE_S = 1.0


async def _settle_cached(state: ApiState, tx: bytes, tx_hash: str, wait: WaitMode
                         ) -> tuple[Any, dict[str, Any] | None]:
    """What became of a tx whose bytes cometbft already holds in its cache: (its CheckTx
    result, when a send after the other copy's CheckTx was judged afresh; or the block
    that holds it). (None, None): still cached after CACHED_SETTLE_S, so it passed
    CheckTx and waits in the mempool. A copy refused meanwhile leaves the cache, and the
    next send gets the refusal: a forged tx sent twice at once is never acknowledged."""
    deadline = time.monotonic() + CACHED_SETTLE_S
    while True:
        try:
            return None, await state.aio().tx(tx_hash)
        except (RpcError, httpx.HTTPError):
            pass  # in no block (yet)
        await anyio.sleep(0.05)
        try:
            return await state.aio().broadcast_tx_sync(tx), None
        except RpcError as exc:
            problem = _rpc_problem(exc, tx_hash)
            if problem is not None:
                state.metrics.count_tx(wait.value, problem.extra.get("code", ""),
                                       problem.name)
                raise problem from None
        except httpx.HTTPError:
            pass  # cometbft briefly unreachable: look again
        if time.monotonic() >= deadline:
            return None, None


async def wait_for_block(state: ApiState, tx_hash: str, timeout_s: float,
                         waiter: asyncio.Future[dict[str, Any]] | None = None
                         ) -> dict[str, Any] | None:
    """The tx's block outcome, or None after `timeout_s`.

    With the block follower running, `waiter` (registered before the broadcast) is
    answered from the first committed block that holds the tx; a lookup of the tx index
    once a second is the safety net for a follower that stalls or skipped heights.
    Without it, the tx index is polled with back-off.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    found: dict[str, Any]
    try:
        while True:
            remaining = deadline - time.monotonic()
            if waiter is not None and state.following() is not None and remaining > 0:
                try:
                    found = await asyncio.wait_for(asyncio.shield(waiter),
                                                   min(FOLLOWER_CHECK_S, remaining))
                    state.metrics.commit_waits.labels("follower").inc()
                    return found
                except TimeoutError:
                    pass
            try:
                found = await state.aio().tx(tx_hash)
                state.metrics.commit_waits.labels("lookup").inc()
                return found
            except (RpcError, httpx.HTTPError):
                pass  # not indexed yet (or cometbft briefly unreachable): keep polling
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if waiter is None or state.following() is None:
                await anyio.sleep(min(delay, remaining))
                delay = min(delay * 1.5, 0.5)
    finally:
        if waiter is not None and state.follower is not None:
            state.follower.waiters.discard(tx_hash, waiter)


#: how long a commit waiter trusts the follower before it looks its tx up itself
FOLLOWER_CHECK_S = 1.0


async def lookup(state: ApiState, tx_hash: str) -> dict[str, Any]:
    """GET /v1/txs/{hash}: the block outcome of a tx, or a 404 if no block has it (yet)."""
    try:
        found: dict[str, Any] = await state.aio().tx(tx_hash)
    except RpcError as exc:
        if "not found" in f"{exc.message} {exc.data}".lower():
            raise Problem(404, "tx_not_found", f"no block contains tx {tx_hash} "
                          "(it may still be pending in the mempool)") from None
        raise Problem(502, "cometbft_error", f"cometbft RPC error: {exc.data or exc.message}"
                      ) from None
    except httpx.HTTPError:
        raise Problem(503, "cometbft_unavailable", "cometbft RPC is not reachable") from None
    return outcome_from_tx(found)
