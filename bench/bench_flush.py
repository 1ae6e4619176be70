"""Commit cost: SQL projection flush per block vs block size, SQLite and PostgreSQL.

Blocks of N memory submits (100 → 10,000) are executed once in an in-process chain; the
resulting canonical changes are then flushed into a fresh projection of each backend and
timed. The per-tx flush cost should stay flat as blocks grow (one SQL transaction,
executemany batches).

    .venv/bin/python -m bench.bench_flush [--sizes 100 1000 10000] [--no-postgres]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from memledger.devtools.chain import LocalChain, seeded_key
from memledger.projection.writer import Projection


def _changes(tmp: Path, size: int) -> tuple[bytes, list[tuple[bytes, bytes | None]]]:
    chain = LocalChain(tmp / f"chain-{size}")
    agents = [seeded_key(f"flush-{i}") for i in range(50)]
    txs = [chain.builder(agents[i % 50]).submit(i // 50 + 1, f"f-{i}",
                                                  f"flush benchmark memory {i} " * 4,
                                                  tags=["bench", f"t{i % 7}"])
           for i in range(size)]
    resp = chain.finalize(txs)
    assert chain.app._pending is not None
    changes = chain.app._pending.overlay.changes()
    chain.close()
    return resp.app_hash, changes


def _time_flush(url: str, app_hash: bytes, changes: list[tuple[bytes, bytes | None]]) -> float:
    projection = Projection(url)
    try:
        start = time.perf_counter()
        projection.flush(1, app_hash, changes)
        return time.perf_counter() - start
    finally:
        projection.close()


def run(sizes: list[int], postgres: bool) -> dict[str, Any]:
    server = None
    if postgres:
        from memledger.devtools.postgres import create_database, start_postgres

        server = start_postgres()
    results: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            for size in sizes:
                app_hash, changes = _changes(tmp, size)
                row: dict[str, Any] = {"txs": size, "changed_keys": len(changes)}
                sqlite_s = _time_flush(f"sqlite:///{tmp / f'p-{size}.db'}", app_hash, changes)
                row["sqlite_ms"] = round(sqlite_s * 1000, 1)
                row["sqlite_us_per_tx"] = round(sqlite_s * 1e6 / size, 1)
                if server is not None:
                    name = f"flush_{size}"
                    url = create_database(server.url, name)
                    pg_s = _time_flush(url, app_hash, changes)
                    row["postgres_ms"] = round(pg_s * 1000, 1)
                    row["postgres_us_per_tx"] = round(pg_s * 1e6 / size, 1)
                results.append(row)
    finally:
        if server is not None:
            server.stop()
    return {"results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run(args.sizes, not args.no_postgres), indent=2))


if __name__ == "__main__":
    main()
