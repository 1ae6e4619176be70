"""The near-copy decision: close in meaning and the same specifics, or not a copy."""

from __future__ import annotations

import pytest

from memledger.daemon.nearcopy import (
    Neighbour,
    differing_specifics,
    first_near_copy,
    is_near_copy,
    specific_words,
)
from memledger.daemon.voter import Candidate, decide

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
