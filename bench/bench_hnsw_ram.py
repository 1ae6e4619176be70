"""RSS of the vector index's HNSW (usearch, int8, cosine) at N vectors, loaded in a fresh
process the way a node loads its saved index. Random unit vectors: RAM depends on the
count, the dimension and the connectivity, not on what the vectors mean.

    .venv/bin/python -m bench.bench_hnsw_ram 1000000 128 6
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def _index(dim: int, connectivity: int):  # type: ignore[no-untyped-def]
    from usearch.index import Index

    from memledger.recall.index import DTYPE, EXPANSION_ADD, EXPANSION_SEARCH

    return Index(ndim=dim, metric="cos", dtype=DTYPE, connectivity=connectivity,
                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> None:
    n, dim, connectivity = (int(a) for a in sys.argv[1:4])
    if len(sys.argv) > 4:  # the fresh process: load and measure
        before = _rss()
        index = _index(dim, connectivity)
        index.load(sys.argv[4])
        grown = _rss() - before
        print(json.dumps({"n": n, "dim": dim, "connectivity": connectivity,
                          "rss_bytes": grown, "rss_bytes_per_vector": round(grown / n)}))
        return
    rng = np.random.default_rng(5)
    data = rng.standard_normal((n, dim), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    index = _index(dim, connectivity)
    started = time.perf_counter()
    index.add(np.arange(n), data, threads=0)
    print(f"build {time.perf_counter() - started:.1f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index.usearch")
        index.save(path)
        del index, data
        subprocess.run([sys.executable, "-m", "bench.bench_hnsw_ram", *sys.argv[1:4], path],
                       check=True)


if __name__ == "__main__":
    main()
