"""The auto-voter: it finds the memories it may vote on behind any number it may not (a
backlog of pinned ballots it is not a member of must not starve the weighted ballots
behind it), and no failure of cometbft's RPC ends it (its exit would stop the node)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from nacl.signing import SigningKey

from memledger.daemon import voter as voter_module
from memledger.daemon.voter import Voter
from memledger.projection.schema import memories, metadata, validators, votes

OTHER = "ab" * 32


def _voter(tmp_path: Path, batch: int = 200) -> Voter:
    url = f"sqlite:///{tmp_path}/projection.db"
    v = Voter(SigningKey(b"\x07" * 32), "test-chain", url, "http://127.0.0.1:1", tmp_path,
              batch=batch)
    metadata.create_all(v.engine)
    with v.engine.begin() as conn:
        conn.execute(sa.insert(validators), [{"public_key": v.me, "power": 10}])
    return v


def _propose(v: Voter, first: int, count: int, height: int, pinned_to: str | None) -> None:
    ballot = None if pinned_to is None else {"scope": "s", "members": [[pinned_to, 1]]}
    rows = [{"id": f"m-{i:06d}", "domain": "ops", "author": OTHER, "type": "fact",
             "content": f"memory number {i} with enough words", "content_hash": f"{i:064x}",
             "confidence_ppm": 900_000, "tags": "[]", "status": "proposed",
             "submitted_height": height, "submitted_time_ns": 0, "decided_height": None,
             "scope": None if pinned_to is None else "s", "cocommit": None, "tx": "00" * 32,
             "record": json.dumps({"ballot": ballot})}
            for i in range(first, first + count)]
    with v.engine.begin() as conn:
        conn.execute(sa.insert(memories), rows)


def test_ballots_it_may_not_vote_on_do_not_fill_the_batch(tmp_path: Path) -> None:
    v = _voter(tmp_path)
    _propose(v, 0, 450, height=1, pinned_to=OTHER)  # older than the batch, none mine
    _propose(v, 450, 5, height=2, pinned_to=None)
    _propose(v, 455, 3, height=3, pinned_to=v.me)
    assert [c.memory_id for c in v.pending()] == [f"m-{i:06d}" for i in range(450, 458)]
    with v.engine.begin() as conn:  # voted once: never offered again
        conn.execute(sa.insert(votes), [{"memory_id": "m-000450", "voter": v.me,
                                         "decision": "accept", "height": 4}])
    assert "m-000450" not in {c.memory_id for c in v.pending()}


def test_a_capped_scan_goes_on_where_it_stopped(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(voter_module, "SCAN_ROWS", 100)
    v = _voter(tmp_path, batch=50)
    _propose(v, 0, 250, height=1, pinned_to=OTHER)
    _propose(v, 250, 60, height=2, pinned_to=None)
    assert v.pending() == []  # looked at 100, none mine
    assert v.pending() == []  # the next 100
    found = [c.memory_id for c in v.pending()]  # the last 50 not mine, then a full batch
    assert found == [f"m-{i:06d}" for i in range(250, 300)]
    again = [c.memory_id for c in v.pending()]  # a full batch: from the oldest again
    assert again == []  # 100 looked at, none mine
    assert v.pending() == []  # the next 100
    assert len(v.pending()) == 50  # the same batch as before: its votes are not in yet


def test_sent_votes_are_forgotten_once_they_would_be_resent(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    v = _voter(tmp_path)
    clock = [1000.0]
    monkeypatch.setattr(voter_module.time, "monotonic", lambda: clock[0])
    v.sent = {"old": 1000.0 - voter_module.RESEND_AFTER_S, "fresh": 999.0}
    assert v.step() == 0  # nothing proposed: no broadcast, nothing to resend
    assert v.sent == {"fresh": 999.0}


def test_an_rpc_that_is_down_or_slow_never_ends_the_voter(tmp_path: Path) -> None:
    import socket

    with socket.socket() as closed:  # a port nothing listens on: connection refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    v = _voter(tmp_path)
    v.rpc = voter_module.RpcClient(f"http://127.0.0.1:{port}", timeout=0.5)
    _propose(v, 0, 3, height=1, pinned_to=None)
    assert v.step() == 0  # no app version to read: the pass waits, it does not raise
    assert v.sent == {}  # nothing was sent, so nothing waits for a resend

    with socket.socket() as silent:  # accepts, never answers: a read timeout
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        v.rpc = voter_module.RpcClient(f"http://127.0.0.1:{silent.getsockname()[1]}",
                                       timeout=0.3)
        assert v.step() == 0


def test_a_failed_pass_is_logged_and_the_next_one_runs(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    v = _voter(tmp_path)
    stop: list[int] = []
    passes: list[int] = []

    def step() -> int:
        passes.append(1)
        if len(passes) == 1:
            raise RuntimeError("a bug in one pass")
        stop.append(1)
        return 0

    monkeypatch.setattr(v, "step", step)
    v.run(0.0, stop)
    assert len(passes) == 2 and voter_module.heartbeat_path(tmp_path).exists()
    assert "voter pass failed" in caplog.text
