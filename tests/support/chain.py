"""Re-exported from memledger.devtools.chain (shared with bench/)."""

from memledger.devtools.chain import (
    CHAIN_ID,
    GENESIS_TIME_S,
    HaltCalled,
    LocalChain,
    apply_direct,
    seeded_key,
)

__all__ = ["CHAIN_ID", "GENESIS_TIME_S", "HaltCalled", "LocalChain", "apply_direct", "seeded_key"]
