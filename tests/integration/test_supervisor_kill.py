"""A SIGKILLed `memledger start` takes its whole node with it, and a home runs one node.

The OOM killer, `kill -9` and a container runtime's timeout give the supervisor no
chance to stop its children; the kernel must (PR_SET_PDEATHSIG), or app, cometbft, REST
and voter keep the ports, LMDB and the block store. Each test runs its own real node
(real cometbft) so that it passes alone.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from memledger.testnet.procs import node_processes
from tests.support.node import PORT_OFFSETS, NodeRunner, memledger, wait_api_ready

pytestmark = pytest.mark.cometbft
#: the read process ("reads") is the api's spawned child, in the children's process group
ROLES = {"supervisor", "app", "cometbft", "api", "reads", "voter"}
GONE_WITHIN_S = 5.0


@pytest.fixture
def node(tmp_path: Path, cometbft_bin: Path) -> Iterator[NodeRunner]:
    """A running node with all four children (voter on), killed hard at teardown."""
    runner = NodeRunner(tmp_path / "home", chain_id="memledger-kill", voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        yield runner
    finally:
        _kill_everything(runner)


def _pgrp(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[2])


def _group_members(pgid: int) -> list[int]:
    """Live processes in a process group: the children and whatever they started."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and _pgrp(int(e)) == pgid]


def _children(runner: NodeRunner) -> tuple[dict[str, list[int]], int]:
    procs = node_processes(runner.home)
    assert set(procs) == ROLES, procs
    assert all(len(pids) == 1 for pids in procs.values()), procs
    groups = {_pgrp(pids[0]) for role, pids in procs.items() if role != "supervisor"}
    assert len(groups) == 1, f"children are not in one process group: {groups}"
    pgid = groups.pop()
    assert pgid is not None and pgid != _pgrp(procs["supervisor"][0])
    return procs, pgid


def _listenable(port: int) -> bool:
    """Nobody holds the port: binds as the servers do (SO_REUSEADDR, so the TIME_WAIT
    remains of the killed node's connections do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def _ports_free(runner: NodeRunner) -> bool:
    return all(_listenable(runner.base + off) for off in PORT_OFFSETS)


def _sigkill_supervisor(runner: NodeRunner) -> tuple[float, dict[str, list[int]], list[int]]:
    """kill -9 the supervisor alone; seconds until no process of the node is left."""
    assert runner.proc is not None
    procs, pgid = _children(runner)
    group = _group_members(pgid)  # the four children and what they started (verify helper)
    assert procs["supervisor"] == [runner.proc.pid]
    killed = time.monotonic()
    os.kill(runner.proc.pid, signal.SIGKILL)
    runner.proc.wait(10)
    wait_until(lambda: not node_processes(runner.home) and not _group_members(pgid)
               and _ports_free(runner), GONE_WITHIN_S, 0.05,
               what="every process of the node to die after SIGKILL of the supervisor",
               error=lambda msg: AssertionError(
                   f"{msg}: still running {node_processes(runner.home)}, group {pgid}: "
                   f"{_group_members(pgid)}, ports free: {_ports_free(runner)}"))
    return time.monotonic() - killed, procs, group


def _kill_everything(runner: NodeRunner) -> None:
    from memledger.testnet.procs import kill_node

    if runner.proc is not None and runner.proc.poll() is None:
        runner.proc.kill()
        runner.proc.wait(10)
    kill_node(runner.home)


def test_sigkill_of_supervisor_leaves_no_process_of_the_node(node: NodeRunner) -> None:
    elapsed, procs, group = _sigkill_supervisor(node)
    assert len(group) >= 4, group
    print(f"\n{sorted(procs)} and {len(group) - 4} more in the children's group: all gone, "
          f"ports free {elapsed:.2f}s after SIGKILL of the supervisor")
    for role, pids in procs.items():
        assert not Path(f"/proc/{pids[0]}").exists() or _pgrp(pids[0]) is None, role


def test_second_start_on_a_busy_home_refuses_at_once(node: NodeRunner) -> None:
    assert node.proc is not None
    with node.rpc() as rpc:
        before = rpc.latest_height()
    started = time.monotonic()
    out = memledger("start", "--home", str(node.home), check=False, timeout=30)
    took = time.monotonic() - started
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert lines == [
        f"memledger: error: node home {node.home.resolve()} is in use by a running "
        f"`memledger start` (pid {node.proc.pid}); stop it before starting another node "
        f"on this home"], out.stderr
    assert "node running" not in out.stdout
    assert took < 10, f"refusal took {took:.1f}s"
    print(f"\nsecond start refused in {took:.2f}s (exit {out.returncode})")
    # The first node was not disturbed: same processes, still making blocks.
    assert node.proc.poll() is None
    assert set(node_processes(node.home)) == ROLES
    with node.rpc() as rpc:
        wait_until(lambda: rpc.latest_height() > before, 30, 0.2,
                   what="the first node to keep making blocks")


def test_restart_after_sigkill_serves_with_nothing_lost(node: NodeRunner) -> None:
    agent = Agent.generate("kill")
    written: dict[str, tuple[str, int]] = {}
    with Client(node.api_url, key=agent) as ml:
        for i in range(3):
            content = f"Kestrels hover facing into the wind, note {i}"
            receipt = ml.submit(f"kill-{i}", content, tags=["birds"])
            assert receipt.committed and receipt.height, receipt
            written[f"kill-{i}"] = (content, receipt.height)
        with node.rpc() as rpc:
            height = rpc.latest_height()
        statuses = {mid: ml.get_memory(mid).status for mid in written}

    elapsed, _, _ = _sigkill_supervisor(node)
    restarted = time.monotonic()
    node.start()  # the kill released the home lock: this start is not refused
    wait_api_ready(node.api_url)
    print(f"\nnode gone {elapsed:.2f}s after SIGKILL; restarted and ready in "
          f"{time.monotonic() - restarted:.1f}s")
    with Client(node.api_url) as ml:
        assert ml.status().height >= height
        for mid, (content, _) in written.items():
            memory = ml.get_memory(mid)
            assert memory.content == content, mid
            assert memory.author == agent.public_key_hex
            # the voter may have moved a memory on since, never back
            assert statuses[mid] in ("proposed", "committed") and memory.status in (
                statuses[mid], "committed"), (mid, statuses[mid], memory.status)
    # and it is a working node again: a new write commits
    with Client(node.api_url, key=agent) as ml:
        assert ml.submit("kill-after", "Written after the restart").committed
