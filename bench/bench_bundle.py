"""Benchmark: verifiable export and offline verification, per memory.

Why: issue 38 asks for export and verify rates per memory (`memledger export`,
`memledger verify-bundle`; docs/EXPORT.md). On a real node (cometbft + app + API, no
embedder, no voter) holding `--memories` memories (filled by pre-signed batched
broadcasts), this times:

  * `Client.export` of all of them (one snapshot, one header, streamed over REST);
  * `verify_bundle` of the file against the pinned header (offline, one core);
  * the limit, in the same run: `Client.get(id, verify=True)` of `--reads` memories one
    by one (each proof fetched and verified, headers from the trusted store), the
    per-memory cost of proving memories without a bundle.

Prints JSON.

    python bench/bench_bundle.py --memories 10000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memledger.devtools.fill import fill  # noqa: E402
from memledger.devtools.node import NodeRunner, wait_api_ready  # noqa: E402
from memledger.sdk import Client  # noqa: E402
from memledger.sdk.bundle import verify_bundle  # noqa: E402
from memledger.sdk.light import GenesisRoot, PinnedRoot  # noqa: E402


def run(memories: int, reads: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        node = NodeRunner(Path(tmp) / "home", chain_id="bench-bundle")
        config = node.config
        config["embedder"] = "none"
        (node.home / "config.json").write_text(json.dumps(config))
        node.start()
        try:
            wait_api_ready(node.api_url)
            t0 = time.perf_counter()
            fill([node.rpc_url], "bench-bundle", memories, agents=8, label="bb")
            fill_s = time.perf_counter() - t0
            bundle = Path(tmp) / "all.jsonl"
            with Client(node.api_url) as ml:
                t0 = time.perf_counter()
                count = ml.export(bundle)
                export_s = time.perf_counter() - t0
            height = json.loads(bundle.read_bytes().split(b"\n", 1)[0])["height"] + 1
            with node.rpc() as rpc:
                block_hash = rpc.call("commit", {"height": str(height)})[
                    "signed_header"]["commit"]["block_id"]["hash"]
            size = bundle.stat().st_size
            t0 = time.perf_counter()
            summary = verify_bundle(bundle, PinnedRoot(height, bytes.fromhex(block_hash)))
            verify_s = time.perf_counter() - t0
            assert summary.count == count
            ids = [f"bb-{a}-{n}" for a in range(8) for n in range(1, reads // 8 + 1)]
            root = GenesisRoot.from_file(node.home / "cometbft" / "config" / "genesis.json")
            with Client(node.api_url, trust=root) as ml:
                ml.get(ids[0], verify=True)  # the header path, once
                t0 = time.perf_counter()
                for mid in ids:
                    ml.get(mid, verify=True)
                read_s = time.perf_counter() - t0
        finally:
            node.stop()
    per_read_ms = read_s / len(ids) * 1000
    return {
        "memories": count, "fill_s": round(fill_s, 1),
        "bundle_bytes_per_memory": round(size / count) if count else None,
        "export_s": round(export_s, 2), "export_per_s": round(count / export_s),
        "verify_s": round(verify_s, 2), "verify_per_s": round(count / verify_s),
        "verified_get_ms": round(per_read_ms, 2), "verified_gets": len(ids),
        "export_plus_verify_ms_per_memory": round((export_s + verify_s) / count * 1000, 3),
        "ratio_verified_get_to_bundle": round(per_read_ms / ((export_s + verify_s)
                                                              / count * 1000), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--reads", type=int, default=200)
    args = ap.parse_args()
    print(json.dumps(run(args.memories, args.reads), indent=2))


if __name__ == "__main__":
    main()
