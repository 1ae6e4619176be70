"""Soak: a 4-validator net under steady load, its RSS, open fds and disk sampled over time.

Issue 40 asks whether anything grows without bound. A local test net (memledger.testnet,
every node a real `memledger start`: app, REST API, auto-voter and cometbft) takes
``--rate`` signed memory submits per second from the benches' load generator while the
voters vote on them; every ``--every`` seconds each node's processes are sampled from
/proc (RSS and open fds, per process and summed) and its home's disk use is split into
CometBFT data, the canonical store, the projection (SQL + recall indexes), snapshots and
logs. Each series gets a least-squares slope per hour, over the whole run and over its
second half (past the warm-up); the JSON and PNG plots go to bench/results/.

Block pruning is off unless ``--retain-blocks N`` sets every node's `retain_blocks`
(memledger.consensus.retain: keep the last N blocks, never above the oldest snapshot;
a test net snapshots every 25 blocks and keeps 10). CometBFT's data is split further
(block store, state store, tx index, consensus WAL) and each node's lowest block
(`/status` earliest_block_height) is sampled, to show what pruning bounds and what it
does not. See BENCHMARKS.md §16.

    .venv/bin/python -m bench.bench_soak [--duration 1800] [--rate 50] [--every 10]
        [--retain-blocks N] [--label pruning_on]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memledger.devtools.loadgen import LoadGenerator
from memledger.testnet.net import Testnet, TestnetNode

RESULTS = Path(__file__).resolve().parent / "results"
MIB = 1024 * 1024
ROLES = ("supervisor", "app", "api", "reads", "voter", "cometbft")
CMT_PARTS = ("cmt_blockstore", "cmt_state", "cmt_tx_index", "cmt_wal")


# --- pure helpers (tests/unit/tooling/test_bench_soak.py) -----------------------------

def slope_per_hour(ts: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys against ts (seconds), in units of y per hour."""
    n = len(ts)
    if n < 2 or n != len(ys):
        return 0.0
    mt = sum(ts) / n
    my = sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    if var == 0:
        return 0.0
    cov = sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True))
    return cov / var * 3600.0


def slopes(ts: Sequence[float], ys: Sequence[float]) -> dict[str, float]:
    """Slope per hour over the whole series and over its second half (past warm-up)."""
    half = len(ts) // 2
    return {"full": round(slope_per_hour(ts, ys), 3),
            "second_half": round(slope_per_hour(ts[half:], ys[half:]), 3)}


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (VmRSS), 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def fd_count(pid: int) -> int:
    """Open file descriptors of one process, 0 if it is gone or not ours."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def disk_bytes(*paths: Path) -> int:
    """Bytes allocated on disk (st_blocks, like du) under the given files or dirs."""
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_blocks * 512
            continue
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass  # removed between walk and stat (compaction, snapshot pruning)
    return total


def disk_split(home: Path) -> dict[str, float]:
    """MiB of a node home by part; "total" is the whole home."""
    data = home / "data"
    cmt = home / "cometbft" / "data"
    parts = {
        "cometbft": disk_bytes(cmt),
        "cmt_blockstore": disk_bytes(cmt / "blockstore.db"),
        "cmt_state": disk_bytes(cmt / "state.db"),
        "cmt_tx_index": disk_bytes(cmt / "tx_index.db"),
        "cmt_wal": disk_bytes(cmt / "cs.wal"),
        "canonical": disk_bytes(data / "state"),
        "projection": disk_bytes(*sorted(data.glob("projection.db*")), data / "recall"),
        "snapshots": disk_bytes(data / "snapshots"),
        "logs": disk_bytes(home / "logs"),
        "total": disk_bytes(home),
    }
    return {k: round(v / MIB, 3) for k, v in parts.items()}


def process_sample(pids: dict[str, list[int]]) -> tuple[dict[str, float], dict[str, int]]:
    """(RSS MiB, open fds) per role and summed over the node's processes."""
    rss: dict[str, float] = {}
    fds: dict[str, int] = {}
    for role in ROLES:
        found = pids.get(role, [])
        rss[role] = round(sum(rss_bytes(p) for p in found) / MIB, 2)
        fds[role] = sum(fd_count(p) for p in found)
    rss["total"] = round(sum(rss[r] for r in ROLES), 2)
    fds["total"] = sum(fds[r] for r in ROLES)
    return rss, fds


def node_sample(node: TestnetNode) -> dict[str, Any]:
    rss, fds = process_sample(node.processes())
    return {"rss_mib": rss, "fds": fds, "disk_mib": disk_split(node.home)}


def earliest_height(node: TestnetNode) -> int | None:
    """The node's lowest block (`/status` earliest_block_height); None if it is down."""
    try:
        with node.rpc(5) as rpc:
            return int(rpc.status()["sync_info"]["earliest_block_height"])
    except Exception:  # noqa: BLE001 - a busy node misses one sample, not the run
        return None


def set_retain_blocks(net: Testnet, retain_blocks: int) -> None:
    for node in net.nodes:
        config = node.node_home.load()
        config.retain_blocks = retain_blocks
        node.node_home.save(config)


def series(samples: list[dict[str, Any]], node: str, metric: str, key: str) -> list[float]:
    return [float(s["nodes"][node][metric][key]) for s in samples]


def all_slopes(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """node -> metric -> part -> {"full", "second_half"} slopes per hour."""
    ts = [float(s["t"]) for s in samples]
    out: dict[str, dict[str, Any]] = {}
    for node in samples[0]["nodes"] if samples else []:
        out[node] = {}
        for metric, keys in samples[0]["nodes"][node].items():
            out[node][metric] = {k: slopes(ts, series(samples, node, metric, k))
                                 for k in keys}
    return out


# --- the run ---------------------------------------------------------------------------

def soak(duration: float, rate: float, every: float, agents: int,
         retain_blocks: int = 0, log: Any = sys.stderr) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        net = Testnet.create(Path(tmp) / "net", 4, chain_id="bench-soak")
        set_retain_blocks(net, retain_blocks)
        try:
            net.up(api=True, voter=True, timeout=180)
            net.wait_height(3, timeout=120)
            gen = LoadGenerator(net.rpc_urls(), net.chain_id, rate=rate, agents=agents,
                                content_bytes=200)
            gen.start(prebuild=int(duration * rate / agents) + 2)
            started = time.monotonic()
            samples: list[dict[str, Any]] = []
            while True:
                t = time.monotonic() - started
                heights = net.heights()
                sample: dict[str, Any] = {
                    "t": round(t, 1),
                    "height": max((h for h in heights.values() if h is not None), default=0),
                    "committed": len(gen.committed()),
                    "load1": round(os.getloadavg()[0], 2),
                    "earliest": {n.name: earliest_height(n) for n in net},
                    "nodes": {n.name: node_sample(n) for n in net},
                }
                samples.append(sample)
                print(f"t={t:6.0f}s h={sample['height']} committed={sample['committed']} "
                      f"load={sample['load1']} rss="
                      + ",".join(f"{v['rss_mib']['total']:.0f}"
                                 for v in sample["nodes"].values())
                      + " fds=" + ",".join(str(v["fds"]["total"])
                                           for v in sample["nodes"].values())
                      + " disk=" + ",".join(f"{v['disk_mib']['total']:.1f}"
                                            for v in sample["nodes"].values())
                      + " earliest=" + ",".join(str(h) for h in sample["earliest"].values()),
                      file=log, flush=True)
                if t >= duration:
                    break
                next_at = started + min(len(samples) * every, duration)
                time.sleep(max(0.0, next_at - time.monotonic()))
            report = gen.stop(settle=20).to_json()
            check = net.check()
        finally:
            net.down()
            for node in net.nodes:
                node.kill()
    committed = [s["committed"] for s in samples]
    ts = [s["t"] for s in samples]
    half = len(ts) // 2
    loads = [s["load1"] for s in samples]
    return {
        "nodes": 4, "rate": rate, "duration_s": duration, "every_s": every,
        "agents": agents, "retain_blocks": retain_blocks,
        "pruning": (f"on: retain_blocks {retain_blocks}, never above the oldest snapshot"
                    if retain_blocks else "off (retain_blocks 0)"),
        "load": report,
        "committed_per_s": round(report["committed"] / duration, 2),
        "committed_per_s_second_half": round(
            (committed[-1] - committed[half]) / max(ts[-1] - ts[half], 1e-9), 2),
        "load1": {"min": min(loads), "mean": round(sum(loads) / len(loads), 2),
                  "max": max(loads)},
        "cpus": os.cpu_count(),
        "net_check_ok": check.ok,
        "final_height": samples[-1]["height"],
        "slopes_per_hour": all_slopes(samples),
        "samples": samples,
    }


# --- plots -----------------------------------------------------------------------------

def plot(result: dict[str, Any], out_dir: Path, label: str) -> list[Path]:
    """Totals per node over time (RSS, fds, disk), and node0 split by process and part."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib import style

    from bench.plots import STYLE

    style.use(["default", STYLE])  # ignore any user matplotlibrc
    samples = result["samples"]
    minutes = [s["t"] / 60 for s in samples]
    nodes = list(samples[0]["nodes"])
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    panels = (("rss_mib", "RSS, all processes (MiB)"), ("fds", "open fds, all processes"),
              ("disk_mib", "disk of the node home (MiB)"))
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for ax, (metric, title) in zip(axes, panels, strict=True):
        for node in nodes:
            slope = result["slopes_per_hour"][node][metric]["total"]["second_half"]
            ax.plot(minutes, series(samples, node, metric, "total"),
                    label=f"{node} ({slope:+.1f}/h, 2nd half)")
        ax.set_title(title)
        ax.legend(loc="best")
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("minutes under load")
    fig.suptitle(f"Soak: 4 validators, {result['rate']:.0f} tx/s offered, "
                 f"{result['committed_per_s']:.1f} tx/s committed ({label})")
    fig.tight_layout()
    path = out_dir / f"soak_{label}_totals.png"
    fig.savefig(path)
    plt.close(fig)
    written.append(path)

    node = nodes[0]
    splits: tuple[tuple[str, Sequence[str], str], ...] = (
        ("rss_mib", ROLES, "RSS by process (MiB)"),
        ("fds", ROLES, "open fds by process"),
        ("disk_mib", ("cometbft", "canonical", "projection", "snapshots", "logs"),
         "disk by part (MiB)"))
    if "cmt_blockstore" in samples[0]["nodes"][node]["disk_mib"]:  # runs before it had none
        splits += (("disk_mib", CMT_PARTS, "CometBFT data by store (MiB)"),)
    fig, axes = plt.subplots(len(splits), 1, figsize=(8, 3 * len(splits)), sharex=True)
    for ax, (metric, keys, title) in zip(axes, splits, strict=True):
        for key in keys:
            ax.plot(minutes, series(samples, node, metric, key), label=key)
        ax.set_title(f"{node}: {title}")
        ax.legend(loc="best", ncol=3)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("minutes under load")
    fig.tight_layout()
    path = out_dir / f"soak_{label}_{node}_split.png"
    fig.savefig(path)
    plt.close(fig)
    written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=1800)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--label", default="pruning_off")
    parser.add_argument("--retain-blocks", type=int, default=0,
                        help="every node's retain_blocks (0 = no block pruning)")
    parser.add_argument("--json", type=Path, default=None,
                        help="default bench/results/soak_LABEL.json")
    parser.add_argument("--plots", type=Path, default=RESULTS / "soak")
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the plots from the JSON of an earlier run")
    args = parser.parse_args()
    path = args.json or RESULTS / f"soak_{args.label}.json"
    if args.replot:
        result = json.loads(path.read_text())
    else:
        result = soak(args.duration, args.rate, args.every, args.agents, args.retain_blocks)
        result["command"] = "python -m bench.bench_soak " + " ".join(sys.argv[1:])
        path.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    for png in plot(result, args.plots, args.label):
        print(f"wrote {png}", file=sys.stderr)
    summary = {k: v for k, v in result.items() if k not in ("samples", "slopes_per_hour")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
