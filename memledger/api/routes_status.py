"""Node status, liveness (/health), readiness (/ready) and Prometheus metrics."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
import httpx
import sqlalchemy as sa
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from memledger.api.db import projection_height
from memledger.api.deps import ApiState, State, rpc_call
from memledger.api.problems import PROBLEM_RESPONSES, Problem
from memledger.api.read_process import ReadProcess, ReadsUnavailable
from memledger.api.schemas import Health, Ready, Recall, RecallTail, Status
from memledger.daemon.voter import is_alive
from memledger.sdk.rpc import RpcError

router = APIRouter(tags=["node"])


def _projection_height_or_none(state: ApiState) -> int | None:
    try:
        with state.engine.connect() as conn:
            return projection_height(conn)
    except sa.exc.SQLAlchemyError:
        return None


@router.get("/v1/status", response_model=Status, responses=PROBLEM_RESPONSES,
            summary="Chain id, height, app hash and version, sync state")
async def get_status(state: State) -> Status:
    status: dict[str, Any] = await rpc_call(state.probe.status)
    info: dict[str, Any] = (await rpc_call(state.probe.abci_info)).get("response", {})
    sync = status.get("sync_info", {})
    node = status.get("node_info", {})
    height, recall = await anyio.to_thread.run_sync(_heights, state)
    return Status(
        chain_id=str(node.get("network", state.settings.chain_id)),
        moniker=str(node.get("moniker", "")),
        height=int(sync.get("latest_block_height") or 0),
        app_hash=str(sync.get("latest_app_hash", "")).lower(),
        app_version=int(info.get("app_version") or 0),
        software_version=str(info.get("version", "")),
        latest_block_time=str(sync.get("latest_block_time", "")),
        catching_up=bool(sync.get("catching_up", False)),
        projection_height=height or 0,
        embedder=recall,
    )


def _heights(state: ApiState) -> tuple[int | None, Recall | None]:
    """The projection height and the vector index's status against it (blocking)."""
    height = _projection_height_or_none(state)
    return height, _recall_status(state, height)


def _recall_status(state: ApiState, height: int | None) -> Recall | None:
    """The vector index's status, its lag against the projection height just read
    (`height`; None when unreadable: the height the follower's step began at)."""
    if state.read_process is not None:
        try:
            st = state.read_process.control("status", height)
        except ReadsUnavailable:
            return None
        if st is None:
            return None
    elif state.recall is None:
        return None
    else:
        st = state.recall.status(state.recall.projection_height if height is None else height)
    return Recall(name=st.embedder, version=st.embedder_version, dim=st.dim, state=st.state,
                  indexed_height=st.indexed_height, lag=st.lag, vectors=st.count,
                  memory_bytes=st.memory_bytes, disk_bytes=st.disk_bytes,
                  rebuilt_reason=st.rebuilt_reason, covered_lag=st.covered_lag,
                  tail=RecallTail(name=st.tail.embedder, memories=st.tail.memories,
                                  covered_height=st.tail.covered_height,
                                  memory_bytes=st.tail.memory_bytes)
                  if st.tail is not None else None)


@router.get("/health", response_model=Health, summary="The REST process is up")
async def health() -> Health:
    return Health(status="ok")


def _checks(state: ApiState) -> dict[str, dict[str, Any]]:
    """Blocking readiness probes (run in a worker thread)."""
    checks: dict[str, dict[str, Any]] = {}
    try:
        sync = state.probe.status().get("sync_info", {})
        checks["cometbft"] = {"ok": True, "detail": f"height {sync.get('latest_block_height')}"}
        catching_up = bool(sync.get("catching_up", False))
        checks["synced"] = {"ok": not catching_up,
                            "detail": "catching up" if catching_up else "in sync"}
    except (httpx.HTTPError, RpcError) as exc:
        checks["cometbft"] = {"ok": False, "detail": f"RPC unreachable: {type(exc).__name__}"}
    height = _projection_height_or_none(state)
    checks["projection"] = {"ok": height is not None,
                            "detail": "unreadable" if height is None else f"height {height}"}
    if state.read_process is not None:
        checks["reads"] = _reads_check(state.read_process)
    settings = state.settings
    if settings.voter_required and settings.home is not None:
        alive = is_alive(settings.home, settings.voter_max_age_s)
        checks["voter"] = {"ok": alive, "detail": "heartbeat fresh" if alive else
                           f"no heartbeat within {settings.voter_max_age_s:.0f}s"}
    return checks


def _reads_check(reads: ReadProcess) -> dict[str, Any]:
    """The read process runs (a dead one is replaced here, as by the next read)."""
    try:
        reads.ensure_running()
    except Exception as exc:  # noqa: BLE001 - not ready, and why
        return {"ok": False, "detail": f"read process cannot start: {exc}"}
    return {"ok": True, "detail": f"pid {reads.pid}, replaced {reads.restarts} times"}


@router.get("/ready", response_model=Ready, summary="Ready to serve (503 problem otherwise)",
            responses={503: PROBLEM_RESPONSES[503]})
async def ready(state: State) -> JSONResponse:
    checks = await anyio.to_thread.run_sync(_checks, state)
    failing = sorted(name for name, check in checks.items() if not check["ok"])
    if failing:
        raise Problem(503, "not_ready", f"failing checks: {', '.join(failing)}",
                      checks=checks, failing=failing)
    return JSONResponse({"status": "ready", "checks": checks})


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
async def metrics(state: State) -> Response:
    body = await anyio.to_thread.run_sync(state.metrics.render)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
