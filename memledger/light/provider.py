"""Where light blocks come from: CometBFT RPC directly, or the node's REST pass-through.

Both are untrusted: a provider only fetches and parses; the light client verifies.
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from memledger.light.errors import ProviderError
from memledger.light.header import LightBlock, parse_light_block
from memledger.node.rpc import RpcClient, RpcError


class Provider(Protocol):
    def light_block(self, height: int) -> LightBlock: ...

    def latest_height(self) -> int: ...


def fetch_rpc_light_block(rpc: RpcClient, height: int) -> dict[str, Any]:
    """`/commit` and every page of `/validators` at `height`, as one JSON document."""
    commit = rpc.call("commit", {"height": str(height)})
    vals: list[Any] = []
    page = 1
    while True:
        doc = rpc.call("validators", {"height": str(height), "page": str(page),
                                      "per_page": "100"})
        vals.extend(doc["validators"])
        if len(vals) >= int(doc["total"]) or not doc["validators"]:
            break
        page += 1
    return {"signed_header": commit["signed_header"], "validators": vals}


class RpcProvider:
    """Light blocks straight from a CometBFT RPC endpoint."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.rpc = RpcClient(url, timeout=timeout)

    def close(self) -> None:
        self.rpc.close()

    def light_block(self, height: int) -> LightBlock:
        try:
            doc = fetch_rpc_light_block(self.rpc, height)
        except (httpx.HTTPError, RpcError, KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"light block {height}: {exc}") from exc
        return parse_light_block(doc["signed_header"], doc["validators"])

    def latest_height(self) -> int:
        try:
            return self.rpc.latest_height()
        except (httpx.HTTPError, RpcError, KeyError, ValueError) as exc:
            raise ProviderError(f"status: {exc}") from exc


class RestProvider:
    """Light blocks through a memledger node's `GET /v1/light` (same JSON as RPC)."""

    def __init__(self, base_url: str, *, timeout: float = 10.0,
                 http: httpx.Client | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http or httpx.Client(timeout=timeout)

    def _get(self, height: int | None) -> dict[str, Any]:
        params = {} if height is None else {"height": str(height)}
        try:
            resp = self._http.get(f"{self.base_url}/v1/light", params=params)
        except httpx.HTTPError as exc:
            raise ProviderError(f"light block {height}: {exc}") from exc
        if resp.status_code != 200:
            raise ProviderError(f"light block {height}: HTTP {resp.status_code}")
        try:
            doc: dict[str, Any] = resp.json()
        except ValueError as exc:
            raise ProviderError(f"light block {height}: not JSON") from exc
        return doc

    def light_block(self, height: int) -> LightBlock:
        doc = self._get(height)
        try:
            return parse_light_block(doc["signed_header"], doc["validators"])
        except KeyError as exc:
            raise ProviderError(f"light block {height}: missing {exc}") from exc

    def latest_height(self) -> int:
        doc = self._get(None)
        try:
            return int(doc["signed_header"]["header"]["height"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"latest light block: {exc}") from exc
