"""The word index (tantivy) behind ranked text search: it finds what the projection's
full-text index finds, filters before the top-k cut, sees a block the moment the
projection has it, survives restarts and replays without double counting, and never
lets a query's characters reach tantivy's query syntax."""

from __future__ import annotations

import random
import resource
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from memledger.api import ranked, search
from memledger.api.filter_check import FilterCheck, Rows
from memledger.api.queries import MemoryFilter
from memledger.api.ranked import text_ranked
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.projection.schema import memories
from memledger.recall.follow import projection_height
from memledger.recall.text_index import TextIndex, query_terms, word_bags
from memledger.recall.text_indexer import TextIndexer, document_body

WORDS = ["river", "stone", "lamp", "orbit", "cedar", "violet", "harbor", "quartz",
         "meadow", "falcon", "ember", "glacier"]


def test_add_search_replay_and_reopen(tmp_path: Path) -> None:
    index = TextIndex(tmp_path / "text")
    assert index.open() == "no word index yet"
    index.add([("a", "the river stone"), ("b", "river lamp"), ("c", "lamp orbit orbit")], 5)
    assert {m for m, _ in index.search(["river"], 10)} == {"a", "b"}
    assert [m for m, _ in index.search(["river", "lamp"], 10)] == ["b"]
    assert {m for m, _ in index.search(["stone", "orbit"], 10, any_word=True)} == {"a", "c"}
    assert index.search(["orbit"], 10)[0][0] == "c"
    index.add([("a", "the river stone")], 6)  # a replayed range: no second copy
    assert len(index) == 3 and index.indexed_height == 6
    index.close()
    again = TextIndex(tmp_path / "text")
    assert again.open() is None and again.indexed_height == 6 and len(again) == 3
    for hostile in (["AND"], ["OR", "NOT"], ['"river'], ["river:*"], ["(", ")"], ["body:lamp"],
                    ["+river", "-lamp"], ["river~2"], ["[a TO z]"]):
        again.search(hostile, 5)  # never a syntax error
    assert query_terms(["body:lamp", "river~2"]) == ["body", "lamp", "river", "2"]
    again.close()


def test_a_search_during_a_discard_keeps_the_old_view(tmp_path: Path) -> None:
    """A search that starts while a damaged index is wiped (it passed the `serving` check
    just before) reads the old view or gets tantivy's ValueError, which sends it to the
    projection: the open index was unset for the wipe, and it failed "not open" (a 500)."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "river stone"), ("b", "river lamp")], 3)
    seen: list[object] = []
    wipe = index._wipe

    def search_then_wipe() -> None:
        try:
            seen.append({m for m, _ in index.search(["river"], 10)})
        except ValueError as exc:  # tantivy's error for files gone: handled upstream
            seen.append(exc)
        wipe()

    index._wipe = search_then_wipe  # type: ignore[method-assign]
    index.discard("found damaged")
    assert seen and not isinstance(seen[0], RuntimeError), seen
    assert len(index) == 0 and index.search(["river"], 10) == []
    index.close()


ODD_WORDS = ["İstanbul", "İSTANBUL", "ǅungla", "ﬁsh", "cat\u0301", "ab\u0640cd", "²",
             "x" * 300, "--", "\x00cat", "a\u00a0b", "\u200bcat", "NEAR(a b)", "title:foo"]


@pytest.mark.parametrize("any_word", [False, True])
def test_a_word_tantivy_splits_in_two_is_two_terms_not_a_phrase(tmp_path: Path,
                                                               any_word: bool) -> None:
    """Python lower-cases "İ" to "i" and a combining dot, which tantivy's tokenizer splits:
    the query parser made that a phrase query, refused by an index without positions."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "a trip to İstanbul in spring"), ("b", "fish and chips")], 1)
    assert [m for m, _ in index.search(["İstanbul"], 10, any_word=any_word)] == ["a"]
    assert [m for m, _ in index.search(["İSTANBUL", "spring"], 10, any_word)] == ["a"]
    bags = word_bags([("c", "İstanbul again")])
    assert [m for m, _ in index.score_unindexed(["İstanbul"], bags, any_word)] == ["c"]
    for word in ODD_WORDS:
        index.search([word], 10, any_word=any_word)  # never an error
        index.search(["spring", word], 10, any_word=any_word)
    assert [m for m, _ in index.search(["ﬁsh"], 10, any_word)] == ["b"]
    index.close()


def test_a_capital_dotted_i_matches_its_plain_lower_case(tmp_path: Path) -> None:
    """Lower-casing "İ" leaves "i" and a combining dot: "istanbul" did not find a memory
    saying "İstanbul" (nor the reverse) until accents were folded before lower-casing."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "a trip to İstanbul in spring"), ("b", "ISTANBUL by night"),
               ("c", "fish and chips")], 1)
    for word in ("istanbul", "İstanbul", "ISTANBUL", "İSTANBUL"):
        assert sorted(m for m, _ in index.search([word], 10, any_word=False)) == ["a", "b"]
    bags = word_bags([("d", "İstanbul again"), ("e", "istanbul too")])
    assert sorted(m for m, _ in index.score_unindexed(["istanbul"], bags, False)) == ["d", "e"]
    index.close()


def test_word_frequency_is_read_from_the_term_dictionary(tmp_path: Path) -> None:
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "Databases running on port-5433"), ("b", "the database runs"),
               ("c", "a lamp")], 1)
    assert index.share_matching("database") == (2, 3)  # stemmed like the documents
    assert index.share_matching("RUNNING") == (2, 3)
    assert index.share_matching("port-5433") == (1, 3)  # its rarest piece
    assert index.share_matching("port-lamp") == (1, 3)  # an upper bound: no doc has both
    assert index.share_matching("zeppelin") == (0, 3)
    assert index.share_matching("--") == (0, 3)
    index.close()


def test_a_stale_watermark_rebuilds(tmp_path: Path) -> None:
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "river")], 1)
    index.close()
    (tmp_path / "text" / "watermark.json").write_text('{"format": 999}')
    again = TextIndex(tmp_path / "text")
    assert again.open() == "word index from another format"
    assert len(again) == 0 and again.indexed_height == 0
    again.close()


@pytest.mark.parametrize("query", ["cafe", "café", "CAFÉ", "Cafés"])
def test_accents_are_folded_in_documents_and_queries(tmp_path: Path, query: str) -> None:
    """As the projection's unicode61 full-text index does: "cafe" finds "café"."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "meet at the café near the station"), ("b", "a cafe au lait"),
               ("c", "the station clock")], 1)
    assert {m for m, _ in index.search([query], 10)} == {"a", "b"}
    bags = word_bags([("d", "naïve crème brûlée at the CAFÉ")])
    assert [m for m, _ in index.score_unindexed([query], bags)] == ["d"]
    assert index.share_matching(query) == (2, 3)
    index.close()


def test_an_index_from_before_accent_folding_is_rebuilt(tmp_path: Path) -> None:
    """Its terms keep the accents a query no longer has: rebuilt, not served."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "café")], 4)
    index.close()
    (tmp_path / "text" / "watermark.json").write_text(
        '{"format": 1, "tokenizer": "en_stem", "indexed_height": 4, "words_added": 1, '
        '"docs_added": 1, "documents": 1}')  # what the unfolding index wrote
    again = TextIndex(tmp_path / "text")
    assert again.open() == "word index from another format"
    assert len(again) == 0 and again.indexed_height == 0
    again.close()


DIGEST = "3f7a" * 16  # a SHA-256 hex digest: 64 bytes
IDENT = "customerAccountReconciliationServiceFactoryBean"
CJK = "東京都庁の会議室は十二階にあります"  # one word to the tokenizer: 51 bytes


@pytest.mark.parametrize("word", [DIGEST, IDENT, CJK, "q" * 512])
def test_words_of_forty_bytes_and_more_are_found(tmp_path: Path, word: str) -> None:
    """tantivy's en_stem drops words over 40 bytes; the projection's full-text index
    (`words` mode) finds them, so ranked text search must too."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", f"the release has {word}。"), ("b", "an unrelated note")], 1)
    assert [m for m, _ in index.search([word], 10)] == ["a"]
    assert [m for m, _ in index.search([word, "release"], 10, any_word=True)] == ["a"]
    bags = word_bags([("c", f"again {word}")])
    assert [m for m, _ in index.score_unindexed([word], bags)] == ["c"]
    assert index.share_matching(word) == (1, 2)
    index.close()


def test_an_index_that_dropped_long_words_is_rebuilt(tmp_path: Path) -> None:
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "river")], 4)
    index.close()
    (tmp_path / "text" / "watermark.json").write_text(
        '{"format": 2, "tokenizer": "en_stem_fold", "indexed_height": 4, "words_added": 1, '
        '"docs_added": 1, "documents": 1}')  # what the 40-byte index wrote
    again = TextIndex(tmp_path / "text")
    assert again.open() == "word index from another format"
    assert len(again) == 0 and again.indexed_height == 0
    again.close()


def test_after_a_full_disk_the_retry_stores_its_documents(tmp_path: Path) -> None:
    """A failed write (EFBIG here) left tantivy's writer dead: the follower's retry then
    "committed" nothing, moved the watermark, and the memories were never indexed."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([(f"m-{k}", f"zeppelin note {k}") for k in range(10)], 1)
    batch = [(f"n-{k}", f"kestrel words {k} " * 50) for k in range(3000)]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, hard))  # CPython ignores SIGXFSZ
    try:
        with pytest.raises(ValueError, match="File too large"):
            index.add(batch, 2)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert index.indexed_height == 1
    index.add(batch, 2)  # the follower's retry
    index.add([("z", "zeppelin later")], 3)
    assert len(index.search(["kestrel"], 5000)) == 3000
    assert len(index.search(["zeppelin"], 50)) == 11
    index.close()
    again = TextIndex(tmp_path / "text")
    assert again.open() is None and again.indexed_height == 3 and len(again) == 3011
    again.close()


class _DeadWriter:
    """tantivy's writer as a failed write can leave it: it takes every call and stores
    nothing, without an error."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def delete_documents_by_term(self, field: str, value: str) -> None:
        pass

    def add_document(self, doc: Any) -> None:
        pass

    def commit(self) -> int:
        return 0

    def rollback(self) -> None:
        self.real.rollback()

    def wait_merging_threads(self) -> None:
        self.real.wait_merging_threads()


def test_a_commit_that_stores_nothing_does_not_move_the_watermark(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([("a", "river")], 1)
    monkeypatch.setattr(index, "_writer", _DeadWriter(index._writer))
    docs = [("b", "river stone"), ("c", "lamp")]
    with pytest.raises(RuntimeError, match="holds 0 of 2 documents"):
        index.add(docs, 2)
    assert index.indexed_height == 1 and index.documents == 1
    assert '"indexed_height": 1' in (tmp_path / "text" / "watermark.json").read_text()
    index.add(docs, 2)  # a new writer
    assert [m for m, _ in index.search(["stone"], 5)] == ["b"] and index.documents == 3
    index.close()


def _chain(tmp_path: Path) -> LocalChain:
    chain = LocalChain(tmp_path / "chain")
    rng = random.Random(11)
    key = seeded_key("words-unit")
    for block in range(3):
        b = chain.builder(key)
        chain.block([b.submit(chain.next_nonce(key), f"w-{block}-{i:03d}",
                              " ".join(rng.choices(WORDS, k=rng.randint(4, 12))),
                              tags=[rng.choice(WORDS)])
                     for i in range(80)])
    return chain


@pytest.fixture
def chain_and_words(tmp_path: Path):  # type: ignore[no-untyped-def]
    chain = _chain(tmp_path)
    engine = sa.create_engine(chain.db_url)
    words = TextIndexer(engine, TextIndex(tmp_path / "text"))
    words.start()
    words.catch_up()
    words.state = "following"
    yield chain, engine, words
    words.stop()
    engine.dispose()
    chain.close()


def _recorded_statements(engine: sa.Engine) -> list[str]:
    """The SQL of every statement this thread runs on `engine` from now on (each one a
    round trip). Other threads are left out: a text indexer's follower may read the
    projection at any moment, and its reads are not the search's."""
    statements: list[str] = []
    me = threading.get_ident()

    def record(_conn: object, _cursor: object, sql: str, *_rest: object) -> None:
        if threading.get_ident() == me:
            statements.append(sql)

    sa.event.listen(engine, "before_cursor_execute", record)
    return statements


def _without_follower(words: TextIndexer) -> None:
    """The index open and serving, with no follower thread to move it."""
    words.stop()
    words.index.open()
    words.state = "following"


@pytest.mark.parametrize("query", ["river", "river stone", "quartz ember glacier", "nothing"])
@pytest.mark.parametrize("status", [None, "proposed", "committed"])
def test_indexed_text_finds_what_the_projection_finds(chain_and_words, query: str,  # type: ignore[no-untyped-def]
                                                      status: str | None) -> None:
    _chain, engine, words = chain_and_words
    flt = MemoryFilter(status=status, q=query)
    with engine.connect() as conn:
        indexed = text_ranked(conn, flt, query, 1000, words_index=words)
        projected = text_ranked(conn, flt, query, 1000)
        assert {m for m, _ in indexed} == {m for m, _ in projected}
        scores = [s for _, s in indexed]
        assert scores == sorted(scores, reverse=True)
        top = text_ranked(conn, flt, query, 5, words_index=words)
        assert top == indexed[:5]  # the filter is applied before the cut
        if status is not None and top:
            found = conn.execute(sa.select(memories.c.status).where(
                memories.c.id.in_([m for m, _ in top]))).scalars().all()
            assert set(found) == {status}
    if query != "nothing" and status != "committed":  # fresh memories are proposed
        assert indexed


def test_the_index_and_the_projection_agree_on_accents(chain_and_words) -> None:  # type: ignore[no-untyped-def]
    """mode=text (the index) and the projection's full-text search find the same memories
    for "cafe" and "café", before and after the index holds them."""
    chain, engine, words = chain_and_words
    _without_follower(words)
    key = seeded_key("words-unit")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), "acc-1", "meet at the café by the river"),
                 b.submit(chain.next_nonce(key), "acc-2", "a cafe on the harbor")])
    for _ in range(2):
        with engine.connect() as conn:
            for q in ("cafe", "café", "CAFÉ"):
                flt = MemoryFilter(q=q)
                indexed = text_ranked(conn, flt, q, 100, words_index=words)
                projected = text_ranked(conn, flt, q, 100)
                assert {m for m, _ in indexed} == {m for m, _ in projected} == {"acc-1",
                                                                                 "acc-2"}
        words.catch_up()  # the second round from the index itself


def test_a_new_block_is_searchable_at_once_without_waiting_for_the_index(  # type: ignore[no-untyped-def]
        chain_and_words) -> None:
    chain, engine, words = chain_and_words
    _without_follower(words)  # nothing brings the index up to the new block
    before = words.index.indexed_height
    key = seeded_key("words-unit")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "fresh",
                                           "a zeppelin over the meadow"),
                 chain.builder(key).submit(chain.next_nonce(key), "fresh-2",
                                           "river river river zeppelin")])
    with engine.connect() as conn:
        hits = text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin", 5, words_index=words)
        # ranked among the index's hits by score: the new memories are the best "river"s
        rivers = text_ranked(conn, MemoryFilter(q="river"), "river", 1000, words_index=words)
        projected = text_ranked(conn, MemoryFilter(q="river"), "river", 1000)
    assert {m for m, _ in hits} == {"fresh", "fresh-2"}
    assert rivers[0][0] == "fresh-2" and {m for m, _ in rivers} == {m for m, _ in projected}
    scores = [s for _, s in rivers]
    assert scores == sorted(scores, reverse=True)
    assert words.index.indexed_height == before < chain.height  # the search did not wait
    words.catch_up()  # once indexed, the index's own scores rank them the same way
    with engine.connect() as conn:
        again = text_ranked(conn, MemoryFilter(q="river"), "river", 1000, words_index=words)
    assert again[0][0] == "fresh-2"


def test_searches_share_one_read_of_the_unindexed_memories(chain_and_words, monkeypatch  # type: ignore[no-untyped-def]
                                                            ) -> None:
    from memledger.recall import text_indexer

    chain, engine, words = chain_and_words
    _without_follower(words)
    reads: list[tuple[Any, ...]] = []
    real = text_indexer.new_memories

    def counted_new_memories(*a: Any, **k: Any) -> Any:
        reads.append(a[1:3])
        return real(*a, **k)

    monkeypatch.setattr(text_indexer, "new_memories", counted_new_memories)
    key = seeded_key("words-unit")
    for block in range(2):
        chain.block([chain.builder(key).submit(chain.next_nonce(key), f"late-{block}",
                                               f"zeppelin {block}")])
        with engine.connect() as conn:
            for _ in range(3):
                hits = text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin", 5,
                                   words_index=words)
                assert {m for m, _ in hits} == {f"late-{b}" for b in range(block + 1)}
    lo = words.index.indexed_height
    assert reads == [(lo, chain.height - 1), (lo, chain.height)]  # one per new block


def test_the_follower_hands_its_rows_to_searches_before_indexing_them(  # type: ignore[no-untyped-def]
        chain_and_words, monkeypatch) -> None:
    from memledger.recall import text_indexer

    chain, engine, words = chain_and_words
    _without_follower(words)
    key = seeded_key("words-unit")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "pending-1",
                                           "zeppelin hangar")])
    reads: list[tuple[Any, ...]] = []
    real = text_indexer.new_memories

    def counted_new_memories(*a: Any, **k: Any) -> Any:
        reads.append(a[1:3])
        return real(*a, **k)

    monkeypatch.setattr(text_indexer, "new_memories", counted_new_memories)
    seen_mid_commit = []
    real_add = words.index.add

    def add(docs, height):  # type: ignore[no-untyped-def]
        # while the follower's commit is under way, a search ranks the pending rows from
        # the follower's own read: no second read of them
        with engine.connect() as conn:
            seen_mid_commit.append(text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin",
                                               5, words_index=words))
        real_add(docs, height)
    monkeypatch.setattr(words.index, "add", add)
    words.catch_up()
    assert [m for m, _ in seen_mid_commit[0]] == ["pending-1"]
    assert reads == [(chain.height - 1, chain.height)]  # the follower's read only


def test_far_behind_the_search_catches_the_index_up(chain_and_words, monkeypatch  # type: ignore[no-untyped-def]
                                                     ) -> None:
    from memledger.recall import text_indexer

    chain, engine, words = chain_and_words
    _without_follower(words)
    monkeypatch.setattr(text_indexer, "UNINDEXED_CAP", 2)
    key = seeded_key("words-unit")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"many-{i}",
                                           f"zeppelin number {i}") for i in range(3)])
    with engine.connect() as conn:
        hits = text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin", 5, words_index=words)
    assert {m for m, _ in hits} == {"many-0", "many-1", "many-2"}
    assert words.index.indexed_height == chain.height


def test_unindexed_scores_are_close_to_the_index_s_own(tmp_path: Path) -> None:
    rng = random.Random(3)
    docs = [(f"d{i}", " ".join(rng.choices(WORDS, k=rng.randint(5, 9)))) for i in range(300)]
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add(docs[:-12], 1)
    pending = docs[-12:]
    for words, any_word in ((["river"], False), (["river", "lamp"], False),
                            (["quartz", "ember"], True)):
        ours = dict(index.score_unindexed(words, word_bags(pending), any_word))
        assert ours  # something matched
        index.add(pending, 2)
        theirs = dict(h for h in index.search(words, 1000, any_word) if h[0] in ours)
        assert set(theirs) == set(ours)
        for memory_id, score in ours.items():
            assert abs(score - theirs[memory_id]) <= 0.05 * theirs[memory_id], memory_id
        index.close()
        index = TextIndex(tmp_path / f"text-{len(words)}-{any_word}")
        index.open()
        index.add(docs[:-12], 1)
    index.close()


def test_common_words_from_the_word_index_match_the_projections_count(
        chain_and_words, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Hybrid drops common words from its word leg; the word index's document
    frequencies must make the same call the projection's capped count makes."""
    _chain, engine, words = chain_and_words
    for module in (ranked, search):
        monkeypatch.setattr(module, "COMMON_MIN_MATCHES", 60)
    verdicts = set()
    with engine.connect() as conn:
        for word in [*WORDS, "Rivers", "zeppelin"]:
            from_index = ranked._common(conn, word, words)
            assert from_index == ranked._common(conn, word, None), word
            verdicts.add(from_index)
        assert verdicts == {True, False}  # the threshold splits the vocabulary
        assert ranked.distinctive_words(conn, "zeppelin river", words) == "zeppelin"


def test_the_filter_check_leaves_out_challenged_memories_and_keeps_the_rows_it_read(
        chain_and_words) -> None:  # type: ignore[no-untyped-def]
    """The default filter passes every status but challenged, include_disputed every
    memory the projection holds; the rows that pass are kept for the page, and the
    first statement brings the projection height the search reads by."""
    _chain, engine, _words = chain_and_words
    with engine.begin() as conn:
        ids = conn.execute(sa.select(memories.c.id).order_by(memories.c.id)).scalars().all()
        challenged = set(ids[::7])
        conn.execute(memories.update().where(memories.c.id.in_(challenged))
                     .values(status="challenged"))
    statements = _recorded_statements(engine)
    rows: Rows = {}
    with engine.connect() as conn:
        check = FilterCheck(conn, MemoryFilter(), rows)
        assert check(ids) == set(ids) - challenged == set(rows)
        assert all(rows[i].content for i in rows)
        assert check.height() == projection_height(conn) > 0
        assert len(statements) == 2  # the check with its height, then the read above
        assert check(ids[:3]) == set(ids[:3]) - challenged and len(statements) == 2
        missing = [*ids, "not-a-memory"]
        assert FilterCheck(conn, MemoryFilter(include_disputed=True))(missing) == set(ids)
        assert FilterCheck(conn, MemoryFilter(status="challenged"))(ids) == challenged
        nothing = FilterCheck(conn, MemoryFilter())
        assert nothing([]) == set() and nothing.height() == check.height()


def test_hybrid_and_semantic_check_their_candidates_in_one_statement(  # type: ignore[no-untyped-def]
        chain_and_words, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each leg's first candidates come from its index before either is checked; one
    statement checks them all and brings the projection height the word leg needs, and
    the fusion is what the legs give searched apart. Text and semantic searches are one
    statement too."""
    from memledger.recall.embedder import make_embedder
    from memledger.recall.hybrid import rrf
    from memledger.recall.index import VectorIndex
    from memledger.recall.indexer import Indexer

    _chain, engine, words = chain_and_words
    _without_follower(words)
    embedder = make_embedder("wordllama")
    assert embedder is not None
    vectors = VectorIndex(tmp_path / "vectors", embedder)
    vectors.open()
    indexer = Indexer(engine, vectors)
    indexer.catch_up()
    with engine.begin() as conn:  # one challenged memory
        conn.execute(memories.update().where(memories.c.id == "w-0-000")
                     .values(status="challenged"))
    statements = _recorded_statements(engine)
    flt = MemoryFilter(q="river quartz")
    with engine.connect() as conn:
        page = ranked.ranked_search(conn, flt, "hybrid", 10, None, indexer, words)
    assert len(statements) == 1 and "json_each" in statements[0], statements
    found = [m["id"] for m in page.items]
    assert len(found) == 10 and "w-0-000" not in found
    statements.clear()
    with engine.connect() as conn:
        text = ranked.ranked_search(conn, MemoryFilter(q="river"), "text", 10, None,
                                    indexer, words)
    assert len(statements) == 1, statements
    assert len(text.items) == 10 and "w-0-000" not in {m["id"] for m in text.items}
    with engine.connect() as conn:  # the legs one after the other, each checked alone
        check = FilterCheck(conn, flt)
        apart = rrf([[m for m, _ in text_ranked(conn, flt, "river quartz", 20, any_word=True,
                                                words_index=words, check=check)],
                     [m for m, _ in ranked.semantic(conn, flt, "river quartz", 20, indexer,
                                                    check)]],
                    weights=(ranked.TEXT_WEIGHT, 1.0))
    assert found == [m for m, _ in apart[:10]]
    # semantic: the check reads the rows it serves, one statement
    semantic = MemoryFilter(q="river quartz")
    with engine.connect() as conn:
        top = ranked.ranked_search(conn, semantic, "semantic", 10, None, indexer,
                                   words).items[0]["id"]
    with engine.begin() as conn:
        conn.execute(memories.update().where(memories.c.id == top)
                     .values(status="challenged"))
    statements.clear()
    with engine.connect() as conn:
        page = ranked.ranked_search(conn, semantic, "semantic", 10, None, indexer, words)
    assert len(statements) == 1, statements
    assert len(page.items) == 10 and top not in {m["id"] for m in page.items}
    vectors.close()


def test_document_body_is_content_and_tags() -> None:
    assert document_body("river stone", '["lamp", "orbit"]') == "river stone lamp orbit"
    assert document_body("river", "[]") == "river" == document_body("river", None)


def test_rest_text_mode_uses_the_word_index_and_reports_it(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app

    chain = _chain(tmp_path)
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x",
                           index_dir=tmp_path / "recall")
    app = create_app(settings)
    words = app.state.memledger.words
    assert words is not None
    with TestClient(app, raise_server_exceptions=False) as api:
        words.catch_up()
        words.state = "following"
        # answered by the index: it says w-0-000 mentions a word its content does not
        words.index.add([("w-0-000", "zebrafish")], words.index.indexed_height)
        resp = api.get("/v1/memories", params={"q": "zebrafish", "mode": "text"})
        assert resp.status_code == 200
        assert [m["id"] for m in resp.json()["items"]] == ["w-0-000"]
        assert "zebrafish" not in resp.json()["items"][0]["content"]
        metrics = api.get("/metrics").text
        assert f"memledger_words_indexed_height {float(chain.height)}" in metrics
        assert "memledger_words_index_documents 240.0" in metrics
        assert "memledger_words_index_serving 1.0" in metrics
    chain.close()


def test_one_process_at_a_time_and_a_busy_folder_leaves_the_owner_intact(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    owner = TextIndex(tmp_path / "text")
    owner.open()
    owner.add([("a", "river")], 3)
    probe = ("import sys\nfrom memledger.recall.text_index import TextIndex, TextIndexBusy\n"
             "try:\n    TextIndex(sys.argv[1]).open()\nexcept TextIndexBusy:\n    sys.exit(7)\n")
    second = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "text")])
    assert second.returncode == 7
    assert [m for m, _ in owner.search(["river"], 5)] == ["a"]  # nothing was wiped
    owner.close()
    assert subprocess.run([sys.executable, "-c", probe, str(tmp_path / "text")]).returncode == 0


def test_a_ranked_page_through_the_api_is_one_statement_with_its_status_reasons(
        chain_and_words) -> None:  # type: ignore[no-untyped-def]
    """The API's ranked page sets each item's status reason from the records of the rows
    the search already read: no second read of them."""
    from types import SimpleNamespace

    from memledger.api import routes_memories

    _chain, engine, words = chain_and_words
    _without_follower(words)
    state = SimpleNamespace(recall=None, words=words, settings=SimpleNamespace(home=None))
    statements = _recorded_statements(engine)
    with engine.connect() as conn:
        page = routes_memories._ranked(conn, MemoryFilter(q="river"), "text", 5, None,
                                       state)  # type: ignore[arg-type]
    assert len(statements) == 1, statements
    assert len(page["items"]) == 5
    assert all("status_reason" in item for item in page["items"])


def test_a_listed_page_through_the_api_is_one_statement_with_its_status_reasons(
        chain_and_words) -> None:  # type: ignore[no-untyped-def]
    """A plain (unranked) page, too, sets status reasons from the records its own read
    brought: one statement while no listed memory was ever disputed."""
    from memledger.api import reasons

    _chain, engine, words = chain_and_words
    _without_follower(words)
    statements = _recorded_statements(engine)
    with engine.connect() as conn:
        items, cursor = reasons.list_memories(conn, MemoryFilter(), 5, None, None)
    assert len(statements) == 1, statements
    assert len(items) == 5 and cursor is not None
    assert all(item["status_reason"] for item in items)


def test_rows_that_fill_the_chunks_exactly_still_move_the_watermark_to_the_top(  # type: ignore[no-untyped-def]
        chain_and_words, monkeypatch) -> None:
    """240 memories read 80 at a time: the last full chunk cannot yet say every row is
    out, so an empty chunk carries the top height. Without it, the watermark stopped a
    height short and every step re-indexed the same rows until a new memory came."""
    from memledger.recall import follow, text_indexer

    chain, engine, words = chain_and_words
    with engine.connect() as conn:
        marks = [(len(rows), mark) for rows, mark in follow.new_memories(conn, 0, chain.height,
                                                                         chunk=80)]
    assert marks[-1] == (0, chain.height) and sum(n for n, _ in marks) == 240
    _without_follower(words)
    words.index.reset()
    real = text_indexer.new_memories
    monkeypatch.setattr(text_indexer, "new_memories",
                        lambda conn, lo, hi, chunk=80: real(conn, lo, hi, chunk))
    assert words.catch_up() == 240
    assert words.index.indexed_height == chain.height
    assert words.catch_up() == 0  # nothing read twice


@pytest.mark.parametrize("suffix", [".store", ".term"])
def test_damage_inside_a_segment_is_found_at_open(tmp_path: Path, suffix: str) -> None:
    """tantivy opens such an index without complaint; every search then failed."""
    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([(f"m-{k}", f"zeppelin note {k} " * 20) for k in range(50)], 10)
    index.close()
    segment = max((p for p in (tmp_path / "text").iterdir() if p.suffix == suffix),
                  key=lambda p: p.stat().st_size)
    data = segment.read_bytes()
    half = len(data) // 2
    segment.write_bytes(bytes(b ^ 0x5A for b in data[:half]) + data[half:])
    again = TextIndex(tmp_path / "text")
    assert (again.open() or "").startswith("unreadable word index: ")
    assert len(again) == 0 and again.indexed_height == 0
    assert again.search(["zeppelin"], 5) == []
    again.close()


def test_a_search_that_finds_the_index_damaged_asks_the_projection_and_it_is_rebuilt(
        chain_and_words, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    _chain, engine, words = chain_and_words
    _without_follower(words)
    flt = MemoryFilter(q="river")
    with engine.connect() as conn:
        projected = text_ranked(conn, flt, "river", 1000)

        def damaged(*args: Any, **kwargs: Any) -> list[tuple[str, float]]:
            raise ValueError("An IO error occurred: 'Fst data is corrupted'")

        real_search = words.index.search
        monkeypatch.setattr(words.index, "search", damaged)
        assert text_ranked(conn, flt, "river", 1000, words_index=words) == projected
        assert not words.serving
        monkeypatch.setattr(words.index, "search", real_search)
        held = len(words.index)
        words._step()  # the follower's next step rebuilds it
        words._step()
        assert words.serving and len(words.index) == held
        assert (words.index.rebuilt_reason or "").startswith("damaged: An IO error")
        indexed = text_ranked(conn, flt, "river", 1000, words_index=words)
        assert {m for m, _ in indexed} == {m for m, _ in projected}
