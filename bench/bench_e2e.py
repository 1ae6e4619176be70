"""End to end through real CometBFT: memledger vs CometBFT's built-in kvstore app.

The same load generator, the same consensus settings and the same machine, in one run:
N agents submit at a target rate for D seconds; we count txs included with code 0 and
the submit → inclusion latency. memledger txs are signed memory submits; kvstore txs are
`key=value` pairs with the same 200-byte content. Both sides' txs are built (memledger's
signed) and the RPC clients opened before the clock starts, so the generator's own setup
and signing do not compete with the nodes for CPU inside the measured window (see
node.loadgen). The ratio memledger/kvstore is the figure of merit
(target ≥ 0.8); absolute numbers on a shared 2-vCPU machine are noise.

    .venv/bin/python -m bench.bench_e2e [--nodes 1 4] [--rate 300] [--duration 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from memledger.daemon.cometbft import CometProcess
from memledger.devtools.comet import init_testnet
from memledger.devtools.loadgen import LoadGenerator
from memledger.sdk.txbuilder import TxBuilder
from memledger.testnet.net import Testnet


def _kv_tx(builder: TxBuilder, nonce: int, memory_id: str, content: str) -> bytes:
    return f"{memory_id}={content}".encode()


def _load(urls: list[str], chain_id: str, rate: float, duration: float, agents: int,
          kvstore: bool) -> dict[str, Any]:
    gen = LoadGenerator(urls, chain_id, rate=rate, agents=agents, content_bytes=200,
                        make_tx=_kv_tx if kvstore else None)
    report = gen.run(duration, settle=20)
    data = report.to_json()
    data["committed_per_s"] = round(report.committed / duration, 1)
    return data


def run_memledger(nodes: int, rate: float, duration: float, agents: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        net = Testnet.create(Path(tmp) / "net", nodes, chain_id="bench-ml", voter=False)
        try:
            net.up(api=False, voter=False)
            return _load(net.rpc_urls(), net.chain_id, rate, duration, agents, kvstore=False)
        finally:
            net.down()
            for node in net.nodes:
                node.kill()


def run_kvstore(nodes: int, rate: float, duration: float, agents: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        homes = init_testnet(Path(tmp), ["kvstore"] * nodes, chain_id="bench-kv")
        procs = [CometProcess(h.home).start() for h in homes]
        try:
            for p in procs:
                p.wait_ready(60)
            procs[0].wait_for_height(2, 60)
            return _load([h.rpc_url for h in homes], "bench-kv", rate, duration, agents,
                         kvstore=True)
        finally:
            for p in procs:
                p.stop()


def run(node_counts: list[int], rate: float, duration: float, agents: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rate": rate, "duration_s": duration, "agents": agents, "nets": {}}
    for n in node_counts:
        started = time.monotonic()
        ml = run_memledger(n, rate, duration, agents)
        kv = run_kvstore(n, rate, duration, agents)
        out["nets"][f"{n}-node"] = {
            "memledger": ml,
            "kvstore": kv,
            "throughput_ratio": round(ml["committed_per_s"] / max(kv["committed_per_s"], 1e-9),
                                      3),
            "wall_s": round(time.monotonic() - started, 1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rate", type=float, default=300)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--agents", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.nodes, args.rate, args.duration, args.agents)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
