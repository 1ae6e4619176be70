"""Read side for memories: one, many (filters, full-text, cursors), and their satellites."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError

from memledger.api import proving, queries, ranked, reasons
from memledger.api.deps import ApiState, State, read, rpc_call
from memledger.api.freshness import MAX_HALF_LIFE_DAYS
from memledger.api.problems import PROBLEM_RESPONSES, Problem, not_found
from memledger.api.routes_state import record_document
from memledger.api.schemas import (
    HEX_KEY,
    MAX_QUERY_WORDS,
    MAX_TAGS,
    MEMORY_CURSOR,
    NAME,
    QUERY,
    ChallengeList,
    CorroborationList,
    Document,
    Memory,
    MemoryPage,
    MemoryStatus,
    MemoryType,
    ProvenMemory,
    ProvenRecordDocument,
    SearchMode,
    Tag,
    VoteList,
)

router = APIRouter(prefix="/v1", tags=["memories"], responses=PROBLEM_RESPONSES)

# Ids may contain "/", so the id is a path segment run; the suffixed routes are declared
# before the bare one so that ".../votes" is never swallowed as part of an id. A client
# that sends an id's own "/" as %2F (the SDK does) also reaches an id that ends in a
# sub-resource's name: see `_id_ending_in`.
MemoryId = Annotated[str, Path(pattern=NAME, description="memory id (may contain '/')")]
#: The id before a sub-resource's name, which may be empty: memory "/votes", sent as
#: %2Fvotes, has the decoded path ".../memories//votes" (no id, then the name), and
#: `_id_ending_in` reads it from the raw path; a literal "//votes" is a 404.
OwnerId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._:/@-]{0,128}$",
                              description="memory id (may contain '/')")]


def memory_links(pointer: str) -> dict[str, Any]:
    """OpenAPI links from a response naming a memory id to that memory's reads."""
    ops = {"Memory": "get_memory_v1_memories__memory_id__get",
           "Votes": "memory_votes_v1_memories__memory_id__votes_get",
           "Challenges": "memory_challenges_v1_memories__memory_id__challenges_get",
           "Corroborations": "memory_corroborations_v1_memories__memory_id__corroborations_get"}
    return {f"Get{name}": {"operationId": op, "parameters": {"memory_id": pointer}}
            for name, op in ops.items()}


_LIST_LINKS = {
    **memory_links("$response.body#/items/0/id"),
    "NextPage": {"operationId": "list_memories_v1_memories_get",
                 "parameters": {"cursor": "$response.body#/next_cursor"}},
}


def _existing(conn: sa.Connection, memory_id: str) -> None:
    if not queries.memory_exists(conn, memory_id):
        raise not_found("memory", memory_id)


@router.get("/memories", response_model=MemoryPage,
            summary="List and full-text search memories (cursor pages)",
            responses={200: {"description": "one page", "links": _LIST_LINKS}})
async def list_memories(
    state: State,
    domain: Annotated[str | None, Query(pattern=NAME)] = None,
    status: Annotated[list[MemoryStatus] | None, Query(
        description="repeatable: keep memories in any of these statuses. Default: committed "
                    "only (with include_disputed, challenged too); deprecated and superseded "
                    "memories are returned only when asked for here")] = None,
    type: Annotated[MemoryType | None, Query(description="memory type")] = None,  # noqa: A002
    author: Annotated[str | None, Query(pattern=HEX_KEY, description="author key, hex")] = None,
    tag: Annotated[list[Tag] | None, Query(max_length=MAX_TAGS,
                                           description="repeatable; all must match")] = None,
    include_disputed: Annotated[bool, Query(
        description="without status: include challenged (disputed) memories, flagged by "
                    "their status")] = False,
    q: Annotated[str | None, Query(
        min_length=1, max_length=512, pattern=QUERY,
        description=f"full-text query: all words must match (at most {MAX_QUERY_WORDS} words; "
                    "spaces and control characters separate words; words without a letter "
                    "or digit are ignored, and a query left with none matches nothing)")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[str | None, Query(
        pattern=MEMORY_CURSOR, description="a page's next_cursor: the next page starts after "
                                           "that (height, id) key")] = None,
    mode: Annotated[SearchMode | None, Query(
        description="with q, rank the results: text (all words, by BM25), semantic (by "
                    "meaning), hybrid (both, fused by reciprocal rank); or words: every word "
                    "must match, unranked, in (height, id) order. Default: hybrid when the "
                    "node has an embedder, else words. Filters apply before the top-k cut "
                    "in every mode; ranked pages take `<offset>~ranked` cursors")] = None,
    freshness: Annotated[float | None, Query(
        gt=0, le=MAX_HALF_LIFE_DAYS,
        description="ranked modes only (ignored by the unranked listing, as mode is "
                    "without q): weigh each hit by its age, as a half-life in days "
                    "(block time since its submit block; a memory that old counts half), "
                    "and by its corroborations (+10% each, up to 10), before the top-k cut. "
                    "Off by default (docs/RECALL.md, Freshness)")] = None,
    rerank: Annotated[bool, Query(
        description="mode=hybrid or semantic only (422 rerank_needs_meaning with text): "
                    "rescore the first 30 hits by late interaction (MaxSim over the "
                    "embedder's token states) and order the page by it; each hit's score "
                    "is then that relevance, -1..1 (docs/RECALL.md, Rerank). A reranked "
                    "search reaches at most 30 hits. Needs a minilm-int8 family embedder "
                    "(else 422 rerank_unsupported). Off by default")] = False,
    min_score: Annotated[float | None, Query(
        ge=-1, le=1,
        description="with rerank=true (else 422 min_score_needs_rerank): leave out hits "
                    "whose rerank score is lower (docs/RECALL.md says what values "
                    "mean)")] = None,
) -> Any:
    flt = queries.MemoryFilter(
        domain=domain, status=tuple(s.value for s in status or ()),
        type=None if type is None else type.value, author=author, tags=tuple(tag or ()),
        include_disputed=include_disputed, q=q)
    chosen = None if q is None else (
        mode.value if mode is not None else "hybrid" if state.has_recall else None)
    if (rerank or min_score is not None) and chosen in (None, "words"):
        if q is not None and mode is None:  # no embedder: the listing would be unranked
            raise Problem(409, "recall_unavailable", "rerank=true needs an embedder; this "
                          "node has none configured (node config `embedder`)")
        raise Problem(422, "rerank_needs_meaning", "rerank=true reranks a meaning search: "
                      "give q, with mode=hybrid or semantic")
    if chosen is not None and chosen != "words":
        return await read_page(state, _ranked, flt, chosen, limit, cursor, state, freshness,
                               rerank, min_score)
    return await read_page(state, _listing, flt, limit, cursor, state.settings.home)


async def read_page(state: ApiState, func: Callable[..., dict[str, Any]],
                    *args: Any) -> Response:
    """A page of memories, validated and encoded as JSON where the read runs (in the
    read process, that is off the event loop that serves writes and probes), exactly as
    the route's response model would be."""
    body: bytes = await read(state, _page_json, func, *args)
    return Response(body, media_type="application/json")


def _page_json(conn: sa.Connection, func: Callable[..., dict[str, Any]],
               *args: Any) -> bytes:
    return MEMORY_PAGE.dump_json(MEMORY_PAGE.validate_python(func(conn, *args)))


#: the page's validator and encoder, built once
MEMORY_PAGE: TypeAdapter[MemoryPage] = TypeAdapter(MemoryPage)


def _listing(conn: sa.Connection, flt: queries.MemoryFilter, limit: int,
             cursor: str | None, home: Any) -> dict[str, Any]:
    items, next_cursor = reasons.list_memories(conn, flt, limit, cursor, home)
    return {"items": items, "next_cursor": next_cursor}


def _ranked(conn: sa.Connection, flt: queries.MemoryFilter, mode: str, limit: int,
            cursor: str | None, state: ApiState, freshness: float | None = None,
            rerank: bool = False, min_score: float | None = None) -> dict[str, Any]:
    page = ranked.ranked_search(conn, flt, mode, limit, cursor, state.recall, state.words,
                                freshness, rerank, min_score)
    reasons.annotate(conn, page.items, state.settings.home, page.records)
    return {"items": page.items, "next_cursor": page.next_cursor}


def _votes(conn: sa.Connection, memory_id: str) -> dict[str, Any]:
    _existing(conn, memory_id)
    return {"memory_id": memory_id, "votes": queries.memory_votes(conn, memory_id)}


@router.get("/memories/{memory_id:path}/votes", response_model=VoteList,
            summary="Votes on a memory")
async def memory_votes(memory_id: OwnerId, state: State, request: Request) -> Any:
    return await _list_or_memory(request, state, memory_id, "votes", _votes)


def _challenges(conn: sa.Connection, memory_id: str) -> dict[str, Any]:
    _existing(conn, memory_id)
    doc = queries.get_document(conn, "challenge", memory_id) or {}
    rounds = doc.get("rounds", [doc] if doc else [])
    return {"memory_id": memory_id, "challenges": list(rounds)}


@router.get("/memories/{memory_id:path}/challenges", response_model=ChallengeList,
            summary="Dispute rounds of a memory")
async def memory_challenges(memory_id: OwnerId, state: State, request: Request) -> Any:
    return await _list_or_memory(request, state, memory_id, "challenges", _challenges)


def _corroborations(conn: sa.Connection, memory_id: str) -> dict[str, Any]:
    _existing(conn, memory_id)
    return {"memory_id": memory_id,
            "corroborations": queries.memory_corroborations(conn, memory_id)}


@router.get("/memories/{memory_id:path}/corroborations", response_model=CorroborationList,
            summary="Corroborations of a memory")
async def memory_corroborations(memory_id: OwnerId, state: State, request: Request) -> Any:
    return await _list_or_memory(request, state, memory_id, "corroborations", _corroborations)


_MEMORY_LINKS = {
    "GetCocommit": {"operationId": "get_cocommit_v1_cocommits__cocommit_id__get",
                    "parameters": {"cocommit_id": "$response.body#/cocommit"}},
    "GetAuthorAccount": {"operationId": "get_account_v1_accounts__public_key__get",
                         "parameters": {"public_key": "$response.body#/author"}},
}


@router.get("/memories/{memory_id:path}", response_model=ProvenMemory | Memory,
            summary="One memory by id",
            responses={200: {"description": "the memory", "links": _MEMORY_LINKS}})
async def get_memory(memory_id: MemoryId, state: State,
                     prove: Annotated[bool, Query(description=(
                         "add `proof`: the canonical record and content with proofs "
                         "against the app hash (docs/VERIFIED_READS.md)"))] = False,
                     fresh: Annotated[bool, Query(description=(
                         "with `prove`: prove at the latest height (its header comes with "
                         "the next block) rather than at the newest height whose next "
                         "header already exists"))] = False,
                     ) -> dict[str, Any]:
    return await _the_memory(memory_id, state, prove, fresh)


async def _the_memory(memory_id: str, state: ApiState, prove: bool,
                      fresh: bool = True) -> dict[str, Any]:
    found = await read(state, reasons.get_memory, memory_id, state.settings.home)
    if found is None:
        raise not_found("memory", memory_id)
    if prove:
        found["proof"] = await rpc_call(proving.memory_proof, state.rpc, memory_id,
                                        state.settings.home, fresh,
                                        reads=state.reads)
    return found


def _id_ending_in(request: Request, memory_id: str, sub: str) -> str | None:
    """The whole memory id when the path ended in "%2F<sub>": the client encoded that
    slash as part of the id (memory "notes/votes"), so it does not name the sub-resource.
    A literal "/votes" stays the sub-resource, as the routes declare."""
    raw = bytes(request.scope.get("raw_path") or b"")
    return f"{memory_id}/{sub}" if raw.lower().endswith(f"%2f{sub}".encode()) else None


async def _list_or_memory(request: Request, state: ApiState, memory_id: str, sub: str,
                          list_of: Callable[[sa.Connection, str], dict[str, Any]]) -> Any:
    """A sub-resource list of `memory_id`, or the memory whose id ends in "/<sub>"."""
    if (whole := _id_ending_in(request, memory_id, sub)) is not None:
        return await _memory_response(whole, state, request)
    return await read(state, list_of, memory_id)


_PROVE = TypeAdapter(bool)


async def _memory_response(memory_id: str, state: ApiState, request: Request) -> JSONResponse:
    """`get_memory`'s answer, from a route whose declared response is another list."""
    raw_prove = request.query_params.get("prove", "false")
    try:
        prove = _PROVE.validate_python(raw_prove)
    except ValidationError:
        raise RequestValidationError([{"type": "bool_parsing", "loc": ("query", "prove"),
                                       "msg": "Input should be a valid boolean",
                                       "input": raw_prove}]) from None
    found = await _the_memory(memory_id, state, prove)
    model = ProvenMemory if prove else Memory
    return JSONResponse(model.model_validate(found).model_dump(mode="json"))


@router.get("/cocommits/{cocommit_id}", response_model=ProvenRecordDocument | Document,
            tags=["co-commits"], summary="A co-commit record by shared id")
async def get_cocommit(cocommit_id: Annotated[str, Path(pattern=NAME)],
                       state: State,
                       prove: Annotated[bool, Query(description=(
                           "add `proof`: the canonical record with its proof against the app "
                           "hash (docs/VERIFIED_READS.md)"))] = False) -> dict[str, Any]:
    return await record_document(state, "cocommit", "co-commit", cocommit_id, prove)
