"""Read side for ledger state other than memories: accounts, validators, proposals."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

import httpx
import sqlalchemy as sa
from fastapi import APIRouter, Path, Query

from memledger.api import proving, queries
from memledger.api.db import projection_height
from memledger.api.deps import ApiState, State, read, rpc_call
from memledger.api.problems import PROBLEM_RESPONSES, not_found
from memledger.api.schemas import (
    ACCOUNT_ID,
    DOCUMENT_CURSOR,
    HEX_KEY,
    NAME,
    Account,
    Document,
    DocumentPage,
    LightBlockDoc,
    ProvenAccount,
    ProvenDocument,
    ProvenRecordDocument,
    ValidatorSet,
)
from memledger.daemon.cometbft import validator_address
from memledger.projection.schema import accounts, validators
from memledger.sdk.rpc import RpcError

log = logging.getLogger("memledger.api")

router = APIRouter(prefix="/v1", responses=PROBLEM_RESPONSES)


def _account_from_app(state: ApiState, key: str) -> dict[str, Any] | None:
    try:
        answer = state.probe.abci_query("/account", key.encode())
        if answer.code == 0:
            nonce = int(json.loads(answer.value)["nonce"])
            return {"public_key": key, "last_nonce": nonce, "next_nonce": nonce + 1,
                    "height": answer.height, "source": "app"}
    except (httpx.HTTPError, RpcError, ValueError, KeyError) as exc:
        log.info("account %s: app query failed (%s); using the projection", key, exc)
    return None


def _account_from_projection(conn: sa.Connection, key: str) -> dict[str, Any]:
    # As text: SQLAlchemy reads SQLite NUMERIC through a float, which rounds ns nonces.
    last = conn.execute(sa.select(sa.cast(accounts.c.nonce, sa.Text))
                        .where(accounts.c.public_key == key)).scalar_one_or_none()
    last_nonce = int(last or 0)
    return {"public_key": key, "last_nonce": last_nonce, "next_nonce": last_nonce + 1,
            "height": projection_height(conn), "source": "projection"}


@router.get("/accounts/{public_key}", response_model=ProvenAccount | Account,
            tags=["accounts"], summary="Last committed nonce of a signer and the next usable one")
async def get_account(public_key: Annotated[str, Path(pattern=HEX_KEY)],
                      state: State,
                      prove: Annotated[bool, Query(description=(
                          "add `proof`: the canonical record with its proof against the app "
                          "hash (docs/VERIFIED_READS.md)"))] = False) -> dict[str, Any]:
    """Any nonce above `last_nonce` is valid (gaps are allowed); `next_nonce` is the
    smallest. Committed state only: pending mempool txs are not counted.

    Asked of the app's committed store first (exact); the projection is the fallback
    when cometbft is unreachable — its SQLite NUMERIC column is written through a float
    by SQLAlchemy, so nanosecond-sized nonces there can be off by a few hundred.
    """
    key = public_key.lower()
    found = await state.reads.run(_account_from_app, state, key)
    if found is None:
        found = await read(state, _account_from_projection, key)
    if prove:
        found["proof"] = await rpc_call(proving.record_proof, state.rpc, "/account",
                                        key.encode(), state.settings.home,
                                        reads=state.reads)
    return found


def _validators(conn: sa.Connection) -> dict[str, Any]:
    rows = conn.execute(sa.select(validators.c.public_key, validators.c.power)
                        .order_by(validators.c.power.desc(), validators.c.public_key)).all()
    members = [{"public_key": r.public_key, "power": int(r.power),
                "address": validator_address(bytes.fromhex(r.public_key))} for r in rows]
    return {"height": projection_height(conn),
            "total_power": sum(m["power"] for m in members), "validators": members}


@router.get("/validators", response_model=ValidatorSet, tags=["validators"],
            summary="The current validator set (voting power = weight)")
async def get_validators(state: State) -> dict[str, Any]:
    return await read(state, _validators)


@router.get("/proposals", response_model=DocumentPage, tags=["governance"],
            summary="Governance proposals (cursor pages, by id)",
            responses={200: {"description": "one page", "links": {
                "GetProposal": {"operationId": "get_proposal_v1_proposals__proposal_id__get",
                                "parameters": {"proposal_id": "$response.body#/items/0/id"}},
                "NextPage": {"operationId": "list_proposals_v1_proposals_get",
                             "parameters": {"cursor": "$response.body#/next_cursor"}}}}})
async def list_proposals(state: State, limit: Annotated[int, Query(ge=1, le=500)] = 50,
                         cursor: Annotated[str | None, Query(
                             pattern=DOCUMENT_CURSOR,
                             description="a page's next_cursor: the next page starts after "
                                         "that id")] = None
                         ) -> dict[str, Any]:
    items, next_cursor = await read(state, queries.list_documents, "proposal", limit, cursor)
    return {"items": items, "next_cursor": next_cursor}


@router.get("/proposals/{proposal_id}", response_model=ProvenRecordDocument | Document,
            tags=["governance"], summary="One governance proposal")
async def get_proposal(proposal_id: Annotated[str, Path(pattern=NAME)],
                       state: State,
                       prove: Annotated[bool, Query(description=(
                           "add `proof`: the canonical record with its proof against the app "
                           "hash (docs/VERIFIED_READS.md)"))] = False) -> dict[str, Any]:
    return await record_document(state, "proposal", "proposal", proposal_id, prove)


async def record_document(state: ApiState, kind: str, label: str, ident: str,
                          prove: bool) -> dict[str, Any]:
    """`{"id", "record"}` of one canonical record (a 404 naming `label` when there is
    none), with `proof` against the app hash when asked."""
    found = await read(state, queries.get_document, kind, ident)
    if found is None:
        raise not_found(label, ident)
    doc: dict[str, Any] = {"id": ident, "record": found}
    if prove:
        doc["proof"] = await rpc_call(proving.record_proof, state.rpc, f"/{kind}",
                                      ident.encode(), state.settings.home,
                                      reads=state.reads)
    return doc


@router.get("/light", response_model=LightBlockDoc, tags=["verified reads"],
            summary="Signed header and validator set at a height, for light clients")
async def get_light_block(state: State, height: Annotated[int | None, Query(
        ge=1, description="block height; the latest when absent")] = None) -> dict[str, Any]:
    """Passed through from cometbft (`/commit`, `/validators`) without verification: a
    client checks the signatures itself, so it need not trust this node."""
    return await rpc_call(proving.light_block, state.rpc, height, reads=state.reads)


#: `fresh=false` proves at the newest settled height (its next header exists, so a client
#: verifies at once); the default proves at the latest height, whose header comes with the
#: next block. A writer looking up a domain before sealing uses the settled one.
_Fresh = Annotated[bool, Query(description=(
    "prove at the latest height (true, the default; its header comes with the next block) "
    "or at the newest height whose next header already exists (false)"))]

#: Kinds served by GET /v1/proofs/{kind}; an account's id has a pattern of its own, so
#: it has its own operation (declared first: a concrete path matches before the template).
_NAMED_KINDS = tuple(kind for kind in proving.KINDS if kind != "account")


@router.get("/proofs/account", response_model=ProvenDocument, tags=["verified reads"],
            summary="One account record with its proof of inclusion or absence")
async def get_account_proof(state: State, id: Annotated[str, Query(  # noqa: A002
        pattern=ACCOUNT_ID, description="account key, hex")] = "",
        fresh: _Fresh = True) -> dict[str, Any]:
    return await _proven(state, "account", id, fresh)


@router.get("/proofs/{kind}", response_model=ProvenDocument, tags=["verified reads"],
            summary="One canonical record with its proof of inclusion or absence")
async def get_proof(kind: Annotated[str, Path(pattern="^(" + "|".join(_NAMED_KINDS) + ")$")],
                    state: State,
                    id: Annotated[str, Query(  # noqa: A002
                        pattern=r"^[A-Za-z0-9._:/@-]{0,128}$",
                        description="memory/content/domain/scope/proposal/co-commit id; "
                                    "empty for validators")] = "",
                    fresh: _Fresh = True) -> dict[str, Any]:
    return await _proven(state, kind, id, fresh)


async def _proven(state: ApiState, kind: str, ident: str, fresh: bool) -> dict[str, Any]:
    path, data = proving.KINDS[kind], ident.encode()
    if fresh:
        record = await rpc_call(proving.proven_record, state.rpc, path, data,
                                reads=state.reads)
    else:
        record = await rpc_call(proving.record_proof, state.rpc, path, data,
                                state.settings.home, False, reads=state.reads)
    return {"kind": kind, "id": ident, "record": record}
