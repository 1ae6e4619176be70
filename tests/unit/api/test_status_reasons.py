"""Every memory says why it has its status (issue 18, points 4-5).

`status_reason` is derived from the canonical record, its dispute rounds and the local
auto-voter's noted reason; these cases are the outcomes a newcomer meets. The REST path
(a projection written by the real engine) is checked at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger.api import ApiSettings, create_app
from memledger.api.reasons import status_reason
from memledger.daemon.voter_notes import NotesWriter, VoterNote, read_notes
from tests.support.chain import LocalChain, seeded_key

AUTHOR = "a" * 64
V1, V2 = "1" * 64, "2" * 64


def _record(status: str, history: list[list[Any]], votes: dict[str, list[Any]] | None = None,
            **extra: Any) -> dict[str, Any]:
    return {"id": "m", "author": AUTHOR, "status": status, "history": history,
            "votes": votes or {}, "decided_height": history[-1][0], "cocommit": None, **extra}


def test_rejected_by_votes_names_the_tally_and_the_voters_reason() -> None:
    rec = _record("deprecated", [[5, "proposed"], [6, "deprecated"]], {V1: ["reject", 6]})
    notes = {V1: VoterNote(V1, "reject", "content shorter than 8 characters")}
    text = status_reason(rec, [], notes)
    assert text is not None
    assert text.startswith("rejected by validator votes at height 6: 1 reject;")
    assert text.endswith(f"auto-voter ({V1[:12]}) voted reject: content shorter than 8 "
                         "characters")
    # Another validator's vote carries no note: only the local voter's reason is known.
    assert "auto-voter" not in (status_reason(rec, [], {V2: notes[V1]}) or "")


def test_reasons_given_on_chain_are_shown_for_every_voter() -> None:
    """v5: reasons travel with the votes, so any node explains every voter's decision; a
    local note is used only for a vote that carries no reason of its own."""
    rec = _record("deprecated", [[5, "proposed"], [6, "deprecated"]],
                  {V1: ["reject", 6, "duplicates a committed memory"], V2: ["reject", 6]})
    notes = {V1: VoterNote(V1, "reject", "stale local note"),
             V2: VoterNote(V2, "reject", "noted locally")}
    text = status_reason(rec, [], notes)
    assert text is not None and text.startswith("rejected by validator votes at height 6: 2 reject")
    assert f"; {V1[:12]} voted reject: duplicates a committed memory" in text
    assert "stale local note" not in text  # the chain's reason wins
    assert text.endswith(f"auto-voter ({V2[:12]}) voted reject: noted locally")
    proposed = _record("proposed", [[5, "proposed"]], {V2: ["accept", 5, "fine by me"]})
    assert status_reason(proposed, []) == \
        f"awaiting validator votes (1 accept so far); {V2[:12]} voted accept: fine by me"


def test_authors_own_challenge_is_a_withdrawal() -> None:
    rec = _record("deprecated", [[5, "proposed"], [6, "committed"], [9, "challenged"],
                                 [9, "deprecated"]], {V1: ["accept", 6]})
    rounds = [{"opener": AUTHOR, "k": 0, "challengers": [AUTHOR],
               "reasons": {AUTHOR: "no longer true"}, "outcome": "deprecated"}]
    text = status_reason(rec, rounds)
    assert text is not None and text.startswith("withdrawn by its author")
    assert text.endswith("at height 9 (reason given: 'no longer true')")


def test_other_dispute_outcomes() -> None:
    hist = [[5, "proposed"], [6, "committed"], [9, "challenged"]]
    other = "b" * 64
    by_other = [{"opener": other, "k": 0, "challengers": [other], "reasons": {},
                 "outcome": "deprecated"}]
    assert (status_reason(_record("deprecated", [*hist, [9, "deprecated"]]), by_other) or "") \
        .startswith(f"deprecated by a challenge from {other[:12]}")
    open_round = [{"opener": other, "k": 1, "challengers": [other], "reasons": {},
                   "outcome": None}]
    assert "deprecated once 2 challengers agree" in (
        status_reason(_record("challenged", hist), open_round) or "")
    reinstated = [{**open_round[0], "outcome": "reinstated", "reinstated_by": V2}]
    assert status_reason(_record("committed", [*hist, [10, "committed"]]), reinstated) \
        == f"reinstated by {V2[:12]}"


def test_commit_cocommit_expiry_and_pending() -> None:
    assert status_reason(_record("committed", [[5, "proposed"], [6, "committed"]],
                                 {V1: ["accept", 6]}), []) \
        == "accepted by validator votes at height 6: 1 accept"
    assert (status_reason(_record("committed", [[5, "committed"]], cocommit="cc-1",
                                  coauthors=[AUTHOR, V1]), []) or "").startswith(
        "co-committed: jointly signed by 2 coauthors")
    expired = _record("deprecated", [[5, "proposed"], [105, "deprecated"]], expired_height=105)
    assert (status_reason(expired, []) or "").startswith("expired at height 105")
    assert status_reason(_record("proposed", [[5, "proposed"]], {V1: ["abstain", 5]}), []) \
        == "awaiting validator votes (1 abstain so far)"


def test_voter_notes_round_trip(tmp_path: Path) -> None:
    assert read_notes(tmp_path, ["m1"]) == {}  # no file yet: no notes, no error
    writer = NotesWriter(tmp_path)
    writer.record("m1", V1, "reject", "duplicates a committed memory")
    writer.record("m1", V1, "reject", "content shorter than 8 characters")  # replaced
    writer.close()
    assert read_notes(tmp_path, ["m1", "m2"]) == {
        "m1": {V1: VoterNote(V1, "reject", "content shorter than 8 characters")}}


@pytest.fixture()
def api(tmp_path: Path) -> Iterator[tuple[TestClient, LocalChain]]:
    chain = LocalChain(tmp_path / "chain")
    alice = seeded_key("reasons-alice")
    b = chain.builder(alice)
    n = chain.next_nonce
    chain.block([b.submit(n(alice), "w-1", "Withdrawn by the author in the next block")])
    chain.block([chain.builder(k).vote(n(k), "w-1") for k in chain.validator_keys])
    chain.block([b.challenge(n(alice), "w-1", "wrong")])
    assert all(r.code == 0 for r in chain.last_results), chain.last_results
    home = tmp_path / "home"
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x",
                           home=home)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client, chain
    chain.close()


def test_rest_serves_the_reason_on_get_and_list(api: tuple[TestClient, LocalChain]) -> None:
    client, _ = api
    doc = client.get("/v1/memories/w-1").json()
    assert doc["status"] == "deprecated"
    assert doc["status_reason"].startswith("withdrawn by its author"), doc
    assert "(reason given: 'wrong')" in doc["status_reason"]
    page = client.get("/v1/memories", params={"status": "deprecated"}).json()
    assert [m["status_reason"] for m in page["items"]] == [doc["status_reason"]]
