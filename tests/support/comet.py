"""Re-exported from memledger.devtools.comet (shared with bench/)."""

from memledger.devtools.comet import NodeHome, init_node, init_testnet

__all__ = ["NodeHome", "init_node", "init_testnet"]
