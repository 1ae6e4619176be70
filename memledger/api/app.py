"""The REST app factory: wiring only (settings -> engine, RPC, metrics, routes, errors)."""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.engine import Engine

from memledger.api import (
    problems,
    routes_export,
    routes_memories,
    routes_state,
    routes_status,
    routes_txs,
)
from memledger.api.db import readonly_engine
from memledger.api.deps import ApiState
from memledger.api.metrics import ApiMetrics, RecallCollector, WordsCollector
from memledger.api.middleware import (
    BodyLimitMiddleware,
    HeadMiddleware,
    ProblemCORSMiddleware,
    RequestMetricsMiddleware,
)
from memledger.api.ratelimit import RateLimitMiddleware, TimeoutMiddleware
from memledger.api.read_process import ReadProcess, RemoteCollector
from memledger.api.readgate import ReadGate, ReadGateMiddleware
from memledger.api.schemas import (
    ProblemModel,
    TxBatchOutcome,
    TxBatchRequest,
    TxRequest,
)
from memledger.api.settings import ApiSettings
from memledger.daemon.home import NodeHome
from memledger.recall.embedder import Embedder, EmbedderUnavailable, make_embedder
from memledger.recall.index import VectorIndex
from memledger.recall.indexer import Indexer
from memledger.recall.tail import TAIL_EMBEDDER
from memledger.recall.text_index import TextIndex, TextIndexBusy
from memledger.recall.text_indexer import TextIndexer
from memledger.sdk.rpc import RpcClient

DESCRIPTION = """Consensus-replicated memory ledger for AI agents.

Writes are signed transactions built by the client (agent keys never leave it); reads
come from the node's SQL projection of committed state. Every error is an RFC 7807
`application/problem+json` document; transaction rejections carry the ledger's numeric
result `code` and its stable `name`.
"""


log = logging.getLogger("memledger.api")

def _version() -> str:
    try:
        return version("memledger")
    except PackageNotFoundError:
        return "0.0.0"


def _settings(source: ApiSettings | NodeHome | str | os.PathLike[str]) -> ApiSettings:
    if isinstance(source, ApiSettings):
        return source
    return ApiSettings.from_home(source)


def start_recall(settings: ApiSettings, engine: Engine) -> Indexer | None:
    """The vector index follower for recall by meaning, started; None without an embedder.

    It opens the index beside the projection (rebuilding it when missing, stale or built
    by another model) and keeps it at the projection's height in a background thread.
    """
    embedder = make_embedder(settings.embedder)
    if embedder is None:
        return None
    if settings.index_dir is None:
        raise ValueError("an embedder needs ApiSettings.index_dir for its vector index")
    indexer = Indexer(engine, VectorIndex(settings.index_dir, embedder),
                      store_token_states=settings.store_token_states,
                      tail_embedder=_tail_embedder(settings, embedder))
    indexer.start()
    return indexer


def _tail_embedder(settings: ApiSettings, embedder: Embedder) -> Embedder | None:
    """The static model that embeds what the index's follower has not reached yet; None
    when the node turned it off or its own model is static (it follows by itself)."""
    if not settings.recall_tail or embedder.static:
        return None
    try:
        return make_embedder(TAIL_EMBEDDER)
    except EmbedderUnavailable as exc:
        log.warning("no recall tail (%s): memories the index has not reached are found "
                    "by words (and by meaning when a search can embed them within its "
                    "budget)", exc)
        return None


def start_words(settings: ApiSettings, engine: Engine,
                busy_wait_s: float = 0.0) -> TextIndexer | None:
    """The word index follower for ranked text search, started; None without a folder
    for indexes (ranked text then comes from the projection's full-text index). Another
    process holding the index is waited for up to `busy_wait_s`."""
    if settings.index_dir is None:
        return None
    deadline = time.monotonic() + busy_wait_s
    while True:
        words = TextIndexer(engine, TextIndex(Path(settings.index_dir) / "text"))
        try:
            words.start()
            return words
        except TextIndexBusy as exc:
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            failure: Exception = exc
        except (OSError, ValueError) as exc:
            failure = exc
        # serving data: without it ranked text still answers, from the projection
        log.warning("no word index (%s): ranked text comes from the projection", failure)
        return None


def _openapi(app: FastAPI) -> dict[str, Any]:
    """The generated schema plus the shared component schemas routes refer to by $ref."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (ProblemModel, TxRequest, TxBatchRequest, TxBatchOutcome):
        doc = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in doc.pop("$defs", {}).items():  # the models it refers to
            components.setdefault(name, sub)
        components.setdefault(str(doc.get("title", model.__name__)), doc)
    # The two submit forms have disjoint keys and forbid extras: exactly one matches.
    body = schema["paths"]["/v1/memories"]["post"]["requestBody"]["content"]
    form = body["application/json"]["schema"]
    form["oneOf"] = form.pop("anyOf")
    form["title"] = "MemorySubmitRequest"
    # POST /v1/txs: a single tx's outcome, or a batch's per-tx outcomes
    ok = schema["paths"]["/v1/txs"]["post"]["responses"]["200"]["content"]["application/json"]
    ok["schema"] = {"oneOf": [ok["schema"], {"$ref": "#/components/schemas/TxBatchOutcome"}]}
    app.openapi_schema = schema
    return schema


#: Swagger UI and ReDoc assets come from the fastapi-offline package (MIT; the assets keep
#: their Apache-2.0 / MIT licences) and are served by the node itself, so /docs and
#: /redoc render on a machine with no network (FastAPI's defaults load them from a CDN).
DOCS_ASSETS = "/docs/assets"


def _docs_assets_dir() -> str:
    import fastapi_offline

    return str(Path(fastapi_offline.__file__).parent / "static")


def install_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc from local assets; no URL in either page leaves the
    node (tests/unit/api/test_docs_offline.py checks every one)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=_docs_assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{redirect_url}",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png")

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png", with_google_fonts=False)


def freeze_startup_objects() -> None:
    """Move what startup made (modules, FastAPI's routes, pydantic's schemas) out of the
    cyclic collector's reach. Each full collection walked all of it: under 300 readers
    the REST process stopped for 40-47 ms at a time, collecting nothing, and every write,
    probe and shed read in flight waited (BENCHMARKS.md §15, "Isolation on a seeded node")."""
    gc.collect()
    gc.freeze()


def create_app(source: ApiSettings | NodeHome | str | os.PathLike[str]) -> FastAPI:
    """Build the REST app for a node home (path or NodeHome) or explicit ApiSettings."""
    settings = _settings(source)
    engine = readonly_engine(settings.db_url)
    # the indexes live where the reads run: in the read process, or here
    reads = ReadProcess(settings, settings.read_slots) if settings.read_process else None
    state = ApiState(
        settings=settings,
        engine=engine,
        rpc=RpcClient(settings.rpc_url, timeout=settings.rpc_timeout_s),
        probe=RpcClient(settings.rpc_url, timeout=2.0),
        metrics=ApiMetrics(engine),
        recall=None if reads else start_recall(settings, engine),
        words=None if reads else start_words(settings, engine),
        read_process=reads,
    )
    state.reads = ReadGate(settings.read_slots, settings.read_backlog,
                           on_shed=state.metrics.shed_reads.inc)
    if reads is not None:
        state.metrics.registry.register(RemoteCollector(reads))
    if state.recall is not None:
        state.metrics.registry.register(RecallCollector(state.recall))
    if state.words is not None:
        state.metrics.registry.register(WordsCollector(state.words))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await state.start_follower()
        freeze_startup_objects()
        try:
            yield
        finally:
            await state.stop_follower()
            state.close()

    app = FastAPI(title="memledger", version=_version(), description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    install_docs(app)
    app.state.memledger = state
    problems.install(app)
    for module in (routes_txs, routes_memories, routes_state, routes_status, routes_export):
        app.include_router(module.router)
    # Innermost first. CORS wraps the rate limit and the timeout so their 429 / 504 carry
    # Access-Control-Allow-Origin (and a browser may read Retry-After), and preflights are
    # answered before they spend a rate-limit token.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(TimeoutMiddleware, seconds=max(settings.request_timeout_s,
                                                      settings.commit_timeout_s + 10),
                       max_wait_s=routes_txs.MAX_COMMIT_WAIT_S)
    app.add_middleware(RateLimitMiddleware, rate=settings.rate_limit_per_s,
                       burst=settings.rate_limit_burst)
    # Outside the rate limit and the timeout: a shed read costs neither a token nor a timer;
    # inside CORS, so a browser may read its Retry-After.
    app.add_middleware(ReadGateMiddleware, gate=state.reads)
    if settings.cors_origins:
        app.add_middleware(ProblemCORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "HEAD", "POST"],
                           allow_headers=["content-type"],
                           expose_headers=["retry-after", "location"])
    app.add_middleware(RequestMetricsMiddleware, observe=state.metrics.observe_request)
    app.add_middleware(HeadMiddleware)  # outermost: everything inside sees a GET
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app
