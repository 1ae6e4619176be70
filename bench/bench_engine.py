"""processTx / FinalizeBlock throughput vs the raw PyNaCl Ed25519 verify rate.

Both are measured in the same run, so the ratio is meaningful on a shared machine where
absolute numbers are not. Three ways a block's signatures get checked:

- inline: every signature verified on the executing thread (one core);
- helper: uncached signatures verified ahead on the helper process
(memledger.consensus.gate.verifypool),
  as a node does for blocks it did not CheckTx (catch-up, others' proposals);
- warm: signatures already verified by CheckTx (the usual path for a validator).

Also reports Commit time (projection flush + LMDB) per block.

    .venv/bin/python -m bench.bench_engine [--txs 5000] [--rounds 3] [--modes inline helper warm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from memledger.devtools.chain import LocalChain, seeded_key
from memledger.protocol.envelope import sign_bytes
from memledger.protocol.pb import abci_pb2 as pb

MODES = ("inline", "helper", "warm")


def raw_verify_rate(count: int) -> float:
    """Ed25519 verifications per second through PyNaCl (the hardware/library limit)."""
    key = SigningKey.generate()
    verify = key.verify_key
    messages = [sign_bytes(f"message {i}".encode() * 8) for i in range(count)]
    signed = [key.sign(m) for m in messages]
    start = time.perf_counter()
    for s in signed:
        verify.verify(s.message, s.signature)
    return count / (time.perf_counter() - start)


def _timed_block(chain: LocalChain, txs: list[bytes]) -> dict[str, float]:
    start = time.perf_counter()
    resp = chain.finalize(txs)
    finalized = time.perf_counter()
    chain.app.commit(pb.RequestCommit())
    committed = time.perf_counter()
    chain.height += 1
    failed = sum(1 for r in resp.tx_results if r.code)
    assert failed == 0, f"{failed} txs failed"
    return {"finalize_s": finalized - start, "commit_s": committed - finalized}


def run_mode(txs: int, mode: str) -> dict[str, Any]:
    """One chain: a block of `txs` submits, then a block of as many validator votes."""
    agents = [seeded_key(f"bench-agent-{i}") for i in range(50)]
    with tempfile.TemporaryDirectory() as tmp:
        chain = LocalChain(Path(tmp) / "chain", verify_helper=mode == "helper")
        pool = chain.app.verifier._pool
        if pool is not None:
            pool.wait_usable(60)
        nonces = dict.fromkeys(range(len(agents)), 0)
        submits = []
        for i in range(txs):
            a = i % len(agents)
            nonces[a] += 1
            submits.append(chain.builder(agents[a]).submit(
                nonces[a], f"bench-{i}", f"benchmark memory number {i} " * 4,
                tags=["bench"]))
        if mode == "warm":
            _check_all(chain, submits)
        submit_times = _timed_block(chain, submits)
        votes: list[bytes] = []
        per_validator = txs // len(chain.validator_keys)
        for key in chain.validator_keys:
            b = chain.builder(key)
            votes.extend(b.vote(n + 1, f"bench-{n}") for n in range(per_validator))
        if mode == "warm":
            _check_all(chain, votes)
        vote_times = _timed_block(chain, votes)
        chain.close()
    return {
        "submit_finalize_tx_per_s": round(txs / submit_times["finalize_s"]),
        "submit_commit_s": round(submit_times["commit_s"], 3),
        "vote_finalize_tx_per_s": round(len(votes) / vote_times["finalize_s"]),
        "vote_commit_s": round(vote_times["commit_s"], 3),
    }


def _check_all(chain: LocalChain, txs: list[bytes]) -> None:
    """CheckTx every tx first, as the mempool does, so FinalizeBlock finds them verified."""
    for tx in txs:
        assert chain.check(tx).code == 0


def _median(key: str, values: list[float]) -> float:
    middle = statistics.median(values)
    return round(middle) if key.endswith("_per_s") else round(middle, 3)


def run(txs: int, modes: list[str], rounds: int) -> dict[str, Any]:
    """Interleave the modes over `rounds`, each block bracketed by its own verify limit.

    The machine's speed drifts (other tenants, clock scaling) by 20% within a minute, so
    one limit for the whole run would skew whichever mode ran furthest from it. Each
    ratio divides a block's rate by the mean of the limits measured just before and just
    after it; the report gives each mode's median over the rounds.
    """
    samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
    limits: list[float] = []
    for _ in range(rounds):
        for mode in modes:
            before = raw_verify_rate(min(txs, 3000))
            result = run_mode(txs, mode)
            after = raw_verify_rate(min(txs, 3000))
            limit = (before + after) / 2
            limits.extend((before, after))
            for kind in ("submit", "vote"):
                result[f"{kind}_ratio_to_verify"] = result[f"{kind}_finalize_tx_per_s"] / limit
            samples[mode].append(result)
    out: dict[str, Any] = {
        "txs_per_block": txs, "rounds": rounds,
        "raw_ed25519_verify_per_s": round(statistics.median(limits)),
        "raw_ed25519_verify_per_s_min_max": [round(min(limits)), round(max(limits))],
    }
    for mode, results in samples.items():
        out[mode] = {key: _median(key, [r[key] for r in results]) for key in results[0]}
        out[mode]["submit_ratio_each_round"] = [round(r["submit_ratio_to_verify"], 3)
                                                for r in results]
        out[mode]["vote_ratio_each_round"] = [round(r["vote_ratio_to_verify"], 3)
                                              for r in results]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--txs", type=int, default=5000)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.txs, args.modes, args.rounds)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
