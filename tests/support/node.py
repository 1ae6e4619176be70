"""Re-exported from memledger.devtools.node (shared with bench/)."""

from memledger.devtools.node import (
    PORT_OFFSETS,
    REPO,
    NodeRunner,
    free_base_port,
    memledger,
    wait_api_ready,
)

__all__ = ["PORT_OFFSETS", "REPO", "NodeRunner", "free_base_port", "memledger",
           "wait_api_ready"]
