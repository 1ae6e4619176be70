"""The light client: from a trust root, verify headers up to the height a read needs.

Trust starts at a root the user chooses: the genesis validator set (verified against the
first header's validators_hash), or a height and header hash the user pins. It moves
forward by CometBFT's rules (`verify.verify_step`): straight to the target if enough of
the trusted power signed it, otherwise by bisection through pivot heights. Heights below
the lowest trusted header are reached backwards through `last_block_id` hash links.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memledger.sdk.light.encoding import time_ns
from memledger.sdk.light.errors import (
    CommitError,
    HeaderError,
    ProviderError,
    PrunedError,
    TrustError,
)
from memledger.sdk.light.header import LightBlock, ValidatorSet, genesis_validators
from memledger.sdk.light.provider import Provider
from memledger.sdk.light.store import TrustedStore
from memledger.sdk.light.verify import (
    TrustOptions,
    check_fresh,
    check_not_expired,
    check_self_consistent,
    verify_commit_full,
    verify_step,
)


@dataclass(frozen=True)
class GenesisRoot:
    """Trust the chain's genesis validator set at its initial height, from its genesis
    time: the header there must carry that time (CometBFT makes the first block's time
    the genesis time), and the trusting period runs from it, not from a served header's
    time, which former genesis validators could choose long after they left."""

    chain_id: str
    validators: ValidatorSet
    initial_height: int = 1
    genesis_time_ns: int = field(kw_only=True)

    @classmethod
    def from_genesis(cls, doc: dict[str, Any]) -> GenesisRoot:
        """From a CometBFT genesis document (chain id, validators, initial height, time).
        Anything else is a `malformed` HeaderError naming the field, never a KeyError."""
        if not isinstance(doc, dict):
            raise HeaderError("malformed", "genesis is not a JSON object")
        chain_id = doc.get("chain_id")
        if not isinstance(chain_id, str) or not chain_id:
            raise HeaderError("malformed", "genesis has no chain_id")
        try:
            genesis_time = time_ns(str(doc["genesis_time"]))
        except (KeyError, ValueError) as exc:
            raise HeaderError("malformed", f"genesis has no valid genesis_time: {exc}") from exc
        initial = doc.get("initial_height") or 1
        if not (isinstance(initial, int) or (isinstance(initial, str) and initial.isdigit())):
            raise HeaderError("malformed", f"genesis initial_height is not a number: {initial!r}")
        return cls(chain_id, genesis_validators(doc), max(1, int(initial)),
                   genesis_time_ns=genesis_time)

    @classmethod
    def from_file(cls, path: Path) -> GenesisRoot:
        """A genesis file; one that cannot be read or parsed is `malformed`, naming it."""
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise HeaderError("malformed", f"cannot read genesis {path}: {exc}") from exc
        try:
            return cls.from_genesis(doc)
        except HeaderError as exc:
            raise HeaderError("malformed", f"{path}: {exc.message}") from exc


@dataclass(frozen=True)
class PinnedRoot:
    """Trust one header the user obtained out of band: its height and hash."""

    height: int
    hash: bytes


TrustRoot = GenesisRoot | PinnedRoot


def root_identity(root: TrustRoot) -> str:
    """What a trust store records of the root its headers were verified from."""
    if isinstance(root, PinnedRoot):
        return f"pinned:{root.height}:{root.hash.hex()}"
    return (f"genesis:{root.chain_id}:{root.initial_height}:{root.genesis_time_ns}:"
            f"{root.validators.hash().hex()}")


def legacy_root_identity(root: TrustRoot) -> str | None:
    """A genesis root's identity as stores written before it named the genesis time
    recorded it (None for a pin, whose identity has not changed)."""
    if isinstance(root, PinnedRoot):
        return None
    return f"genesis:{root.chain_id}:{root.initial_height}:{root.validators.hash().hex()}"


def check_height(lb: LightBlock, height: int) -> None:
    """The light block is the one asked for: its header and its commit are at `height`."""
    if lb.header.height != height or lb.commit.height != height:
        raise HeaderError("wrong_height", f"asked for the header at height {height}, got "
                                          f"header {lb.header.height} with the commit for "
                                          f"{lb.commit.height}")


def check_genesis_header(root: GenesisRoot, lb: LightBlock) -> None:
    """The header at the initial height is the genesis's: its validator set and time."""
    if lb.header.validators_hash != root.validators.hash():
        raise TrustError("genesis_mismatch", f"header {lb.height} is not signed by the "
                                             "genesis validator set")
    if lb.header.time_ns != root.genesis_time_ns:
        raise TrustError("genesis_mismatch", f"header {lb.height} does not carry the genesis "
                                             "time, as the first block of the chain does")


class LightClient:
    """Verifies headers for one chain from one provider, remembering what it verified."""

    def __init__(self, provider: Provider, root: TrustRoot, *, chain_id: str | None = None,
                 store: TrustedStore | None = None, options: TrustOptions | None = None,
                 now_ns: Callable[[], int] = time.time_ns, wait_s: float = 10.0) -> None:
        # A pinned root fixes the chain id through its header hash (learned on first use).
        self.chain_id = chain_id or (root.chain_id if isinstance(root, GenesisRoot) else "")
        self.provider = provider
        self.root = root
        self.store = store if store is not None else TrustedStore()
        self.options = options or TrustOptions()
        self.now_ns = now_ns
        self.wait_s = wait_s
        self._root_checked = False

    # --- fetching ------------------------------------------------------------------------

    def _fetch(self, height: int) -> LightBlock:
        """A light block of exactly `height`, waiting briefly for a height the chain has
        not reached yet. The provider is untrusted: a signed header of another height
        would otherwise pass for this one (an old absence proof, relabelled)."""
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                lb = self.provider.light_block(height)
            except PrunedError:
                raise  # gone for good: waiting would not bring it back
            except ProviderError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)
                continue
            check_height(lb, height)
            return lb

    # --- trust root ----------------------------------------------------------------------

    def _root_block(self) -> LightBlock:
        """Verify and store the trust root's own light block (once)."""
        root = self.root
        height = root.height if isinstance(root, PinnedRoot) else root.initial_height
        known = self.store.get(height)
        if known is not None:
            self._check_stored_root(known)
            return known
        if isinstance(root, GenesisRoot):  # before any fetch: nothing served can renew it
            check_fresh(root.genesis_time_ns, f"the genesis at height {height}", self.now_ns(),
                        self.options)
        try:
            lb = self._fetch(height)
        except PrunedError as exc:
            raise TrustError("root_pruned", self._pruned_root(height, exc.lowest)) from exc
        if isinstance(root, PinnedRoot):
            if lb.header.hash() != root.hash:
                raise TrustError("pinned_hash_mismatch", f"header at height {height} does not "
                                                         "have the pinned hash")
            self.chain_id = self.chain_id or lb.header.chain_id
        if lb.header.chain_id != self.chain_id:
            raise HeaderError("wrong_chain_id", f"header is for chain {lb.header.chain_id!r}, "
                                                f"expected {self.chain_id!r}")
        if isinstance(root, GenesisRoot):
            check_genesis_header(root, lb)
        check_self_consistent(self.chain_id, lb)
        verify_commit_full(self.chain_id, lb.validators, lb.header, lb.commit)
        check_not_expired(lb.header, self.now_ns(), self.options)
        self.store.save(lb)
        return lb

    def _pruned_root(self, height: int, lowest: int) -> str:
        """Why a root on a pruning node cannot be checked, and what to do instead."""
        what = "the genesis header" if isinstance(self.root, GenesisRoot) else \
            f"the pinned header at height {height}"
        return (f"this node pruned {what} (its lowest block is {lowest}, `retain_blocks` "
                "in its config): verify against a node that keeps every block, pin a header "
                f"at height {lowest} or above (PinnedRoot), or use a trust store that already "
                "holds the root")

    def _check_stored_root(self, known: LightBlock) -> None:
        """A stored header at the root's height is the root's own (or the store is not
        this root's: another chain, a reset devnet, another pin)."""
        root = self.root
        if isinstance(root, PinnedRoot) and known.header.hash() != root.hash:
            raise TrustError("conflict", f"stored header at {known.height} differs from the "
                                         "pinned hash")
        if isinstance(root, GenesisRoot) and (
                known.header.chain_id != root.chain_id
                or known.header.validators_hash != root.validators.hash()
                or known.header.time_ns != root.genesis_time_ns):
            raise TrustError("conflict", f"stored header at {known.height} is not this "
                                         "genesis's (another chain's trust store?)")
        self.chain_id = self.chain_id or known.header.chain_id

    # --- verification --------------------------------------------------------------------

    def verify_to(self, height: int) -> LightBlock:
        """The verified light block at `height` (from the store when already verified,
        by this client's root: headers another root verified are refused, not used)."""
        lb = self._verify_to(height)
        check_height(lb, height)  # a reader takes the app hash as height `height`'s
        return lb

    def _verify_to(self, height: int) -> LightBlock:
        self._bind_store()
        known = self.store.get(height)
        if known is not None:
            return known
        if not self._root_checked or self.store.get(self._root_height()) is None:
            self._root_block()  # verifies the root, or checks a stored one against it
            self._root_checked = True
        known = self.store.get(height)
        if known is not None:
            return known
        below = self.store.latest_at_or_below(height)
        above = self.store.lowest_above(height)
        if below is not None and (above is None or not self._expired(below)):
            return self._forward(below, height)
        assert above is not None
        # Below the lowest trusted header, or the one below has expired: hash links down
        # from a trusted header above still prove the honest answer (as in CometBFT).
        return self._backward(above, height)

    def _expired(self, lb: LightBlock) -> bool:
        return lb.header.time_ns + self.options.period_ns <= self.now_ns()

    def _bind_store(self) -> None:
        """Tie the store to this root. A store written before a genesis root named its
        genesis time is taken over once its root header carries that time: the headers
        in it were then verified from this very genesis."""
        legacy = legacy_root_identity(self.root)
        if legacy is not None and self.store.root == legacy:
            known = self.store.get(self._root_height())
            if known is None:
                raise TrustError("conflict", "the trust store lacks its root header; verify "
                                             "with another trust store, or delete it")
            self._check_stored_root(known)
            self.store.root = root_identity(self.root)  # written with the next header
        self.store.bind(root_identity(self.root))

    def _root_height(self) -> int:
        root = self.root
        return root.height if isinstance(root, PinnedRoot) else root.initial_height

    def _forward(self, trusted: LightBlock, height: int) -> LightBlock:
        """Skipping verification with bisection, as CometBFT's light client does."""
        pending = [self._fetch(height)]
        while pending:
            candidate = pending[-1]
            try:
                verify_step(self.chain_id, trusted, candidate, self.now_ns(), self.options)
            except CommitError as exc:
                if exc.reason != "insufficient_trust":
                    raise
                pivot = (trusted.height + candidate.height) // 2
                if pivot <= trusted.height:  # adjacent never reports insufficient trust
                    raise
                pending.append(self._fetch(pivot))
                continue
            self.store.save(candidate)
            trusted = candidate
            pending.pop()
        return trusted

    def _backward(self, trusted: LightBlock, height: int) -> LightBlock:
        """Below the lowest trusted header: follow last_block_id hashes down to `height`."""
        check_not_expired(trusted.header, self.now_ns(), self.options)
        current = trusted
        while current.height > height:
            prev = self._fetch(current.height - 1)
            if prev.header.hash() != current.header.last_block_id.hash:
                raise HeaderError("broken_link", f"header {prev.height} is not the one header "
                                                 f"{current.height} links to")
            check_self_consistent(self.chain_id, prev)
            current = prev
        self.store.save(current)
        return current
