"""The one place that says which consensus rules are active at an app version.

An upgrade proposal moves the chain's app version at its activation height; every
version-dependent branch in the state machine asks `active(rule, version)` instead of
comparing numbers inline, so the full rule history is readable here.
"""

from __future__ import annotations

from typing import Any

#: App versions this binary can execute. A node whose chain moves past these halts with
#: "upgrade required" before executing a block under rules it does not know.
SUPPORTED_APP_VERSIONS: frozenset[int] = frozenset({1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
#: The version a genesis without an explicit `app_version` starts at (chains made before
#: genesis could name one must replay under the rules they were made with).
INITIAL_APP_VERSION = 1
#: The version new chains start at (`memledger init`, `memledger testnet init`).
LATEST_APP_VERSION = max(SUPPORTED_APP_VERSIONS)

#: rule name -> first app version where it applies
RULES: dict[str, int] = {
    # v2: corroboration is only meaningful for committed memories; v1 also accepted
    # markers on proposed ones, which then silently shaped later dispute electorates.
    "corroborate_requires_committed": 2,
    # v3: replay protection by a per-signer window of recent nonces instead of "strictly
    # above the last committed nonce", so one signer's concurrent txs may commit in any
    # order (docs/RULES.md, "Nonces"). Also makes `nonce_window` a governed parameter.
    "nonce_window": 3,
    # v4: every memory ballot expires `ballot_expiry` blocks after it opened (ballots open
    # at the upgrade get the full window from the activation height), and removing a
    # validator no longer waits for the pinned ballots naming it to close. Before, a
    # member holding >= 1/3 of a ballot could keep it open forever by never voting, and
    # stay in the validator set while it did (docs/RULES.md, "Ballot expiry").
    "ballot_expiry": 4,
    # v5: a memory vote may say why (MemoryVote.reason, at most 4 KiB), kept with the vote
    # in the memory's record, so every node can explain a decision (docs/RULES.md, "Vote
    # reasons"). Before, only the voting node's own off-chain notes knew.
    "vote_reason": 5,
    # v6: each bucket of the app-hash tree hashes its entries under a Merkle tree (hash
    # layout 2) instead of flat, so a proof carries one path of ~log2(n/65536) digests
    # instead of the whole bucket: proofs stay under 1 KB at millions of memories where
    # they had passed 2 KB. The first block run under v6 rehashes every bucket once
    # (docs/APP_HASH.md, "Layout 2").
    "bucket_merkle": 6,
    # v7: a plain memory submit may not take an id starting "cc-", the prefix of the ids
    # co-commits derive from their content and coauthors. Before, anyone who saw a
    # co-commit in the mempool could submit a memory under its id first, and the
    # co-commit then failed as a duplicate however often it was signed again
    # (docs/RULES.md, "Co-commits").
    "cocommit_ids_reserved": 7,
    # v8: repairs of rules that left state stuck or judged a tx against stale state
    # (docs/RULES.md, each under "From v8"):
    # - a domain a scope_revise drops is unclaimed again, like a never-used domain (its
    #   record is deleted; one left by an earlier release counts as unclaimed), and the
    #   domains it keeps keep their `created` height. Before, a dropped domain kept a
    #   record with neither owner nor scope, and nobody could write it or be granted it.
    "scope_release_unclaims": 8,
    # - a retired scope cannot be revised (refused when proposed, failed when executed),
    #   as it cannot be paused or resumed. Before, a revise could give it new domains,
    #   which then refused every write.
    "retired_scope_final": 8,
    # - a nonce is judged against the account trimmed to the current `nonce_window`.
    #   Before, after governance lowered the window, a signer's next tx was judged
    #   against the old, longer window and could take a nonce the rule refuses.
    "nonce_window_trimmed_check": 8,
    # - an upgrade proposal's voting ends at the last height it could still pass (the
    #   block before its activation height); not passed by then, it expires. Before, it
    #   took votes after its activation height and then "passed" only to fail.
    "upgrade_votes_end_before_activation": 8,
    # v9: a scheduled upgrade can be called off by governance (GovPropose.upgrade_cancel,
    # naming it), until the block of its activation height. Before, nothing could remove
    # it: one passed with a wrong height or for a faulty release had to be run, and while
    # it waited every later upgrade was refused ("another upgrade is already scheduled").
    "upgrade_cancel": 9,
    # v10: memories that stay true (docs/RULES.md, "Corrections" and "Peer disputes"):
    # - a submit may name the committed memory it corrects (MemorySubmit.supersedes);
    #   when the correction is committed the original becomes `superseded` in the same
    #   block, linked both ways. Before, a corrected fact and its original both stayed
    #   committed.
    "corrections": 10,
    # - a submit may carry the provenance of a memory imported from another chain
    #   (MemorySubmit.origin), checked for shape and kept in the record.
    "memory_origin": 10,
    # - anyone who may write a shared or ownerless domain may challenge a memory in it:
    #   a peer dispute the memory's electorate decides, bounded per key and block and
    #   expiring after `ballot_expiry` blocks. Before, only the owner, modify holders
    #   (and in ownerless domains the author) could, so nobody could flag a wrong fact
    #   in `general`.
    "peer_disputes": 10,
    # - a domain may be private (docs/RULES.md, "Private domains"): its owner hands each
    #   member the epoch key sealed to that member (DomainPrivate, DomainKeys), memories
    #   written there are ciphertext under the current epoch (MemorySubmit.epoch) and
    #   consensus checks only their envelope; ending a grant starts a new epoch the
    #   revoked key never gets. Before, every node and RPC answer held every memory's text.
    "private_domains": 10,
    # - a validator CometBFT reports in FinalizeBlock's misbehaviour (a double sign, a
    #   light-client attack) is removed by the chain itself, within the limits of a
    #   governance removal (docs/RULES.md, "Misbehaviour"). Before, reports were ignored.
    "evict_misbehaving": 10,
}

#: (message kind, field) -> the first app version whose rules know that field. Under an
#: earlier version the body is parsed with the schema of that time, tx.proto without the
#: field (memledger.consensus.gate.schema), so every body is answered as the binaries of
#: that time answered it: the then-unknown field, whatever its bytes, made the body not
#: canonical (BODY_NOT_CANONICAL, before the chain id and signature checks), and old
#: heights replay with the same result codes. A field added to tx.proto must be listed.
FIELDS: dict[tuple[str, str], int] = {
    ("memory_vote", "reason"): RULES["vote_reason"],
    ("gov_propose", "upgrade_cancel"): RULES["upgrade_cancel"],
    ("memory_submit", "supersedes"): RULES["corrections"],
    ("memory_submit", "origin"): RULES["memory_origin"],
    ("memory_submit", "epoch"): RULES["private_domains"],
}


def active(rule: str, app_version: int) -> bool:
    return app_version >= RULES[rule]


def hash_layout(app_version: int) -> int:
    """The bucket-hash layout (docs/APP_HASH.md) of a block run under `app_version`."""
    return 2 if active("bucket_merkle", app_version) else 1


def fields_version(kind: str, message: Any) -> int:
    """The lowest app version whose rules know every field `message` (of `kind`) sets."""
    return max([since for (k, name), since in FIELDS.items()
                if k == kind and _sets(message, name)], default=1)


def _sets(message: Any, name: str) -> bool:
    """Whether `message` carries field `name`: by presence where the field has it (a oneof
    member set to "" is on the wire, and the older binaries refused it), else by value."""
    try:
        return bool(message.HasField(name))
    except ValueError:  # a plain proto3 scalar: on the wire only when not the default
        return bool(getattr(message, name))
