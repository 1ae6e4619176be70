"""GET /v1/export: a verifiable JSON Lines bundle of the memories a filter selects
(docs/EXPORT.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from memledger.api import exporting, queries
from memledger.api.deps import State
from memledger.api.problems import PROBLEM_RESPONSES, problem_responses
from memledger.api.schemas import HEX_KEY, NAME, MemoryStatus, MemoryType, Tag
from memledger.protocol.limits import MAX_TAGS

router = APIRouter(prefix="/v1", responses=PROBLEM_RESPONSES)
BUNDLE_TYPE = "application/x-ndjson"


@router.get("/export", tags=["verified reads"],
            summary="Export memories as a verifiable bundle (JSON Lines)",
            response_class=StreamingResponse,
            responses={200: {"description": "the bundle (docs/EXPORT.md)",
                             "content": {BUNDLE_TYPE: {}}}, **problem_responses(501)})
async def export(
    state: State,
    domain: Annotated[str | None, Query(pattern=NAME)] = None,
    status: MemoryStatus | None = None,
    type: Annotated[MemoryType | None, Query(description="memory type")] = None,  # noqa: A002
    author: Annotated[str | None, Query(pattern=HEX_KEY, description="author key, hex")] = None,
    tag: Annotated[list[Tag] | None, Query(max_length=MAX_TAGS,
                                           description="repeatable; all must match")] = None,
) -> StreamingResponse:
    flt = queries.MemoryFilter(
        # a bundle is a copy of what the ledger holds: every status unless one is named
        # (each record carries its status, so a reader sees what was retracted)
        domain=domain, status=tuple(s.value for s in MemoryStatus) if status is None
        else status.value,
        type=None if type is None else type.value, author=author, tags=tuple(tag or ()),
        include_disputed=True)
    lines = await state.reads.run(exporting.open_bundle, state.engine, state.rpc,
                                           state.settings.home, flt)
    return StreamingResponse(lines, media_type=BUNDLE_TYPE)
