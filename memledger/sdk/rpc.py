"""Minimal synchronous client for the CometBFT v0.38 JSON-RPC API.

Kept separate from process management so the gateway, tests and benchmarks can talk to
any node (local child process or remote) with one small dependency (httpx).

All calls use JSON-RPC 2.0 over POST. In that encoding CometBFT expects ``[]byte`` params
as base64, ``HexBytes`` params (e.g. ``abci_query.data``) as hex, and integers as strings.
"""

from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass
from typing import Any

import httpx

from memledger.sdk.plainhttp import PlainHttp
from memledger.sdk.rpc_pool import PostPool
from memledger.sdk.waiting import wait_until

DEFAULT_URL = "http://127.0.0.1:26657"

_ids = itertools.count(1)


class RpcError(RuntimeError):
    """A JSON-RPC error object returned by CometBFT (as opposed to a transport failure)."""

    def __init__(self, method: str, code: int, message: str, data: str) -> None:
        super().__init__(f"{method}: rpc error {code}: {message}: {data}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class TxResult:
    """Outcome of a broadcast; ``code`` is the CheckTx code (and FinalizeBlock for commit)."""

    code: int
    log: str
    hash: str
    height: int = 0
    check_tx: dict[str, Any] | None = None
    tx_result: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.code == 0


@dataclass(frozen=True)
class QueryResult:
    """Decoded ``abci_query`` response (bytes fields are base64-decoded)."""

    code: int
    log: str
    info: str
    key: bytes
    value: bytes
    height: int
    codespace: str
    raw: dict[str, Any]


def laddr_to_url(laddr: str) -> str:
    """Turn a CometBFT listen address (``tcp://host:port``) into an HTTP base URL."""
    host_port = laddr.split("://", 1)[-1]
    host, _, port = host_port.rpartition(":")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    return f"http://{host}:{port}"


def b64decode(value: str | None) -> bytes:
    """Decode an optional base64 field (CometBFT omits empty ones)."""
    return base64.b64decode(value) if value else b""


class RpcClient:
    """Thin JSON-RPC client; one pooled httpx connection per instance."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        # CometBFT's RPC is plain http on loopback here; building the default TLS context
        # costs ~50 ms of CPU per client, paid by every CLI call and agent thread.
        plain = self.url.startswith("http://")
        self._http = httpx.Client(timeout=timeout, verify=not plain)
        #: plain-http calls skip httpx's own per-request cost (memledger.sdk.plainhttp)
        self._plain = PlainHttp(self.url, timeout) if PlainHttp.serves(self.url, None) else None

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
        self._http.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Invoke ``method`` and return its ``result``; raise RpcError on a JSON-RPC error."""
        body = _request(method, params)
        resp = (self._http.post(self.url, json=body) if self._plain is None
                else self._plain.request("POST", "", json=body))
        return _result(method, self.url, resp)

    # --- info -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        result: dict[str, Any] = self.call("status")
        return result

    def latest_height(self) -> int:
        return int(self.status()["sync_info"]["latest_block_height"])

    def block(self, height: int | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.call("block", _height_params(height))
        return result

    def block_results(self, height: int | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.call("block_results", _height_params(height))
        return result

    def validators(self, height: int | None = None) -> dict[str, Any]:
        params = _height_params(height)
        params["per_page"] = "100"
        result: dict[str, Any] = self.call("validators", params)
        return result

    def abci_info(self) -> dict[str, Any]:
        result: dict[str, Any] = self.call("abci_info")
        return result

    # --- transactions -----------------------------------------------------------------

    def broadcast_tx_sync(self, tx: bytes) -> TxResult:
        """Submit ``tx`` and wait only for CheckTx."""
        return _tx_result(self.call("broadcast_tx_sync", {"tx": base64.b64encode(tx).decode()}))

    def broadcast_tx_async(self, tx: bytes) -> TxResult:
        """Submit ``tx`` without waiting for CheckTx (fire and forget)."""
        r = self.call("broadcast_tx_async", {"tx": base64.b64encode(tx).decode()})
        return TxResult(code=int(r.get("code", 0)), log=r.get("log", ""), hash=r["hash"])

    def broadcast_tx_commit(self, tx: bytes) -> TxResult:
        """Submit ``tx`` and wait until it is in a committed block (or CheckTx rejects it)."""
        r = self.call("broadcast_tx_commit", {"tx": base64.b64encode(tx).decode()})
        check = r.get("check_tx", {})
        result = r.get("tx_result", {})
        code = int(check.get("code", 0)) or int(result.get("code", 0))
        log = check.get("log", "") if check.get("code") else result.get("log", "")
        return TxResult(
            code=code,
            log=log,
            hash=r.get("hash", ""),
            height=int(r.get("height", 0)),
            check_tx=check,
            tx_result=result,
        )

    def tx(self, tx_hash: str | bytes, *, prove: bool = False) -> dict[str, Any]:
        """Look a committed tx up by hash (hex string as returned by broadcast, or raw bytes)."""
        raw = bytes.fromhex(tx_hash) if isinstance(tx_hash, str) else tx_hash
        params = {"hash": base64.b64encode(raw).decode(), "prove": prove}
        result: dict[str, Any] = self.call("tx", params)
        return result

    def tx_search(
        self, query: str, *, page: int = 1, per_page: int = 30, order_by: str = "asc"
    ) -> dict[str, Any]:
        """Search the kv tx index, e.g. ``tx.height=5`` or ``app.key='x'``."""
        params = {
            "query": query,
            "prove": False,
            "page": str(page),
            "per_page": str(per_page),
            "order_by": order_by,
        }
        result: dict[str, Any] = self.call("tx_search", params)
        return result

    def abci_query(
        self, path: str, data: bytes = b"", *, height: int = 0, prove: bool = False
    ) -> QueryResult:
        """Query the application; ``data`` is hex-encoded on the wire (HexBytes)."""
        params = {"path": path, "data": data.hex(), "height": str(height), "prove": prove}
        return _query_result(self.call("abci_query", params)["response"])

    # --- waiting ----------------------------------------------------------------------

    def wait_for_height(self, height: int, timeout: float = 30.0, poll: float = 0.1) -> int:
        """Block until the node reports ``latest_block_height >= height``; return it."""
        last: list[int] = []

        def reached() -> tuple[int] | None:  # a tuple: height 0 is an answer too
            last[:] = [self.latest_height()]
            return (last[0],) if last[0] >= height else None

        return wait_until(reached, timeout, poll, what=f"{self.url} to reach height {height}",
                          ignore=(httpx.HTTPError, RpcError),
                          error=lambda msg: TimeoutError(f"{msg}, last height {last}"))[0]


def _request(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}}


def _result(method: str, url: str, resp: httpx.Response) -> Any:
    """The ``result`` of a JSON-RPC answer; RpcError for an error object or non-JSON-RPC."""
    try:
        payload = resp.json()
    except ValueError:
        if resp.is_error:
            resp.raise_for_status()
        raise RpcError(method, 0, "not a JSON-RPC answer",
                       f"{url} answered {resp.text[:80]!r}") from None
    return _payload_result(method, url, payload, resp.content)


def _payload_result(method: str, url: str, payload: Any, data: bytes) -> Any:
    """The ``result`` of a decoded JSON-RPC answer (`data`: its bytes, for the error)."""
    if not isinstance(payload, dict) or ("result" not in payload
                                         and not payload.get("error")):
        # e.g. the REST API's address given as the RPC URL: JSON, but not JSON-RPC
        raise RpcError(method, 0, "not a JSON-RPC answer",
                       f"{url} answered {data[:80].decode(errors='replace')!r}")
    if payload.get("error"):
        err = payload["error"]
        raise RpcError(method, int(err.get("code", 0)), str(err.get("message", "")),
                       str(err.get("data", "")))
    return payload["result"]


def _tx_result(r: dict[str, Any]) -> TxResult:
    return TxResult(code=int(r.get("code", 0)), log=r.get("log", ""), hash=r["hash"])


def _query_result(r: dict[str, Any]) -> QueryResult:
    return QueryResult(code=int(r.get("code", 0)), log=r.get("log", ""), info=r.get("info", ""),
                       key=b64decode(r.get("key")), value=b64decode(r.get("value")),
                       height=int(r.get("height", 0)), codespace=r.get("codespace", ""), raw=r)


class AsyncRpcClient:
    """The calls a server makes per request, on an event loop with kept-alive
    connections: no worker-thread hop per call, many calls in flight. Plain http (the
    node's own cometbft) goes through PostPool, anything else through httpx."""

    def __init__(self, url: str = DEFAULT_URL, *, timeout: float = 30.0,
                 keep: int = 64) -> None:
        self.url = url.rstrip("/")
        self._pool = PostPool(self.url + "/", timeout=timeout, keep=keep) \
            if self.url.startswith("http://") else None
        self._http = None if self._pool is not None else httpx.AsyncClient(timeout=timeout)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
        if self._http is not None:
            await self._http.aclose()

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        body = json.dumps(_request(method, params)).encode()
        if self._pool is None:
            assert self._http is not None
            resp = await self._http.post(self.url, content=body,
                                         headers={"content-type": "application/json"})
        else:
            status, data = await self._pool.post(body)
            try:  # a JSON answer is read as it is: no httpx objects made per call
                return _payload_result(method, self.url, json.loads(data), data)
            except ValueError:  # not JSON: said as for any other client
                resp = httpx.Response(status, content=data,
                                      request=httpx.Request("POST", self.url))
        return _result(method, self.url, resp)

    async def broadcast_tx_sync(self, tx: bytes) -> TxResult:
        return _tx_result(await self.call("broadcast_tx_sync",
                                          {"tx": base64.b64encode(tx).decode()}))

    async def tx(self, tx_hash: str) -> dict[str, Any]:
        params = {"hash": base64.b64encode(bytes.fromhex(tx_hash)).decode(), "prove": False}
        result: dict[str, Any] = await self.call("tx", params)
        return result

    async def abci_query(self, path: str, data: bytes = b"", *, height: int = 0) -> QueryResult:
        params = {"path": path, "data": data.hex(), "height": str(height), "prove": False}
        return _query_result((await self.call("abci_query", params))["response"])

    async def app_height(self) -> int:
        """The height the app last committed (its projection is flushed up to it)."""
        info = (await self.call("abci_info")).get("response", {})
        return int(info.get("last_block_height") or 0)

    async def block(self, height: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("block", _height_params(height))
        return result

    async def block_results(self, height: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("block_results", _height_params(height))
        return result


def _height_params(height: int | None) -> dict[str, Any]:
    return {} if height is None else {"height": str(height)}
