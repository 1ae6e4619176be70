"""Re-exported from memledger.devtools.node (shared with bench/), and what the real-node
tests do with a node between restarts."""

import httpx

from memledger.devtools.node import (
    PORT_OFFSETS,
    REPO,
    NodeRunner,
    free_base_port,
    memledger,
    wait_api_ready,
)

__all__ = ["PORT_OFFSETS", "REPO", "NodeRunner", "free_base_port", "memledger",
           "statuses_after_start", "wait_api_ready"]


def statuses_after_start(runner: NodeRunner, memory_ids: list[str]) -> list[int]:
    """Start the stopped node; the HTTP status of a read of each memory."""
    runner.start()
    wait_api_ready(runner.api_url)
    with httpx.Client(base_url=runner.api_url, timeout=30) as api:
        return [api.get(f"/v1/memories/{m}").status_code for m in memory_ids]
