"""Nemeses: faults that start, last a while and heal, on real tools.

Network faults act on the Toxiproxy proxies of the P2P links (wiring.py) and, for packet
loss, on nftables rules over the proxies' ports; pauses and kills signal the node's
processes; a full disk fills the small tmpfs that holds one node's home. Clock skew is not
offered: CLOCK_REALTIME is not per-namespace (time namespaces shift only the monotonic
and boot clocks) and cometbft, a Go binary, reads the clock through the vDSO, so
libfaketime's LD_PRELOAD cannot reach it; skewing the host clock would skew every node.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from memledger.daemon import cometbft
from memledger.devtools.chaos.proxy import Toxiproxy
from memledger.devtools.chaos.wiring import Link
from memledger.testnet import procs as testnet_procs
from memledger.testnet.net import NodeError, Testnet, TestnetNode

NFT_TABLE = "memledger_chaos"
BALLAST = ".chaos-ballast"


@dataclass
class Faults:
    """Everything a nemesis may touch, and what is currently broken (for the final heal)."""

    net: Testnet
    toxi: Toxiproxy
    links: list[Link]
    disk_node: int | None = None  # index of the node whose home is a small tmpfs
    paused: set[int] = field(default_factory=set)
    killed: set[int] = field(default_factory=set)
    nft_on: bool = False
    notes: list[str] = field(default_factory=list)  # what a heal had to do, for the report
    start_node: Callable[[TestnetNode], None] = lambda n: None

    # --- network ----------------------------------------------------------------------
    def cut(self, groups: Sequence[set[int]]) -> None:
        """Disable every link between two nodes that share no group."""
        for ln in self.links:
            if not any(ln.src in g and ln.dst in g for g in groups):
                self.toxi.enable(ln.name, False)

    def slow(self, latency_ms: int, jitter_ms: int) -> None:
        for ln in self.links:
            for stream in ("upstream", "downstream"):
                self.toxi.add_toxic(ln.name, f"lat-{stream}", "latency",
                                    {"latency": latency_ms, "jitter": jitter_ms},
                                    stream=stream)

    def lose(self, percent: int) -> None:
        """Drop ``percent``% of the packets on every proxied link, both ways (nftables)."""
        ports = ", ".join(str(ln.port) for ln in self.links)
        rules = (f"add table inet {NFT_TABLE}\n"
                 f"add chain inet {NFT_TABLE} out {{ type filter hook output priority 0 ; }}\n"
                 f"add rule inet {NFT_TABLE} out tcp dport {{ {ports} }} "
                 f"numgen random mod 100 < {percent} drop\n"
                 f"add rule inet {NFT_TABLE} out tcp sport {{ {ports} }} "
                 f"numgen random mod 100 < {percent} drop\n")
        done = subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=False,
                              capture_output=True)
        if done.returncode != 0:
            raise PermissionError(done.stderr.strip() or "nft failed")
        self.nft_on = True

    def heal_network(self) -> None:
        self.toxi.reset()
        if self.nft_on:
            subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], check=False,
                           capture_output=True)
            self.nft_on = False

    # --- processes --------------------------------------------------------------------
    def pause(self, i: int) -> None:
        pids = [p for ps in self.net.node(i).processes().values() for p in ps]
        testnet_procs.signal_pids(pids, signal.SIGSTOP)
        self.paused.add(i)

    def resume(self) -> None:
        for i in sorted(self.paused):
            pids = [p for ps in self.net.node(i).processes().values() for p in ps]
            testnet_procs.signal_pids(pids, signal.SIGCONT)
        self.paused.clear()

    def kill(self, nodes: Sequence[int]) -> None:
        for i in nodes:  # one right after the other: both are gone within milliseconds
            testnet_procs.kill_node(self.net.node(i).home)
        for i in nodes:
            self.net.node(i).kill()
            self.killed.add(i)

    def restart_dead(self) -> list[str]:
        """Start every node that has no process left (killed, or died of a full disk)."""
        started = []
        for node in self.net.nodes:
            if not node.running:
                self.start_node(node)
                started.append(node.name)
        self.killed.clear()
        return started

    # --- disk -------------------------------------------------------------------------
    def fill_disk(self) -> str:
        if self.disk_node is None:
            return "no tmpfs home: skipped"
        home = self.net.node(self.disk_node).home
        st = os.statvfs(home)
        free = st.f_bavail * st.f_frsize
        with open(home / BALLAST, "wb") as f:
            with contextlib.suppress(OSError):
                os.posix_fallocate(f.fileno(), 0, free)
        return f"filled {free // 2**20} MiB"

    def free_disk(self) -> None:
        if self.disk_node is not None:
            (self.net.node(self.disk_node).home / BALLAST).unlink(missing_ok=True)

    # --- all --------------------------------------------------------------------------
    def heal_all(self) -> list[str]:
        """Network whole, paused nodes resumed, disk freed, dead nodes restarted."""
        self.heal_network()
        self.resume()
        self.free_disk()
        return self.restart_dead()


def proposer_index(net: Testnet) -> int:
    """The node proposing the current round (asked of any node that answers)."""
    addresses = {cometbft.validator_address(n.validator_pubkey): n.index for n in net.nodes}
    for node in net.nodes:
        with contextlib.suppress(httpx.HTTPError, KeyError, ValueError):
            doc = httpx.get(f"{node.rpc_url}/consensus_state", timeout=3).json()
            address = doc["result"]["round_state"]["proposer"]["address"]
            return addresses[address.upper()]
    return 0


@dataclass(frozen=True)
class Nemesis:
    """One fault: ``inject`` breaks something and says what, ``heal`` mends it."""

    name: str
    inject: Callable[[Faults], str]
    heal: Callable[[Faults], None]


def _partition(groups: list[set[int]]) -> Callable[[Faults], str]:
    def go(f: Faults) -> str:
        f.cut(groups)
        return " | ".join(",".join(f"n{i}" for i in sorted(g)) for g in groups)
    return go


def _isolate_proposer(f: Faults) -> str:
    p = proposer_index(f.net)
    f.cut([{p}, {n.index for n in f.net.nodes} - {p}])
    return f"proposer n{p} alone"


def _heal_net(f: Faults) -> None:
    f.heal_network()


def _latency(f: Faults) -> str:
    f.slow(250, 150)
    return "250 ms +- 150 ms on every link, both ways"


def _loss(f: Faults) -> str:
    if shutil.which("nft") is None:
        return "nft not installed: skipped"
    try:
        f.lose(20)
    except PermissionError as exc:  # not root, or no nf_tables in the kernel
        return f"nft refused ({exc}): skipped"
    return "20% of packets dropped on every link, both ways"


def _pause(i: int) -> Callable[[Faults], str]:
    def go(f: Faults) -> str:
        f.pause(i)
        return f"SIGSTOP n{i}"
    return go


def _kill_two(pair: tuple[int, int]) -> Callable[[Faults], str]:
    def go(f: Faults) -> str:
        f.kill(pair)
        return f"SIGKILL n{pair[0]} and n{pair[1]}"
    return go


def _heal_processes(f: Faults) -> None:
    f.resume()
    f.restart_dead()


def _fill(f: Faults) -> str:
    return f.fill_disk()


def _unfill(f: Faults) -> None:
    """Free the disk; a node whose consensus stopped on the full disk is restarted, as
    cometbft's "CONSENSUS FAILURE ... check your file system and restart the node" asks
    (its process stays up, so nothing else would)."""
    f.free_disk()
    f.notes.extend(f"{name} had died: restarted" for name in f.restart_dead())
    if f.disk_node is None:
        return
    node = f.net.node(f.disk_node)
    tops = [h for h in f.net.heights().values() if h is not None]
    target = max(tops, default=0) + 1
    with contextlib.suppress(NodeError):
        node.wait_height(target, timeout=8)
        return
    f.notes.append(f"{node.name} stalled after the disk filled: restarted")
    node.stop()
    f.start_node(node)


def catalogue(size: int, disk_node: int | None) -> list[Nemesis]:
    """Every nemesis, in the order a schedule runs them (indices chosen for ``size``)."""
    half = size // 2
    first, second = set(range(half)), set(range(half, size))
    bridge = size - 2  # in both halves
    return [
        Nemesis("partition-halves", _partition([first, second]), _heal_net),
        Nemesis("pause", _pause(1), _heal_processes),
        Nemesis("isolate-proposer", _isolate_proposer, _heal_net),
        Nemesis("latency", _latency, _heal_net),
        Nemesis("kill-two", _kill_two((0, size - 1)), _heal_processes),
        Nemesis("bridge", _partition([set(range(bridge + 1)), {bridge, size - 1}]), _heal_net),
        Nemesis("packet-loss", _loss, _heal_net),
        Nemesis("disk-full", _fill, _unfill) if disk_node is not None else
        Nemesis("pause-other", _pause(2), _heal_processes),
    ]


def mount_tmpfs(path: Path, size_mb: int) -> bool:
    """A small tmpfs at ``path`` (for one node's home), or False if it cannot be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs",
                           str(path)], capture_output=True, check=False)
    return done.returncode == 0


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
