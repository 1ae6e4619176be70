"""Benchmark: read-side latency of the REST API's projection queries.

Why: reads must stay fast as the ledger grows, on both projection backends. This fills a
projection through `Projection.flush` with synthetic blocks (5,000 memories each, Zipf
vocabulary, realistic record shape), then measures

  * full-text search latency (p50/p99, the exact query GET /v1/memories?q= runs, limit
    20), split into common-word and rare-word queries, on SQLite (FTS5) and PostgreSQL
    (tsvector + GIN);
  * REST GET /v1/memories/{id} requests/s and latency with a concurrent asyncio client
    against uvicorn running the real app in a subprocess.

Prints JSON. Sizes: 100k by default, `--quick` 10k (CI), `--million` adds 1M.
PostgreSQL: `--pg-url URL`, else $MEMLEDGER_PG_URL, else a private throwaway server
(memledger/devtools/postgres.py); `--no-postgres` skips it.

    .venv/bin/python bench/bench_read.py --quick
    .venv/bin/python bench/bench_read.py --dir /tmp/br --reuse --no-postgres   # re-measure
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memledger.consensus.store import codec  # noqa: E402
from memledger.consensus.store.state import CanonicalStore  # noqa: E402
from memledger.devtools.stats import percentile  # noqa: E402
from memledger.projection.writer import Projection  # noqa: E402
from memledger.protocol import records  # noqa: E402
from memledger.sdk.waiting import wait_until  # noqa: E402

BLOCK = 5_000  # memories per synthetic block (the engine and resource benches use 5,000 too)
SYLLABLES = ["ka", "lo", "mi", "ru", "te", "sa", "no", "vi", "de", "po", "zu", "fe", "ga", "hi"]
VOCAB = [a + b for a in SYLLABLES for b in SYLLABLES] + \
    [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES[:6]]
WEIGHTS = [1 / (rank + 1) for rank in range(len(VOCAB))]
AUTHORS = [hashlib.sha256(f"author-{i}".encode()).hexdigest() for i in range(64)]
DOMAINS = ["general", "ops", "research", "team-a", "team-b"]
STATUSES = ["committed"] * 8 + ["proposed", "challenged"]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(12, 40)))


def _record(i: int, height: int, rng: random.Random, content: str) -> dict[str, Any]:
    status = rng.choice(STATUSES)
    return {
        "id": f"mem-{i:08d}", "domain": rng.choice(DOMAINS), "author": rng.choice(AUTHORS),
        "type": "fact", "content_hash": hashlib.sha256(content.encode()).hexdigest(),
        "confidence_ppm": 900_000, "tags": sorted(set(rng.choices(VOCAB[:40], k=2))),
        "status": status, "submitted_height": height,
        "submitted_time_ns": 1_780_000_000_000_000_000 + height * 10**9,
        "decided_height": None if status == "proposed" else height + 1, "votes": {},
        "ballot": None, "history": [[height, "proposed"]], "cocommit": None,
        "tx": hashlib.sha256(f"tx-{i}".encode()).hexdigest(),
    }


def _blocks(start: int, total: int, seed: int) -> Iterator[tuple[int, list[tuple[bytes, bytes]]]]:
    rng = random.Random(seed + start)
    for first in range(start, total, BLOCK):
        height = first // BLOCK + 1
        changes: list[tuple[bytes, bytes]] = []
        for i in range(first, min(first + BLOCK, total)):
            content = _text(rng)
            rec = _record(i, height, rng, content)
            changes.append((records.memory_key(rec["id"]), codec.encode(rec)))
            changes.append((records.content_key(rec["id"]), content.encode()))
        changes.sort()
        yield height, changes


def populate(proj: Projection, have: int, total: int, seed: int,
             store: CanonicalStore | None = None) -> float:
    """Flush blocks until the projection holds `total` memories; returns seconds.

    With `store`, each block takes the node's whole Commit path instead: the canonical
    overlay and its app hash, the projection flush with that hash, then the LMDB commit.
    """
    start = time.perf_counter()
    for height, changes in _blocks(have, total, seed):
        if store is None:
            proj.flush(height, hashlib.sha256(b"%d" % height).digest(), changes)
            continue
        overlay = store.begin_block()
        for key, value in changes:
            overlay.put(key, value)
        app_hash = overlay.app_hash()
        proj.flush(height, app_hash, changes)
        store.commit(overlay, height, app_hash, 1)
    return time.perf_counter() - start


def disk_bytes(path: Path) -> int:
    """Bytes of every file under `path` (the resource benches' disk figure)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def resource_use(root: Path, sqlite_path: Path, memories: int, seconds: float) -> dict[str, Any]:
    """Disk bytes per memory of LMDB and the SQLite projection, and this process's RSS."""
    lmdb_bytes = disk_bytes(root / "state")
    projection_bytes = sum(p.stat().st_size for p in sqlite_path.parent.glob(
        sqlite_path.name + "*"))
    return {
        "memories": memories, "lmdb_bytes": lmdb_bytes, "projection_bytes": projection_bytes,
        "lmdb_bytes_per_memory": round(lmdb_bytes / memories),
        "projection_bytes_per_memory": round(projection_bytes / memories),
        "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "commit_path_memories_per_s": round(memories / max(seconds, 1e-9)),
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(percentile(ms, 50), 3), "p99_ms": round(percentile(ms, 99), 3),
            "mean_ms": round(statistics.fmean(ms), 3), "queries": len(ms)}


def search_latency(db_url: str, queries: int, seed: int) -> dict[str, Any]:
    """Time the API's own search query (node.api.queries) through a read-only engine."""
    from memledger.api.db import readonly_engine
    from memledger.api.queries import MemoryFilter, list_memories

    engine = readonly_engine(db_url)
    rng = random.Random(seed)
    common, rare = VOCAB[:30], VOCAB[-400:]
    out: dict[str, Any] = {}
    with engine.connect() as conn:
        list_memories(conn, MemoryFilter(q=VOCAB[0]), 20, None)  # warm caches
        for label, words, n_words in (("common_1_word", common, 1),
                                      ("rare_1_word", rare, 1),
                                      ("mixed_2_words", common + rare, 2)):
            samples, hits = [], 0
            for _ in range(queries):
                q = " ".join(rng.sample(words, n_words))
                t0 = time.perf_counter()
                page, _ = list_memories(conn, MemoryFilter(q=q), 20, None)
                samples.append(time.perf_counter() - t0)
                hits += len(page)
            out[label] = {**_summary(samples), "mean_hits": round(hits / queries, 2)}
    engine.dispose()
    return out


# ----------------------------------------------------------------------------- REST
def serve(db_url: str, port: int) -> None:
    """Subprocess entry: uvicorn with the real app factory (RPC points nowhere)."""
    import uvicorn

    from memledger.api import ApiSettings, create_app

    # Capacity is measured, so the per-client rate limit is off for this server.
    app = create_app(ApiSettings(db_url=db_url, rpc_url="http://127.0.0.1:9",
                                 rate_limit_per_s=0))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _get_loop(host: str, port: int, paths: list[str], deadline: float, rng: random.Random,
                    latencies: list[float], statuses: list[int]) -> None:
    """One keep-alive HTTP/1.1 connection issuing GETs back to back.

    Hand-rolled on asyncio streams so the load generator, which shares the CPUs with the
    server, costs far less per request than a full HTTP client library would.
    """
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline:
            path = rng.choice(paths)
            t0 = time.perf_counter()
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t0)
            statuses.append(int(head.split(b" ", 2)[1]))
    finally:
        writer.close()


async def _hammer(url: str, paths: list[str], seconds: float, concurrency: int,
                  seed: int) -> dict[str, Any]:
    host, _, port = url.removeprefix("http://").partition(":")
    latencies: list[float] = []
    statuses: list[int] = []
    start = time.perf_counter()
    await asyncio.gather(*(
        _get_loop(host, int(port), paths, start + seconds, random.Random(seed + i), latencies,
                  statuses) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"requests": len(latencies), "errors": sum(1 for s in statuses if s != 200),
            "requests_per_s": round(len(latencies) / elapsed, 1),
            "concurrency": concurrency, **_summary(latencies)}


def rest_get_by_id(db_url: str, total: int, seconds: float, concurrency: int,
                   seed: int) -> dict[str, Any]:
    import httpx

    from memledger.devtools.ports import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", db_url, "--port", str(port)],
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    url = f"http://127.0.0.1:{port}"
    try:
        def healthy() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"bench API server exited with {proc.returncode}")
            return httpx.get(f"{url}/health", timeout=2).status_code == 200

        wait_until(healthy, 60, 0.1, what="the bench API server", ignore=(httpx.HTTPError,),
                   error=RuntimeError)
        paths = [f"/v1/memories/mem-{i:08d}"
                 for i in random.Random(seed).sample(range(total), 2000)]
        asyncio.run(_hammer(url, paths, 1.0, concurrency, seed))  # warm-up
        result = asyncio.run(_hammer(url, paths, seconds, concurrency, seed + 1))
        baseline = asyncio.run(_hammer(url, ["/health"], min(seconds, 3.0), concurrency, seed))
        result["health_requests_per_s"] = baseline["requests_per_s"]  # server+client ceiling
        return result
    finally:
        proc.terminate()
        proc.wait(15)


# ----------------------------------------------------------------------------- driver
@dataclass
class Backend:
    """One projection under test and how far it has been filled."""

    name: str
    url: str
    canonical: Path | None = None  # fill through the Commit path, LMDB store under here
    have: int = 0
    loaded_s: float = 0.0
    results: dict[str, Any] = field(default_factory=dict)


def _fill_in_background(backend: Backend, size: int, seed: int) -> subprocess.Popen[str]:
    """Populate a backend in another process (it has its own server; SQLite is busy here)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--populate-into", backend.url, "--from", str(backend.have),
         "--to", str(size), "--seed", str(seed)], stdout=subprocess.PIPE, text=True)


def _fill_here(backend: Backend, size: int, seed: int) -> float:
    proj = Projection(backend.url)
    store = None if backend.canonical is None else CanonicalStore(
        str(backend.canonical / "state"))
    try:
        return populate(proj, backend.have, size, seed, store)
    finally:
        proj.close()
        if store is not None:
            store.close()


def bench_backends(backends: list[Backend], sizes: list[int], args: argparse.Namespace) -> None:
    """For each size: fill every backend (the first here, the rest alongside), then measure.

    Filling runs concurrently to fit the 1M step in the suite's time budget; measuring
    never overlaps with anything.
    """
    for backend in backends:
        proj = Projection(backend.url)  # creates the schema before any concurrent writer
        with proj.engine.connect() as conn:  # --reuse: continue from what is there
            backend.have = int(conn.exec_driver_sql("SELECT count(*) FROM memories")
                               .scalar_one())
        proj.close()
    for size in sizes:
        started = {b.name: _fill_in_background(b, size, args.seed)
                   for b in backends[1:] if b.have < size}
        filled = {backends[0].name: _fill_here(backends[0], size, args.seed)
                  if backends[0].have < size else 0.0}
        for name, proc in started.items():
            out, _ = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"populating {name} failed ({proc.returncode})")
            filled[name] = float(out.strip().splitlines()[-1])
        for backend in backends:
            load_s = filled.get(backend.name, 0.0)
            added = size - min(backend.have, size)
            backend.have = max(backend.have, size)
            backend.loaded_s += load_s
            entry: dict[str, Any] = {
                "populate_s": round(load_s, 1),
                "populate_memories_per_s": round(added / max(load_s, 1e-9)),
                "populated_concurrently": len(started) > 0,
            }
            if backend.canonical is not None:
                entry["resources"] = resource_use(
                    backend.canonical, Path(backend.url.removeprefix("sqlite:///")), size,
                    backend.loaded_s)
            entry["search"] = search_latency(backend.url, args.queries, args.seed)
            if not args.no_rest:
                entry["rest_get_by_id"] = rest_get_by_id(backend.url, size, args.seconds,
                                                         args.concurrency, args.seed)
            backend.results[str(size)] = entry
            print(f"# {backend.name} {size}: done", file=sys.stderr, flush=True)


def _pg_url(args: argparse.Namespace) -> tuple[str | None, Any]:
    if args.no_postgres:
        return None, None
    url = args.pg_url or os.environ.get("MEMLEDGER_PG_URL")
    if url:
        return url, None
    from memledger.devtools.postgres import start_postgres

    server = start_postgres("bench_read")
    return server.url, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k memories (CI)")
    parser.add_argument("--million", action="store_true", help="also 1M memories")
    parser.add_argument("--queries", type=int, default=300, help="queries per kind")
    parser.add_argument("--seconds", type=float, default=5.0, help="REST load duration")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where SQLite files go")
    parser.add_argument("--pg-url", default=None)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-rest", action="store_true")
    parser.add_argument("--canonical", action="store_true",
                        help="fill SQLite through the node's Commit path (LMDB + app hash "
                             "too) and report disk bytes and RSS per size")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the projection in --dir (and --pg-url) from a previous run")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--populate-into", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--from", dest="start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--to", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.populate_into:  # child of bench_backends: fill, print the seconds it took
        proj = Projection(args.populate_into)
        try:
            print(populate(proj, args.start, args.to, args.seed))
        finally:
            proj.close()
        return
    sizes = [10_000] if args.quick else [100_000] + ([1_000_000] if args.million else [])
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-read-"))
    root.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "benchmark": "bench_read",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version, "platform": platform.platform(),
                    "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "params": {"sizes": sizes, "block": BLOCK, "queries_per_kind": args.queries,
                   "page_limit": 20, "rest_seconds": args.seconds,
                   "rest_concurrency": args.concurrency},
        "backends": {},
    }
    sqlite_path = root / "projection.db"
    if not args.reuse:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{sqlite_path}{suffix}").unlink(missing_ok=True)
    canonical = None
    if args.canonical:
        if args.reuse:
            parser.error("--canonical builds a fresh canonical store; drop --reuse")
        canonical = root
        shutil.rmtree(root / "state", ignore_errors=True)
    backends = [Backend("sqlite", f"sqlite:///{sqlite_path}", canonical)]
    pg_url, server = _pg_url(args)
    try:
        if pg_url:
            from sqlalchemy import create_engine, text

            engine = create_engine(pg_url)
            with engine.begin() as conn:
                report["machine"]["postgres"] = conn.execute(text("show server_version")
                                                             ).scalar_one()
                if not args.reuse:
                    conn.execute(text("drop schema public cascade; create schema public"))
            engine.dispose()
            backends.append(Backend("postgresql", pg_url))
        bench_backends(backends, sizes, args)
    finally:
        if server is not None:
            server.stop()
    report["backends"] = {b.name: b.results for b in backends}
    report["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
