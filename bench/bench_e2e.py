"""End to end through real CometBFT: memledger vs CometBFT's built-in kvstore app.

The same load generator, the same consensus settings and the same machine, in one run:
N agents submit at a target rate for D seconds; we count txs included with code 0 and
the submit → inclusion latency. memledger txs are signed memory submits; kvstore txs are
`key=value` pairs with the same 200-byte content. Both sides' txs are built (memledger's
signed) and the RPC clients opened before the clock starts, so the generator's own setup
and signing do not compete with the nodes for CPU inside the measured window (see
node.loadgen). The ratio memledger/kvstore is the figure of merit
(target ≥ 0.8); absolute numbers on a shared 2-vCPU machine are noise.

Per node, the bench also reads each process's CPU seconds (utime + stime, /proc) from the
clock's start to the end of the settle, divided by committed txs: `app_cpu_us_per_tx`
is memledger's ABCI app process (its signature helper apart, `helper_cpu_us_per_tx`),
and `phases_us_per_tx` splits the app thread's CPU by ABCI method (the app's own
counters, `/debug/phase_cpu`). That cost does not depend on what else the machine runs,
which throughput and latency do. `cometbft_cpu_us_per_tx` is the node itself (for
kvstore, whose app runs inside it, the only figure).

    .venv/bin/python -m bench.bench_e2e [--nodes 1 4] [--rate 300] [--duration 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from memledger.consensus.wire.phases import PHASES_PATH
from memledger.daemon.cometbft import CometProcess
from memledger.devtools.comet import init_testnet
from memledger.devtools.loadgen import LoadGenerator, LoadReport
from memledger.devtools.proccpu import cpu_seconds, tree_cpu_seconds
from memledger.sdk.rpc import RpcClient
from memledger.sdk.txbuilder import TxBuilder
from memledger.testnet.net import Testnet


def _kv_tx(builder: TxBuilder, nonce: int, memory_id: str, content: str) -> bytes:
    return f"{memory_id}={content}".encode()


class _NodeCpu:
    """CPU seconds of one node's processes (and the app's phase counters) at an instant."""

    def __init__(self, rpc_url: str, cometbft: int, app: int | None) -> None:
        self.rpc_url, self.cometbft, self.app = rpc_url, cometbft, app

    def sample(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cometbft": cpu_seconds(self.cometbft)}
        if self.app is not None:
            tree = tree_cpu_seconds(self.app)
            out["app"] = tree.pop(self.app)
            out["helper"] = sum(tree.values())
            with RpcClient(self.rpc_url) as rpc:
                out["phases"] = json.loads(rpc.abci_query(PHASES_PATH).value or b"{}")
        return out


def _per_tx(nodes: list[_NodeCpu], before: list[dict[str, Any]],
            after: list[dict[str, Any]], committed: int) -> list[dict[str, Any]]:
    """Each node's CPU between two samples, in µs per committed tx."""
    per = max(committed, 1)
    out = []
    for node, b, a in zip(nodes, before, after, strict=True):
        row: dict[str, Any] = {"cometbft_cpu_us_per_tx": round(
            (a["cometbft"] - b["cometbft"]) * 1e6 / per, 1)}
        if node.app is not None:
            row["app_cpu_us_per_tx"] = round((a["app"] - b["app"]) * 1e6 / per, 1)
            row["helper_cpu_us_per_tx"] = round((a["helper"] - b["helper"]) * 1e6 / per, 1)
            was = b["phases"]
            row["phases_us_per_tx"] = {
                phase: round((v["cpu_ns"] - was.get(phase, {}).get("cpu_ns", 0)) / 1e3 / per,
                             1)
                for phase, v in a["phases"].items()}
            row["phase_calls_per_tx"] = {
                phase: round((v["calls"] - was.get(phase, {}).get("calls", 0)) / per, 3)
                for phase, v in a["phases"].items()}
        out.append(row)
    return out


def _load(urls: list[str], chain_id: str, rate: float, duration: float, agents: int,
          kvstore: bool, nodes: list[_NodeCpu]) -> dict[str, Any]:
    gen = LoadGenerator(urls, chain_id, rate=rate, agents=agents, content_bytes=200,
                        make_tx=_kv_tx if kvstore else None)
    # as LoadGenerator.run, with the CPU samples around the clocked window and the settle
    gen.start(prebuild=int(duration * rate / agents) + 2)
    before = [n.sample() for n in nodes]
    time.sleep(duration)
    report: LoadReport = gen.stop(settle=20)
    after = [n.sample() for n in nodes]
    data = report.to_json()
    data["committed_per_s"] = round(report.committed / duration, 1)
    data["cpu_per_node"] = _per_tx(nodes, before, after, report.committed)
    apps = [row["app_cpu_us_per_tx"] for row in data["cpu_per_node"]
            if "app_cpu_us_per_tx" in row]
    if apps:
        data["app_cpu_us_per_tx_mean"] = round(sum(apps) / len(apps), 1)
    return data


def run_memledger(nodes: int, rate: float, duration: float, agents: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        net = Testnet.create(Path(tmp) / "net", nodes, chain_id="bench-ml", voter=False)
        try:
            net.up(api=False, voter=False)
            cpus = []
            for node in net.nodes:
                procs = node.processes()
                cpus.append(_NodeCpu(node.rpc_url, procs["cometbft"][0], procs["app"][0]))
            return _load(net.rpc_urls(), net.chain_id, rate, duration, agents,
                         kvstore=False, nodes=cpus)
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
            cpus = [_NodeCpu(h.rpc_url, p.proc.pid, None) for h, p in zip(homes, procs,
                                                                           strict=True)
                    if p.proc is not None]
            return _load([h.rpc_url for h in homes], "bench-kv", rate, duration, agents,
                         kvstore=True, nodes=cpus)
        finally:
            for p in procs:
                p.stop()


def run(node_counts: list[int], rate: float, duration: float, agents: int,
        kvstore: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"rate": rate, "duration_s": duration, "agents": agents, "nets": {}}
    for n in node_counts:
        started = time.monotonic()
        ml = run_memledger(n, rate, duration, agents)
        if not kvstore:  # the per-node CPU figures alone
            out["nets"][f"{n}-node"] = {"memledger": ml,
                                        "wall_s": round(time.monotonic() - started, 1)}
            continue
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
    parser.add_argument("--no-kvstore", action="store_true",
                        help="memledger only (no ratio): for its per-node CPU figures")
    args = parser.parse_args()
    result = run(args.nodes, args.rate, args.duration, args.agents,
                 kvstore=not args.no_kvstore)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
