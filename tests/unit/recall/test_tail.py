"""The recall tail: memories above the vector index's watermark, embedded by a static
model as they commit, so a search finds them by meaning however far behind the index's
follower is (memledger.recall.tail)."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from memledger.recall.embedder import Embedder, make_embedder
from memledger.recall.index import VectorIndex
from memledger.recall.tail import Run, Tail, appended, nearest, pruned
from tests.support.api import settings_with_extra


def _run(ids: list[str], heights: list[int], dim: int = 4) -> Run:
    vectors = np.zeros((len(ids), dim), dtype=np.float32)
    for row, memory_id in enumerate(ids):
        vectors[row, hash(memory_id) % dim] = 1.0
    return Run(tuple(ids), np.asarray(heights, dtype=np.int64), vectors)


def test_runs_merge_as_they_grow_and_keep_their_order() -> None:
    runs: tuple[Run, ...] = ()
    for height in range(1, 1001):
        runs = appended(runs, _run([f"m{height:04d}"], [height]))
    assert sum(len(r) for r in runs) == 1000
    assert len(runs) <= 2 * 10 + 1  # O(log n) runs
    ids = [m for r in runs for m in r.ids]
    assert ids == sorted(ids)
    assert all(np.all(np.diff(r.heights) > 0) for r in runs)


def test_pruning_drops_what_the_index_has_and_the_oldest_past_the_cap() -> None:
    runs = (_run(["a", "b"], [1, 2]), _run(["c", "d"], [3, 4]), _run(["e"], [5]))
    kept, dropped = pruned(runs, watermark=2, cap=10)
    assert [r.ids for r in kept] == [("c", "d"), ("e",)] and dropped == 0
    kept, dropped = pruned(runs, watermark=3, cap=10)  # "c" is masked, its run kept
    assert [r.ids for r in kept] == [("c", "d"), ("e",)] and dropped == 0
    kept, dropped = pruned(runs, watermark=0, cap=2)
    assert [r.ids for r in kept] == [("d",), ("e",)] and dropped == 3  # a run is cut
    kept, dropped = pruned(runs, watermark=3, cap=1)  # "c" is masked: "d" goes for room
    assert [r.ids for r in kept] == [("e",)] and dropped == 4
    straddling = (_run(["a", "b", "c", "d"], [1, 2, 3, 4]),)
    kept, dropped = pruned(straddling, watermark=1, cap=2)
    assert [r.ids for r in kept] == [("c", "d")] and dropped == 2


def test_nearest_keeps_to_the_heights_asked_and_orders_by_score_then_id() -> None:
    vectors = np.asarray([[1, 0], [0.6, 0.8], [1, 0], [0, 1]], dtype=np.float32)
    run = Run(("w", "x", "y", "z"), np.asarray([1, 2, 3, 4], dtype=np.int64), vectors)
    query = np.asarray([1, 0], dtype=np.float32)
    assert [m for m, _ in nearest((run,), query, 0, 4, 3)] == ["w", "y", "x"]
    assert [m for m, _ in nearest((run,), query, 1, 3, 5)] == ["y", "x"]
    assert nearest((run,), query, 4, 9, 5) == []


@pytest.fixture
def chain(tmp_path: Path):  # type: ignore[no-untyped-def]
    from memledger.devtools.chain import LocalChain

    local = LocalChain(tmp_path / "chain")
    yield local
    local.close()


def _fillers(chain, key, count: int, start: int = 0) -> None:  # type: ignore[no-untyped-def]
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"f-{i}",
                                           f"filler note {i} on invoice number {i * 7}")
                 for i in range(start, start + count)])


def test_the_tail_follows_from_the_watermark_and_lets_go_as_the_index_passes(
        chain, wordllama: Embedder) -> None:  # type: ignore[no-untyped-def]
    from memledger.devtools.chain import seeded_key

    key = seeded_key("tail-follow")
    _fillers(chain, key, 5)
    first = chain.height
    sealed = "mlpriv1:" + base64.b64encode(bytes(64)).decode()
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "cat",
                                           "Our cat Miso is allergic to chicken"),
                 chain.builder(key).submit(chain.next_nonce(key), "secret", sealed)])
    _fillers(chain, key, 3, start=5)
    engine = sa.create_engine(chain.db_url)
    with engine.connect() as conn:  # committed, and its content is the envelope
        assert conn.execute(sa.text("SELECT content FROM memories WHERE id = 'secret'")
                            ).scalar_one() == sealed
    watermark = [first]
    tail = Tail(engine, wordllama, lambda: watermark[0])
    assert tail.catch_up() == 4  # the cat and three fillers; the sealed one never
    assert len(tail) == 4 and tail.covered_height(first) == chain.height
    found = tail.nearest("what must the pet not eat", 0, chain.height, 1)
    assert [m for m, _ in found] == ["cat"]
    watermark[0] = chain.height  # the index got there
    assert tail.catch_up() == 0 and len(tail) == 0 and tail.runs == ()
    _fillers(chain, key, 2, start=8)
    assert tail.catch_up() == 2 and tail.status().memories == 2
    engine.dispose()


def test_a_full_tail_drops_the_oldest_and_says_they_are_not_covered(
        chain, wordllama: Embedder,  # type: ignore[no-untyped-def]
        caplog: pytest.LogCaptureFixture) -> None:
    from memledger.devtools.chain import seeded_key

    key = seeded_key("tail-cap")
    for start in range(0, 5):
        _fillers(chain, key, 2, start=2 * start)  # five blocks of two
    engine = sa.create_engine(chain.db_url)
    watermark = [0]
    tail = Tail(engine, wordllama, lambda: watermark[0], cap=5)
    assert tail.catch_up() == 10
    assert len(tail) == 5  # the oldest are dropped first
    assert tail.dropped_through > 0 and tail.covered_height(0) == 0
    assert tail.status().covered_height == 0  # memories in neither: recall is behind
    _fillers(chain, key, 2, start=10)
    assert tail.catch_up() == 2 and len(tail) == 5  # more dropped, the same gap
    full = [r for r in caplog.records if "recall tail full" in r.getMessage()]
    assert len(full) == 1  # said once per gap, not at every step
    watermark[0] = tail.dropped_through  # once the index passes them, covered again
    assert tail.covered_height(watermark[0]) == chain.height
    engine.dispose()


def test_a_search_finds_by_meaning_what_the_follower_is_far_from_reaching(
        chain, tmp_path: Path, wordllama: Embedder,  # type: ignore[no-untyped-def]
        monkeypatch: pytest.MonkeyPatch) -> None:
    """More than the newest 128 above the watermark: before the tail, a memory older
    than those was found by words only until the follower reached it."""
    from memledger.api.filter_check import FilterCheck
    from memledger.api.queries import MemoryFilter
    from memledger.api.ranked import hybrid, semantic
    from memledger.devtools.chain import seeded_key
    from memledger.recall import indexer as indexer_module
    from memledger.recall.indexer import UNINDEXED_CAP, Indexer

    # the budget is the clock's business; here the picks are what is tested
    monkeypatch.setattr(indexer_module, "TAIL_BUDGET_S", 60.0)
    # past the newest 128, which `unindexed` ranks; the node waits for 1,000 behind
    monkeypatch.setattr(indexer_module, "TAIL_AFTER", UNINDEXED_CAP)
    key, other = seeded_key("tail-search"), seeded_key("tail-other")
    _fillers(chain, key, 40)
    main = make_embedder("minilm-int8:128")
    assert main is not None
    engine = sa.create_engine(chain.db_url)
    tail_model = make_embedder("wordllama:128")
    indexers = {}
    for with_tail in (False, True):
        indexer = Indexer(engine, VectorIndex(tmp_path / f"recall-{with_tail}", main),
                          tail_embedder=tail_model if with_tail else None)
        indexer.index.open()
        indexer.catch_up()
        indexer.state = "following"  # serving, with no follower thread to move it
        indexers[with_tail] = indexer
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "cat",
                                           "Our cat Miso is allergic to chicken"),
                 chain.builder(other).submit(chain.next_nonce(other), "dog",
                                             "The dog must never eat chocolate")])
    _fillers(chain, key, UNINDEXED_CAP + 20, start=100)
    found: dict[bool, list[str]] = {}
    for with_tail, indexer in indexers.items():
        if indexer.tail is not None:
            indexer.tail.catch_up()
            assert indexer.status().covered_lag == 0 < indexer.status().lag
            with monkeypatch.context() as nearer:  # not far enough behind: no picks
                nearer.setattr(indexer_module, "TAIL_AFTER", len(indexer.tail))
                with engine.connect() as conn:
                    flt = MemoryFilter(q="what should the pet not eat")
                    assert indexer.tail_picks(conn, flt.q or "", chain.height, 0,
                                              None) == []
                assert indexer.tail_searches == 0
        with engine.connect() as conn:
            flt = MemoryFilter(q="what should the pet not eat")
            found[with_tail] = [m for m, _ in semantic(conn, flt, flt.q or "", 5, indexer,
                                                       FilterCheck(conn, flt))]
            if with_tail:
                mixed = hybrid(conn, flt, flt.q or "", 5, indexer, None,
                               FilterCheck(conn, flt))
                assert {"cat", "dog"} <= {m for m, _ in mixed}
                mine = MemoryFilter(q=flt.q, author=bytes(key.verify_key).hex())
                only = [m for m, _ in semantic(conn, mine, mine.q or "", 5, indexer,
                                               FilterCheck(conn, mine))]
                assert "cat" in only and "dog" not in only  # the filter holds for picks
        assert indexer.index.meta.indexed_height < chain.height  # nothing waited
        if indexer.tail is not None:
            indexer.catch_up()  # the follower gets there: the tail lets go
            indexer.tail.catch_up()
            assert len(indexer.tail) == 0 and indexer.status().covered_lag == 0
        indexer.stop()
    assert not {"cat", "dog"} & set(found[False])  # past the newest 128: not by meaning
    assert {"cat", "dog"} <= set(found[True][:3])
    engine.dispose()


def test_the_node_runs_a_tail_beside_a_transformer_and_reports_it(
        chain, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """On by default beside a model that cannot follow a busy node; none beside a static
    one, or with `extra.recall_tail: "off"` (anything else is a configuration error).
    /v1/status and /metrics say how far behind recall by meaning is."""
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import seeded_key

    def tail_on(extra: dict[str, str]) -> bool:
        return settings_with_extra(tmp_path / "home", extra).recall_tail

    assert tail_on({}) is True and tail_on({"recall_tail": "off"}) is False
    with pytest.raises(ValueError, match="recall_tail"):
        tail_on({"recall_tail": "no"})

    key = seeded_key("tail-node")
    _fillers(chain, key, 3)
    base = {"db_url": chain.db_url, "rpc_url": "http://127.0.0.1:9", "chain_id": "x"}
    static = create_app(ApiSettings(**base, embedder="wordllama",
                                    index_dir=tmp_path / "static"))
    assert static.state.memledger.recall.tail is None
    static.state.memledger.recall.stop()
    off = create_app(ApiSettings(**base, embedder="minilm-int8:128", recall_tail=False,
                                 index_dir=tmp_path / "off"))
    assert off.state.memledger.recall.tail is None
    off.state.memledger.recall.stop()
    app = create_app(ApiSettings(**base, embedder="minilm-int8:128",
                                 index_dir=tmp_path / "on"))
    recall = app.state.memledger.recall
    assert recall.tail is not None and recall.wait_caught_up(60)
    with TestClient(app, raise_server_exceptions=False) as api:
        recall.pause()  # the index's follower holds; the tail follows on its own
        _fillers(chain, key, 5, start=3)
        deadline = time.monotonic() + 30
        while len(recall.tail) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        status = recall.status()
        assert status.lag == 1 and status.covered_lag == 0, status
        assert status.tail is not None and status.tail.embedder.startswith("wordllama")
        assert status.tail.covered_height == chain.height and status.tail.memories == 5
        metrics = api.get("/metrics").text
        assert "memledger_recall_tail_searches_total 0.0" in metrics
        assert "memledger_recall_covered_lag_blocks 0.0" in metrics
        assert "memledger_recall_tail_memories 5.0" in metrics
        recall.pause(False)
