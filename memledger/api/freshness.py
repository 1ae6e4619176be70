"""Freshness in ranked search: weigh each hit's relevance by its age and corroborations.

`freshness` on a ranked query is a half-life in days: a memory's score is multiplied by
`0.5 ** (age / half_life)`, age counted in block time from the block that submitted it
(`submitted_time_ns`, on chain) to the newest submitted memory the projection holds. The
reference only scales every score by one factor, so it never changes the order; taking
it from the chain keeps a ranking reproducible from the projection alone, with no wall
clock. Each corroboration multiplies the weight by 1 + CORROBORATION_BOOST, up to
MAX_CORROBORATIONS of them. Off unless asked for.

The weights are applied to a pool of the POOL_FACTOR x (at least POOL_EXTRA more) best
hits by relevance, and the page is cut from the re-sorted pool: the cut comes after the
weighing, and a fresh memory ranked a little below an old one by relevance can overtake
it; one far below the pool cannot (docs/RECALL.md, "Freshness").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from memledger.projection.schema import memories

DAY_NS = 86_400 * 1_000_000_000
#: the largest half-life accepted, in days (100 years: no decay worth the name)
MAX_HALF_LIFE_DAYS = 36_500.0
CORROBORATION_BOOST = 0.1
MAX_CORROBORATIONS = 10
POOL_FACTOR = 4
POOL_EXTRA = 50


def pool_size(want: int, cap: int) -> int:
    """How many hits by relevance a freshness-weighted page of `want` re-sorts."""
    return min(max(want * POOL_FACTOR, want + POOL_EXTRA), cap)


def weight(age_ns: int, half_life_days: float, corroborations: int) -> float:
    """The factor a hit's score is multiplied by (1 for a memory as new as the newest)."""
    age_days = max(age_ns, 0) / DAY_NS
    boost = 1 + CORROBORATION_BOOST * min(max(corroborations, 0), MAX_CORROBORATIONS)
    return float(0.5 ** (age_days / half_life_days) * boost)


def weighed(score: float, factor: float) -> float:
    """A score times the factor; a negative score (a cosine below 0) divided by it, so
    that a higher weight always ranks a hit higher."""
    return score * factor if score >= 0 else score / factor


def reweigh(ranked: Sequence[tuple[str, float]], facts: Mapping[str, tuple[int, int]],
            now_ns: int, half_life_days: float) -> list[tuple[str, float]]:
    """The hits re-sorted by weighed score (ties by id); `facts` maps id ->
    (submitted_time_ns, corroborations), and a hit without facts keeps weight 1."""
    out = []
    for memory_id, score in ranked:
        time_ns, corroborations = facts.get(memory_id, (now_ns, 0))
        out.append((memory_id, weighed(score, weight(now_ns - time_ns, half_life_days,
                                                     corroborations))))
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


def hit_facts(conn: sa.Connection, ids: Sequence[str], rows: Mapping[str, Any]
              ) -> tuple[dict[str, tuple[int, int]], int]:
    """(submitted_time_ns, corroborations) of each hit, and the newest submit time the
    projection holds (the age reference). `rows` are projection rows already read."""
    missing = [m for m in ids if m not in rows]
    found: dict[str, Any] = {m: rows[m] for m in ids if m in rows}
    if missing:
        query = sa.select(memories.c.id, memories.c.submitted_time_ns, memories.c.record
                          ).where(memories.c.id.in_(missing))
        found.update((str(r.id), r) for r in conn.execute(query))
    facts = {m: (int(r.submitted_time_ns),
                 len(json.loads(r.record).get("corroborators") or []))
             for m, r in found.items()}
    newest = conn.execute(sa.select(memories.c.submitted_time_ns)
                          .order_by(memories.c.submitted_height.desc()).limit(1)).scalar()
    return facts, int(newest or 0)
