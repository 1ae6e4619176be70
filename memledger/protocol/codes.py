"""Stable result codes: every outcome of a transaction, and every answer of a Query.

Codes are part of the protocol: clients branch on them, and tx codes are hashed into the
block results. Never renumber; only append. Each code is one line here, number and
description together; docs/CODES.md is generated from these enums
(`tests/unit/consensus/test_engine_rejections.py::test_codes_are_distinct_and_documented`
keeps the two in sync).
"""

from __future__ import annotations

from enum import IntEnum

from memledger.protocol.limits import (
    MAX_CONTENT_BYTES,
    MAX_ID_BYTES,
    MAX_REASON_BYTES,
    MAX_TAG_BYTES,
    MAX_TAGS,
    MAX_TX_BYTES,
    MIN_COAUTHORS,
)

CODESPACE = "memledger"
#: Query answers live in their own codespace: query code 1 is "not found", not tx code 1.
QUERY_CODESPACE = "memledger.query"


class _Described(IntEnum):
    """An IntEnum whose members are declared as `NAME = number, "description"`."""

    description: str

    def __new__(cls, value: int, description: str = "") -> _Described:
        member = int.__new__(cls, value)
        member._value_ = value
        member.description = description
        return member

    @property
    def slug(self) -> str:
        """The lowercase name used in logs and REST problem types."""
        return self.name.lower()


class Code(_Described):
    """Result code of a transaction (0 = success), in ranges by rule family."""

    OK = 0, 'accepted'
    # --- envelope (1..29) ---
    TX_TOO_LARGE = 1, f'transaction larger than the {MAX_TX_BYTES >> 20} MiB limit'
    TX_DECODE = 2, 'transaction bytes are not a valid Tx envelope'
    TX_NOT_CANONICAL = 3, 'Tx envelope is not in canonical protobuf form'
    BODY_DECODE = 4, 'body bytes are not a valid TxBody'
    BODY_NOT_CANONICAL = (
        5, 'TxBody is not in canonical protobuf form, or sets a field its app version lacks')
    WRONG_CHAIN_ID = 6, 'body chain_id differs from this chain'
    BAD_PUBLIC_KEY = 7, 'public key is not 32 bytes'
    BAD_SIGNATURE = 8, 'Ed25519 signature does not verify over the body'
    NONCE_ZERO = 9, 'nonce 0 is never valid'
    NONCE_REPLAYED = (
        10, 'nonce already used by this signer (v1-v2: not greater than the last committed nonce)')
    EMPTY_MESSAGE = 11, 'TxBody carries no message'
    UNKNOWN_MESSAGE = 12, 'message kind not supported at this app version'
    NONCE_BELOW_WINDOW = (
        13, "nonce at or below the signer's nonce window (v3+; from v8 the window as "
            "`nonce_window` is now, also just after governance lowered it): sign again with "
            "a fresh nonce")
    NONCE_PENDING = (
        14, 'CheckTx only: a tx with this nonce from this signer is already in the mempool')
    SIGNER_BACKLOG_FULL = (
        15, "REST admission only: this node's mempool already holds a quarter window of "
            "this signer's txs above its oldest pending one; send the same tx again after "
            "the next block")
    # --- memory submit (30..49) ---
    INVALID_MEMORY_ID = 30, (f'memory id empty, longer than {MAX_ID_BYTES} bytes or with bad '
                             'characters; '
                             "from v7 also a plain submit's id starting `cc-` (co-commits' ids)")
    INVALID_DOMAIN = 31, (f'domain empty, longer than {MAX_ID_BYTES} bytes or with bad '
                          'characters')
    INVALID_MEMORY_TYPE = 32, 'memory type not one of fact|observation|inference|task'
    CONTENT_TOO_LARGE = 33, f'content larger than {MAX_CONTENT_BYTES >> 10} KiB'
    CONTENT_HASH_MISMATCH = 34, 'content_hash is not SHA-256(content)'
    INVALID_CONFIDENCE = 35, 'confidence_ppm above 1,000,000'
    TOO_MANY_TAGS = 36, f'more than {MAX_TAGS} tags'
    INVALID_TAG = 37, (f'tag empty, longer than {MAX_TAG_BYTES} bytes (UTF-8), holding a NUL '
                       'byte, or duplicated (order does not matter: tags are stored sorted)')
    MEMORY_TERMINAL = 38, 'memory id already committed or deprecated'
    MEMORY_ID_CONFLICT = 39, 'memory id exists with different content or author'
    DOMAIN_WRITE_DENIED = 40, 'signer may not write into this domain'
    SCOPE_NOT_ACTIVE = 41, 'domain belongs to a paused or retired scope'
    EMPTY_CONTENT = 42, 'content is empty'
    INVALID_CONTENT = 43, 'content contains a NUL character'
    SUPERSEDES_NOT_FOUND = 44, 'v10+: the memory a correction supersedes does not exist'
    SUPERSEDES_NOT_COMMITTED = 45, ('v10+: the memory a correction supersedes is not committed '
                                    '(proposed, challenged or deprecated)')
    SUPERSEDES_OTHER_DOMAIN = 46, ('v10+: the memory a correction supersedes is in another '
                                   'domain')
    SUPERSEDES_TAKEN = 47, ('v10+: the memory a correction supersedes is already superseded, '
                            'or has a pending correction (one at a time: wait for it to be '
                            'decided)')
    CORRECTION_DENIED = 48, ("v10+: only the corrected memory's author or a modify-grant "
                             "holder of its domain may correct it")
    INVALID_ORIGIN = 49, ('v10+: origin malformed (chain id, memory id or author empty or too '
                          'long, author not a hex key, or height not positive)')
    # --- votes (50..59) ---
    MEMORY_NOT_FOUND = 50, 'no memory with this id'
    NOT_A_VALIDATOR = 51, 'signer is not in the current validator set'
    ALREADY_VOTED = 52, 'signer already voted on this memory'
    MEMORY_NOT_PROPOSED = 53, 'memory is not in status proposed'
    INVALID_DECISION = 54, 'decision must be accept, reject or abstain'
    NOT_A_SCOPE_MEMBER = 55, "signer is not a member of the memory's pinned ballot"
    VOTE_REASON_TOO_LONG = 56, f'vote reason longer than {MAX_REASON_BYTES >> 10} KiB (v5+)'
    # --- disputes (60..69) ---
    CHALLENGE_DENIED = 60, 'only the owner or a modify-grant holder may challenge'
    MEMORY_NOT_COMMITTED = 61, 'memory is not committed'
    ALREADY_CHALLENGED = 62, 'signer already challenged this memory in this round'
    MEMORY_NOT_CHALLENGED = 63, 'memory is not challenged'
    REINSTATE_DENIED = 64, 'signer is not in the dispute electorate'
    CORROBORATE_BY_AUTHOR = 65, 'an author may not corroborate their own memory'
    ALREADY_CORROBORATED = 66, 'signer already corroborated this memory'
    REASON_TOO_LONG = 67, f'challenge reason longer than {MAX_REASON_BYTES >> 10} KiB'
    PEER_CHALLENGE_LIMIT = 68, ('v10+: this key has opened `peer_challenges_per_block` peer '
                                'challenges in this block, or holds `peer_disputes_open` open '
                                'peer disputes')
    # --- co-commit (70..79) ---
    COCOMMIT_CORE_DECODE = 70, 'co-commit core bytes do not decode'
    COCOMMIT_CORE_NOT_CANONICAL = 71, 'co-commit core is not in canonical form'
    COCOMMIT_TOO_FEW_COAUTHORS = 72, f'co-commit needs at least {MIN_COAUTHORS} coauthors'
    COCOMMIT_COAUTHORS_UNSORTED = 73, 'coauthor keys must be 32 bytes, distinct and ascending'
    COCOMMIT_SUBMITTER_NOT_COAUTHOR = 74, 'submitter is not among the coauthors'
    COCOMMIT_SIGNATURE_MISMATCH = 75, 'signatures do not match the coauthor list'
    COCOMMIT_BAD_SIGNATURE = 76, 'a coauthor signature does not verify'
    COCOMMIT_OUTSIDE_WINDOW = 77, 'block time outside the co-commit validity window'
    COCOMMIT_DUPLICATE = 78, 'co-commit with this shared id already exists'
    COCOMMIT_SCOPED_DOMAIN = 79, 'co-commits are not allowed in scoped domains'
    # --- access (80..85); 86 was appended here for co-commits ---
    GRANT_DENIED = 80, 'only the domain owner may grant or revoke'
    INVALID_GRANT_LEVEL = 81, 'grant level must be read, write or modify'
    INVALID_GRANTEE = 82, 'grantee must be a 32-byte key other than the owner'
    GRANT_NOT_FOUND = 83, 'no grant to revoke'
    GRANT_EXPIRY_PAST = 84, 'grant expiry height is not in the future'
    SHARED_DOMAIN_GRANT = 85, 'shared domains have no owner and take no grants'
    COCOMMIT_WRONG_CHAIN = 86, 'co-commit core chain_id differs from this chain'
    # --- governance (90..119) ---
    GOV_NOT_VALIDATOR = 90, 'governance txs must be signed by a current validator'
    GOV_PROPOSAL_NOT_FOUND = 91, 'no proposal with this id'
    GOV_ALREADY_VOTED = 92, 'validator already voted on this proposal'
    GOV_PROPOSAL_CLOSED = 93, ('proposal is no longer open for votes; from v8 an upgrade '
                               'stops taking votes after the block before its activation '
                               'height')
    GOV_INVALID_PROPOSAL = 94, ('proposal is malformed or cannot apply to the current state '
                                '(e.g. its scope is retired; from v8 also for a scope_revise; '
                                'from v9 an upgrade_cancel naming no scheduled upgrade)')
    GOV_ACTIVATION_TOO_SOON = 95, 'upgrade activation height earlier than the minimum delay'
    GOV_UNSAFE_VALIDATOR_CHANGE = 96, 'change would empty the set or remove >= 1/3 power'
    GOV_UNSUPPORTED_VERSION = 97, 'upgrade target version not greater than the current'
    GOV_CANCEL_DENIED = 98, 'only the proposer may cancel an open proposal'
    GOV_VALIDATOR_PINNED = 99, 'validator is a member of an open pinned scope ballot'
    GOV_UNKNOWN_SCOPE = 100, 'no scope with this id'
    GOV_SCOPE_EXISTS = 101, 'scope id already exists'
    GOV_UNKNOWN_PARAM = 102, 'unknown parameter'
    GOV_INVALID_PARAM_VALUE = 103, 'parameter value out of range'
    # --- private domains (110..119, v10+) ---
    PRIVATE_CONTENT_NOT_SEALED = 110, ('v10+: in a private domain the content must be a sealed '
                                       'envelope (`mlpriv1:` + base64 of nonce and ciphertext) '
                                       'with the epoch set')
    PRIVATE_EPOCH_NOT_CURRENT = 111, ("v10+: the submit's epoch is not the private domain's "
                                      'current one (or the domain is not private)')
    PRIVATE_TAGS = 112, 'v10+: memories in a private domain carry no tags (tags are not sealed)'
    PRIVATE_DOMAIN_DENIED = 113, ('v10+: only the owner of a non-shared, unscoped domain may '
                                  'make it private or hand out its epoch keys')
    DOMAIN_ALREADY_PRIVATE = 114, 'v10+: the domain is already private'
    SEALED_KEYS_INVALID = 115, ('v10+: a sealed key is malformed (recipient not 32 bytes, '
                                'sealed not 80 bytes) or recipients are not strictly ascending')
    SEALED_KEYS_MEMBERS = 116, ("v10+: sealed keys must go to members only, and a new epoch's "
                                'to every member (the owner and each unexpired grantee)')
    PRIVATE_REVOKE_NEEDS_EPOCH = 117, ('v10+: a grant in a private domain ends only with a new '
                                       'epoch (domain_keys with epoch = current + 1 and revoke)')
    EPOCH_UNKNOWN = 118, ("v10+: domain_keys' epoch is neither an existing epoch of the domain "
                          'nor the next one, or the domain is not private')
    PRIVATE_COCOMMIT = 119, 'v10+: co-commits are not allowed in private domains'


class QueryCode(_Described):
    """Result code of an ABCI Query (codespace `memledger.query`)."""

    OK = 0, "found"
    NOT_FOUND = 1, "no record under this key"
    BAD_REQUEST = 2, "malformed query data"
    UNKNOWN_PATH = 3, "unknown query path"
    FAILED = 4, "the query failed inside the node"
    NO_SUCH_HEIGHT = 5, "only the latest committed height can be queried"


#: What a caller can do about a refusal whose description alone leaves them stuck: the
#: REST API ends the problem's detail with it (and `memledger gov` its error line). Not
#: on chain: a tx result's log carries the description, never these.
NEXT_STEPS: dict[Code, str] = {
    Code.NOT_A_VALIDATOR: (
        "Only validators vote on a memory (on a memory in a scoped domain, the members "
        "pinned on its ballot); a key becomes a validator by a governance proposal, "
        "`memledger gov propose validator --pubkey KEY --power N`, that the current "
        "validators vote through"),
    Code.NOT_A_SCOPE_MEMBER: (
        "Only the members pinned on a scoped memory's ballot when it was proposed vote on "
        "it; a scope's members change by a governance proposal (`memledger gov propose "
        "scope revise SCOPE --member KEY:WEIGHT ...`) that the validators vote through, "
        "for memories proposed after it"),
    Code.GOV_NOT_VALIDATOR: (
        "Only current validators propose and vote in governance (`memledger gov` signs "
        "with the node home's validator key); a key becomes a validator by a `memledger "
        "gov propose validator --pubkey KEY --power N` proposal that the current "
        "validators vote through"),
    Code.DOMAIN_WRITE_DENIED: (
        "A domain belongs to its first writer: its owner can grant write access (the SDK's "
        "`grant(domain, KEY)`); a scoped domain takes its scope's members, set by "
        "governance; shared domains (by default `general`) take anyone's writes"),
    Code.INVALID_TAG: (
        f"A memory takes at most {MAX_TAGS} tags, distinct, each 1 to {MAX_TAG_BYTES} bytes "
        "of UTF-8 of any characters but NUL (U+0000)"),
}
NEXT_STEPS[Code.TOO_MANY_TAGS] = NEXT_STEPS[Code.INVALID_TAG]

#: Kept for callers that look a description up by code.
DESCRIPTIONS: dict[Code, str] = {code: code.description for code in Code}


class TxError(Exception):
    """A deterministic rejection: carries the code and a one-line reason."""

    def __init__(self, code: Code, log: str = "") -> None:
        super().__init__(log or code.description)
        self.code = code
        self.log = log or code.description


def markdown_table(enum: type[_Described] = Code) -> str:
    """Render a code table documented in docs/CODES.md."""
    lines = ["| code | name | meaning |", "| ---: | --- | --- |"]
    for code in enum:
        lines.append(f"| {int(code)} | `{code.slug}` | {code.description} |")
    return "\n".join(lines) + "\n"
