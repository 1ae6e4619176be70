"""The narrow-filter probe of ranked search: the same ids as reading cap + 1 of them, in
fewer rows handed to Python when the filter is broad, asked once per search."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.api import ranked
from memledger.api.queries import MemoryFilter, apply_filters
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.projection.schema import make_engine, memories


def _reference(conn: sa.Connection, flt: MemoryFilter, cap: int) -> list[str] | None:
    """What the search read before: cap + 1 ids, None when all of them came back."""
    rows = conn.execute(apply_filters(sa.select(memories.c.id), flt).limit(cap + 1)
                        ).scalars().all()
    return None if len(rows) > cap else [str(r) for r in rows]


def test_filtered_ids_answers_as_a_full_read_and_asks_sql_once_per_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("narrow")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"big-{i:02d}", f"a big note {i}",
                          domain="big") for i in range(30)] +
                [b.submit(chain.next_nonce(key), f"small-{i}", f"a small note {i}",
                          domain="small") for i in range(5)])
    monkeypatch.setattr(ranked, "NARROW_FIRST_READ", 4)  # so 30 is past the first read
    engine = make_engine(chain.db_url)
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute",
                    lambda *args: statements.append(str(args[2])))
    with engine.connect() as conn:
        for domain in ("big", "small", "none"):
            flt = MemoryFilter(domain=domain, status=("proposed",))
            for cap in (0, 3, 4, 5, 29, 30, 31, 100):
                narrow = ranked.filtered_ids(conn, flt)
                want = _reference(conn, flt, cap)
                statements.clear()
                got = narrow(cap)
                assert got == want, (domain, cap)
                assert narrow(cap) == want and len(statements) <= 3  # kept, not asked again
        broad = ranked.filtered_ids(conn, MemoryFilter(domain="big", status=("proposed",)))
        statements.clear()
        assert broad(20) is None
        # the first read (5 rows), then SQL's answer that a 21st row exists: no full read
        assert len(statements) == 2 and "OFFSET" in statements[1]
    engine.dispose()
    chain.close()
