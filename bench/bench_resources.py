"""Resource use: disk bytes per memory (LMDB + SQL projection) and app RSS at N memories.

Memories are written through the real block path (FinalizeBlock + Commit of blocks of
5,000 submits) in one process, so the figures include app-hash tree, hash index,
projection rows and the full-text index.

    .venv/bin/python -m bench.bench_resources [--memories 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_read import disk_bytes
from memledger.devtools.chain import LocalChain, seeded_key

BLOCK = 5000


def run(memories: int) -> dict[str, Any]:
    agents = [seeded_key(f"res-{i}") for i in range(100)]
    nonces = [0] * len(agents)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "chain"
        chain = LocalChain(home)
        started = time.perf_counter()
        written = 0
        while written < memories:
            txs = []
            for i in range(written, min(written + BLOCK, memories)):
                a = i % len(agents)
                nonces[a] += 1
                txs.append(chain.builder(agents[a]).submit(
                    nonces[a], f"r-{i}", f"resource benchmark memory {i}: " + "lorem " * 20,
                    tags=["bench", f"t{i % 13}"]))
            results = chain.block(txs)
            assert all(r.code == 0 for r in results)
            written += len(txs)
        elapsed = time.perf_counter() - started
        chain.close()
        state = disk_bytes(home / "state")
        projection = sum(p.stat().st_size for p in home.glob("projection.db*"))
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "memories": memories,
        "content_bytes_each": len("resource benchmark memory 0: " + "lorem " * 20),
        "lmdb_bytes": state,
        "projection_bytes": projection,
        "lmdb_bytes_per_memory": round(state / memories),
        "projection_bytes_per_memory": round(projection / memories),
        "max_rss_mib": round(rss_kib / 1024, 1),
        "write_memories_per_s": round(memories / elapsed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    args = parser.parse_args()
    print(json.dumps(run(args.memories), indent=2))


if __name__ == "__main__":
    main()
