"""The near-copy decision: close in meaning and the same specifics, or not a copy."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from memledger.daemon.nearcopy import (
    Neighbour,
    NeighbourSource,
    differing_specifics,
    first_near_copy,
    is_near_copy,
    specific_words,
)
from memledger.daemon.voter import Candidate, decide
from tests.support.http_server import serving

PORT = "The staging database listens on port 5433"


def test_specific_words_are_numbers_names_symbols_and_negations() -> None:
    text = "Deploys to prod.example.com are not allowed on Friday after 17:00, Maria said"
    assert specific_words(text) == {"prod.example.com", "not", "friday", "17:00", "maria"}


def test_a_capital_that_only_starts_a_sentence_is_no_name() -> None:
    assert differing_specifics("Deploys happen on Tuesdays. Nightly builds run.",
                               "Every Tuesdays deploys happen; nightly builds run") == set()


@pytest.mark.parametrize("other", [
    "The production database listens on port 5432",
    "The staging database does not listen on port 5433",
    "The staging database listens on port five",
])
def test_a_changed_number_name_or_negation_is_a_different_fact(other: str) -> None:
    assert not is_near_copy(PORT, Neighbour("m1", other, 0.99), 0.92)


def test_a_rewording_above_the_threshold_is_a_near_copy() -> None:
    assert is_near_copy("Port 5433 is where the staging database listens",
                        Neighbour("m1", PORT, 0.95), 0.92)


def test_below_the_threshold_or_with_the_check_off_nothing_is_a_copy() -> None:
    reworded = "Port 5433 is where the staging database listens"
    assert not is_near_copy(reworded, Neighbour("m1", PORT, 0.91), 0.92)
    assert not is_near_copy(reworded, Neighbour("m1", PORT, 0.99), 0.0)


def test_the_closest_near_copy_is_named() -> None:
    found = first_near_copy(PORT, [Neighbour("far", PORT, 0.93), Neighbour("near", PORT, 0.97),
                                   Neighbour("other", "Port 1 is open", 0.99)], 0.92)
    assert found is not None and found.memory_id == "near"


def _cand(near: tuple[str, float] | None = None, dup: bool = False) -> Candidate:
    return Candidate("m2", "infra", PORT, "h", 900_000, dup, near)


def test_decide_rejects_a_near_copy_naming_the_id() -> None:
    decision, reason = decide(_cand(("m1", 0.953)))
    assert decision == "reject" and "m1" in reason and "0.95" in reason


def test_decide_accepts_without_a_near_copy_and_keeps_the_exact_check_first() -> None:
    assert decide(_cand()) == ("accept", "passes baseline checks")
    assert decide(_cand(("m1", 0.99), dup=True))[1] == "duplicates a committed memory"


class _Recall(BaseHTTPRequestHandler):
    """The node's recall route as the voter reads it: canned hits, or a failure."""

    hits: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200
    asked: ClassVar[list[dict[str, list[str]]]] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        _Recall.asked.append(parse_qs(urlsplit(self.path).query))
        body = json.dumps({"items": self.hits}).encode()
        self.send_response(self.status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_source_asks_for_committed_neighbours_of_the_domain_and_fails_open() -> None:
    _Recall.hits = [{"id": "m1", "content": PORT, "score": 0.97},
                    {"id": "m2", "content": PORT, "score": None},  # unranked: ignored
                    {"id": "self", "content": PORT, "score": 1.0}]  # itself: ignored
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Recall)) as url:
        source = NeighbourSource(url, timeout=2)
        found = source.neighbours("self", "infra", "Port 5433: the staging database")
        assert found == [Neighbour("m1", PORT, 0.97)]
        asked = _Recall.asked[-1]
        assert asked["mode"] == ["semantic"] and asked["status"] == ["committed"]
        assert asked["domain"] == ["infra"] and asked["q"] == ["Port 5433: the staging database"]
        _Recall.status = 409  # no embedder: no neighbours, the vote goes on
        assert source.neighbours("self", "infra", PORT) == []
        source.close()
    _Recall.status = 200
    assert NeighbourSource(url, timeout=0.5).neighbours("x", "infra", PORT) == []  # down
