"""How much of the exact top 10 the vector index's HNSW finds, per graph connectivity and
search width, against its RAM: the measurement behind the index's defaults
(memledger/recall/index.py, BENCHMARKS.md section 9).

The memories are bench_read's synthetic Zipf texts embedded by the default embedder, and
the queries are other such texts. They are a hard case for an approximate index: word
soups sit at nearly equal distances, so the true neighbours are near-ties. "exact int8"
is the same search done exhaustively over the quantised vectors: the most any graph can
reach with int8 storage.

    .venv/bin/python -m bench.bench_hnsw_recall 200000 --out bench/results/hnsw_recall.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.bench_read import _text
from memledger.recall.embedder import DEFAULT_EMBEDDER, make_embedder
from memledger.recall.index import DTYPE, EXPANSION_ADD

QUERIES = 300
TOP = 10


def _overlap(found: np.ndarray, exact: np.ndarray) -> float:
    hits = sum(len(set(f.tolist()) & set(e.tolist())) for f, e in zip(found, exact, strict=True))
    return hits / (len(exact) * TOP)


def measure(n: int, graphs: list[tuple[int, int]]) -> dict[str, Any]:
    from usearch.index import Index

    embedder = make_embedder(DEFAULT_EMBEDDER)
    assert embedder is not None
    rng = random.Random(3)
    vectors = embedder.embed([_text(rng) for _ in range(n)]).astype(np.float32)
    queries = embedder.embed([_text(random.Random(99 + i)) for i in range(QUERIES)])
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, :TOP]
    out: dict[str, Any] = {"n": n, "embedder": embedder.name, "dim": embedder.dim,
                           "queries": QUERIES, "top": TOP, "runs": []}
    for connectivity, width in graphs:
        index = Index(ndim=embedder.dim, metric="cos", dtype=DTYPE, connectivity=connectivity,
                      expansion_add=EXPANSION_ADD, expansion_search=width)
        started = time.perf_counter()
        index.add(np.arange(n), vectors, threads=0)
        build = time.perf_counter() - started
        exhaustive = index.search(queries, TOP, exact=True).keys
        found, took = [], []
        for query in queries:
            t0 = time.perf_counter()
            found.append(index.search(query, TOP).keys)
            took.append(time.perf_counter() - t0)
        took.sort()
        out["runs"].append({
            "connectivity": connectivity, "expansion_search": width,
            "recall_at_10": round(_overlap(np.array(found), exact), 3),
            "exact_int8_recall_at_10": round(_overlap(exhaustive, exact), 3),
            "search_ms_p50": round(took[len(took) // 2] * 1000, 3),
            "build_per_s": round(n / build)})
        print(json.dumps(out["runs"][-1]), file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--graphs", nargs="+", default=["6:96", "6:200", "8:200", "16:96"],
                        help="connectivity:expansion_search pairs")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    graphs = [(int(c), int(w)) for c, w in (g.split(":") for g in args.graphs)]
    result = measure(args.n, graphs)
    result["command"] = "python -m bench.bench_hnsw_recall " + " ".join(sys.argv[1:])
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
