"""processTx / FinalizeBlock throughput vs the raw PyNaCl Ed25519 verify rate.

Both are measured in the same run on one core, so the ratio is meaningful on a shared
machine where absolute numbers are not. Also reports Commit time (projection flush +
LMDB) per block.

    .venv/bin/python -m bench.bench_engine [--txs 5000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from abci._pb import abci_pb2 as pb
from abci.tx import sign_bytes
from tests.support.chain import LocalChain, seeded_key


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


def run(txs: int) -> dict[str, Any]:
    agents = [seeded_key(f"bench-agent-{i}") for i in range(50)]
    with tempfile.TemporaryDirectory() as tmp:
        chain = LocalChain(Path(tmp) / "chain")
        nonces = dict.fromkeys(range(len(agents)), 0)
        submits = []
        for i in range(txs):
            a = i % len(agents)
            nonces[a] += 1
            submits.append(chain.builder(agents[a]).submit(
                nonces[a], f"bench-{i}", f"benchmark memory number {i} " * 4,
                tags=["bench"]))
        submit_times = _timed_block(chain, submits)
        votes = []
        per_validator = txs // len(chain.validator_keys)
        for key in chain.validator_keys:
            b = chain.builder(key)
            votes.extend(b.vote(n + 1, f"bench-{n}") for n in range(per_validator))
        vote_times = _timed_block(chain, votes)
        chain.close()
    verify = raw_verify_rate(txs)
    submit_rate = txs / submit_times["finalize_s"]
    vote_rate = len(votes) / vote_times["finalize_s"]
    return {
        "txs_per_block": txs,
        "raw_ed25519_verify_per_s": round(verify),
        "submit_finalize_tx_per_s": round(submit_rate),
        "submit_ratio_to_verify": round(submit_rate / verify, 3),
        "submit_commit_s": round(submit_times["commit_s"], 3),
        "vote_finalize_tx_per_s": round(vote_rate),
        "vote_ratio_to_verify": round(vote_rate / verify, 3),
        "vote_commit_s": round(vote_times["commit_s"], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--txs", type=int, default=5000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.txs)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
