"""Write side: signed transactions in (raw or JSON), outcomes out.

The server never signs anything: every body arrives signed by the client, so agent keys
stay on the client. POST /v1/memories additionally accepts a JSON form whose signature
covers the canonical body the server rebuilds from the fields.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from google.protobuf.message import DecodeError

from memledger.api import broadcast
from memledger.api.deps import ApiState, State
from memledger.api.problems import (
    NESTED_TOO_DEEPLY,
    PROBLEM_RESPONSES,
    Problem,
    problem_responses,
)
from memledger.api.routes_memories import memory_links
from memledger.api.schemas import (
    BASE64,
    MAX_BATCH_TXS,
    MemorySubmitForm,
    MemorySubmitRequest,
    MemorySubmitTx,
    TxBatchItem,
    TxBatchOutcome,
    TxOutcome,
    WaitMode,
)
from memledger.consensus.gate.envelope import peek_signer_nonce
from memledger.protocol.pb import tx_pb2
from memledger.protocol.txkinds import TX_KINDS

router = APIRouter(prefix="/v1", tags=["transactions"])

WaitQuery = Annotated[WaitMode, Query(description="none: fire and forget; sync: CheckTx "
                                      "result; commit: wait for the block")]
#: the longest commit wait a client may ask for (`timeout`)
MAX_COMMIT_WAIT_S = 120.0
TimeoutQuery = Annotated[float | None, Query(gt=0, le=MAX_COMMIT_WAIT_S,
                                             description="commit wait, seconds")]
HashPath = Annotated[str, Path(pattern=r"^[0-9a-fA-F]{64}$", description="SHA-256 tx hash")]

_TX_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {"oneOf": [
            {"$ref": "#/components/schemas/TxRequest"},
            {"$ref": "#/components/schemas/TxBatchRequest"}]}},
        "application/octet-stream": {"schema": {"type": "string", "format": "binary",
                                                "minLength": 1}},
    },
}
# Stateful links: what a submission's outcome lets a client (or a conformance run) ask next.
_TX_LINK = {"GetTxByHash": {"operationId": "get_tx_v1_txs__tx_hash__get",
                            "parameters": {"tx_hash": "$response.body#/hash"}}}
_MEMORY_LINKS = {**_TX_LINK, **memory_links("$response.body#/memory_id")}


def _outcomes(links: dict[str, Any]) -> dict[int | str, dict[str, Any]]:
    return {
        200: {"model": TxOutcome, "description": "included in a block (wait=commit)",
              "links": links},
        202: {"model": TxOutcome, "description": "submitted/accepted, or outcome unknown",
              "links": links},
        **problem_responses(400, 404, 409, 413, 415, 422, 429, 502, 503, 504),
    }


def decode_b64(value: str, what: str = "tx") -> bytes:
    """Exactly the document's `BASE64` pattern; the pattern check makes decoding total."""
    if re.fullmatch(BASE64, value) is None:
        raise Problem(400, "invalid_base64", f"{what} is not padded standard base64")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern rules it out
        raise Problem(400, "invalid_base64", f"{what} is not valid base64") from None


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


async def _read_tx(request: Request) -> bytes | list[bytes]:
    """The tx bytes from a JSON `{"tx": base64}` body or a raw octet-stream body; a list
    of them from a JSON `{"txs": [base64, ...]}` batch."""
    media = _media_type(request)
    body = await request.body()
    if media in ("application/octet-stream", "application/x-protobuf"):
        return body
    if not _is_json(media):
        raise Problem(415, "unsupported_media_type", "send application/json {\"tx\": base64} "
                      "or application/octet-stream raw tx bytes")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Problem(400, "malformed_json", f"request body is not valid JSON: {exc}") from None
    except RecursionError:  # a few KB of "[[[[" outnest the parser's stack: bad input, not a 500
        raise Problem(400, "malformed_json", NESTED_TOO_DEEPLY) from None
    if isinstance(doc, dict) and set(doc) == {"txs"}:
        return _batch(doc["txs"])
    if not isinstance(doc, dict) or set(doc) != {"tx"} or not isinstance(doc["tx"], str):
        raise Problem(422, "invalid_request", "JSON body must be exactly {\"tx\": \"<base64>\"}"
                      " or {\"txs\": [\"<base64>\", ...]}")
    return decode_b64(doc["tx"])


def _batch(txs: Any) -> list[bytes]:
    if (not isinstance(txs, list) or not 1 <= len(txs) <= MAX_BATCH_TXS
            or not all(isinstance(t, str) for t in txs)):
        raise Problem(422, "invalid_request", f"txs must be a list of 1 to {MAX_BATCH_TXS} "
                      "base64 strings")
    return [decode_b64(t, f"txs[{i}]") for i, t in enumerate(txs)]


def _respond(status: int, body: dict[str, Any]) -> JSONResponse:
    headers = {"Location": f"/v1/txs/{body['hash']}"} if status == 202 else None
    return JSONResponse(TxOutcome(**body).model_dump(mode="json"), status_code=status,
                        headers=headers)


@router.post("/txs", summary="Broadcast a signed transaction", responses=_outcomes(_TX_LINK),
             response_model=TxOutcome, openapi_extra={"requestBody": _TX_BODY})
async def post_tx(request: Request, state: State, wait: WaitQuery = WaitMode.sync,
                  timeout: TimeoutQuery = None) -> JSONResponse:
    """Raw signed tx in; a non-zero result code becomes a 4xx problem with its `code`.

    A `{"txs": [...]}` body submits a batch and answers 200 with one outcome or RFC 7807
    problem per tx (TxBatchOutcome)."""
    tx = await _read_tx(request)
    if isinstance(tx, list):
        return await _submit_batch(state, tx, wait, timeout)
    status, body = await broadcast.submit(state, tx, wait, timeout)
    if body.get("memory_id") is None:
        body["memory_id"] = target_memory_id(tx)
    return _respond(status, body)


async def _submit_batch(state: ApiState, txs: list[bytes], wait: WaitMode,
                        timeout: float | None) -> JSONResponse:
    """Each signer's txs in the order sent (its nonces usually rise with it); signers side
    by side, as many parallel single submits would be."""
    items: list[TxBatchItem | None] = [None] * len(txs)
    by_signer: dict[bytes | None, list[int]] = {}
    for i, tx in enumerate(txs):
        peeked = peek_signer_nonce(tx)
        by_signer.setdefault(peeked[0] if peeked else None, []).append(i)

    async def one(i: int) -> None:
        try:
            status, body = await broadcast.submit(state, txs[i], wait, timeout)
        except Problem as problem:
            items[i] = TxBatchItem(index=i, status=problem.status,
                                   problem=problem.body(f"/v1/txs#{i}"))
            return
        if body.get("memory_id") is None:
            body["memory_id"] = target_memory_id(txs[i])
        items[i] = TxBatchItem(index=i, status=status, outcome=TxOutcome(**body))

    async def in_order(indexes: list[int]) -> None:
        for i in indexes:
            await one(i)

    async with anyio.create_task_group() as group:
        for signer, indexes in by_signer.items():
            if signer is None:  # unreadable: each is refused on its own
                for i in indexes:
                    group.start_soon(one, i)
            else:
                group.start_soon(in_order, indexes)
    results = [item for item in items if item is not None]
    accepted = sum(1 for item in results if item.status < 300)
    doc = TxBatchOutcome(results=results, accepted=accepted, refused=len(results) - accepted)
    return JSONResponse(doc.model_dump(mode="json"), status_code=200)


@router.get("/txs/{tx_hash}", summary="Outcome of a transaction by hash",
            response_model=TxOutcome, responses=PROBLEM_RESPONSES)
async def get_tx(tx_hash: HashPath, state: State) -> TxOutcome:
    return TxOutcome(**await broadcast.lookup(state, tx_hash.lower()))


def _tx_from_form(req: MemorySubmitForm, chain_id: str) -> bytes:
    """Rebuild the canonical memory_submit Tx from the JSON form and its signature."""
    for text in (req.content, req.memory_id, req.domain, req.chain_id or "", *req.tags):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise Problem(422, "invalid_text",
                          "text fields must be valid Unicode (no lone surrogates)") from None
    content = req.content
    msg = tx_pb2.MemorySubmit(
        memory_id=req.memory_id, domain=req.domain, memory_type=req.type.value,
        content=content, content_hash=hashlib.sha256(content.encode()).digest(),
        confidence_ppm=req.confidence_ppm, tags=sorted(req.tags))
    body = tx_pb2.TxBody(chain_id=req.chain_id or chain_id, nonce=req.nonce, memory_submit=msg)
    envelope = tx_pb2.Tx(body=body.SerializeToString(deterministic=True),
                         public_key=bytes.fromhex(req.public_key),
                         signature=bytes.fromhex(req.signature))
    return envelope.SerializeToString(deterministic=True)


#: tx kinds that name one memory (a co-commit's id comes from its block event)
_MEMORY_KINDS = tuple(k.name for k in TX_KINDS if "memory_id" in k.field_names())


def target_memory_id(tx: bytes) -> str | None:
    """The memory a tx is about, read from its own bytes (None for other kinds or bytes
    that do not decode: the ledger's verdict on those is in the outcome)."""
    try:
        body = tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(tx).body)
    except (DecodeError, ValueError):
        return None
    kind = body.WhichOneof("msg")
    if kind not in _MEMORY_KINDS:
        return None
    return str(getattr(body, kind).memory_id) or None


def _submitted_memory_id(tx: bytes) -> str | None:
    """The memory id of a memory_submit tx; 422 for any other kind; None if undecodable
    or without a message (CheckTx then answers with the precise code: tx_decode,
    tx_not_canonical, empty_message, ...), which is no other kind to send elsewhere."""
    try:
        body = tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(tx).body)
    except (DecodeError, ValueError):
        return None
    kind = body.WhichOneof("msg")
    if kind is None:
        return None
    if kind != "memory_submit":
        raise Problem(422, "wrong_tx_kind",
                      f"POST /v1/memories takes a memory_submit tx, not {kind}"
                      "; use POST /v1/txs for other kinds")
    return str(body.memory_submit.memory_id)


async def _json_body(request: Request) -> None:
    """415 before the body is validated: FastAPI hands a text/plain or form body (curl -d)
    to the model as bytes, and its 422 "Input should be a valid dictionary" hides that
    only the media type is wrong. Async: FastAPI runs a sync dependency on a worker
    thread, a thread hop on every memory submit (~13% of the REST process's samples)."""
    if not _is_json(_media_type(request)):
        raise Problem(415, "unsupported_media_type", "send application/json: a signed "
                      "{\"tx\": base64} or the memory's JSON fields")


@router.post("/memories", summary="Submit a memory (signed by the client)",
             responses=_outcomes(_MEMORY_LINKS), response_model=TxOutcome, tags=["memories"],
             dependencies=[Depends(_json_body)])
async def post_memory(req: MemorySubmitRequest, state: State, wait: WaitQuery = WaitMode.sync,
                      timeout: TimeoutQuery = None) -> JSONResponse:
    """Either `tx` (a signed memory_submit Tx) or the JSON field form, never both."""
    if isinstance(req, MemorySubmitTx):
        tx = decode_b64(req.tx)
        memory_id = _submitted_memory_id(tx)
    else:
        tx = _tx_from_form(req, state.settings.chain_id)
        memory_id = req.memory_id
    status, body = await broadcast.submit(state, tx, wait, timeout)
    body["memory_id"] = memory_id
    return _respond(status, body)
