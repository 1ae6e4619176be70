"""Summary statistics shared by the load generator (`memledger bench load`) and bench/."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

N = TypeVar("N", int, float)

__all__ = ["percentile"]


def percentile(values: Sequence[N], q: int | float) -> N:
    """The nearest-rank ``q``-th percentile (``q`` in 0..100): the smallest value with at least
    ``q`` percent of the values at or below it, always one of ``values`` (so ints stay ints).

    ``percentile(v, 50)`` is the lower median; ``percentile(v, 100)`` the maximum. The rank
    ⌈q·n/100⌉ is computed in integers when ``q`` is one. Raises ValueError on no values.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    n = len(values)
    rank = -(-q * n // 100) if isinstance(q, int) else math.ceil(q * n / 100)
    return sorted(values)[max(1, rank) - 1]
