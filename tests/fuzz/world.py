"""The adversarial world: one small chain state with every kind of object an attack needs.

Shared by the handler fuzzers and the adversarial suite. Built once into a template
directory, then cloned (a file copy of LMDB + SQLite) for every test or example, so each
attack starts from exactly the same committed state and the same app hash.

Validators v0..v3 hold power 10, 20, 30, 40; v0 has been removed by governance (so it is
an ex-validator everywhere: total power 90). A genesis scope `ops` binds domain `ops` to
S1 (5), S2 (3), S3 (2). OWNER owns domain `vault` and granted READER read, WRITER write
and MODDER modify. Memories in every status, a co-commit, an open proposal and an
account whose nonce is already 2^64-1 are in place.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.protocol.pb import abci_pb2 as pb
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import (
    cocommit_core,
    param_proposal,
    sign_cocommit,
    validator_proposal,
)
from tests.support.chain import LocalChain, seeded_key

MAX_NONCE = (1 << 64) - 1

OWNER = seeded_key("world-owner")
READER = seeded_key("world-reader")
WRITER = seeded_key("world-writer")
MODDER = seeded_key("world-modder")
CORR = seeded_key("world-corroborator")
STRANGER = seeded_key("world-stranger")
C1 = seeded_key("world-coauthor-1")
C2 = seeded_key("world-coauthor-2")
MAXED = seeded_key("world-maxed-nonce")
S1, S2, S3 = (seeded_key(f"world-scope-{n}") for n in range(3))

AGENTS: dict[str, SigningKey] = {
    "owner": OWNER, "reader": READER, "writer": WRITER, "modder": MODDER, "corr": CORR,
    "stranger": STRANGER, "c1": C1, "c2": C2, "maxed": MAXED, "s1": S1, "s2": S2, "s3": S3,
}
SCOPE = {"id": "ops", "domains": ["ops"],
         "members": [[bytes(S1.verify_key).hex(), 5], [bytes(S2.verify_key).hex(), 3],
                     [bytes(S3.verify_key).hex(), 2]]}
COCOMMIT_CONTENT = "jointly observed: the deploy finished"

#: memory id -> status it has in the world
MEMORIES = {
    "m-proposed": "proposed",       # general, by OWNER, no votes
    "v-committed": "committed",     # vault, by OWNER, committed by v2 + v3
    "v-corroborated": "committed",  # vault, by WRITER, committed, corroborated by CORR
    "v-challenged": "challenged",   # vault, by OWNER, corroborated by CORR, challenged (k=1)
    "v-deprecated": "deprecated",   # vault, by OWNER, committed, challenged with k=0
    "s-proposed": "proposed",       # ops (scoped), by S1, pinned ballot
}


def _ok(results: list[pb.ExecTxResult]) -> None:
    bad = [(r.code, r.log) for r in results if r.code != 0]
    assert not bad, bad


@dataclass
class World:
    """A chain in the world state plus the handles attacks need."""

    chain: LocalChain
    cocommit_id: str
    removed_at: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def validators(self) -> list[SigningKey]:
        return self.chain.validator_keys

    def tx(self, key: SigningKey, method: str, *args: Any, **kwargs: Any) -> bytes:
        """A well-formed tx from `key` with its next nonce (nonce consumed)."""
        builder = self.chain.builder(key)
        return getattr(builder, method)(self.chain.next_nonce(key), *args, **kwargs)  # type: ignore[no-any-return]

    def run(self, key: SigningKey, method: str, *args: Any, **kwargs: Any) -> pb.ExecTxResult:
        return self.chain.block([self.tx(key, method, *args, **kwargs)])[0]

    def body(self, key: SigningKey, **msg: Any) -> tx_pb2.TxBody:
        return tx_pb2.TxBody(chain_id=self.chain.chain_id, nonce=self.chain.next_nonce(key),
                             **msg)

    def close(self) -> None:
        self.chain.close()


def _submit_commit(w: World, key: SigningKey, mid: str, domain: str) -> None:
    v = w.validators
    _ok(w.chain.block([w.tx(key, "submit", mid, f"world memory {mid}", domain=domain)]))
    _ok(w.chain.block([w.tx(v[3], "vote", mid), w.tx(v[2], "vote", mid)]))


def build(home: Path) -> World:
    """Build the world from genesis (about 15 blocks)."""
    chain = LocalChain(home, app_state={"scopes": [SCOPE]})
    w = World(chain=chain, cocommit_id="", removed_at=0)
    v = w.validators
    # Governance first: remove v0 (10 of 100 power), effective two blocks later.
    _ok(chain.block([w.tx(v[1], "propose", validator_proposal(bytes(v[0].verify_key), 0))]))
    _ok(chain.block([w.tx(v[3], "gov_vote", "p1"), w.tx(v[2], "gov_vote", "p1")]))
    w.removed_at = chain.height + 2
    chain.block([])
    chain.block([])
    # Domain `vault` owned by OWNER, with read / write / modify grants.
    _submit_commit(w, OWNER, "v-committed", "vault")
    _ok(chain.block([
        w.tx(OWNER, "grant", "vault", bytes(READER.verify_key), "read"),
        w.tx(OWNER, "grant", "vault", bytes(WRITER.verify_key), "write"),
        w.tx(OWNER, "grant", "vault", bytes(MODDER.verify_key), "modify"),
    ]))
    _submit_commit(w, WRITER, "v-corroborated", "vault")
    _submit_commit(w, OWNER, "v-challenged", "vault")
    _submit_commit(w, OWNER, "v-deprecated", "vault")
    _ok(chain.block([w.tx(CORR, "corroborate", "v-corroborated"),
                     w.tx(CORR, "corroborate", "v-challenged")]))
    _ok(chain.block([w.tx(OWNER, "challenge", "v-challenged", "stale"),
                     w.tx(OWNER, "challenge", "v-deprecated", "wrong")]))
    _ok(chain.block([w.tx(OWNER, "submit", "m-proposed", "a proposed memory"),
                     w.tx(S1, "submit", "s-proposed", "a scoped memory", domain="ops")]))
    # A co-commit by C1 + C2 in the shared domain.
    core = cocommit_core(chain.chain_id, COCOMMIT_CONTENT,
                         [bytes(C1.verify_key), bytes(C2.verify_key)])
    sigs = sorted(sign_cocommit(k, core) for k in (C1, C2))
    result = chain.block([w.tx(C1, "cocommit", core, sigs)])[0]
    assert result.code == 0, result.log
    w.cocommit_id = next(a.value for e in result.events if e.type == "cocommit"
                         for a in e.attributes if a.key == "id")
    w.extra["cocommit_core"] = core
    # An account at the top of the nonce space.
    _ok(chain.block([chain.builder(MAXED).submit(MAX_NONCE, "m-maxed", "last nonce ever")]))
    chain.nonces[bytes(MAXED.verify_key)] = MAX_NONCE
    # An open proposal (p2) nobody voted on yet.
    _ok(chain.block([w.tx(v[1], "propose", param_proposal("gov_voting_period", 50))]))
    chain.block([])  # settle: nothing pending, nothing due
    for mid, status in MEMORIES.items():
        record = chain.memory(mid)
        assert record is not None and record["status"] == status, (mid, record)
    return w


@dataclass(frozen=True)
class Template:
    """A built world on disk, ready to be cloned."""

    home: Path
    nonces: dict[bytes, int]
    cocommit_id: str
    removed_at: int
    extra: dict[str, Any]
    app_hash: bytes
    height: int


def make_template(home: Path) -> Template:
    w = build(home)
    t = Template(home, dict(w.chain.nonces), w.cocommit_id, w.removed_at, dict(w.extra),
                 w.chain.app.store.last_app_hash, w.chain.height)
    w.close()
    return t


def clone(template: Template, dest: Path) -> World:
    """A fresh, independent copy of the world (new app process state, same disk state)."""
    shutil.copytree(template.home, dest)
    chain = LocalChain(dest, app_state={"scopes": [SCOPE]})
    chain.nonces = dict(template.nonces)
    assert chain.height == template.height
    return World(chain, template.cocommit_id, template.removed_at, dict(template.extra))
