"""Deterministic random workloads: the same seed always yields the same blocks.

Used by the determinism and property tests. `python -m tests.support.workload DIR SEED`
applies a workload in a fresh process and prints the app hash of every height as JSON.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.sdk.txbuilder import cocommit_core, sign_cocommit
from tests.support.chain import LocalChain, seeded_key

AGENTS = [seeded_key(f"agent-{i}") for i in range(4)]


def blocks(chain: LocalChain, seed: int, count: int,
           app_version: int = 0) -> list[list[bytes]]:
    """Generate `count` blocks of submits, votes and invalid txs (replays, bad sigs); from
    v5 some votes give a reason (drawn only then, so older versions' blocks stay as
    they were)."""
    rng = random.Random(seed)
    out: list[list[bytes]] = []
    memory_ids: list[str] = []
    authors: dict[str, SigningKey] = {}
    nonces: dict[bytes, int] = {}

    def nonce(key: SigningKey) -> int:
        pk = bytes(key.verify_key)
        nonces[pk] = nonces.get(pk, 0) + rng.choice([1, 1, 1, 2, 7])
        return nonces[pk]

    for b in range(count):
        txs: list[bytes] = []
        for _ in range(rng.randint(0, 8)):
            roll = rng.random()
            if roll < 0.2 or not memory_ids:
                agent = rng.choice(AGENTS)
                mid = f"mem-{b}-{len(txs)}"
                domain = rng.choice(["general", "general", f"team-{rng.randint(0, 2)}"])
                txs.append(chain.builder(agent).submit(
                    nonce(agent), mid, f"content {rng.getrandbits(64)}", domain=domain,
                    tags=rng.sample(["a", "b", "c", "d"], rng.randint(0, 3))))
                memory_ids.append(mid)
                authors[mid] = agent
            elif roll < 0.7:
                voter = rng.choice(chain.validator_keys)
                vote_nonce = nonce(voter)  # drawn in the order the goldens were made with
                target = rng.choice(memory_ids[-3:])
                decision = rng.choice(["accept", "reject", "reject", "abstain"])
                reason = rng.choice(["", "looks right", "duplicate", "x" * 4097]) \
                    if app_version >= 5 else ""
                txs.append(chain.builder(voter).vote(vote_nonce, target, decision, reason))
            elif roll < 0.9:
                txs.append(_lifecycle_tx(chain, rng, nonce, memory_ids, authors))
            elif roll < 0.95:
                agent = rng.choice(AGENTS)
                txs.append(chain.builder(agent).submit(1, "replay", "stale nonce"))
            else:
                raw = bytearray(chain.builder(rng.choice(AGENTS)).vote(5, "x"))
                raw[-1] ^= 0x01
                txs.append(bytes(raw))
        out.append(txs)
    return out


def _lifecycle_tx(chain: LocalChain, rng: random.Random, nonce: Any,
                  memory_ids: list[str], authors: dict[str, SigningKey]) -> bytes:
    """Grants, corroborations, challenges, reinstatements and co-commits, valid or not."""
    agent = rng.choice(AGENTS)
    builder = chain.builder(agent)
    kind = rng.choice(["grant", "revoke", "corroborate", "challenge", "challenge",
                       "reinstate", "cocommit"])
    if kind in ("grant", "revoke"):
        other = bytes(rng.choice(AGENTS).verify_key)
        domain = f"team-{rng.randint(0, 2)}"
        if kind == "revoke":
            return builder.revoke(nonce(agent), domain, other)
        return builder.grant(nonce(agent), domain, other,
                             rng.choice(["read", "write", "modify"]))
    if kind == "cocommit":
        keys = rng.sample(AGENTS, rng.randint(2, 3))
        core = cocommit_core(chain.chain_id, f"joint {rng.getrandbits(16)}",
                             [bytes(k.verify_key) for k in keys],
                             agreement_nonce=rng.randint(1, 3))
        sigs = sorted(sign_cocommit(k, core) for k in keys)
        submitter = rng.choice(keys + [agent])
        return chain.builder(submitter).cocommit(nonce(submitter), core, sigs)
    target = rng.choice(memory_ids[-12:])
    if kind == "challenge" and rng.random() < 0.7 and target in authors:
        agent = authors[target]
        builder = chain.builder(agent)
    return getattr(builder, kind)(nonce(agent), target)


def run(home: Path, seed: int, count: int, restart_at: int,
        app_version: int = 0) -> dict[int, str]:
    """Apply the workload; with `app_version` >= 3, also shuffle each block (order-free nonces);
    from 4, ballots expire after 10 blocks; from 5, votes give reasons (some too long)."""
    app_state: dict[str, Any] = {}
    if app_version:
        params: dict[str, Any] = {"nonce_window": 8}
        if app_version >= 4:
            params["ballot_expiry"] = 10
        app_state = {"app_version": app_version, "params": params}
    chain = LocalChain(home, app_state=app_state)
    plan = blocks(chain, seed, count, app_version)
    if app_version >= 3:
        shuffler = random.Random(seed + 1)
        for txs in plan:
            shuffler.shuffle(txs)
    for i, txs in enumerate(plan):
        if i == restart_at:
            chain.reopen()
        chain.block(txs)
    hashes = {h: v.hex() for h, v in chain.app_hashes.items()}
    chain.close()
    return hashes


def run_in_fresh_process(home: Path, hash_seed: str, restart_at: int, app_version: int,
                         seed: int = 77, count: int = 24) -> dict[str, str]:
    """`run` in a new interpreter with its own PYTHONHASHSEED: app hash per height."""
    import os
    import subprocess

    repo = Path(__file__).parents[2]
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(repo))
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.workload", str(home), str(seed), str(count),
         str(restart_at), str(app_version)],
        check=True, capture_output=True, text=True, env=env, cwd=repo,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


if __name__ == "__main__":
    version = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    result = run(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), version)
    print(json.dumps(result, sort_keys=True))
