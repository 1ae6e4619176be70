"""memledger.devtools.stats.percentile: the one percentile (nearest rank) of loadgen and bench/."""

from __future__ import annotations

import pytest

from memledger.devtools.stats import percentile


def test_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile(values, 0) == 1.0
    assert percentile([5.0], 99) == 5.0
    assert percentile([3, 1, 2, 4], 50) == 2  # the lower median, not 2.5
    assert percentile([3, 1, 2, 4], 51) == 3


def test_always_one_of_the_values_and_ints_stay_ints() -> None:
    samples = [7, 3, 9, 1, 5, 11, 13]
    for q in (1, 10, 25, 50, 75, 90, 99, 99.9, 12.5):
        result = percentile(samples, q)
        assert result in samples and isinstance(result, int)
    assert percentile(list(range(1000)), 99.9) == 998  # rank ⌈999.0⌉ = 999


def test_no_values_or_a_bad_q_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0], 101)
