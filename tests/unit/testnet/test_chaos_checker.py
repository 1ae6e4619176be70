"""The fault campaign's checker on made-up histories: clean ones pass, and each kind of
anomaly (lost write, divergence, backwards read, stale verified read, unresolved unknown,
slow recovery) is caught."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memledger.devtools.chaos.checker import check
from memledger.devtools.chaos.history import FAIL, OK, UNKNOWN, History, Op
from memledger.devtools.chaos.probe import challengers

V0, V1 = "aa" * 32, "bb" * 32


def rec(status: str = "committed", submitted: int = 5, history: Any = None,
        voters: tuple[str, ...] = (V0, V1), challengers: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"status": status, "content_hash": "c1" * 32, "submitted_height": submitted,
            "history": history if history is not None else [[5, "proposed"],
                                                            [8, "committed"]],
            "voters": list(voters), "challengers": list(challengers)}


def final(**memories: dict[str, Any] | None) -> dict[str, Any]:
    nodes = {f"node{i}": {"height": 20, "memories": copy.deepcopy(memories)}
             for i in range(4)}
    return {"nodes": nodes, "divergence": None, "common_height": 20, "unreachable": []}


def op(kind: str, start: float, end: float, outcome: str = OK, node: int = 0,
       code: str = "", **result: Any) -> Op:
    args: dict[str, Any] = {"memory_id": "m1"}
    if kind == "vote":
        args["signer"] = V0
    if kind == "read":
        args = {"memory_id": "m1"}
    return Op(f"agent-{node}", node, kind, args, start, end, outcome, code, result)


def clean_ops() -> list[Op]:
    return [
        op("submit", 0.0, 1.0, height=5),
        op("vote", 1.0, 2.0, height=6),
        op("read", 2.0, 2.1, height=7, app_hash="ab"),
        op("read", 2.2, 2.3, node=1, height=7, app_hash="ab"),
        op("read", 2.4, 2.5, height=9, app_hash="cd"),
        op("verified_read", 3.0, 3.5, status="proposed", content_hash="c1" * 32,
           submitted_height=5, verified_height=6),
        op("verified_read", 3.6, 3.9, status="committed", content_hash="c1" * 32,
           submitted_height=5, verified_height=8),
        op("verified_read", 0.0, 0.2, absent=True, verified_height=3),
        op("submit", 4.0, 5.0, FAIL, code="bad_nonce"),
        Op("nemesis", -1, "fault", {"name": "partition-halves"}, 1.0, 3.0, OK, "",
           {"detail": "n0,n1 | n2,n3", "recovery_s": 2.5}),
    ]


def test_clean_history_passes() -> None:
    v = check(clean_ops(), final(m1=rec()))
    assert v.ok, v.summary()
    s = v.summary()
    assert s["faults_injected"] == 1 and s["recovery_s_max"] == 2.5
    assert s["operations"] == 9


def test_acknowledged_submit_missing_on_one_node_is_lost() -> None:
    state = final(m1=rec())
    state["nodes"]["node2"]["memories"]["m1"] = None
    v = check(clean_ops(), state)
    assert not v.ok and len(v.lost_writes) == 2  # the submit and the vote on it
    assert "node2" in v.lost_writes[0]


def test_acknowledged_vote_missing_is_lost() -> None:
    v = check(clean_ops(), final(m1=rec(voters=(V1,))))
    assert [w.split()[0] for w in v.lost_writes] == ["vote"]


def test_two_app_hashes_at_one_height_are_a_divergence() -> None:
    ops = clean_ops() + [op("read", 2.6, 2.7, node=2, height=7, app_hash="ff")]
    v = check(ops, final(m1=rec()))
    assert len(v.divergences) == 1 and "height 7" in v.divergences[0]


def test_divergent_headers_after_heal_fail() -> None:
    state = final(m1=rec())
    state["divergence"] = "height 12 node3 app_hash: aa != bb"
    assert check(clean_ops(), state).divergences


def test_read_going_back_in_height_fails() -> None:
    ops = clean_ops() + [op("read", 3.0, 3.1, height=8, app_hash="ee")]
    v = check(ops, final(m1=rec()))
    assert len(v.nonmonotonic_reads) == 1


def test_overlapping_reads_may_see_heights_in_any_order() -> None:
    ops = clean_ops() + [op("read", 2.45, 2.6, height=8, app_hash="ee")]  # overlaps 9
    assert check(ops, final(m1=rec())).ok


@pytest.mark.parametrize("result", [
    {"status": "committed", "verified_height": 6},  # committed only at 8
    {"status": "proposed", "verified_height": 4},  # submitted at 5
    {"status": "proposed", "verified_height": 6, "content_hash": "00" * 32},
    {"absent": True, "verified_height": 5},  # it was there at 5
])
def test_stale_or_false_verified_reads_are_caught(result: dict[str, Any]) -> None:
    body = {"content_hash": "c1" * 32, "submitted_height": 5, **result}
    ops = clean_ops() + [op("verified_read", 4.0, 4.1, **body)]
    v = check(ops, final(m1=rec()))
    assert len(v.stale_verified_reads) == 1, v.summary()


def test_verified_read_of_a_memory_the_chain_never_held_is_caught() -> None:
    ops = [op("verified_read", 4.0, 4.1, status="proposed", content_hash="c1" * 32,
              submitted_height=5, verified_height=9)]
    assert check(ops, final(m1=None)).stale_verified_reads


def test_unknowns_resolved_either_way_pass_and_split_ones_fail() -> None:
    ops = [op("submit", 0, 1, UNKNOWN, code="ReadTimeout")]
    assert check(ops, final(m1=rec())).resolved_unknowns == {"happened": 1}
    assert check(ops, final(m1=None)).resolved_unknowns == {"did_not_happen": 1}
    split = final(m1=rec())
    split["nodes"]["node0"]["memories"]["m1"] = None
    v = check(ops, split)
    assert not v.ok and len(v.unresolved_unknowns) == 1


def test_unreachable_node_fails() -> None:
    state = final(m1=rec())
    state["nodes"]["node1"] = {"error": "cannot reach"}
    assert check(clean_ops(), state).unreachable == ["node1"]


@pytest.mark.parametrize("took", [None, 61.0])
def test_slow_or_missing_recovery_fails(took: float | None) -> None:
    ops = clean_ops() + [Op("nemesis", -1, "fault", {"name": "kill-two"}, 4, 6, OK, "",
                            {"detail": "x", "recovery_s": took})]
    v = check(ops, final(m1=rec()), bound_s=60)
    assert len(v.slow_recoveries) == 1 and not v.ok


def test_history_round_trips_through_jsonl(tmp_path: Any) -> None:
    h = History()
    for o in clean_ops():
        h.add(o)
    h.dump(tmp_path / "h.jsonl")
    assert History.load(tmp_path / "h.jsonl").ops == h.ops


def test_challengers_are_read_from_every_dispute_round() -> None:
    rounds: list[dict[str, Any]] = [
        {"opener": "AA", "challengers": ["aa", "bb"], "outcome": "deprecated"},
        {"opener": "cc", "challengers": ["cc"], "outcome": None}, {}]
    assert challengers(rounds) == ["aa", "bb", "cc"]
