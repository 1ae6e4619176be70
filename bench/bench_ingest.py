"""Ingest (issue 37): does the vector index keep up with a node committing memories at a
sustained rate, and how far behind does it fall?

One real node (cometbft, the ABCI app, the REST process with its recall followers, the
node's default embedder unless `--embedder`) takes `--rate` signed memory submits a
second for `--duration` seconds through CometBFT's RPC `broadcast_tx_sync`, paced from
`--writers` connections, each writer with its own key. The txs are signed before the
clock starts. Their contents are the long-conversation set's turns (15 tokens on
average, bench/data/conversation_eval.json), each with a serial number so no two are
alike.

Every second the bench reads how many memories the projection holds (its SQLite file,
read-only) and how many vectors the index holds (`/v1/status`), and reports:

- committed/s over the window, against the offered rate;
- the index lag in memories (projection - vectors) and in blocks (`embedder.lag`): the
  maximum, the value at the end of the window, and its slope over the window's second
  half (memories/s: 0 means bounded, > 0 that it grows for as long as the load lasts);
- the follower's rate (vectors added per second) and how long after the load stopped
  the index caught up with the projection;
- the covered lag: memories in neither the index nor its static tail
  (memledger.recall.tail), in memories and blocks (`embedder.covered_lag`): how far
  behind recall by meaning is;
- probes: every `--probe-every` seconds under load, a memory the index has not reached
  and that is not among the newest 1,000 is searched for by its own text
  (`mode=semantic`, limit 10): found or not, and each probe's latency.

    .venv/bin/python -m bench.bench_ingest --rate 1000 --duration 300 \
        --out bench/results/ingest_1000.json
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from nacl.signing import SigningKey

from memledger.devtools.node import NodeRunner, wait_api_ready
from memledger.sdk.rpc_pool import PostPool
from memledger.sdk.txbuilder import TxBuilder
from memledger.sqlite_uri import readonly_uri

CHAIN = "memledger-bench-ingest"
TURNS = Path(__file__).resolve().parent / "data" / "conversation_eval.json"
#: the longest the bench waits for the index to catch up after the load
CATCH_UP_LIMIT_S = 900.0


def signed_txs(writers: int, total: int) -> list[list[bytes]]:
    """`total` memory submits dealt round-robin to `writers` keys, nonces from 1."""
    turns = [m["content"] for m in json.loads(TURNS.read_text())["memories"]]
    builders = [TxBuilder(SigningKey(f"ingest-{w}".encode().ljust(32, b".")[:32]), CHAIN)
                for w in range(writers)]
    out: list[list[bytes]] = [[] for _ in range(writers)]
    for i in range(total):
        w = i % writers
        out[w].append(builders[w].submit(len(out[w]) + 1, f"ingest-{i:07d}",
                                         f"{turns[i % len(turns)]} (note {i})"))
    return out


def _rpc_body(tx: bytes) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "broadcast_tx_sync",
                       "params": {"tx": base64.b64encode(tx).decode()}}).encode()


async def _send(rpc_url: str, txs: list[list[bytes]], rate: float) -> dict[str, int]:
    """Writer w sends its k-th tx no earlier than start + (k * writers + w) / rate."""
    writers = len(txs)
    counts = {"accepted": 0, "refused": 0}
    start = time.perf_counter()

    async def writer(w: int) -> None:
        pool = PostPool(rpc_url + "/", timeout=120, keep=1)
        try:
            for k, tx in enumerate(txs[w]):
                due = start + (k * writers + w) / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                status, data = await pool.post(_rpc_body(tx))
                ok = status == 200 and json.loads(data).get("result", {}).get("code") == 0
                counts["accepted" if ok else "refused"] += 1
        finally:
            await pool.aclose()

    await asyncio.gather(*(writer(w) for w in range(writers)))
    return counts


class Sampler:
    """Once a second: memories in the projection, vectors in the index, blocks behind."""

    def __init__(self, db_path: Path, api_url: str) -> None:
        self.db = sqlite3.connect(readonly_uri(db_path), uri=True, check_same_thread=False)
        self.api = httpx.Client(base_url=api_url, timeout=10)
        self.samples: list[dict[str, float]] = []
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> dict[str, float]:
        memories = self.db.execute("SELECT count(*) FROM memories").fetchone()[0]
        recall = self.api.get("/v1/status").json().get("embedder") or {}
        tail = recall.get("tail") or {}
        row = {"t": round(time.perf_counter() - self.t0, 2), "memories": memories,
               "vectors": int(recall.get("vectors", 0)),
               "tail": int(tail.get("memories", 0)),
               "lag_blocks": int(recall.get("lag", 0)),
               "covered_lag_blocks": int(recall.get("covered_lag", recall.get("lag", 0)))}
        row["lag"] = row["memories"] - row["vectors"]
        row["covered_lag"] = max(0, row["lag"] - row["tail"])
        self.samples.append(row)
        return row

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def close(self) -> None:
        self.db.close()
        self.api.close()


def _turn(content: str) -> str:
    """A submitted content without its serial number (see `signed_txs`)."""
    return content.rsplit(" (note ", 1)[0]


class Prober:
    """Searches, under load, for memories the index has not reached, by their own text."""

    def __init__(self, db_path: Path, api_url: str, every_s: float) -> None:
        self.db = sqlite3.connect(readonly_uri(db_path), uri=True, check_same_thread=False)
        self.api = httpx.Client(base_url=api_url, timeout=30)
        self.every_s = every_s
        self.probes: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def probe(self) -> None:
        watermark = int((self.api.get("/v1/status").json().get("embedder") or {})
                        .get("indexed_height", 0))
        row = self.db.execute(
            "SELECT id, content, submitted_height FROM memories WHERE rowid = "
            "(SELECT max(rowid) FROM memories) - 1000").fetchone()
        if row is None or int(row[2]) <= watermark:
            return  # not behind the index by that much: nothing to probe
        started = time.perf_counter()
        resp = self.api.get("/v1/memories", params={
            "q": row[1], "mode": "semantic", "limit": 10,
            "status": ["proposed", "committed"]})
        took_ms = (time.perf_counter() - started) * 1000
        items = resp.json().get("items", []) if resp.is_success else []
        turn = _turn(row[1])  # the set's turns repeat, each with its own serial number
        self.probes.append({"id": row[0], "found": row[0] in [m["id"] for m in items],
                            "same_turn": any(_turn(m["content"]) == turn for m in items),
                            "ms": round(took_ms, 1), "status": resp.status_code})

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.probe()
            except httpx.HTTPError as exc:
                self.probes.append({"error": str(exc)})

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.db.close()
        self.api.close()

    def summary(self) -> dict[str, Any]:
        done = [p for p in self.probes if "found" in p]
        times = sorted(p["ms"] for p in done)
        return {"probes": len(self.probes), "probes_found": sum(p["found"] for p in done),
                "probes_found_same_turn": sum(p["same_turn"] for p in done),
                "probe_ms_p50": times[len(times) // 2] if times else None,
                "probe_ms_p99": times[min(len(times) - 1, int(len(times) * 0.99))]
                if times else None}


def _slope(rows: list[dict[str, float]]) -> float:
    """Least-squares slope of lag over time (memories/s)."""
    if len(rows) < 2:
        return 0.0
    ts, ys = [r["t"] for r in rows], [r["lag"] for r in rows]
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / den if den else 0.0


def run(rate: float, duration: float, writers: int, embedder: str | None,
        probe_every_s: float = 2.0) -> dict[str, Any]:
    total = int(rate * duration)
    t0 = time.perf_counter()
    txs = signed_txs(writers, total)
    signing_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        runner = NodeRunner(Path(tmp) / "home", chain_id=CHAIN)
        config = json.loads((runner.home / "config.json").read_text())
        config.setdefault("extra", {})["api_rate_limit_per_s"] = "0"
        if embedder is not None:
            config["embedder"] = embedder
        (runner.home / "config.json").write_text(json.dumps(config))
        runner.start()
        try:
            wait_api_ready(runner.api_url)
            db = runner.home / "data" / "projection.db"
            sampler = Sampler(db, runner.api_url)
            prober = Prober(db, runner.api_url, probe_every_s)
            with sampler:
                started = time.perf_counter()
                with prober:
                    counts = asyncio.run(_send(runner.rpc_url, txs, rate))
                sent_s = time.perf_counter() - started
                window = list(sampler.samples)  # those taken while the load ran
                end = sampler.sample()
                caught_up_s = None
                while time.perf_counter() - started - sent_s < CATCH_UP_LIMIT_S:
                    row = sampler.sample()
                    if row["memories"] >= counts["accepted"] and row["lag"] <= 0:
                        caught_up_s = round(time.perf_counter() - started - sent_s, 1)
                        break
                    time.sleep(1.0)
            status = httpx.get(runner.api_url + "/v1/status", timeout=10).json()
            sampler.close()
        finally:
            runner.stop()
    half = window[len(window) // 2:]
    first, last = window[0], end
    return {
        "offered_per_s": rate, "duration_s": duration, "writers": writers,
        "embedder": (status.get("embedder") or {}).get("name"),
        "signing_s": round(signing_s, 1), "send_s": round(sent_s, 1), **counts,
        "committed_per_s": round((last["memories"] - first["memories"]) / sent_s, 1),
        "follower_per_s": round((last["vectors"] - first["vectors"]) / sent_s, 1),
        "lag_max": max(r["lag"] for r in window + [end]),
        "lag_blocks_max": max(r["lag_blocks"] for r in window + [end]),
        "lag_at_end": end["lag"],
        "lag_slope_second_half_per_s": round(_slope(half), 1),
        "covered_lag_max": max(r["covered_lag"] for r in window + [end]),
        "covered_lag_blocks_max": max(r["covered_lag_blocks"] for r in window + [end]),
        "tail_max": max(r["tail"] for r in window + [end]),
        **prober.summary(),
        "caught_up_s_after_load": caught_up_s,
        "samples": sampler.samples,
        "probe_log": prober.probes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--duration", type=float, default=300)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--embedder", help="the node's embedder (default: the node's default)")
    parser.add_argument("--probe-every", type=float, default=2.0,
                        help="seconds between searches for a memory the index lacks")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = run(args.rate, args.duration, args.writers, args.embedder, args.probe_every)
    summary = {k: v for k, v in result.items() if k not in ("samples", "probe_log")}
    print(json.dumps(summary, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
