"""Canonical state layout: every key prefix and the shape of the record behind it.

Keys are printable ASCII except for a NUL separator between compound parts (ids and
domains may not contain NUL). Values are canonical JSON (`memledger.consensus.store.codec`). This
module is
the single source of truth for the layout; the projection and the proofs read it too.
"""

from __future__ import annotations

MEMORY = b"mem/"            # mem/<id> -> memory record (without content)
CONTENT = b"memc/"          # memc/<id> -> raw UTF-8 content bytes (written once)
ACCOUNT = b"acct/"          # acct/<hex key> -> {"nonce": n}
DOMAIN = b"dom/"            # dom/<name> -> {"owner": hex|None, "scope": id|None}
GRANT = b"grant/"           # grant/<domain>\0<hex> -> {"level": str, "expires": h, ...}
SCOPE = b"scope/"           # scope/<id> -> scope record
COCOMMIT = b"cc/"           # cc/<shared id> -> co-commit record
CORROBORATION = b"corr/"    # corr/<id>\0<hex> -> {"height": h}
CHALLENGE = b"chal/"        # chal/<id> -> current dispute round
PROPOSAL = b"gov/"          # gov/<proposal id> -> proposal record
BALLOT = b"ballot/"         # ballot/<hex> -> {"open": n} open pinned ballots naming a member
BALLOT_EXPIRY = b"bexp/"    # bexp/<opened:020d>\0<id> -> {} open memory ballots (v4+)
SYS = b"sys/"
GOV_STATE = b"sys/gov"      # {"next_id": n, "open": [ids]}
UPGRADE = b"sys/upgrade"    # scheduled upgrade plan, if any
APP_VERSION = b"sys/app_version"  # {"version": n, "name": str, "since": h}
VALSET_PENDING = b"sys/valset_pending"  # {"pending": [[effective_height, hex, power]]}
VALIDATORS = b"sys/validators"  # {"validators": [[hex, power], ...]} sorted by hex
PARAMS = b"sys/params"      # consensus parameters of the app
CHAIN = b"sys/chain"        # {"chain_id": str, "initial_height": h}
SEP = b"\x00"

STATUS_PROPOSED = "proposed"
STATUS_COMMITTED = "committed"
STATUS_CHALLENGED = "challenged"
STATUS_DEPRECATED = "deprecated"

#: The lifecycle table: every allowed status transition (DESIGN §4).
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        (STATUS_PROPOSED, STATUS_COMMITTED),
        (STATUS_PROPOSED, STATUS_DEPRECATED),
        (STATUS_COMMITTED, STATUS_CHALLENGED),
        (STATUS_COMMITTED, STATUS_DEPRECATED),
        (STATUS_CHALLENGED, STATUS_COMMITTED),
        (STATUS_CHALLENGED, STATUS_DEPRECATED),
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


def proposal_key(proposal_id: str) -> bytes:
    return PROPOSAL + proposal_id.encode()


def split_compound(key: bytes, prefix: bytes) -> tuple[str, str]:
    """Split `<prefix><a>\\0<b>` into (a, b)."""
    first, _, second = key[len(prefix):].partition(SEP)
    return first.decode(), second.decode()
