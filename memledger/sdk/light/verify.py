"""Commit and header checks, the two rules CometBFT's light client moves trust with.

- Adjacent (H -> H+1): the new header's validator set is the one the trusted header
  named as next, and more than 2/3 of that set's power signed the new header.
- Skipping (H -> H+k): more than `trust level` (default 1/3) of the *trusted* set's
  power signed the new header (so at least one honest validator vouches for it), and
  more than 2/3 of the new header's own set signed it.

All power arithmetic is integer: `signed * den > total * num`, never a float ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from memledger.sdk.light.errors import CommitError, HeaderError, TrustError
from memledger.sdk.light.header import (
    FLAG_ABSENT,
    FLAG_COMMIT,
    FLAG_NIL,
    Commit,
    Header,
    LightBlock,
    ValidatorSet,
)


@dataclass(frozen=True, slots=True)
class TrustOptions:
    """How far trust reaches: period in ns, skipping threshold as an integer fraction."""

    period_ns: int = 14 * 24 * 3600 * 1_000_000_000
    level_num: int = 1
    level_den: int = 3
    max_clock_drift_ns: int = 10 * 1_000_000_000

    def __post_init__(self) -> None:
        if self.period_ns <= 0:
            raise ValueError("trusting period must be positive")
        if not (0 < self.level_num and 3 * self.level_num >= self.level_den
                and self.level_num <= self.level_den):
            raise ValueError("trust level must be within [1/3, 1]")


def _verify_sig(pub_key: bytes, message: bytes, signature: bytes) -> bool:
    if len(signature) != 64:
        return False
    try:
        VerifyKey(pub_key).verify(message, signature)
    except BadSignatureError:
        return False
    return True


def check_commit_matches(header: Header, commit: Commit) -> None:
    """The commit is for this header: same height and the block id is the header's hash."""
    if commit.height != header.height:
        raise HeaderError("commit_height", f"commit is for height {commit.height}, "
                                           f"header is {header.height}")
    if commit.block_id.hash != header.hash():
        raise HeaderError("hash_mismatch", f"header at height {header.height} does not hash to "
                                           "the block id its commit signs")


def verify_commit_full(chain_id: str, vals: ValidatorSet, header: Header, commit: Commit) -> int:
    """More than 2/3 of `vals` (the header's own set, by position) signed; returns power.

    Every commit signature present is checked, not just enough of them: one bad signature
    means the commit was tampered with, and is reported as such.
    """
    if len(commit.signatures) != len(vals.validators):
        raise CommitError("size_mismatch", f"commit has {len(commit.signatures)} signatures "
                                           f"for {len(vals.validators)} validators")
    signed = 0
    for i, sig in enumerate(commit.signatures):
        if sig.flag != FLAG_COMMIT:
            continue
        val = vals.validators[i]
        if sig.validator_address != val.address:
            raise CommitError("wrong_signer", f"signature {i} is not from validator {i}")
        if not _verify_sig(val.pub_key, commit.sign_bytes(chain_id, i), sig.signature):
            raise CommitError("bad_signature", f"signature of validator {val.address.hex()} "
                                               f"at height {commit.height} does not verify")
        signed += val.power
    total = vals.total_power
    if signed * 3 <= total * 2:
        flags = [s.flag for s in commit.signatures]
        raise CommitError("insufficient_power", f"only {signed} of {total} voting power signed "
                                                f"height {commit.height} (needs more than 2/3; "
                                                f"{flags.count(FLAG_COMMIT)} for the block, "
                                                f"{flags.count(FLAG_NIL)} nil, "
                                                f"{flags.count(FLAG_ABSENT)} absent)")
    return signed


def verify_commit_trusting(chain_id: str, trusted: ValidatorSet, commit: Commit,
                           num: int, den: int) -> int:
    """More than num/den of the trusted set's power signed (matched by address)."""
    by_addr = trusted.by_address()
    seen: set[bytes] = set()
    signed = 0
    for i, sig in enumerate(commit.signatures):
        if sig.flag != FLAG_COMMIT:
            continue
        val = by_addr.get(sig.validator_address)
        if val is None:
            continue
        if val.address in seen:
            raise CommitError("double_vote", f"validator {val.address.hex()} signed twice")
        seen.add(val.address)
        if not _verify_sig(val.pub_key, commit.sign_bytes(chain_id, i), sig.signature):
            raise CommitError("bad_signature", f"signature of validator {val.address.hex()} "
                                               f"at height {commit.height} does not verify")
        signed += val.power
    total = trusted.total_power
    if signed * den <= total * num:
        raise CommitError("insufficient_trust", f"only {signed} of {total} trusted power signed "
                                                f"height {commit.height} (needs more than "
                                                f"{num}/{den})")
    return signed


def check_self_consistent(chain_id: str, lb: LightBlock) -> None:
    """Checks that need no trust: chain id, commit matches header, set hash matches."""
    h = lb.header
    if h.chain_id != chain_id:
        raise HeaderError("wrong_chain_id", f"header is for chain {h.chain_id!r}, "
                                            f"expected {chain_id!r}")
    check_commit_matches(h, lb.commit)
    if lb.validators.hash() != h.validators_hash:
        raise HeaderError("validators_mismatch", f"validator set served for height {h.height} "
                                                 "does not hash to the header's validators_hash")


def check_not_expired(trusted: Header, now_ns: int, opts: TrustOptions) -> None:
    check_fresh(trusted.time_ns, f"trusted header at height {trusted.height}", now_ns, opts)


def check_fresh(trusted_ns: int, what: str, now_ns: int, opts: TrustOptions) -> None:
    """Trust from `trusted_ns` is still within the trusting period: past it, the keys
    that signed then may have been handed on, so they vouch for nothing."""
    if trusted_ns + opts.period_ns <= now_ns:
        raise TrustError("expired", f"{what} is older than the trusting period; pin a recent "
                                    "--trust-height/--trust-hash")


def verify_step(chain_id: str, trusted: LightBlock, new: LightBlock, now_ns: int,
                opts: TrustOptions) -> None:
    """Move trust from `trusted` to `new` (adjacent or skipping); raise on any failure."""
    check_not_expired(trusted.header, now_ns, opts)
    check_self_consistent(chain_id, new)
    th, nh = trusted.header, new.header
    if nh.height <= th.height:
        raise HeaderError("not_forward", f"height {nh.height} is not above trusted {th.height}")
    if nh.time_ns <= th.time_ns:
        raise HeaderError("time_not_monotonic", f"header {nh.height} is not later than "
                                                f"trusted header {th.height}")
    if nh.time_ns >= now_ns + opts.max_clock_drift_ns:
        raise HeaderError("from_future", f"header {nh.height} is from the future")
    if nh.height == th.height + 1:
        if nh.validators_hash != th.next_validators_hash:
            raise HeaderError("next_validators_mismatch",
                              f"header {nh.height}'s validator set is not the one trusted "
                              f"header {th.height} named as next")
        if nh.last_block_id.hash != th.hash():
            raise HeaderError("broken_link", f"header {nh.height} does not link to trusted "
                                             f"header {th.height}")
    else:
        verify_commit_trusting(chain_id, trusted.validators, new.commit,
                               opts.level_num, opts.level_den)
    verify_commit_full(chain_id, new.validators, nh, new.commit)
