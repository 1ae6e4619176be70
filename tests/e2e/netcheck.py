"""Assertions shared by the multi-node tests."""

from __future__ import annotations

from collections.abc import Sequence

from memledger.devtools.loadgen import LoadGenerator
from memledger.projection.schema import memories
from memledger.sdk.waiting import wait_until
from memledger.testnet.consistency import compare_dumps, matched_snapshots
from memledger.testnet.net import Testnet, TestnetNode

MEMORY_STATUS = [c.name for c in memories.columns].index("status")


def assert_headers_agree(net: Testnet) -> int:
    """App hashes (and block ids) agree at every common height; returns that height."""
    report = net.check(projections=False)
    assert report.ok, report.divergence
    assert report.conclusive, report.to_json()
    return report.common_height


def assert_replicated(net: Testnet, committed: Sequence[tuple[str, int]],
                      timeout: float = 60.0) -> int:
    """Projections of all nodes are equal at one common height, and every memory the
    load generator saw committed is there (identical, since the whole dumps are equal)."""
    assert_headers_agree(net)
    height, dumps = matched_snapshots(net.targets(), timeout=timeout)
    divergence = compare_dumps(dumps, height)
    assert divergence is None, str(divergence)
    present = {row[0] for row in dumps[net.node(0).name]["memories"]}
    late = [(m, h) for m, h in committed if h > height]
    assert not late, f"committed above the compared height {height}: {late[:5]}"
    missing = [m for m, _ in committed if m not in present]
    assert not missing, f"{len(missing)} committed memories missing, e.g. {missing[:5]}"
    return height


def wait_all_voted(net: Testnet, memory_ids: Sequence[str], timeout: float = 90.0) -> None:
    """The voters move every given memory to `committed` on every node."""
    wanted = set(memory_ids)
    open_: list[str] = []

    def all_committed() -> bool:
        height, dumps = matched_snapshots(net.targets(), timeout=30)
        statuses = {row[0]: row[MEMORY_STATUS] for row in dumps[net.node(0).name]["memories"]
                    if row[0] in wanted}
        open_[:] = sorted(m for m in wanted if statuses.get(m) != "committed")
        if open_:
            return False
        assert compare_dumps(dumps, height) is None
        return True

    wait_until(all_committed, timeout, 1.0, what="the voters to commit every memory everywhere",
               error=lambda msg: AssertionError(f"{msg}: {len(open_)} open, e.g. {open_[:5]}"))


def assert_only_victims_lost(gen: LoadGenerator, victims: Sequence[TestnetNode]) -> None:
    """Acknowledged txs may only go missing from the mempool of a node we crashed."""
    urls = {v.rpc_url for v in victims}
    lost = [s for s in gen.submissions if (s.acked and s.height == 0) or s.code not in (None, 0)]
    stray = [s for s in lost if s.node not in urls]
    assert not stray, f"{len(stray)} txs acknowledged by live nodes were lost: {stray[:3]}"


def wait_until_all_up(net: Testnet, timeout: float = 90.0) -> None:
    """Start whatever a previous test left down and wait until everyone has caught up."""
    stopped = [n for n in net.nodes if not n.running]
    for n in stopped:
        n.start(wait=False)
    for n in net.nodes:
        n.wait_ready(timeout)
    net.wait_caught_up(timeout=timeout)
