"""The test-net checker against stand-in RPCs: what it concludes when nodes hold
different ranges of blocks, and how it reads FinalizeBlock's app hash.

Real nets run in tests/e2e/test_multinode.py and test_testnet_tools.py; these pin the
two cases review found on real nets, without building one.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from memledger.sdk.rpc import RpcError
from memledger.testnet import consistency
from memledger.testnet.consistency import NodeTarget, check, finalize_app_hash, first_disagreement

#: url -> (earliest block, latest block)
NODES = {"http://n0": (1, 40), "http://n1": (1, 40), "http://lagging": (1, 5),
         "http://synced": (21, 40)}


class StandInRpc:
    """A node's RPC: status, and an error for a block it does not hold."""

    def __init__(self, url: str, timeout: float = 10) -> None:
        self.earliest, self.latest = NODES[url]

    def status(self) -> dict[str, Any]:
        return {"sync_info": {"latest_block_height": str(self.latest),
                              "earliest_block_height": str(self.earliest)}}

    def _held(self, height: int) -> None:
        if not self.earliest <= height <= self.latest:
            raise RpcError("block_results", -32603, "Internal error",
                           f"height {height} is not available, lowest height is "
                           f"{self.earliest}")

    def call(self, method: str, params: dict[str, str]) -> dict[str, Any]:
        low, high = int(params["minHeight"]), int(params["maxHeight"])
        self._held(low)
        return {"block_metas": [
            {"header": {"height": str(h), "app_hash": f"A{h}", "last_results_hash": "R"},
             "block_id": {"hash": f"B{h}"}} for h in range(high, low - 1, -1)]}

    def block_results(self, height: int) -> dict[str, Any]:
        self._held(height)
        return {"app_hash": base64.b64encode(bytes([height]) * 32).decode()}

    def close(self) -> None:
        pass


def test_a_node_below_a_state_synced_node_s_first_block_is_inconclusive(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """It was an RpcError out of check() ("height 5 is not available"), which the CLI
    reported with the exit status of a divergence."""
    monkeypatch.setattr(consistency, "RpcClient", StandInRpc)
    targets = [NodeTarget(name, url) for name, url in
               (("n0", "http://n0"), ("lagging", "http://lagging"), ("synced", "http://synced"))]
    report = check(targets, projections=False)
    assert report.ok and not report.conclusive
    assert "the lowest is at height 5, a state-synced node's first block is 21" in \
        report.notes[0]


def test_nodes_that_share_blocks_are_compared_from_the_first_they_share(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consistency, "RpcClient", StandInRpc)
    targets = [NodeTarget("n0", "http://n0"), NodeTarget("synced", "http://synced")]
    report = check(targets, projections=False)
    assert report.ok and report.conclusive
    assert (report.first_common_height, report.common_height) == (21, 40)


class _Hash:
    def __init__(self, digest: bytes) -> None:
        self.text = base64.b64encode(digest).decode()

    def block_results(self, height: int) -> dict[str, str]:
        return {"app_hash": self.text}  # CometBFT v0.38 serves it in base64


def test_finalize_app_hashes_are_compared_as_bytes_and_shown_as_hex() -> None:
    """Upper-cased as served, two hashes whose base64 differs only in letter case
    compared equal: a divergence missed."""
    a = hashlib.sha256(b"node-a state").digest()
    text = base64.b64encode(a).decode()
    i = next(i for i, c in enumerate(text[:40]) if c.isalpha())
    b = base64.b64decode(text[:i] + text[i].swapcase() + text[i + 1:])
    assert a != b
    seen = {name: finalize_app_hash(_Hash(d), 7)  # type: ignore[arg-type]
            for name, d in (("n0", a), ("n1", a), ("n2", b))}
    assert first_disagreement(seen) is not None
    assert seen["n0"] == a.hex().upper()  # as the headers show app hashes
