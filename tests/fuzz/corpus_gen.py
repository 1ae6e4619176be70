"""Seed corpus: one or more valid txs of every message kind, as hex files.

Each seed is valid against the adversarial world (tests/fuzz/world.py) when applied on
its own, so the fuzzers start from inputs that reach deep into every handler. Ed25519
signatures are deterministic, so regenerating gives byte-identical files:

    .venv/bin/python -m tests.fuzz.corpus_gen        # rewrite tests/fuzz/corpus/*.hex
"""

from __future__ import annotations

import sys
from pathlib import Path

from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import (
    TxBuilder,
    cocommit_core,
    param_proposal,
    scope_proposal,
    sign_cocommit,
    upgrade_proposal,
    validator_proposal,
)
from tests.fuzz import world
from tests.support.chain import CHAIN_ID, seeded_key

CORPUS_DIR = Path(__file__).parent / "corpus"
VALIDATORS = [seeded_key(f"validator-{i}") for i in range(4)]
NONCE = 1_000_000  # above every nonce the world used
#: a sealed epoch key as consensus sees it: 80 opaque bytes (a real one is random, and the
#: corpus must regenerate byte for byte)
SEALED = bytes(range(80))


def seeds() -> dict[str, bytes]:
    """name -> tx bytes, in a fixed order."""
    v = VALIDATORS
    b = {name: TxBuilder(key, CHAIN_ID) for name, key in world.AGENTS.items()}
    vb = [TxBuilder(k, CHAIN_ID) for k in v]
    core = cocommit_core(CHAIN_ID, "a second joint observation",
                         [bytes(world.C1.verify_key), bytes(world.C2.verify_key)],
                         tags=["joint", "ops"], agreement_nonce=2)
    sigs = sorted(sign_cocommit(k, core) for k in (world.C1, world.C2))
    new_member = bytes(seeded_key("corpus-new-validator").verify_key)
    out = {
        "memory_submit-general": b["stranger"].submit(
            NONCE, "corpus-1", "The staging cluster restarts nightly at 02:00 UTC",
            tags=["infra", "ops"], confidence_ppm=750_000),
        "memory_submit-vault": b["writer"].submit(
            NONCE, "corpus-2", "vault entry written under a write grant", domain="vault",
            memory_type="observation"),
        "memory_submit-scoped": b["s2"].submit(
            NONCE, "corpus-3", "scoped memory with a pinned ballot", domain="ops",
            memory_type="task"),
        "memory_vote-accept": vb[3].vote(NONCE, "m-proposed", "accept"),
        "memory_vote-scoped": b["s3"].vote(NONCE, "s-proposed", "reject"),
        "memory_challenge-modder": b["modder"].challenge(NONCE, "v-committed", "superseded"),
        "memory_corroborate-corr": b["corr"].corroborate(NONCE, "v-committed"),
        "memory_reinstate-modder": b["modder"].reinstate(NONCE, "v-challenged"),
        "cocommit_submit-c2": b["c2"].cocommit(NONCE, core, sigs),
        "access_grant-owner": b["owner"].grant(
            NONCE, "vault", bytes(world.STRANGER.verify_key), "read", expires_height=10_000),
        "access_revoke-owner": b["owner"].revoke(NONCE, "vault", bytes(world.READER.verify_key)),
        "gov_propose-validator": vb[1].propose(NONCE, validator_proposal(new_member, 5)),
        "gov_propose-scope": vb[2].propose(NONCE, scope_proposal(
            "create", "lab-scope", ["lab"], [(bytes(world.S1.verify_key), 1)])),
        "gov_propose-param": vb[3].propose(NONCE, param_proposal("gov_min_upgrade_delay", 30)),
        "gov_propose-upgrade": vb[1].propose(NONCE + 1, upgrade_proposal(
            "memledger-v2", 2, 500, binary_sha256="ab" * 32, title="v2")),
        "gov_propose-pause": vb[2].propose(NONCE + 1, scope_proposal("pause", "ops")),
        "gov_vote-accept": vb[3].gov_vote(NONCE + 1, "p2", "accept"),
        "gov_cancel-proposer": vb[1].gov_cancel(NONCE + 2, "p2"),
        # v10 kinds: the world runs v1, where they are unknown; test_fuzz_tx_gate applies
        # them on a v10 chain
        "domain_private-stranger": b["stranger"].build(
            "domain_private", NONCE, domain="hideout",
            keys=((bytes(world.STRANGER.verify_key), SEALED),)),
        "domain_keys-stranger": b["stranger"].build(
            "domain_keys", NONCE + 1, domain="hideout", epoch=2,
            keys=((bytes(world.STRANGER.verify_key), SEALED),)),
    }
    return out


def load() -> dict[str, bytes]:
    """The checked-in corpus."""
    return {p.stem: bytes.fromhex(p.read_text().strip())
            for p in sorted(CORPUS_DIR.glob("*.hex"))}


def kind_of(raw: bytes) -> str:
    return str(tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body).WhichOneof("msg"))


def write() -> None:
    CORPUS_DIR.mkdir(exist_ok=True)
    for old in CORPUS_DIR.glob("*.hex"):
        old.unlink()
    for name, raw in seeds().items():
        (CORPUS_DIR / f"{name}.hex").write_text(raw.hex() + "\n")


if __name__ == "__main__":
    write()
    print(f"wrote {len(seeds())} seeds to {CORPUS_DIR}", file=sys.stderr)
