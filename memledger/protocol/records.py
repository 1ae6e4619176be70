"""Canonical state layout: every key prefix, grouped by the rule family that owns it.

Keys are printable ASCII except for a NUL separator between compound parts (ids and
domains may not contain NUL). Values are canonical JSON (`store/codec.py`); each
family types its records (e.g. `families/memory/record.py`). This module is the one list
of prefixes: the store, the projection mapping (`projection/mapping.py`) and the proofs
all read it, and `tests/unit/projection/test_layout.py` checks every prefix has an owner and a
projection row.
"""

from __future__ import annotations

# memory (families/memory)
MEMORY = b"mem/"            # mem/<id> -> MemoryRecord (without content)
CONTENT = b"memc/"          # memc/<id> -> raw UTF-8 content bytes (written once)
BALLOT = b"ballot/"         # ballot/<hex> -> {"open": n} open pinned ballots naming a member
BALLOT_EXPIRY = b"bexp/"    # bexp/<opened:020d>\0<id> -> {} open memory ballots (v4+)
# disputes (families/disputes)
CORROBORATION = b"corr/"    # corr/<id>\0<hex> -> {"height": h}
CHALLENGE = b"chal/"        # chal/<id> -> {"rounds": [...]} dispute rounds
PEER_EXPIRY = b"pexp/"      # pexp/<opened:020d>\0<id> -> {} open peer disputes (v10+)
PEER_CHALLENGER = b"pchl/"  # pchl/<hex> -> {"open": [ids]} a key's open peer disputes;
#                             pchl/~block -> {"height", "counts"} this block's (v10+)
# co-commits (families/cocommit)
COCOMMIT = b"cc/"           # cc/<shared id> -> co-commit record
# access (families/access)
DOMAIN = b"dom/"            # dom/<name> -> DomainRecord
GRANT = b"grant/"           # grant/<domain>\0<hex> -> GrantRecord
# accounts (families/accounts)
ACCOUNT = b"acct/"          # acct/<hex key> -> nonces (v1-v2 {"nonce"}; v3+ with a window)
# governance (families/governance)
SCOPE = b"scope/"           # scope/<id> -> ScopeRecord
PROPOSAL = b"gov/"          # gov/<proposal id> -> ProposalRecord
GOV_STATE = b"sys/gov"      # GovState {"next_id": n, "open": [ids]}
UPGRADE = b"sys/upgrade"    # UpgradePlan, while one is scheduled
VALSET_PENDING = b"sys/valset_pending"  # {"pending": [[effective_height, hex, power]]}
VALIDATORS = b"sys/validators"  # {"validators": [[hex, power], ...]} sorted by hex
PARAMS = b"sys/params"      # chain parameters (consensus/params.py)
# the chain itself (block/genesis.py, versions.py)
SYS = b"sys/"
APP_VERSION = b"sys/app_version"  # {"version": n, "name": str, "since": h}
CHAIN = b"sys/chain"        # {"chain_id": str, "initial_height": h}

#: key prefix -> the rule family that owns (writes) it
OWNERS: dict[bytes, str] = {
    MEMORY: "memory", CONTENT: "memory", BALLOT: "memory", BALLOT_EXPIRY: "memory",
    CORROBORATION: "disputes", CHALLENGE: "disputes", PEER_EXPIRY: "disputes",
    PEER_CHALLENGER: "disputes",
    COCOMMIT: "cocommit",
    DOMAIN: "access", GRANT: "access",
    ACCOUNT: "accounts",
    SCOPE: "governance", PROPOSAL: "governance",
    SYS: "chain and governance",
}
SEP = b"\x00"

STATUS_PROPOSED = "proposed"
STATUS_COMMITTED = "committed"
STATUS_CHALLENGED = "challenged"
STATUS_DEPRECATED = "deprecated"
STATUS_SUPERSEDED = "superseded"  # v10+: a committed correction replaced it

#: The lifecycle table: every allowed status transition (DESIGN §4).
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        (STATUS_PROPOSED, STATUS_COMMITTED),
        (STATUS_PROPOSED, STATUS_DEPRECATED),
        (STATUS_COMMITTED, STATUS_CHALLENGED),
        (STATUS_COMMITTED, STATUS_DEPRECATED),
        (STATUS_CHALLENGED, STATUS_COMMITTED),
        (STATUS_CHALLENGED, STATUS_DEPRECATED),
        (STATUS_COMMITTED, STATUS_SUPERSEDED),
        (STATUS_CHALLENGED, STATUS_SUPERSEDED),
    }
)
INITIAL_STATUSES = frozenset({STATUS_PROPOSED, STATUS_COMMITTED})


def memory_key(memory_id: str) -> bytes:
    return MEMORY + memory_id.encode()


def content_key(memory_id: str) -> bytes:
    return CONTENT + memory_id.encode()


def account_key(public_key: bytes) -> bytes:
    return ACCOUNT + public_key.hex().encode()


def domain_key(domain: str) -> bytes:
    return DOMAIN + domain.encode()


def grant_key(domain: str, grantee: bytes) -> bytes:
    return GRANT + domain.encode() + SEP + grantee.hex().encode()


def scope_key(scope_id: str) -> bytes:
    return SCOPE + scope_id.encode()


def cocommit_key(shared_id: str) -> bytes:
    return COCOMMIT + shared_id.encode()


def corroboration_key(memory_id: str, agent: bytes) -> bytes:
    return CORROBORATION + memory_id.encode() + SEP + agent.hex().encode()


def challenge_key(memory_id: str) -> bytes:
    return CHALLENGE + memory_id.encode()


def peer_challenger_key(agent: bytes) -> bytes:
    return PEER_CHALLENGER + agent.hex().encode()


def proposal_key(proposal_id: str) -> bytes:
    return PROPOSAL + proposal_id.encode()


def split_compound(key: bytes, prefix: bytes) -> tuple[str, str]:
    """Split `<prefix><a>\\0<b>` into (a, b)."""
    first, _, second = key[len(prefix):].partition(SEP)
    return first.decode(), second.decode()
