"""What ranked search asks SQLite at scale: the narrow-filter probe (the same ids as
reading cap + 1 of them, fewer rows handed to Python when the filter is broad, asked once
per search) and the filter check (its listed ids looked up by primary key, never the
filter's own index walked: that walk was ~100-150 ms on a 100k-memory ledger)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.api import ranked
from memledger.api.filter_check import FilterCheck
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


def test_the_filter_check_looks_its_ids_up_and_passes_what_the_filter_passes(
        tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "chain")
    alice, bob = seeded_key("check-a"), seeded_key("check-b")
    txs = []
    for key, name in ((alice, "a"), (bob, "b")):
        b = chain.builder(key)
        txs += [b.submit(chain.next_nonce(key), f"{name}-{i:02d}", f"note {i} by {name}",
                         domain="ops" if i % 2 else "dev", tags=("red",) if i % 3 else ())
                for i in range(12)]
    chain.block(txs)
    engine = make_engine(chain.db_url)
    plans: list[list[str]] = []

    def plan(conn: object, cursor: object, statement: str, parameters: object,
             *rest: object) -> None:
        if "json_each" in statement:
            rows = cursor.execute(f"EXPLAIN QUERY PLAN {statement}",  # type: ignore[attr-defined]
                                  parameters).fetchall()
            plans.append([str(r[3]) for r in rows])

    sa.event.listen(engine, "before_cursor_execute", plan)
    author = bytes(bob.verify_key).hex()
    filters = [MemoryFilter(status=("proposed",)),
               MemoryFilter(domain="ops", status=("proposed",)),
               MemoryFilter(domain="dev", status=("proposed",), tags=("red",)),
               MemoryFilter(author=author.upper(), status=("proposed",), type="fact",
                            tags=("red",)),
               MemoryFilter(domain="ops")]  # committed: none are
    listed = [f"{n}-{i:02d}" for n in "ab" for i in range(0, 12, 2)] + ["a-01", "nope"]
    with engine.connect() as conn:
        for flt in filters:
            want = {str(m) for m in conn.execute(apply_filters(sa.select(memories.c.id), flt)
                                                 .where(memories.c.id.in_(listed))).scalars()}
            plans.clear()
            assert FilterCheck(conn, flt, {})(listed) == want, flt
            searched = [step for step in plans[0] if step.startswith("SEARCH memories")]
            assert searched == ["SEARCH memories USING INDEX sqlite_autoindex_memories_1 (id=?)"]
    engine.dispose()
    chain.close()
