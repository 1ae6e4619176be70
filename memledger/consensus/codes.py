"""Stable result codes for every outcome of a transaction.

Codes are part of the protocol: clients branch on them, and they are hashed into the
block results. Never renumber; only append. The table in docs/CODES.md is generated from
this enum (see `tests/unit/test_codes.py`, which keeps the two in sync).
"""

from __future__ import annotations

from enum import IntEnum

CODESPACE = "memledger"


class Code(IntEnum):
    """Result code of a transaction (0 = success)."""

    OK = 0
    # --- envelope (1..29) ---
    TX_TOO_LARGE = 1
    TX_DECODE = 2
    TX_NOT_CANONICAL = 3
    BODY_DECODE = 4
    BODY_NOT_CANONICAL = 5
    WRONG_CHAIN_ID = 6
    BAD_PUBLIC_KEY = 7
    BAD_SIGNATURE = 8
    NONCE_ZERO = 9
    NONCE_REPLAYED = 10
    EMPTY_MESSAGE = 11
    UNKNOWN_MESSAGE = 12
    NONCE_BELOW_WINDOW = 13
    NONCE_PENDING = 14
    # --- memory submit (30..49) ---
    INVALID_MEMORY_ID = 30
    INVALID_DOMAIN = 31
    INVALID_MEMORY_TYPE = 32
    CONTENT_TOO_LARGE = 33
    CONTENT_HASH_MISMATCH = 34
    INVALID_CONFIDENCE = 35
    TOO_MANY_TAGS = 36
    INVALID_TAG = 37
    MEMORY_TERMINAL = 38
    MEMORY_ID_CONFLICT = 39
    DOMAIN_WRITE_DENIED = 40
    SCOPE_NOT_ACTIVE = 41
    EMPTY_CONTENT = 42
    INVALID_CONTENT = 43
    # --- votes (50..59) ---
    MEMORY_NOT_FOUND = 50
    NOT_A_VALIDATOR = 51
    ALREADY_VOTED = 52
    MEMORY_NOT_PROPOSED = 53
    INVALID_DECISION = 54
    NOT_A_SCOPE_MEMBER = 55
    # --- disputes (60..69) ---
    CHALLENGE_DENIED = 60
    MEMORY_NOT_COMMITTED = 61
    ALREADY_CHALLENGED = 62
    MEMORY_NOT_CHALLENGED = 63
    REINSTATE_DENIED = 64
    CORROBORATE_BY_AUTHOR = 65
    ALREADY_CORROBORATED = 66
    REASON_TOO_LONG = 67
    # --- co-commit (70..79) ---
    COCOMMIT_CORE_DECODE = 70
    COCOMMIT_CORE_NOT_CANONICAL = 71
    COCOMMIT_TOO_FEW_COAUTHORS = 72
    COCOMMIT_COAUTHORS_UNSORTED = 73
    COCOMMIT_SUBMITTER_NOT_COAUTHOR = 74
    COCOMMIT_SIGNATURE_MISMATCH = 75
    COCOMMIT_BAD_SIGNATURE = 76
    COCOMMIT_OUTSIDE_WINDOW = 77
    COCOMMIT_DUPLICATE = 78
    COCOMMIT_SCOPED_DOMAIN = 79
    # --- access (80..89) ---
    GRANT_DENIED = 80
    INVALID_GRANT_LEVEL = 81
    INVALID_GRANTEE = 82
    GRANT_NOT_FOUND = 83
    GRANT_EXPIRY_PAST = 84
    SHARED_DOMAIN_GRANT = 85
    COCOMMIT_WRONG_CHAIN = 86
    # --- governance (90..119) ---
    GOV_NOT_VALIDATOR = 90
    GOV_PROPOSAL_NOT_FOUND = 91
    GOV_ALREADY_VOTED = 92
    GOV_PROPOSAL_CLOSED = 93
    GOV_INVALID_PROPOSAL = 94
    GOV_ACTIVATION_TOO_SOON = 95
    GOV_UNSAFE_VALIDATOR_CHANGE = 96
    GOV_UNSUPPORTED_VERSION = 97
    GOV_CANCEL_DENIED = 98
    GOV_VALIDATOR_PINNED = 99
    GOV_UNKNOWN_SCOPE = 100
    GOV_SCOPE_EXISTS = 101
    GOV_UNKNOWN_PARAM = 102
    GOV_INVALID_PARAM_VALUE = 103

    @property
    def slug(self) -> str:
        """The lowercase name used in logs and REST problem types."""
        return self.name.lower()


DESCRIPTIONS: dict[Code, str] = {
    Code.OK: "accepted",
    Code.TX_TOO_LARGE: "transaction larger than the 1 MiB limit",
    Code.TX_DECODE: "transaction bytes are not a valid Tx envelope",
    Code.TX_NOT_CANONICAL: "Tx envelope is not in canonical protobuf form",
    Code.BODY_DECODE: "body bytes are not a valid TxBody",
    Code.BODY_NOT_CANONICAL: "TxBody is not in canonical protobuf form",
    Code.WRONG_CHAIN_ID: "body chain_id differs from this chain",
    Code.BAD_PUBLIC_KEY: "public key is not 32 bytes",
    Code.BAD_SIGNATURE: "Ed25519 signature does not verify over the body",
    Code.NONCE_ZERO: "nonce 0 is never valid",
    Code.NONCE_REPLAYED: "nonce already used by this signer (v1-v2: not greater than the "
                         "last committed nonce)",
    Code.EMPTY_MESSAGE: "TxBody carries no message",
    Code.UNKNOWN_MESSAGE: "message kind not supported at this app version",
    Code.NONCE_BELOW_WINDOW: "nonce at or below the signer's nonce window (v3+): sign again "
                             "with a fresh nonce",
    Code.NONCE_PENDING: "CheckTx only: a tx with this nonce from this signer is already in "
                        "the mempool",
    Code.INVALID_MEMORY_ID: "memory id empty, longer than 128 bytes or with bad characters",
    Code.INVALID_DOMAIN: "domain empty, longer than 128 bytes or with bad characters",
    Code.INVALID_MEMORY_TYPE: "memory type not one of fact|observation|inference|task",
    Code.CONTENT_TOO_LARGE: "content larger than 512 KiB",
    Code.CONTENT_HASH_MISMATCH: "content_hash is not SHA-256(content)",
    Code.INVALID_CONFIDENCE: "confidence_ppm above 1,000,000",
    Code.TOO_MANY_TAGS: "more than 32 tags",
    Code.INVALID_TAG: "tag empty, too long, duplicated or not sorted",
    Code.MEMORY_TERMINAL: "memory id already committed or deprecated",
    Code.MEMORY_ID_CONFLICT: "memory id exists with different content or author",
    Code.DOMAIN_WRITE_DENIED: "signer may not write into this domain",
    Code.SCOPE_NOT_ACTIVE: "domain belongs to a paused or retired scope",
    Code.EMPTY_CONTENT: "content is empty",
    Code.INVALID_CONTENT: "content contains a NUL character",
    Code.MEMORY_NOT_FOUND: "no memory with this id",
    Code.NOT_A_VALIDATOR: "signer is not in the current validator set",
    Code.ALREADY_VOTED: "signer already voted on this memory",
    Code.MEMORY_NOT_PROPOSED: "memory is not in status proposed",
    Code.INVALID_DECISION: "decision must be accept, reject or abstain",
    Code.NOT_A_SCOPE_MEMBER: "signer is not a member of the memory's pinned ballot",
    Code.CHALLENGE_DENIED: "only the owner or a modify-grant holder may challenge",
    Code.MEMORY_NOT_COMMITTED: "memory is not committed",
    Code.ALREADY_CHALLENGED: "signer already challenged this memory in this round",
    Code.MEMORY_NOT_CHALLENGED: "memory is not challenged",
    Code.REINSTATE_DENIED: "signer is not in the dispute electorate",
    Code.CORROBORATE_BY_AUTHOR: "an author may not corroborate their own memory",
    Code.ALREADY_CORROBORATED: "signer already corroborated this memory",
    Code.REASON_TOO_LONG: "challenge reason longer than 4 KiB",
    Code.COCOMMIT_CORE_DECODE: "co-commit core bytes do not decode",
    Code.COCOMMIT_CORE_NOT_CANONICAL: "co-commit core is not in canonical form",
    Code.COCOMMIT_TOO_FEW_COAUTHORS: "co-commit needs at least 2 coauthors",
    Code.COCOMMIT_COAUTHORS_UNSORTED: "coauthor keys must be 32 bytes, distinct and ascending",
    Code.COCOMMIT_SUBMITTER_NOT_COAUTHOR: "submitter is not among the coauthors",
    Code.COCOMMIT_SIGNATURE_MISMATCH: "signatures do not match the coauthor list",
    Code.COCOMMIT_BAD_SIGNATURE: "a coauthor signature does not verify",
    Code.COCOMMIT_OUTSIDE_WINDOW: "block time outside the co-commit validity window",
    Code.COCOMMIT_DUPLICATE: "co-commit with this shared id already exists",
    Code.COCOMMIT_SCOPED_DOMAIN: "co-commits are not allowed in scoped domains",
    Code.GRANT_DENIED: "only the domain owner may grant or revoke",
    Code.INVALID_GRANT_LEVEL: "grant level must be read, write or modify",
    Code.INVALID_GRANTEE: "grantee must be a 32-byte key other than the owner",
    Code.GRANT_NOT_FOUND: "no grant to revoke",
    Code.GRANT_EXPIRY_PAST: "grant expiry height is not in the future",
    Code.SHARED_DOMAIN_GRANT: "shared domains have no owner and take no grants",
    Code.COCOMMIT_WRONG_CHAIN: "co-commit core chain_id differs from this chain",
    Code.GOV_NOT_VALIDATOR: "governance txs must be signed by a current validator",
    Code.GOV_PROPOSAL_NOT_FOUND: "no proposal with this id",
    Code.GOV_ALREADY_VOTED: "validator already voted on this proposal",
    Code.GOV_PROPOSAL_CLOSED: "proposal is no longer open for votes",
    Code.GOV_INVALID_PROPOSAL: "proposal is malformed",
    Code.GOV_ACTIVATION_TOO_SOON: "upgrade activation height earlier than the minimum delay",
    Code.GOV_UNSAFE_VALIDATOR_CHANGE: "change would empty the set or remove >= 1/3 power",
    Code.GOV_UNSUPPORTED_VERSION: "upgrade target version not greater than the current",
    Code.GOV_CANCEL_DENIED: "only the proposer may cancel an open proposal",
    Code.GOV_VALIDATOR_PINNED: "validator is a member of an open pinned scope ballot",
    Code.GOV_UNKNOWN_SCOPE: "no scope with this id",
    Code.GOV_SCOPE_EXISTS: "scope id already exists",
    Code.GOV_UNKNOWN_PARAM: "unknown parameter",
    Code.GOV_INVALID_PARAM_VALUE: "parameter value out of range",
}


class TxError(Exception):
    """A deterministic rejection: carries the code and a one-line reason."""

    def __init__(self, code: Code, log: str = "") -> None:
        super().__init__(log or DESCRIPTIONS[code])
        self.code = code
        self.log = log or DESCRIPTIONS[code]


def markdown_table() -> str:
    """Render the code table documented in docs/CODES.md."""
    lines = ["| code | name | meaning |", "| ---: | --- | --- |"]
    for code in Code:
        lines.append(f"| {int(code)} | `{code.slug}` | {DESCRIPTIONS[code]} |")
    return "\n".join(lines) + "\n"
