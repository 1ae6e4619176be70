"""The auto-voter's near-copy check on a real node (cometbft, app, REST, voter, default
embedder): a reworded copy of a committed memory is rejected with the copied memory's id
in the vote reason; a different fact that shares most of its words is accepted, and so
is a correction that rewords the memory it supersedes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from tests.support.node import NodeRunner, wait_api_ready

pytestmark = pytest.mark.cometbft

ORIGINAL = "The staging database listens on port 5433 behind the internal load balancer"
REWORDED = "Behind the internal load balancer, port 5433 is where the staging database listens"
DIFFERENT = "The production database listens on port 5432 behind the internal load balancer"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[NodeRunner]:
    runner = NodeRunner(tmp_path_factory.mktemp("nearcopy") / "home",
                        chain_id="memledger-nearcopy", voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        yield runner
    finally:
        runner.stop()


def _indexed(api: str, memory_id: str) -> bool:
    """The committed memory is in the vector index (what the voter's check asks)."""
    items = httpx.get(f"{api}/v1/memories", timeout=30, params={
        "q": ORIGINAL, "mode": "semantic", "status": "committed", "limit": 5}).json()["items"]
    return any(m["id"] == memory_id for m in items)


def test_reworded_copy_rejected_naming_it_and_different_fact_accepted(
        node: NodeRunner) -> None:
    with Client(node.api_url, key=Agent.generate("nearcopy-a")) as ml:
        ml.submit("nc-original", ORIGINAL, domain="infra")
        assert ml.wait_decided("nc-original").status == "committed"
        wait_until(lambda: _indexed(node.api_url, "nc-original"), 60, 0.2,
                   what="the original to be indexed", ignore=(httpx.HTTPError, KeyError))
        ml.submit("nc-copy", REWORDED, domain="infra")
        ml.submit("nc-other", DIFFERENT, domain="infra")
        # the same rewording in another domain is no copy of it
        ml.submit("nc-elsewhere", REWORDED, domain="ops")
        copy = ml.wait_decided("nc-copy")
        assert copy.status == "deprecated", copy
        [vote] = ml.votes("nc-copy")
        assert vote.decision == "reject"
        assert vote.reason is not None and "nc-original" in vote.reason, vote.reason
        assert "near-copy" in (copy.status_reason or ""), copy.status_reason
        assert ml.wait_decided("nc-other").status == "committed"
        assert ml.wait_decided("nc-elsewhere").status == "committed"
        # a correction rewords the memory it corrects on purpose: it is no near-copy
        ml.submit("nc-fix", "Behind the internal load balancer the staging database "
                  "listens on port 5433", domain="infra", supersedes="nc-original")
        fix = ml.wait_decided("nc-fix")
        assert fix.status == "committed", fix
        assert ml.get("nc-original").status == "superseded"
