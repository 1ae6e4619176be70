"""Where light blocks come from: CometBFT RPC directly, or the node's REST pass-through.

Both are untrusted: a provider only fetches and parses; the light client verifies.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import httpx

from memledger.sdk.light.errors import ProviderError, PrunedError
from memledger.sdk.light.header import LightBlock, parse_light_block
from memledger.sdk.rpc import RpcClient, RpcError


class Provider(Protocol):
    def light_block(self, height: int) -> LightBlock: ...

    def latest_height(self) -> int: ...


#: CometBFT's answer (`/commit`, `/validators`, `/block`...) for a height below its base
_PRUNED = re.compile(r"height (\d+) is not available, lowest height is (\d+)")


def pruned_lowest(exc: RpcError) -> int | None:
    """The node's lowest height when `exc` says the height asked for was pruned."""
    found = _PRUNED.search(f"{exc.message} {exc.data}")
    return None if found is None else int(found[2])


#: CometBFT's bound on a validator set (MaxVotesCount) and its largest /validators page.
MAX_VALIDATORS = 10_000
PER_PAGE = 100


def fetch_rpc_light_block(rpc: RpcClient, height: int) -> dict[str, Any]:
    """`/commit` and every page of `/validators` at `height`, as one JSON document."""
    commit = rpc.call("commit", {"height": str(height)})
    return {"signed_header": commit["signed_header"],
            "validators": fetch_rpc_validators(rpc, height)}


def fetch_rpc_validators(rpc: RpcClient, height: int) -> list[Any]:
    """Every page of `/validators` at `height`. The RPC is untrusted and names the
    `total` itself, so it is held to it: within CometBFT's bound, the same on every page,
    and every page must add validators. A lying RPC cannot keep the client paging."""
    vals: list[Any] = []
    total: int | None = None
    for page in range(1, MAX_VALIDATORS // PER_PAGE + 1):
        doc = rpc.call("validators", {"height": str(height), "page": str(page),
                                      "per_page": str(PER_PAGE)})
        total = _page_total(doc, total, height)
        items = doc["validators"]
        if not isinstance(items, list) or not 0 < len(items) <= PER_PAGE:
            raise ProviderError(f"validators {height}: page {page} is empty or oversized "
                                f"with {len(vals)} of {total} fetched")
        vals.extend(items)
        if len(vals) >= total:
            return vals
    raise ProviderError(f"validators {height}: more than {MAX_VALIDATORS} validators")


def _page_total(doc: dict[str, Any], total: int | None, height: int) -> int:
    """The page's `total`, which must be a possible set size and agree with page 1's."""
    page_total = int(doc["total"])
    if not 0 < page_total <= MAX_VALIDATORS:
        raise ProviderError(f"validators {height}: total {page_total} is not a set size")
    if total is not None and page_total != total:
        raise ProviderError(f"validators {height}: total changed from {total} to "
                            f"{page_total} between pages")
    return page_total


class RpcProvider:
    """Light blocks straight from a CometBFT RPC endpoint."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.rpc = RpcClient(url, timeout=timeout)

    def close(self) -> None:
        self.rpc.close()

    def light_block(self, height: int) -> LightBlock:
        try:
            doc = fetch_rpc_light_block(self.rpc, height)
        except RpcError as exc:
            lowest = pruned_lowest(exc)
            if lowest is not None:
                raise PrunedError(height, lowest) from exc
            raise ProviderError(f"light block {height}: {exc}") from exc
        except (httpx.HTTPError, KeyError, TypeError, ValueError) as exc:
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
        if resp.status_code == 410 and height is not None:  # the node pruned it
            raise PrunedError(height, _lowest_of(resp))
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


def _lowest_of(resp: httpx.Response) -> int:
    """`lowest_height` of a 410 problem document (0 when it does not say)."""
    try:
        return int(resp.json().get("lowest_height") or 0)
    except (ValueError, TypeError, AttributeError):
        return 0
