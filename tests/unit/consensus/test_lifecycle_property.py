"""Property: random lifecycle interleavings are deterministic and respect the table."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memledger.protocol import records
from tests.support.chain import LocalChain
from tests.support.workload import blocks


def _apply(home: Path, plan: list[list[bytes]]) -> tuple[LocalChain, dict[str, list[str]]]:
    chain = LocalChain(home)
    seen: dict[str, list[str]] = {}
    for txs in plan:
        chain.block(txs)
        for key, raw in chain.app.store.iter_prefix(records.MEMORY):
            import json

            status = json.loads(raw)["status"]
            trail = seen.setdefault(key.decode(), [])
            if not trail or trail[-1] != status:
                trail.append(status)
    return chain, seen


def _reachable(a: str, b: str) -> bool:
    """b can follow a through zero or more table transitions (blocks may skip steps)."""
    frontier, seen = {a}, {a}
    while frontier:
        nxt = {y for x in frontier for (f, y) in records.TRANSITIONS if f == x} - seen
        seen |= nxt
        frontier = nxt
    return b in seen


def _history(chain: LocalChain, key: str) -> list[str]:
    """The statuses in the stored history of the memory under state key `key`."""
    record = chain.memory(key.removeprefix("mem/"))
    assert record is not None, key
    return [s for _, s in record["history"]]


def _allowed(path: list[str]) -> bool:
    if path[0] not in records.INITIAL_STATUSES:
        return False
    return all((a, b) in records.TRANSITIONS for a, b in zip(path, path[1:], strict=False))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(5, 25))
def test_two_instances_agree_and_histories_follow_the_table(seed: int, count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = LocalChain(Path(tmp) / "scratch")
        plan = blocks(scratch, seed, count)
        scratch.close()
        first, seen = _apply(Path(tmp) / "one", plan)
        second, _ = _apply(Path(tmp) / "two", plan)
        assert first.app_hashes == second.app_hashes
        assert first.app.projection.dump() == second.app.projection.dump()
        for memory_id, path in seen.items():
            assert all(_reachable(a, b) for a, b in zip(path, path[1:], strict=False)), path
            record_history = _history(first, memory_id)
            assert _allowed(record_history), (memory_id, record_history)
        first.close()
        second.close()


def test_workload_exercises_every_status(tmp_path: Path) -> None:
    scratch = LocalChain(tmp_path / "scratch")
    plan = blocks(scratch, 8, 60)
    chain, seen = _apply(tmp_path / "one", plan)
    statuses = {s for path in seen.values() for s in path}
    statuses |= {s for m in seen for s in _history(chain, m)}
    assert {"proposed", "committed", "deprecated"} <= statuses
    assert "challenged" in statuses
