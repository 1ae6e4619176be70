"""A CometBFT light client in Python: verify that an app hash really is the chain's.

`LightClient` moves trust from a root (genesis validators or a pinned header) to the
header a read needs; `reads` checks record proofs against that header's app hash.
"""

from memledger.sdk.light.client import GenesisRoot, LightClient, PinnedRoot, TrustRoot
from memledger.sdk.light.errors import (
    CommitError,
    HeaderError,
    ProofError,
    ProviderError,
    PrunedError,
    TrustError,
    VerificationError,
)
from memledger.sdk.light.verify import TrustOptions

__all__ = [
    "CommitError",
    "GenesisRoot",
    "HeaderError",
    "LightClient",
    "PinnedRoot",
    "ProofError",
    "ProviderError",
    "PrunedError",
    "TrustError",
    "TrustOptions",
    "TrustRoot",
    "VerificationError",
]
