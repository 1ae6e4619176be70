"""Run a fault campaign: a 4-validator net behind Toxiproxy, the workload, the nemeses in
turns, the heal, the probe and the checker. `make chaos` runs the short schedule;
bench/bench_chaos.py the long one.

    python -m memledger.devtools.chaos.campaign OUT_DIR [--long] [--seed N]

Writes OUT_DIR/history.jsonl, final.json and verdict.json; exits 1 if the verdict fails.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memledger.devtools.chaos.checker import check
from memledger.devtools.chaos.history import OK, History, Op
from memledger.devtools.chaos.nemesis import Faults, catalogue, mount_tmpfs, unmount
from memledger.devtools.chaos.probe import final_state
from memledger.devtools.chaos.proxy import Toxiproxy
from memledger.devtools.chaos.wiring import api_port, rewire
from memledger.devtools.chaos.workload import start_agents
from memledger.testnet.net import Testnet, TestnetNode

CHAIN_ID = "memledger-chaos"
VALIDATORS = 4
DISK_MB = 256


@dataclass(frozen=True)
class Schedule:
    rounds: int  # nemesis turns (the catalogue, cycled)
    fault_s: float  # how long each fault lasts
    calm_s: float  # healthy time after each heal (and before the first fault)
    bound_s: float  # the chain must move on within this after each heal


SHORT = Schedule(rounds=8, fault_s=6, calm_s=2, bound_s=60)
LONG = Schedule(rounds=24, fault_s=15, calm_s=6, bound_s=60)


def _start(node: TestnetNode) -> None:
    node.start(api=True, voter=False, wait=False)


def recovery_time(net: Testnet, bound_s: float) -> float | None:
    """Seconds until every node is 2 blocks past the highest height seen at the heal."""
    t0 = time.monotonic()
    tops = [h for h in net.heights().values() if h is not None]
    target = (max(tops) if tops else 0) + 2
    while time.monotonic() - t0 < bound_s:
        heights = net.heights().values()
        if all(h is not None and h >= target for h in heights):
            return round(time.monotonic() - t0, 2)
        time.sleep(0.25)
    return None


def _advance(before: dict[str, int | None],
             after: dict[str, int | None]) -> dict[str, int | None]:
    """Blocks each node gained (None: it did not answer at one end)."""
    return {name: None if h is None or after.get(name) is None else after[name] - h  # type: ignore[operator]
            for name, h in before.items()}


def run(out: Path, schedule: Schedule, seed: int,
        say: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    root = out / "net"
    if (root / "testnet.json").exists():  # an earlier campaign's net in the same place
        shutil.rmtree(root)
    disk_node = VALIDATORS - 1
    disk_home = root / f"node{disk_node}"
    mounted = mount_tmpfs(disk_home, DISK_MB)
    say(f"node{disk_node}'s home on a {DISK_MB} MiB tmpfs: {mounted}")
    net = Testnet.create(root, VALIDATORS, chain_id=CHAIN_ID, voter=False)
    links = rewire(net)
    toxi = Toxiproxy(api_port(net), out / "toxiproxy.log").start()
    faults = Faults(net, toxi, links, disk_node if mounted else None, start_node=_start)
    stop = threading.Event()
    history = History()
    try:
        for ln in links:
            toxi.create(ln.name, ln.port, ln.upstream)
        net.up(api=True, voter=False, progress=say)
        agents = start_agents(net, history, stop, seed)
        time.sleep(schedule.calm_s)
        nemeses = catalogue(VALIDATORS, faults.disk_node)
        rng = random.Random(seed)
        for turn in range(schedule.rounds):
            nemesis = nemeses[turn % len(nemeses)]
            start = history.now()
            before = net.heights()
            detail = nemesis.inject(faults)
            say(f"fault {turn + 1}/{schedule.rounds}: {nemesis.name} ({detail})")
            time.sleep(schedule.fault_s * rng.uniform(0.75, 1.25))
            during = _advance(before, net.heights())
            nemesis.heal(faults)
            healed = history.now()
            notes, faults.notes = faults.notes, []
            took = recovery_time(net, schedule.bound_s)
            say(f"  blocks made during the fault per node {during}; healed {notes}; "
                f"progress after {took} s")
            history.add(Op("nemesis", -1, "fault", {"name": nemesis.name}, start, healed, OK,
                           "", {"detail": detail, "recovery_s": took,
                                "blocks_during": during, "heal_notes": notes}))
            time.sleep(schedule.calm_s)
        say(f"final heal: restarted {faults.heal_all() or 'none'}")
        stop.set()
        for a in agents:
            a.join(60)
        net.wait_caught_up(timeout=120)
        final = final_state(net, history)
    finally:
        stop.set()
        faults.heal_all()
        history.dump(out / "history.jsonl")
        net.down(timeout=20)
        for node in net.nodes:
            node.kill()
        toxi.stop()
        if mounted:  # keep the node's logs: its home goes with the tmpfs
            shutil.copytree(disk_home / "logs", out / f"node{disk_node}-logs",
                            dirs_exist_ok=True)
            unmount(disk_home)
    (out / "final.json").write_text(json.dumps(final, indent=1, sort_keys=True))
    verdict = check(history.ops, final, bound_s=schedule.bound_s).summary()
    verdict["schedule"] = {"rounds": schedule.rounds, "fault_s": schedule.fault_s,
                           "calm_s": schedule.calm_s, "seed": seed,
                           "seconds": round(history.now(), 1)}
    (out / "verdict.json").write_text(json.dumps(verdict, indent=1, sort_keys=True))
    return verdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--long", action="store_true", help="the long schedule (bench)")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    verdict = run(args.out, LONG if args.long else SHORT, seed,
                  say=lambda m: print(m, flush=True))
    print(json.dumps({k: v for k, v in verdict.items() if k != "examples"}, indent=1))
    if verdict["examples"]:
        print(json.dumps(verdict["examples"], indent=1))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
