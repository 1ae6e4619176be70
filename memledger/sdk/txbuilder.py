"""Build and sign memledger transactions (used by the SDK, the CLI, the voter and tests).

Agent keys never leave the caller: this module only needs a `SigningKey` in memory.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from nacl.signing import SigningKey

from memledger.protocol.envelope import encode_tx
from memledger.protocol.pb import tx_pb2
from memledger.protocol.txkinds import DECISIONS, LEVELS, kind_named

COCOMMIT_SIGN_PREFIX = b"memledger/cocommit/v1\x00"
__all__ = ["COCOMMIT_SIGN_PREFIX", "DECISIONS", "LEVELS", "TxBuilder", "cocommit_core",
           "confidence_to_ppm", "param_proposal", "scope_proposal", "sign_cocommit",
           "upgrade_cancel_proposal", "upgrade_proposal", "validator_proposal"]


def confidence_to_ppm(confidence: float) -> int:
    """A fraction from 0 to 1 in parts per million (consensus only ever sees the integer).
    An int above 1 is not taken for ppm: 2 would mean 2,000,000 ppm, which the ledger
    refuses, never a silent 0.0002%."""
    return int(round(float(confidence) * 1_000_000))


class TxBuilder:
    """Signs bodies for one key on one chain; the caller chooses nonces."""

    def __init__(self, key: SigningKey, chain_id: str) -> None:
        self.key = key
        self.chain_id = chain_id

    @property
    def public_key(self) -> bytes:
        return bytes(self.key.verify_key)

    def build(self, kind: str, nonce: int, **fields: Any) -> bytes:
        """Sign a transaction of any kind (a row of memledger.protocol.txkinds) from its
        fields; an unknown or missing field is a TypeError naming the kind's fields."""
        row = kind_named(kind)
        msg = row.message_of(row.checked(fields, f"TxBuilder.build({kind!r})"))
        body = tx_pb2.TxBody(chain_id=self.chain_id, nonce=nonce, **{row.name: msg})
        return encode_tx(body, self.key)

    # The typed methods below are `build` with the kind's fields as parameters.
    def submit(
        self,
        nonce: int,
        memory_id: str,
        content: str,
        *,
        domain: str = "general",
        memory_type: str = "fact",
        confidence_ppm: int = 900_000,
        tags: Sequence[str] = (),
        supersedes: str = "",
        origin: Mapping[str, Any] | None = None,
        epoch: int = 0,
    ) -> bytes:
        """A memory submit; `supersedes` (the id of the memory it corrects) and `origin`
        (chain_id, height, memory_id, author of an imported memory) need app version 10+."""
        return self.build("memory_submit", nonce, memory_id=memory_id, content=content,
                          domain=domain, memory_type=memory_type,
                          confidence_ppm=confidence_ppm, tags=tags, supersedes=supersedes,
                          origin=origin, epoch=epoch)

    def vote(self, nonce: int, memory_id: str, decision: str = "accept",
             reason: str = "") -> bytes:
        """A memory vote; `reason` (kept on chain with the vote) needs app version 5+."""
        return self.build("memory_vote", nonce, memory_id=memory_id, decision=decision,
                          reason=reason)

    def challenge(self, nonce: int, memory_id: str, reason: str = "") -> bytes:
        return self.build("memory_challenge", nonce, memory_id=memory_id, reason=reason)

    def corroborate(self, nonce: int, memory_id: str) -> bytes:
        return self.build("memory_corroborate", nonce, memory_id=memory_id)

    def reinstate(self, nonce: int, memory_id: str) -> bytes:
        return self.build("memory_reinstate", nonce, memory_id=memory_id)

    def grant(self, nonce: int, domain: str, grantee: bytes, level: str,
              expires_height: int = 0) -> bytes:
        return self.build("access_grant", nonce, domain=domain, grantee=grantee, level=level,
                          expires_height=expires_height)

    def revoke(self, nonce: int, domain: str, grantee: bytes) -> bytes:
        return self.build("access_revoke", nonce, domain=domain, grantee=grantee)

    def cocommit(self, nonce: int, core: bytes, signatures: Sequence[tuple[bytes, bytes]]) -> bytes:
        return self.build("cocommit_submit", nonce, core=core, signatures=signatures)

    # ------------------------------------------------------------ governance
    def propose(self, nonce: int, proposal: tx_pb2.GovPropose) -> bytes:
        return self.build("gov_propose", nonce, proposal=proposal)

    def gov_vote(self, nonce: int, proposal_id: str, decision: str = "accept") -> bytes:
        return self.build("gov_vote", nonce, proposal_id=proposal_id, decision=decision)

    def gov_cancel(self, nonce: int, proposal_id: str) -> bytes:
        return self.build("gov_cancel", nonce, proposal_id=proposal_id)

    def raw_body(self, body: tx_pb2.TxBody) -> bytes:
        return encode_tx(body, self.key)


def cocommit_core(
    chain_id: str,
    content: str,
    coauthors: Sequence[bytes],
    *,
    domain: str = "general",
    memory_type: str = "fact",
    confidence_ppm: int = 900_000,
    tags: Sequence[str] = (),
    agreement_nonce: int = 1,
    not_before_unix_ns: int = 0,
    not_after_unix_ns: int = (1 << 63) - 1,
) -> bytes:
    """Canonical CoCommitCore bytes, the thing every coauthor signs."""
    core = tx_pb2.CoCommitCore(
        chain_id=chain_id, domain=domain, memory_type=memory_type, content=content,
        content_hash=hashlib.sha256(content.encode()).digest(), confidence_ppm=confidence_ppm,
        tags=sorted(tags), coauthors=sorted(coauthors), agreement_nonce=agreement_nonce,
        not_before_unix_ns=not_before_unix_ns, not_after_unix_ns=not_after_unix_ns,
    )
    signed: bytes = core.SerializeToString(deterministic=True)
    return signed


def sign_cocommit(key: SigningKey, core: bytes) -> tuple[bytes, bytes]:
    """One coauthor's (public key, signature) over the core."""
    return bytes(key.verify_key), key.sign(COCOMMIT_SIGN_PREFIX + core).signature


# ---------------------------------------------------------------- proposal builders
def validator_proposal(public_key: bytes, power: int, title: str = "") -> tx_pb2.GovPropose:
    return tx_pb2.GovPropose(title=title, validator=tx_pb2.ValidatorChange(
        public_key=public_key, power=power))


def scope_proposal(action: str, scope_id: str, domains: Sequence[str] = (),
                   members: Sequence[tuple[bytes, int]] = (), title: str = "") -> tx_pb2.GovPropose:
    """action: create | revise | pause | resume | retire."""
    if action in ("create", "revise"):
        spec = tx_pb2.ScopeSpec(scope_id=scope_id, domains=list(domains), members=[
            tx_pb2.ScopeMember(public_key=k, weight=w) for k, w in members])
        return tx_pb2.GovPropose(title=title, **{f"scope_{action}": spec})  # type: ignore[arg-type]
    return tx_pb2.GovPropose(title=title, **{f"scope_{action}": scope_id})  # type: ignore[arg-type]


def param_proposal(key: str, value: int, title: str = "") -> tx_pb2.GovPropose:
    return tx_pb2.GovPropose(title=title, param=tx_pb2.ParamChange(key=key, value=value))


def upgrade_proposal(name: str, app_version: int, activation_height: int,
                     binary_sha256: str = "", title: str = "") -> tx_pb2.GovPropose:
    return tx_pb2.GovPropose(title=title, upgrade=tx_pb2.SoftwareUpgrade(
        name=name, app_version=app_version, activation_height=activation_height,
        binary_sha256=binary_sha256))


def upgrade_cancel_proposal(name: str, title: str = "") -> tx_pb2.GovPropose:
    """Call off the scheduled upgrade `name` (app version 9+)."""
    return tx_pb2.GovPropose(title=title, upgrade_cancel=name)
