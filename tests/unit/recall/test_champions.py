"""Champion lists: a one-word search for a word most memories hold ranks its kept best
documents instead of scanning the word's postings, and gives what the index gives."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.api.queries import MemoryFilter
from memledger.api.ranked import text_ranked
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.projection.schema import memories
from memledger.recall import champions
from memledger.recall.champions import Champions, make_list
from memledger.recall.text_index import TextIndex, bm25
from memledger.recall.text_indexer import TextIndexer


def _weight(entry: tuple[str, int, int], average: float = 10.0) -> float:
    return float(bm25(1.0, entry[1], entry[2], average))


def test_a_list_keeps_the_best_in_order_and_ignores_replays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(champions, "CHAMPIONS", 4)
    rng = random.Random(5)
    entries = [(f"d{i}", rng.randint(1, 4), rng.randint(3, 30)) for i in range(12)]
    kept = make_list("t", 10.0, entries[:6])
    for entry in entries[6:]:
        kept = kept.offered([entry])
    best = sorted(entries, key=lambda e: (-_weight(e), e[0]))[:4]
    assert [e[0] for e in kept.entries] == [e[0] for e in best]
    assert kept.offered([best[0]]).entries == kept.entries  # a replayed document
    top = kept.ranked(2.0, 10.0, 3)
    assert [m for m, _ in top] == [e[0] for e in best[:3]]
    assert top[0][1] == pytest.approx(2.0 * _weight(best[0]))


def test_lists_are_built_on_demand_one_at_a_time_rebuilt_on_drift_and_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(champions, "CHAMPIONS", 2)
    monkeypatch.setattr(champions, "LISTED_MIN_DOCS", 10)
    monkeypatch.setattr(champions, "MAX_LISTS", 2)
    built: list[str] = []

    def top(term: str) -> list[tuple[str, int, int]]:
        built.append(term)
        return [(f"{term}-a", 1, 5), (f"{term}-b", 2, 5), (f"{term}-c", 1, 50)]

    lists = Champions()
    freq = {"common": 50, "rare": 3, "other": 40, "third": 30}.__getitem__
    lists.want("other")  # sampled from the latest memories
    assert lists.serving("common", 1, freq) is None  # asked for by a search
    assert lists.serving("rare", 1, freq) is None  # too rare to list
    assert lists.wanted() == ["common", "other"]  # a search's word first
    assert lists.build_next(10.0, top) and built == ["common"]
    found = lists.serving("common", 1, freq)
    assert found is not None and [e[0] for e in found.entries] == ["common-b", "common-a"]
    assert lists.serving("common", 2, freq) is None  # deeper than half a list: the index
    assert lists.build_next(10.0, top) and built[-1] == "other"
    assert not lists.build_next(10.1, top)  # nothing wanted, 1% drift: kept
    assert lists.build_next(10.5, top) and built[-1] == "common"  # 5%: rebuilt
    lists.offer([("new", Counter({"common": 3, "x": 1}))])
    assert lists.serving("common", 1, freq).entries[0][0] == "new"  # type: ignore[union-attr]
    lists.serving("third", 1, freq)
    while lists.build_next(10.5, top):
        pass
    assert len(lists) == 2 and "third" in built
    assert lists.serving("other", 1, freq) is None  # the least recently searched went


WORDS = ["river", "stone", "lamp", "orbit", "cedar", "violet"]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A chain whose every memory holds "river", with lists from 20 documents up."""
    monkeypatch.setattr(champions, "CHAMPIONS", 48)
    monkeypatch.setattr(champions, "LISTED_MIN_DOCS", 20)
    chain = LocalChain(tmp_path / "chain")
    rng = random.Random(11)
    key = seeded_key("champions-unit")
    for block in range(2):
        b = chain.builder(key)
        chain.block([b.submit(chain.next_nonce(key), f"c-{block}-{i:03d}", " ".join(
            ["river"] * rng.randint(1, 3) + rng.choices(WORDS[1:], k=rng.randint(2, 14))))
            for i in range(60)])
    engine = sa.create_engine(chain.db_url)
    words = TextIndexer(engine, TextIndex(tmp_path / "text"))
    words.index.open()
    words.catch_up()
    words.state = "following"
    yield chain, engine, words, key
    words.index.close()
    engine.dispose()
    chain.close()


def test_a_common_word_is_answered_from_its_list_as_the_index_answers(  # type: ignore[no-untyped-def]
        node, monkeypatch: pytest.MonkeyPatch) -> None:
    chain, engine, words, key = node
    with engine.connect() as conn:
        by_index = text_ranked(conn, MemoryFilter(q="river"), "river", 5, words_index=words)
    assert words.champions.wanted() == ["river"]
    words._step()  # the follower builds the list between blocks, asked ones first
    assert words.champions.serving("river", 20, words.index.doc_freq) is not None
    scans = []
    real = words.index.search

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        scans.append(args)
        return real(*args, **kwargs)
    words.index.search = counted  # type: ignore[method-assign]
    with engine.connect() as conn:
        by_list = text_ranked(conn, MemoryFilter(q="river"), "river", 5, words_index=words)
    assert scans == []  # no posting scan
    # the same ranking, up to the order of equal scores
    assert [s for _, s in by_list] == pytest.approx([s for _, s in by_index], rel=0.05)
    with engine.begin() as conn:
        conn.execute(memories.update().where(memories.c.id == by_list[0][0])
                     .values(status="challenged"))
    with engine.connect() as conn:  # filtered before the cut, from the list
        filtered = text_ranked(conn, MemoryFilter(q="river"), "river", 5, words_index=words)
    assert by_list[0][0] not in {m for m, _ in filtered} and scans == []
    assert [s for _, s in filtered][:4] == pytest.approx([s for _, s in by_list][1:], rel=0.05)
    # a new block's best document: offered to the list before the index's watermark moves
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "c-best",
                                           "river river river river")])
    with engine.connect() as conn:  # not indexed yet: ranked from the unindexed rows
        assert text_ranked(conn, MemoryFilter(q="river"), "river", 5,
                           words_index=words)[0][0] == "c-best"
    words.catch_up()
    assert words.champions.serving("river", 5, words.index.doc_freq).entries[0][0] == "c-best"  # type: ignore[union-attr]
    with engine.connect() as conn:
        again = text_ranked(conn, MemoryFilter(q="river"), "river", 5, words_index=words)
    assert again[0][0] == "c-best" and scans == []
    with engine.connect() as conn:  # two words: the index answers
        text_ranked(conn, MemoryFilter(q="river stone"), "river stone", 5, words_index=words)
    assert len(scans) == 1
    with engine.connect() as conn:  # a filter that leaves too few of the list: the index
        narrowed = text_ranked(conn, MemoryFilter(q="river", status="committed"), "river",
                               5, words_index=words)
    assert narrowed == [] and len(scans) > 1  # every memory here is proposed


def test_the_follower_lists_the_common_words_of_the_latest_memories_at_start(node) -> None:  # type: ignore[no-untyped-def]
    _chain, _engine, words, _key = node
    assert len(words.champions) == 0
    while not words._step():  # no search has asked: the sampled words, one a step
        pass
    assert words.champions.wanted() == []
    listed = {t for t in WORDS if words.champions.serving(t, 20, words.index.doc_freq)}
    assert "river" in listed  # in every memory
    assert words.champions.serving("zeppelin", 20, words.index.doc_freq) is None
