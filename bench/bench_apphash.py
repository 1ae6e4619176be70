"""Benchmark: app-hash and commit cost per block versus state size.

Why: the app hash must cost O(changes * log n), not O(n). This populates stores of 10k,
100k and 1M keys (bulk-loaded in big write transactions), then runs blocks of 1,000 changed
keys (updates, inserts, deletes) and prints JSON with per-block times for
``overlay.app_hash()`` and ``store.commit()`` at each size (``commit_cpu``: the CPU the
commit took, which the fsync's wait is not).

    .venv/bin/python bench/bench_apphash.py [--quick] [--blocks 8] [--dir /tmp/x] [--layout 1]

Layout 2 (app version 6 on, docs/APP_HASH.md) is the default. Under it each size is
bulk-loaded under layout 1 first and moved by one empty block, as an upgrade to v6 moves
a chain: that block's time is `move_to_layout_2_s`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memledger.consensus.store import codec  # noqa: E402
from memledger.consensus.store.state import CanonicalStore  # noqa: E402

FULL_SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)


def _key(i: int) -> bytes:
    return b"mem/%012d" % i


def _value(i: int, version: int) -> bytes:
    """A ~120-byte canonical record, roughly the shape the app stores."""
    return codec.encode(
        {"id": i, "owner": f"agent-{i % 977}", "v": version, "text": "x" * 48, "tags": []}
    )


def _items(n: int) -> Iterator[tuple[bytes, bytes]]:
    for i in range(n):
        yield _key(i), _value(i, 0)


def _stats(samples: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {
        "median_ms": round(statistics.median(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(min(ms), 3),
        "max_ms": round(max(ms), 3),
    }


def run_size(root: Path, n: int, blocks: int, changes: int, seed: int, layout: int = 2
             ) -> dict[str, Any]:
    path = root / f"state-{n}"
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    store = CanonicalStore(str(path), map_size=16 << 30)
    store.bulk_load(_items(n))
    populate = time.perf_counter() - t0
    moved: dict[str, float] = {}
    if layout == 2:
        t0 = time.perf_counter()
        overlay = store.begin_block()
        overlay.set_layout(2)
        store.commit(overlay, 0, overlay.app_hash(), 6)
        moved["move_to_layout_2_s"] = round(time.perf_counter() - t0, 2)
    rng = random.Random(seed)
    next_new = n
    t_hash: list[float] = []
    t_commit: list[float] = []
    cpu_commit: list[float] = []
    effective: list[int] = []
    try:
        for b in range(blocks):
            overlay = store.begin_block()
            n_del = changes // 20
            n_ins = changes * 3 // 20
            picked = rng.sample(range(n), changes - n_ins)
            for i in picked[:n_del]:
                overlay.delete(_key(i))
            for i in picked[n_del:]:
                overlay.put(_key(i), _value(i, b + 1))
            for _ in range(n_ins):
                overlay.put(_key(next_new), _value(next_new, b + 1))
                next_new += 1
            t1 = time.perf_counter()
            app_hash = overlay.app_hash()
            t2, c2 = time.perf_counter(), time.process_time()
            store.commit(overlay, b + 1, app_hash, 6 if layout == 2 else 5)
            t3, c3 = time.perf_counter(), time.process_time()
            cpu_commit.append(c3 - c2)
            t_hash.append(t2 - t1)
            t_commit.append(t3 - t2)
            effective.append(len(overlay.changes()))
        t4 = time.perf_counter()
        store.close()
        reopened = CanonicalStore(str(path), map_size=16 << 30)
        reopen = time.perf_counter() - t4
        assert reopened.last_app_hash == app_hash
        reopened.close()
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    return {
        "state_keys": n,
        "hash_layout": layout,
        **moved,
        "blocks": blocks,
        "changes_per_block": changes,
        "effective_changes_min": min(effective),
        "populate_s": round(populate, 2),
        "reopen_s": round(reopen, 3),
        "app_hash": _stats(t_hash),
        "commit": _stats(t_commit),
        "commit_cpu": _stats(cpu_commit),  # this process's CPU: the writes, not the fsync
    }


def _ratio(results: list[dict[str, Any]], what: str) -> float:
    """Largest-state median over smallest-state median: ~1 means independent of n."""
    return round(results[-1][what]["median_ms"] / results[0][what]["median_ms"], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k and 100k keys only")
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--layout", type=int, choices=[1, 2], default=2)
    args = ap.parse_args()
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-apphash-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        results = [run_size(root, n, args.blocks, args.changes, args.seed, args.layout)
                   for n in sizes]
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    growth = {
        "state_size_ratio": sizes[-1] // sizes[0],
        "app_hash_median_ratio": _ratio(results, "app_hash"),
        "commit_median_ratio": _ratio(results, "commit"),
    }
    print(json.dumps({"results": results, "growth": growth}, indent=2))


if __name__ == "__main__":
    main()
