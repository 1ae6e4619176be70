"""The recall indexes heal themselves: they are serving data, so a damaged or partly lost
folder is rebuilt from the projection instead of taking the node down or claiming
memories it cannot find; a projection that went back rebuilds them without serving the
half-built index; and a search never waits for (or does) a rebuild. Real files on disk:
the damage is done to the files tantivy and usearch wrote."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from memledger.api.app import start_words
from memledger.api.queries import MemoryFilter
from memledger.api.ranked import text_ranked
from memledger.api.settings import ApiSettings
from memledger.devtools.chain import LocalChain, seeded_key
from memledger.recall import follow, text_indexer
from memledger.recall import indexer as indexer_module
from memledger.recall.index import VectorIndex
from memledger.recall.indexer import Indexer
from memledger.recall.text_index import TextIndex
from memledger.recall.text_indexer import TextIndexer
from memledger.sdk.waiting import wait_until

SEGMENT_FILES = (".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm")


def _words(folder: Path, n: int = 50, height: int = 10) -> TextIndex:
    """A word index of `n` documents at `height`, closed."""
    index = TextIndex(folder)
    index.open()
    index.add([(f"m-{i}", f"zeppelin note {i} " * 20) for i in range(n)], height)
    index.close()
    return index


def _chain(home: Path, blocks: int, per_block: int) -> LocalChain:
    chain = LocalChain(home)
    key = seeded_key("healing")
    for block in range(blocks):
        chain.block([chain.builder(key).submit(chain.next_nonce(key), f"m-{block}-{i:03d}",
                                               f"zeppelin {block} {i}")
                     for i in range(per_block)])
    return chain


def _serving_words(engine: sa.Engine, folder: Path) -> TextIndexer:
    """A word indexer opened on `folder`, caught up and serving, with no follower thread."""
    words = TextIndexer(engine, TextIndex(folder))
    words.index.open()
    words.catch_up()
    words.state = "following"
    return words


def _chunked(monkeypatch: pytest.MonkeyPatch, module: object, chunk: int) -> None:
    """The module's follower reads the projection `chunk` memories at a time."""
    monkeypatch.setattr(module, "new_memories",
                        lambda conn, lo, hi, chunk=chunk: follow.new_memories(conn, lo, hi, chunk))


# ---------------------------------------------------------------- damaged word index
@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_damaged_word_index_segment_is_rebuilt_not_fatal(tmp_path: Path, damage: str) -> None:
    _words(tmp_path / "text")
    segment = max((p for p in (tmp_path / "text").iterdir() if p.suffix in SEGMENT_FILES),
                  key=lambda p: p.stat().st_size)
    if damage == "truncated":
        segment.write_bytes(segment.read_bytes()[:segment.stat().st_size // 2])
    else:
        segment.unlink()
    index = TextIndex(tmp_path / "text")
    assert (index.open() or "").startswith("unreadable word index")
    assert len(index) == 0 and index.indexed_height == 0
    index.add([("a", "zeppelin again")], 1)  # an empty index, whole again
    assert [m for m, _ in index.search(["zeppelin"], 5)] == ["a"]
    index.close()


def test_the_rest_process_starts_on_a_damaged_word_index_and_rebuilds_it(
        tmp_path: Path) -> None:
    chain = _chain(tmp_path / "chain", 2, 5)
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:1",
                           index_dir=tmp_path / "indexes")
    _words(tmp_path / "indexes" / "text")
    segment = next(p for p in (tmp_path / "indexes" / "text").iterdir() if p.suffix == ".store")
    segment.write_bytes(b"")
    engine = sa.create_engine(chain.db_url)
    words = start_words(settings, engine)
    assert words is not None
    try:
        assert (words.index.rebuilt_reason or "").startswith("unreadable word index")
        deadline = time.monotonic() + 30
        while not (words.serving and words.index.indexed_height == chain.height):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert len(words.index) == 10
    finally:
        words.stop()
        engine.dispose()
        chain.close()


def test_a_failed_open_releases_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    _words(tmp_path / "text")

    def fail(_self: TextIndex) -> str | None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(TextIndex, "_stale_reason", fail)
    with pytest.raises(RuntimeError):
        TextIndex(tmp_path / "text").open()
    monkeypatch.undo()
    again = TextIndex(tmp_path / "text")  # not TextIndexBusy: the lock went with the failure
    assert again.open() is None and len(again) == 50
    again.close()


# ---------------------------------------------------------------- lost files
def test_a_lost_tantivy_meta_rebuilds_the_word_index(tmp_path: Path) -> None:
    _words(tmp_path / "text")
    (tmp_path / "text" / "meta.json").unlink()  # tantivy's: it then opens an empty index
    index = TextIndex(tmp_path / "text")
    assert index.open() == "word index holds 0 documents, its watermark counted 50"
    assert index.indexed_height == 0 and len(index) == 0
    index.close()


def test_a_watermark_from_before_the_count_is_checked_for_an_empty_index(tmp_path: Path
                                                                        ) -> None:
    folder = tmp_path / "text"
    watermark = folder / "watermark.json"

    def without_count() -> None:
        doc = json.loads(watermark.read_text())
        doc.pop("documents", None)
        watermark.write_text(json.dumps(doc))

    _words(folder)
    without_count()
    index = TextIndex(folder)
    assert index.open() is None and index.documents == 50  # counted from now on
    index.close()
    without_count()
    (folder / "meta.json").unlink()
    index = TextIndex(folder)
    assert index.open() == "word index holds no documents, its watermark is 10"
    index.close()


def test_a_crash_between_tantivy_s_commit_and_the_watermark_rebuilds_nothing(
        tmp_path: Path) -> None:
    """The watermark is the commit point: tantivy holding more documents than it counted
    is a range to replay, not damage. Fewer (a reset's empty commit under the old
    watermark) is."""
    folder = tmp_path / "text"
    _words(folder, n=50, height=10)
    at_10 = (folder / "watermark.json").read_text()
    index = TextIndex(folder)
    assert index.open() is None
    index.add([(f"late-{i}", "zeppelin late") for i in range(5)], 11)
    index.close()
    (folder / "watermark.json").write_text(at_10)  # the crash: the watermark never moved
    again = TextIndex(folder)
    assert again.open() is None
    assert again.indexed_height == 10 and len(again) == 55
    again.add([(f"late-{i}", "zeppelin late") for i in range(5)], 11)  # the replay
    assert len(again) == 55 and again.documents == 55
    at_11 = (folder / "watermark.json").read_text()
    again.reset()
    again.close()
    (folder / "watermark.json").write_text(at_11)  # a crash in reset, after the commit
    emptied = TextIndex(folder)
    assert emptied.open() == "word index holds 0 documents, its watermark counted 55"
    emptied.close()


def test_a_lost_key_map_rebuilds_the_vector_index(tmp_path: Path, wordllama  # type: ignore[no-untyped-def]
                                                  ) -> None:
    index = VectorIndex(tmp_path / "recall", wordllama)
    index.open()
    index.add([(f"m-{i}", f"note {i} about topic {i % 7}") for i in range(300)], height=10)
    index.save()
    index.close()
    again = VectorIndex(tmp_path / "recall", wordllama)
    assert again.open() is None and len(again) == 300  # whole: loaded
    again.close()
    for path in (tmp_path / "recall").glob("keys.sqlite*"):
        path.unlink()
    lost = VectorIndex(tmp_path / "recall", wordllama)
    assert lost.open() == "key map holds 0 keys, meta says 300 vectors"
    assert len(lost) == 0 and lost.meta.indexed_height == 0
    lost.close()


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_key_map_is_made_again_and_the_vector_index_rebuilt(  # type: ignore[no-untyped-def]
        tmp_path: Path, wordllama, damage: str) -> None:
    folder = tmp_path / "recall"
    notes = [(f"m-{i}", f"note {i} about topic {i % 7}") for i in range(300)]
    index = VectorIndex(folder, wordllama)
    index.open()
    index.add(notes, height=10)
    index.save()
    index.close()
    keys = folder / "keys.sqlite"
    data = keys.read_bytes()
    keys.write_bytes(data[:len(data) // 2] if damage == "truncated" else b"x" * len(data))
    damaged = VectorIndex(folder, wordllama)
    reason = damaged.open()  # raised sqlite3.DatabaseError: the node could not start
    assert reason is not None and reason.startswith("unreadable key map: "), reason
    assert len(damaged) == 0 and damaged.meta.indexed_height == 0
    damaged.add(notes, height=10)  # the rebuild
    damaged.save()
    damaged.close()
    healed = VectorIndex(folder, wordllama)
    assert healed.open() is None and len(healed) == 300
    hits = healed.search(wordllama.embed(["note 5 about topic 5"])[0], 3)
    assert len(hits) == 3 and all(mid.startswith("m-") for mid, _ in hits)
    healed.close()


def test_a_vector_index_rebuilt_at_start_is_saved_once_built(  # type: ignore[no-untyped-def]
        tmp_path: Path, wordllama) -> None:
    """Saved when the build completes, as docs/RECALL.md says, not 5 minutes (or 50,000
    additions) later: a crash meanwhile rebuilt the whole index again."""
    chain = _chain(tmp_path / "chain", 3, 20)
    engine = sa.create_engine(chain.db_url)
    indexer = Indexer(engine, VectorIndex(tmp_path / "recall", wordllama), poll_s=0.05)
    indexer.start()  # no index yet: "missing", built from the projection
    try:
        assert indexer.wait_caught_up(30)
        saved = tmp_path / "recall" / "meta.json"
        wait_until(saved.exists, 5, 0.05, what="the built index to be saved")
        meta = json.loads(saved.read_text())
        assert (meta["indexed_height"], meta["count"]) == (chain.height, 60)
    finally:
        indexer.stop()
        engine.dispose()
        chain.close()


# ---------------------------------------------------------------- the projection went back
def test_a_word_index_above_the_projection_rebuilds_without_serving(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch) -> None:
    first = _chain(tmp_path / "a", 6, 10)
    engine = sa.create_engine(first.db_url)
    _serving_words(engine, tmp_path / "text").index.close()
    engine.dispose()
    first.close()

    chain = _chain(tmp_path / "b", 3, 40)  # the projection now: lower, other memories
    engine = sa.create_engine(chain.db_url)
    words = TextIndexer(engine, TextIndex(tmp_path / "text"))
    assert words.index.open() is None
    words.state = "following"  # as start() leaves it: the watermark was readable
    with engine.connect() as conn:  # before the follower notices, searches fall back
        assert words.unindexed(conn) is None
    _chunked(monkeypatch, text_indexer, 20)
    seen: list[tuple[bool, float]] = []
    real_add = words.index.add

    def slow_add(docs, height):  # type: ignore[no-untyped-def]
        with engine.connect() as conn:
            started = time.monotonic()
            hits = text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin", 200,
                               words_index=words)
            seen.append((words.serving, time.monotonic() - started))
            assert len(hits) == 120  # the projection's full-text index answers, whole
        real_add(docs, height)

    monkeypatch.setattr(words.index, "add", slow_add)
    assert words.catch_up() == 120
    assert seen and not any(serving for serving, _ in seen)
    assert max(took for _, took in seen) < 5  # none waited behind the rebuild's lock
    assert words.state == "following" and words.index.rebuilt_reason == "projection behind index"
    assert words.index.indexed_height == chain.height and len(words.index) == 120
    words.index.close()
    engine.dispose()
    chain.close()


def test_a_search_waiting_to_catch_up_leaves_when_a_rebuild_begins(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch) -> None:
    chain = _chain(tmp_path / "chain", 1, 5)
    engine = sa.create_engine(chain.db_url)
    words = _serving_words(engine, tmp_path / "text")
    key = seeded_key("healing")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"late-{i}", "zeppelin")
                 for i in range(3)])
    monkeypatch.setattr(text_indexer, "UNINDEXED_CAP", 2)  # far behind: it catches up
    found: list[object] = []

    def unindexed() -> None:
        with engine.connect() as conn:
            found.append(words.unindexed(conn, chain.height))

    with words._catch_up_lock:  # the follower's catch-up under way
        search = threading.Thread(target=unindexed)
        search.start()
        time.sleep(0.1)
        assert search.is_alive()  # waiting for the follower, as a search far behind does
        words.state = "building"  # the follower found the projection went back
        search.join(timeout=2)
        assert not search.is_alive() and found == [None]  # gone to the projection
    words.index.close()
    engine.dispose()
    chain.close()


def test_a_vector_index_above_the_projection_rebuilds_as_a_build(  # type: ignore[no-untyped-def]
        tmp_path: Path, wordllama, monkeypatch) -> None:
    first = _chain(tmp_path / "a", 6, 10)
    engine = sa.create_engine(first.db_url)
    built = Indexer(engine, VectorIndex(tmp_path / "recall", wordllama))
    built.index.open()
    built.catch_up()
    built.maybe_save(force=True)
    built.index.close()
    engine.dispose()
    first.close()

    chain = _chain(tmp_path / "b", 3, 40)
    engine = sa.create_engine(chain.db_url)
    indexer = Indexer(engine, VectorIndex(tmp_path / "recall", wordllama))
    assert indexer.index.open() is None
    indexer.state = "following"
    _chunked(monkeypatch, indexer_module, 20)
    seen: list[tuple[str, int, int]] = []
    real_add = indexer.index.add

    def watched_add(items, height, threads=1, **rest):  # type: ignore[no-untyped-def]
        saved = json.loads((tmp_path / "recall" / "meta.json").read_text())
        seen.append((indexer.status().state, threads, saved["indexed_height"]))
        return real_add(items, height, threads, **rest)

    monkeypatch.setattr(indexer.index, "add", watched_add)
    assert indexer.catch_up() == 120
    # a build: every core, "building" in /v1/status, and no saved vectors of the other
    # projection left under the old watermark for a crash to reload
    assert set(seen) == {("building", 0, 0)}
    assert indexer.status().state == "following"
    assert indexer.index.meta.indexed_height == chain.height and len(indexer.index) == 120
    assert indexer.index.rebuilt_reason == "projection behind index"
    indexer.index.close()
    engine.dispose()
    chain.close()


# ---------------------------------------------------------------- read-your-writes cap
@pytest.mark.parametrize("new", [3, 4, 5])
def test_exactly_the_cap_of_unindexed_memories_is_ranked_by_the_search(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch, new: int) -> None:
    monkeypatch.setattr(text_indexer, "UNINDEXED_CAP", 4)
    chain = _chain(tmp_path / "chain", 1, 1)
    engine = sa.create_engine(chain.db_url)
    words = _serving_words(engine, tmp_path / "text")
    watermark = words.index.indexed_height
    key = seeded_key("healing")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"new-{i}", f"zeppelin {i}")
                 for i in range(new)])
    with engine.connect() as conn:
        hits = text_ranked(conn, MemoryFilter(q="zeppelin"), "zeppelin", 10, words_index=words)
    assert len(hits) == new + 1
    # up to the cap the search ranks them itself; past it, it catches the index up
    assert words.index.indexed_height == (watermark if new <= 4 else chain.height)
    words.index.close()
    engine.dispose()
    chain.close()
