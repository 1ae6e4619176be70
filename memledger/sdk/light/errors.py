"""Typed verification failures: every rejection says which layer failed and why.

`kind` is one of `proof` (a record proof or a served value), `header` (a header that is
malformed, for another chain, or not linked to trust), `commit` (signatures or voting
power), `trust` (no usable trust root: expired, unknown, or conflicting). `reason` is a
stable slug tests and callers can branch on.
"""

from __future__ import annotations

KINDS = ("proof", "header", "commit", "trust")


class VerificationError(Exception):
    """A read could not be verified against the chain; never return the data."""

    kind = "proof"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{self.kind}: {message}")
        self.reason = reason
        self.message = message


class ProofError(VerificationError):
    """The record proof, or the served value, does not match the trusted app hash."""

    kind = "proof"


class HeaderError(VerificationError):
    """A header is malformed, for the wrong chain, or does not hash as claimed."""

    kind = "header"


class CommitError(VerificationError):
    """A commit's signatures do not verify or do not carry enough voting power."""

    kind = "commit"


class TrustError(VerificationError):
    """No valid trust to verify from (expired, pinned hash differs, too far behind)."""

    kind = "trust"


class ProviderError(Exception):
    """A light block could not be fetched (transport, missing height): not a verdict."""


class PrunedError(ProviderError):
    """The node pruned the height asked for (block pruning, `retain_blocks`): it will not
    come back, so it is not waited for. `lowest` is the node's lowest height."""

    def __init__(self, height: int, lowest: int) -> None:
        super().__init__(f"light block {height}: this node pruned it (its lowest block is "
                         f"{lowest})")
        self.height = height
        self.lowest = lowest
