"""Portable, verifiable memory bundles: export, offline verification, import.

A bundle is JSON Lines (docs/EXPORT.md): one header line with the light block whose app
hash covers every memory in it, one line per memory with its record, content and proofs,
and an end line with the count. Anyone holding a trusted header hash (or the chain's
genesis) can verify it offline, without trusting the node that made it.
"""

from memledger.sdk.bundle.format import BundleError
from memledger.sdk.bundle.verify import BundleSummary, VerifiedMemory, read_bundle, verify_bundle

__all__ = ["BundleError", "BundleSummary", "VerifiedMemory", "read_bundle", "verify_bundle"]
