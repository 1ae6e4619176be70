"""The app's CPU per tx without sockets: CheckTx, recheck, FinalizeBlock and Commit in turn.

Why: a 4-validator net on two shared cores (bench_e2e) shows what a node costs per tx,
but not what inside the app to cut. Here one in-process app (memledger.devtools.chain,
the ABCI methods called as CometBFT calls them) runs a steady mempool: each round a new
batch arrives through CheckTx, the oldest batch becomes a block, and what is left is
rechecked, as after every Commit. Each phase's process CPU time per tx is reported,
beside the Ed25519 verifications alone (libsodium, the same txs), which every node must
do once per tx and so bound how cheap CheckTx can get. `--gc default` runs the loop at
the interpreter's default collector thresholds instead of the app process's.

    .venv/bin/python -m bench.bench_app_loop [--rounds 20] [--batch 300] [--gc tuned]
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from memledger.consensus.gate.envelope import verify_signature
from memledger.consensus.gate.sigverify import envelope_triple
from memledger.consensus.main import tune_gc
from memledger.consensus.versions import LATEST_APP_VERSION
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.protocol.pb import abci_pb2 as pb

AGENTS = 32


def _batches(chain: LocalChain, rounds: int, size: int) -> list[list[bytes]]:
    builders = [chain.builder(seeded_key(f"app-loop-{a}")) for a in range(AGENTS)]
    nonces = [0] * AGENTS
    out = []
    for _ in range(rounds + 2):
        batch = []
        for k in range(size):
            a = k % AGENTS
            nonces[a] += 1
            batch.append(builders[a].submit(nonces[a], f"loop-{a}-{nonces[a]}",
                                            "load test memory " + "x" * 180))
        out.append(batch)
    return out


def run(rounds: int, size: int, tuned_gc: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        chain = LocalChain(Path(tmp) / "chain", app_state={"app_version": LATEST_APP_VERSION})
        try:
            batches = _batches(chain, rounds, size)
            app = chain.app
            if tuned_gc:
                tune_gc()
            spent = dict.fromkeys(("check_tx", "recheck_tx", "finalize_block", "commit"), 0.0)
            mempool = batches[0] + batches[1]
            for tx in mempool:
                app.check_tx(pb.RequestCheckTx(tx=tx))
            for r in range(2, rounds + 2):
                block, mempool = mempool[:size], mempool[size:]
                t = time.process_time()
                chain.finalize(block)
                spent["finalize_block"] += time.process_time() - t
                t = time.process_time()
                app.commit(pb.RequestCommit())
                chain.height += 1
                spent["commit"] += time.process_time() - t
                t = time.process_time()
                for tx in mempool:
                    app.check_tx(pb.RequestCheckTx(tx=tx, type=pb.RECHECK))
                spent["recheck_tx"] += time.process_time() - t
                t = time.process_time()
                for tx in batches[r]:
                    if app.check_tx(pb.RequestCheckTx(tx=tx)).code:
                        raise RuntimeError("a loop tx was refused")
                spent["check_tx"] += time.process_time() - t
                mempool += batches[r]
            triples = [envelope_triple(tx) for tx in batches[-1]]
            t = time.process_time()
            for triple in triples:
                assert triple is not None and verify_signature(*triple)
            verify = (time.process_time() - t) / len(triples)
        finally:
            gc.unfreeze()
            chain.close()
    txs = rounds * size
    per_tx = {k: round(v * 1e6 / txs, 1) for k, v in spent.items()}
    return {"rounds": rounds, "batch": size, "gc": "tuned" if tuned_gc else "default",
            "us_per_tx": per_tx, "total_us_per_tx": round(sum(per_tx.values()), 1),
            "ed25519_verify_us": round(verify * 1e6, 1),
            "rechecks_skipped": getattr(getattr(app, "rechecks", None), "skipped", None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=300)
    parser.add_argument("--gc", choices=["tuned", "default"], default="tuned")
    args = parser.parse_args()
    print(json.dumps(run(args.rounds, args.batch, args.gc == "tuned"), indent=2))


if __name__ == "__main__":
    main()
