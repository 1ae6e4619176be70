"""Benchmark: verified reads, meaning proof size, client verify time and the node's cost.

Why: issue 12 sets goals for reads that carry proofs: a proof of at most 2 KB, client
verification of at most 2 ms per record once the header is trusted, and read throughput
with proofs at least 50% of the throughput without them. This measures, at each state
size (memories stored as `mem/<id>` + `memc/<id>`, ids shaped like real ones):

  * proof bytes (the two ABCI proof ops) for a memory record, its content, and an absent
    id, answered by the real `QueryService` from a real LMDB store;
  * the Query cost with and without `prove=true`, in process (no transport);
  * client time for `memledger.sdk.light.reads.verify_memory` (record + content proofs, and
    the served-vs-proven comparison) against a header already in the trusted store;
  * with `--node`: REST `GET /v1/memories/{id}` vs `?prove=true` requests/s on a real node
    (cometbft + app + API), with concurrent clients.

Prints JSON.

    python bench/bench_proofs.py --sizes 100000 1000000 --node
    python bench/bench_proofs.py --sizes 100000 1000000 --layouts 1 2
    python bench/bench_proofs.py --quick

`--layouts` picks the app-hash layouts to measure (docs/APP_HASH.md): 1 is app versions
1-5 (flat buckets), 2 is version 6 on (Merkle buckets), what new chains use.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memledger.consensus.query import QueryService  # noqa: E402
from memledger.consensus.store import codec  # noqa: E402
from memledger.consensus.store.state import CanonicalStore  # noqa: E402
from memledger.devtools.stats import percentile  # noqa: E402
from memledger.protocol import records  # noqa: E402
from memledger.protocol.pb import abci_pb2 as pb  # noqa: E402
from memledger.sdk.light.client import LightClient, PinnedRoot  # noqa: E402
from memledger.sdk.light.header import (  # noqa: E402
    BlockId,
    Commit,
    Header,
    LightBlock,
    ValidatorSet,
)
from memledger.sdk.light.reads import proven_memory, verify_memory  # noqa: E402
from memledger.sdk.light.store import TrustedStore  # noqa: E402

WORDS = ["cache", "build", "deploy", "index", "vector", "ledger", "node", "agent", "query",
         "proof", "header", "commit", "domain", "scope", "memory", "vote", "quorum"]


def memory_id(i: int) -> str:
    return "m-" + hashlib.sha256(f"bench-{i}".encode()).hexdigest()[:32]


def _items(n: int, seed: int) -> Iterator[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    for i in range(n):
        mid = memory_id(i)
        content = " ".join(rng.choices(WORDS, k=rng.randint(12, 40)))
        rec = {"id": mid, "domain": "general", "author": "ab" * 32, "type": "fact",
               "content_hash": hashlib.sha256(content.encode()).hexdigest(),
               "confidence_ppm": 900_000, "tags": ["bench"], "status": "committed",
               "submitted_height": 1 + i // 5000, "submitted_time_ns": 1_780_000_000 * 10**9,
               "decided_height": 2 + i // 5000, "votes": {}, "ballot": None,
               "history": [[1, "proposed"], [2, "committed"]], "cocommit": None,
               "tx": hashlib.sha256(f"tx-{i}".encode()).hexdigest()}
        yield records.memory_key(mid), codec.encode(rec)
        yield records.content_key(mid), content.encode()


def build_store(path: Path, n: int, seed: int, layout: int = 2
                ) -> tuple[CanonicalStore, float]:
    """A committed store of n memories, loaded in sorted chunks (the bulk path)."""
    store = CanonicalStore(str(path), map_size=16 << 30)
    started = time.perf_counter()
    items = sorted(_items(n, seed))
    store.bulk_load(iter(items), layout=layout)
    overlay = store.begin_block()  # one (empty) committed block: proofs speak for height 1
    store.commit(overlay, 1, overlay.app_hash(), 6 if layout == 2 else 5)
    return store, time.perf_counter() - started


def _doc(path: str, resp: pb.ResponseQuery) -> dict[str, Any]:
    """The REST proven-record shape, as memledger/api/proving.py serves it."""
    b64 = base64.b64encode
    return {"path": path, "key": b64(resp.key).decode(),
            "value": b64(resp.value).decode() if resp.code == 0 else None,
            "height": resp.height,
            "proof_ops": [{"type": o.type, "key": b64(o.key).decode(),
                           "data": b64(o.data).decode()} for o in resp.proof_ops.ops]}


class _NoProvider:
    def light_block(self, height: int) -> LightBlock:
        raise AssertionError("the header must already be trusted")

    def latest_height(self) -> int:
        return 0


def trusted_client(app_hash: bytes, height: int) -> LightClient:
    """A light client whose store already holds header `height` with this app hash."""
    header = Header(11, 1, "bench", height, 1_780_000_000, 0, BlockId(b"", 0, b""),
                    b"", b"", b"", b"", b"", app_hash, b"", b"", b"")
    lb = LightBlock(header, Commit(height, 0, BlockId(header.hash(), 1, b""), ()),
                    ValidatorSet(()))
    store = TrustedStore()
    store.save(lb)
    return LightClient(_NoProvider(), PinnedRoot(height, header.hash()), chain_id="bench",
                       store=store)


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50) * 1000, 4),
            "p99_ms": round(percentile(values, 99) * 1000, 4),
            "mean_ms": round(sum(values) / len(values) * 1000, 4)}


def _sizes(values: list[int]) -> dict[str, int]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "max": max(values)}


def measure_store(n: int, samples: int, seed: int, workdir: Path, layout: int = 2
                  ) -> dict[str, Any]:
    store, load_s = build_store(workdir / f"state-{n}-{layout}", n, seed, layout)
    try:
        svc = QueryService(store)
        height = store.last_height
        lc = trusted_client(store.last_app_hash, height + 1)
        rng = random.Random(seed)
        ids = [memory_id(rng.randrange(n)) for _ in range(samples)]
        rec_bytes, content_bytes, absent_bytes = [], [], []
        q_plain, q_prove, verify_s = [], [], []
        for i, mid in enumerate(ids):
            data = mid.encode()
            t0 = time.perf_counter()
            svc.query(pb.RequestQuery(path="/memory", data=data))
            t1 = time.perf_counter()
            rec = svc.query(pb.RequestQuery(path="/memory", data=data, prove=True))
            t2 = time.perf_counter()
            q_plain.append(t1 - t0)
            q_prove.append(t2 - t1)
            content = svc.query(pb.RequestQuery(path="/content", data=data, prove=True))
            rec_bytes.append(sum(len(o.data) for o in rec.proof_ops.ops))
            content_bytes.append(sum(len(o.data) for o in content.proof_ops.ops))
            absent = svc.query(pb.RequestQuery(path="/memory", data=f"absent-{i}".encode(),
                                               prove=True))
            absent_bytes.append(sum(len(o.data) for o in absent.proof_ops.ops))
            proof = {"records": [_doc("/memory", rec), _doc("/content", content)]}
            served = proven_memory(json.loads(rec.value), content.value)
            t3 = time.perf_counter()
            verify_memory(lc, mid, served, proof)
            verify_s.append(time.perf_counter() - t3)
        return {
            "memories": n, "state_keys": 2 * n, "hash_layout": layout,
            "load_s": round(load_s, 1),
            "proof_bytes": {"memory_record": _sizes(rec_bytes),
                            "content": _sizes(content_bytes),
                            "absent": _sizes(absent_bytes)},
            "query_in_process": {"plain": _ms(q_plain), "prove": _ms(q_prove),
                                 "prove_over_plain": round(
                                     sum(q_prove) / sum(q_plain), 2)},
            "client_verify_per_memory": _ms(verify_s),
            "samples": samples,
        }
    finally:
        store.close()


# --- a real node ---------------------------------------------------------------------------


async def _hammer(url: str, paths: list[str], seconds: float, concurrency: int) -> float:
    import httpx

    done = 0
    deadline = time.monotonic() + seconds

    async def worker(k: int) -> None:
        nonlocal done
        rng = random.Random(k)
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            while time.monotonic() < deadline:
                resp = await http.get(rng.choice(paths))
                resp.raise_for_status()
                done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return done / (time.monotonic() - started)


#: memories submitted through the SDK and read back; a larger node is filled in bulk first
READ_SET = 300


def measure_node(memories: int, seconds: float, concurrency: int,
                 workdir: Path) -> dict[str, Any]:
    """REST reads with and without proofs on a real single node (memledger start)."""
    from memledger.devtools.node import NodeRunner, wait_api_ready
    from memledger.sdk import Client
    from memledger.sdk.keys import Agent

    runner = NodeRunner(workdir / "node", chain_id="bench-proofs", voter=False)
    config_file = runner.home / "config.json"  # measure the server, not its rate limiter
    config = json.loads(config_file.read_text())
    config.setdefault("extra", {})["api_rate_limit_per_s"] = "0"
    config_file.write_text(json.dumps(config, indent=1))
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        ids = []
        fill_s = 0.0
        if memories > READ_SET:  # the bulk through real blocks; reads go to the last ones
            from memledger.devtools.fill import fill

            fill_s = fill([runner.rpc_url], "bench-proofs", memories - READ_SET,
                          label="bulk").seconds
        with Client(runner.api_url, key=Agent.generate()) as ml:
            for i in range(min(memories, READ_SET)):
                receipt = ml.submit(None, f"bench proof memory {i} " + " ".join(WORDS),
                                    wait="sync" if i < min(memories, READ_SET) - 1
                                    else "commit")
                assert receipt.memory_id
                ids.append(receipt.memory_id)
            root = None
            from memledger.sdk.light import GenesisRoot

            root = GenesisRoot.from_file(runner.home / "cometbft" / "config" / "genesis.json")
        plain = [f"/v1/memories/{m}" for m in ids]
        proven = [p + "?prove=true" for p in plain]
        rps_plain = asyncio.run(_hammer(runner.api_url, plain, seconds, concurrency))
        rps_prove = asyncio.run(_hammer(runner.api_url, proven, seconds, concurrency))
        # The SDK end to end: fetch with proofs + verify (headers cached after the first).
        with Client(runner.api_url, trust=root) as ml:
            ml.get(ids[0], verify=True)
            t0 = time.perf_counter()
            k = 0
            while time.perf_counter() - t0 < seconds:
                ml.get(ids[k % len(ids)], verify=True)
                k += 1
            sdk_verified = k / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            k = 0
            while time.perf_counter() - t0 < seconds:
                ml.get(ids[k % len(ids)])
                k += 1
            sdk_plain = k / (time.perf_counter() - t0)
        return {"memories": memories, "fill_s": round(fill_s, 1), "read_set": len(ids),
                "concurrency": concurrency, "seconds": seconds,
                "rest_get_rps": round(rps_plain, 1), "rest_get_prove_rps": round(rps_prove, 1),
                "prove_over_plain": round(rps_prove / rps_plain, 3),
                "sdk_sequential_get_rps": round(sdk_plain, 1),
                "sdk_sequential_get_verify_rps": round(sdk_verified, 1)}
    finally:
        runner.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--node", action="store_true", help="also measure REST on a real node")
    ap.add_argument("--node-memories", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="small sizes, for CI")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--layouts", type=int, nargs="+", choices=[1, 2], default=[2])
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.samples, args.node_memories, args.seconds = [5000], 200, 30, 2.0
    workdir = Path(tempfile.mkdtemp(prefix="bench-proofs-"))
    try:
        out: dict[str, Any] = {"stores": [
            measure_store(n, args.samples, args.seed, workdir, layout)
            for n in args.sizes for layout in args.layouts]}
        if args.node:
            out["node"] = measure_node(args.node_memories, args.seconds, args.concurrency,
                                       workdir)
        print(json.dumps(out, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
