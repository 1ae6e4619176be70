"""Freshness weights: age halves a score per half-life, corroborations raise it, and the
re-sort happens on the pool before any cut."""

from __future__ import annotations

import pytest

from memledger.api.freshness import (
    DAY_NS,
    MAX_CORROBORATIONS,
    pool_size,
    reweigh,
    weighed,
    weight,
)


def test_a_memory_one_half_life_old_counts_half() -> None:
    assert weight(0, 30, 0) == 1.0
    assert weight(30 * DAY_NS, 30, 0) == pytest.approx(0.5)
    assert weight(60 * DAY_NS, 30, 0) == pytest.approx(0.25)
    assert weight(-5 * DAY_NS, 30, 0) == 1.0  # a clock step back never boosts


def test_corroborations_boost_up_to_a_cap() -> None:
    assert weight(0, 30, 3) == pytest.approx(1.3)
    assert weight(0, 30, 1000) == weight(0, 30, MAX_CORROBORATIONS) == pytest.approx(2.0)


def test_a_higher_weight_always_ranks_higher_even_for_negative_scores() -> None:
    assert weighed(0.8, 0.5) == pytest.approx(0.4)
    assert weighed(-0.2, 0.5) < weighed(-0.2, 1.0)


def test_a_fresh_memory_overtakes_a_slightly_more_relevant_old_one() -> None:
    now = 1000 * DAY_NS
    ranked = [("old", 0.90), ("new", 0.80), ("older", 0.85)]
    facts = {"old": (now - 365 * DAY_NS, 0), "new": (now - DAY_NS, 0),
             "older": (now - 730 * DAY_NS, 0)}
    assert [m for m, _ in reweigh(ranked, facts, now, 90)] == ["new", "old", "older"]
    # a long half-life leaves relevance in charge
    assert [m for m, _ in reweigh(ranked, facts, now, 36_500)] == ["old", "older", "new"]


def test_the_reference_time_never_changes_the_order() -> None:
    ranked = [("a", 0.9), ("b", 0.7), ("c", 0.8)]
    facts = {"a": (0, 0), "b": (40 * DAY_NS, 2), "c": (10 * DAY_NS, 0)}
    orders = {tuple(m for m, _ in reweigh(ranked, facts, now, 20))
              for now in (40 * DAY_NS, 400 * DAY_NS, 4000 * DAY_NS)}
    assert len(orders) == 1


def test_the_pool_is_deeper_than_the_page() -> None:
    assert pool_size(5, 1001) == 55
    assert pool_size(100, 1001) == 400
    assert pool_size(900, 1001) == 1001
