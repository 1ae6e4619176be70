"""State sync against block replay: how long until a new node serves.

Two parts, each with its limit measured in the same run:

1. **Real CometBFT** (`--net N`): a one-validator net is filled with N memories through
   blocks; then one new node joins by state sync and another by replaying every block
   (blocksync). Figure: seconds from start until each is caught up and its REST API is
   ready; ratio replay / state sync. The source keeps snapshotting while the chain runs
   idle, and the block interval during snapshot writes is set against the interval
   outside them (the snapshot's cost to block time).
2. **In process at scale** (`--sizes ...`, e.g. 1M): a canonical store of N synthetic
   memories; time to write its snapshot, and to restore it through the ABCI methods
   (chunk checks, LMDB load, tree, projection rebuild). The limit: the block path's
   memories/s measured here on signed submits (FinalizeBlock + Commit, no consensus), so
   "replay" at N is N / that rate, a lower bound on real replay time.

    .venv/bin/python -m bench.bench_statesync [--net 100000] [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.bench_read import _blocks
from memledger.consensus.store import codec
from memledger.consensus.store.snapshots import SnapshotStore
from memledger.consensus.store.state import CanonicalStore
from memledger.consensus.store.statesync import StateSync
from memledger.consensus.versions import LATEST_APP_VERSION, hash_layout
from memledger.devtools.fill import fill
from memledger.devtools.stats import percentile
from memledger.projection.writer import Projection
from memledger.protocol import records
from memledger.protocol.pb import abci_pb2 as pb
from memledger.sdk.waiting import wait_until
from memledger.testnet.net import Testnet, TestnetNode

SNAPSHOT_INTERVAL = 50


# ----------------------------------------------------------------------------- real net
def _ready(node: TestnetNode, target_height: int, timeout: float) -> float:
    """Seconds until the node is at `target_height` and its REST API answers /ready."""
    started = time.monotonic()

    def ready() -> bool:
        height = node.height()
        return height is not None and height >= target_height and \
            httpx.get(f"{node.api_url}/ready", timeout=2).status_code == 200

    wait_until(ready, timeout, 0.2, what=f"{node.name} at height {target_height}, REST ready",
               ignore=(httpx.HTTPError,))
    return time.monotonic() - started


def _block_times(node: TestnetNode, low: int, high: int) -> dict[int, float]:
    """Height -> seconds since the previous block, from header times."""
    from datetime import datetime

    times: dict[int, float] = {}
    with node.rpc(30) as rpc:
        for top in range(high, low - 1, -20):
            metas = rpc.call("blockchain", {"minHeight": str(max(low, top - 19)),
                                            "maxHeight": str(top)})["block_metas"]
            for meta in metas:
                stamp = meta["header"]["time"]
                base, _, frac = stamp.rstrip("Z").partition(".")
                t = datetime.fromisoformat(base).timestamp() + float(f"0.{frac or 0}")
                times[int(meta["header"]["height"])] = t
    return {h: times[h] - times[h - 1] for h in sorted(times) if h - 1 in times}


def _snapshot_windows(app_log: Path) -> list[tuple[int, float]]:
    """(height, seconds it took) of each snapshot the app logged."""
    out = []
    for line in app_log.read_text().splitlines():
        found = re.search(r"snapshot at height (\d+): .* in ([0-9.]+)s", line)
        if found:
            out.append((int(found.group(1)), float(found.group(2))))
    return out


def bench_net(memories: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        net = Testnet.create(Path(tmp) / "net", 1, chain_id="bench-sync", voter=False)
        source = net.node(0)
        config = source.node_home.load()
        config.snapshot_interval, config.snapshot_keep = SNAPSHOT_INTERVAL, 20
        source.node_home.save(config)
        try:
            net.up(api=False, voter=False)
            report = fill([source.rpc_url], net.chain_id, memories, agents=16)
            filled_at = source.height() or 0
            # Idle chain: snapshots keep being taken; wait for two after the fill.
            net.wait_height(filled_at + 2 * SNAPSHOT_INTERVAL + 5, timeout=600)
            net.add_node(state_sync=True)
            synced = net.nodes[-1]
            net.add_node()
            replayed = net.nodes[-1]
            target = source.height() or 0
            synced.start(api=True, voter=False, wait=False)
            sync_s = _ready(synced, target, 1800)
            synced.stop()  # one joiner at a time: they share the two cores
            replayed.start(api=True, voter=False, wait=False)
            replay_s = _ready(replayed, target, 3600)
            top = source.height() or 0
            intervals = _block_times(source, filled_at + 1, top)
            windows = _snapshot_windows(source.home / "logs" / "app.log")
            typical = percentile(list(intervals.values()), 50) if intervals else 1.0
            during = {h for start, secs in windows if start > filled_at
                      for h in range(start + 1, start + 2 + math.ceil(secs / typical))}
            inside = [v for h, v in intervals.items() if h in during]
            outside = [v for h, v in intervals.items() if h not in during]
            mean_in = sum(inside) / len(inside) if inside else 0.0
            mean_out = sum(outside) / len(outside) if outside else 0.0
            return {
                "memories": memories, "fill_per_s": round(report.per_s, 1),
                "height": target, "state_sync_ready_s": round(sync_s, 1),
                "replay_ready_s": round(replay_s, 1),
                "replay_over_state_sync": round(replay_s / sync_s, 2),
                "snapshot_write_s": [s for h, s in windows if h > filled_at],
                "block_interval_s_during_snapshot": round(mean_in, 3),
                "block_interval_s_otherwise": round(mean_out, 3),
                "block_time_ratio": round(mean_in / mean_out, 3) if mean_out else None,
            }
        finally:
            net.down()
            for node in net.nodes:
                node.kill()


# ----------------------------------------------------------------------------- in process
def block_path_rate(memories: int = 10_000) -> float:
    """Memories/s through FinalizeBlock + Commit with real signed submits (replay limit)."""
    from memledger.devtools.chain import LocalChain, seeded_key  # the in-process driver

    with tempfile.TemporaryDirectory() as tmp:
        chain = LocalChain(Path(tmp) / "c", app_state={"app_version": LATEST_APP_VERSION})
        keys = [seeded_key(f"bench-agent-{i}") for i in range(10)]
        per_block = 1000
        blocks = []
        for b in range(memories // per_block):
            txs = []
            for i in range(per_block):
                key = keys[i % len(keys)]
                n = b * per_block + i
                txs.append(chain.builder(key).submit(n + 1, f"r-{n}", f"replay memory {n} "
                                                     + "x" * 60))
            blocks.append(txs)
        started = time.perf_counter()
        for txs in blocks:
            chain.block(txs)
        seconds = time.perf_counter() - started
        chain.close()
    return memories / seconds


def bench_restore(size: int, replay_rate: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = CanonicalStore(str(root / "src"))
        # A chain at the current app version: its version record names it, and its app
        # hash uses that version's layout (a restore rebuilds the tree under it).
        version = LATEST_APP_VERSION
        record = (records.APP_VERSION, codec.encode({"version": version, "name": "bench",
                                                    "since": 1}))
        source.bulk_load(itertools.chain(
            (kv for _, changes in _blocks(0, size, 7) for kv in changes), [record]),
            layout=hash_layout(version))
        overlay = source.begin_block()
        source.commit(overlay, 1, overlay.app_hash(), version)
        snaps = SnapshotStore(root / "snaps")
        started = time.perf_counter()
        with source.snapshot() as view:
            info = snaps.write(view)
        write_s = time.perf_counter() - started
        source.close()

        target = CanonicalStore(str(root / "dst"))
        projection = Projection(f"sqlite:///{root / 'dst.db'}")
        sync = StateSync(target, projection, None)
        started = time.perf_counter()
        offer = sync.offer_snapshot(pb.RequestOfferSnapshot(snapshot=pb.Snapshot(
            height=info.height, format=info.format, chunks=info.chunks, hash=info.hash,
            metadata=info.metadata()), app_hash=info.app_hash))
        assert offer.result == pb.ResponseOfferSnapshot.ACCEPT
        results = [sync.apply_snapshot_chunk(pb.RequestApplySnapshotChunk(
            index=i, chunk=snaps.load_chunk(info.height, info.format, i), sender="bench"))
            .result for i in range(info.chunks)]
        restore_s = time.perf_counter() - started
        assert results == [pb.ResponseApplySnapshotChunk.ACCEPT] * info.chunks
        assert target.last_app_hash == info.app_hash
        target.close()
        projection.close()
        replay_s = size / replay_rate
        return {"memories": size, "records": info.records, "chunks": info.chunks,
                "snapshot_write_s": round(write_s, 1),
                "restore_with_projection_s": round(restore_s, 1),
                "replay_estimate_s": round(replay_s, 1),
                "replay_over_restore": round(replay_s / restore_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--net", type=int, default=100_000,
                        help="memories on the real-CometBFT net (0 skips it)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--replay-sample", type=int, default=10_000)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    if args.sizes:
        rate = block_path_rate(args.replay_sample)
        out["block_path_memories_per_s"] = round(rate, 1)
        out["restore"] = {str(n): bench_restore(n, rate) for n in args.sizes}
    if args.net:
        out["net"] = bench_net(args.net)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
