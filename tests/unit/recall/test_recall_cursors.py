"""Ranked pages are slices of one list, and filters fill them: the semantic walk's windows,
its exact scoring past the widest walk, and the word leg past its widest fetch."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from memledger.recall import hybrid
from memledger.recall.hybrid import semantic_ranked, with_unindexed
from memledger.recall.index import VectorIndex

FILL = ("river stone lamp orbit quartz ember glacier harbor meadow falcon copper violet "
        "thunder pepper maple cedar willow canyon basalt heron otter moss fern").split()


def _word_salad(n: int, seed: int) -> list[tuple[str, str]]:
    """`n` memories of a few shared words: many near and equal scores, as in real sets."""
    rng = random.Random(seed)
    return [(f"m-{i:05d}", " ".join(rng.choices(FILL, k=rng.randint(3, 9))))
            for i in range(n)]


def test_semantic_pages_are_prefixes_of_one_list(tmp_path: Path, wordllama) -> None:  # type: ignore[no-untyped-def]
    """A shallow page is the start of a deep one (usearch's neighbours differ by count:
    walked at 2*want, pages of 50 repeated and skipped hits against one page of 500)."""
    index = VectorIndex(tmp_path / "recall", wordllama)
    index.open()
    index.add(_word_salad(4000, 4), height=1)
    for question in ("herons and otters by the river", "copper lamp in the canyon"):
        query = wordllama.embed([question])[0]
        whole = semantic_ranked(index, query, 600, None, None)
        assert len(whole) == len({m for m, _ in whole}) == 600
        for want in (11, 51, 151, 201, 251, 401, 551):
            assert semantic_ranked(index, query, want, None, None) == whole[:want], want
    index.close()


def test_fresh_memories_join_without_reordering_the_hits() -> None:
    """Memories above the watermark go before the first hit scoring less; the hits keep
    their order, so a deeper page still starts with the shallower one."""
    query = np.array([1.0, 0.0])
    hits = [("a", 0.9), ("b", 0.5), ("c", 0.7), ("d", 0.2)]  # a later window's c > b
    fresh = [("x", np.array([0.6, 0.8])), ("y", np.array([0.1, 0.99]))]  # 0.6, ~0.1
    merged = with_unindexed(hits, query, fresh, None, 5)
    assert [m for m, _ in merged] == ["a", "x", "b", "c", "d"]
    assert with_unindexed(hits[:2], query, fresh, None, 2) == [("a", 0.9), merged[1]]
    assert [m for m, _ in with_unindexed(hits, query, fresh, None, 9)][-1] == "y"


def test_a_filter_the_walk_cannot_fill_is_scored_exactly(tmp_path: Path, wordllama,  # type: ignore[no-untyped-def]
                                                        monkeypatch) -> None:
    """status=committed passing 10 memories far from the query, on an index larger than
    the widest walk: all 10, not the few the walk met (3 of 10 at 21k memories)."""
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import LocalChain, seeded_key

    # the widest walk 16 neighbours (20,000 in service): 300 memories are past it
    monkeypatch.setattr(hybrid, "OVERFETCH_CAP", 16)
    monkeypatch.setattr(hybrid, "SEMANTIC_WINDOWS", (4, 16), raising=False)
    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("committed-unit")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), mid, text)
                 for mid, text in _word_salad(300, 3)])
    finance = ["The marketing budget for the third quarter is 40,000 euros",
               "Payroll taxes are filed every month by the accountant",
               "Invoice numbers restart at one every fiscal year",
               "Quarterly revenue grew eight percent over forecast",
               "The CFO approves every expense over five thousand dollars",
               "Our bank charges a fee for international wire transfers",
               "Annual audit is scheduled for the second week of March",
               "The pension fund contributions were raised to six percent",
               "Travel reimbursements need receipts within thirty days",
               "Sales commission is paid at the end of each quarter"]
    chain.block([b.submit(chain.next_nonce(key), f"fin-{i}", t)
                 for i, t in enumerate(finance)])
    voters = [(chain.builder(k), k) for k in chain.validator_keys[2:]]
    chain.block([v.vote(chain.next_nonce(k), f"fin-{i}") for i in range(10)
                 for v, k in voters])
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                 chain_id="x", embedder="wordllama",
                                 index_dir=tmp_path / "recall"))
    assert app.state.memledger.recall.wait_caught_up(60)
    with TestClient(app, raise_server_exceptions=False) as api:
        committed = api.get("/v1/memories", params={"status": "committed", "limit": 50})
        assert len(committed.json()["items"]) == 10
        for mode in ("semantic", "hybrid"):
            params = {"q": "herons and otters by the river among ferns", "mode": mode,
                      "status": "committed", "limit": 10}
            found = api.get("/v1/memories", params=params).json()["items"]
            assert sorted(m["id"] for m in found) == [f"fin-{i}" for i in range(10)], mode
    chain.close()


def _wait_for_words(app, chain) -> None:  # type: ignore[no-untyped-def]
    """The word index's follower caught up with the chain and serving."""
    import time

    words = app.state.memledger.words
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if words.index.indexed_height >= chain.height and words.state == "following":
            return
        time.sleep(0.02)
    raise TimeoutError("the word index did not catch up")


def _follow(api, params: dict[str, str | int]) -> list[tuple[str, float]]:  # type: ignore[no-untyped-def]
    """Every (id, score) a cursor shows, page after page."""
    seen: list[tuple[str, float]] = []
    cursor: str | None = None
    while True:
        page = api.get("/v1/memories",
                       params={**params, **({"cursor": cursor} if cursor else {})}).json()
        seen += [(m["id"], m["score"]) for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


@pytest.mark.parametrize("word", ["river", "İstanbul"])
def test_text_pages_keep_their_ranker_past_the_widest_fetch(tmp_path: Path, monkeypatch,
                                                            word: str) -> None:
    """A filter whose matches the widest fetch (OVERFETCH_CAP, 16 here) does not hold
    all of: page 1 came from the word index, page 2 from the projection's bm25, with
    other scores and another order of ties (a hit shown twice, another never). The
    matches past it are scored by the query the word index's own search makes."""
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app, ranked
    from memledger.devtools.chain import LocalChain, seeded_key

    monkeypatch.setattr(ranked, "OVERFETCH_CAP", 16)
    rng = random.Random(2)
    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("overfetch-unit")
    b = chain.builder(key)
    # equal BM25, added in descending id order: the index's order of ties is not by id
    for letters in ("hgfe", "dcba"):
        chain.block([b.submit(chain.next_nonce(key), f"rare-{c}",
                              "river stone lamp orbit İstanbul", domain="rare")
                      for c in letters])
    chain.block([b.submit(chain.next_nonce(key), f"bulk-{i:03d}", "river İstanbul " +
                          " ".join(rng.choices(FILL, k=rng.randint(3, 30))))
                 for i in range(60)])
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                 chain_id="x", index_dir=tmp_path / "recall"))
    with TestClient(app, raise_server_exceptions=False) as api:
        _wait_for_words(app, chain)
        query: dict[str, str | int] = {"q": word, "mode": "text", "domain": "rare"}
        whole = _follow(api, {**query, "limit": 20})
        assert sorted(m for m, _ in whole) == [f"rare-{c}" for c in "abcdefgh"]
        for limit in (3, 5):
            assert _follow(api, {**query, "limit": limit}) == whole, limit
    chain.close()


def test_a_memory_above_the_watermark_scores_as_the_index_scores_it(tmp_path: Path) -> None:
    """score_unindexed gives a memory the score tantivy gives an indexed one of the same
    words (its one-byte lengths, its average, its precision), so it ranks among the
    index's hits where it ranks once indexed. With exact lengths and a running average
    its score was close only: it moved when the follower indexed it between two pages,
    and the next page repeated or skipped a hit."""
    from memledger.recall.text_index import TextIndex, word_bags

    rng = random.Random(1)

    def doc(i: int, prefix: str) -> tuple[str, str]:
        words = ["river"] * rng.randint(1, 3) + rng.choices(FILL, k=rng.randint(10, 120))
        return f"{prefix}-{i:03d}", " ".join(rng.sample(words, len(words)))

    index = TextIndex(tmp_path / "text")
    index.open()
    index.add([doc(i, "old") for i in range(200)], height=1)
    twins = [doc(i, "twin") for i in range(8)] + [("twin-long", f"river {'x' * 60} stone")]
    index.add(twins, height=2)  # a second segment
    pending = [(m.replace("twin", "new"), body) for m, body in twins]
    for words, any_word in ((["river"], False), (["river", "stone"], False),
                            (["river", "heron"], True)):
        held = dict(index.search(words, 400, any_word=any_word))
        got = index.score_unindexed(words, word_bags(pending), any_word)
        assert got and all(score == held[m.replace("new", "twin")] for m, score in got), (
            words, got[:2])
    index.close()


def test_recall_ranks_by_words_on_a_node_without_an_embedder(tmp_path: Path) -> None:
    """SDK recall() with no mode, on a node with no embedder: the best matches by BM25
    (it got the unranked listing, oldest first, every score None)."""
    import asyncio

    import httpx
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import LocalChain, seeded_key
    from memledger.sdk import AsyncClient, Client

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("recall-words")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"a-{i}", f"river stone {'lamp ' * 30}{i}")
                 for i in range(5)] +
                [b.submit(chain.next_nonce(key), "best", "river river stone")])
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                 chain_id="x", index_dir=tmp_path / "recall"))
    with TestClient(app, raise_server_exceptions=False) as api:
        _wait_for_words(app, chain)
        def relay(request: httpx.Request) -> httpx.Response:
            answer = api.request(request.method, str(request.url), content=request.content)
            return httpx.Response(answer.status_code, headers=answer.headers,
                                  content=answer.content)

        ml = Client("http://testserver", transport=httpx.MockTransport(relay))
        hits = ml.recall("river", limit=2)
        assert [(m.id, m.mode) for m in hits][:1] == [("best", "text")]
        assert all(m.score and m.score > 0 for m in hits)

        async def recall_async() -> list[str]:
            async with AsyncClient(
                    "http://testserver", transport=httpx.MockTransport(relay)) as aml:
                return [m.id for m in await aml.recall("river", limit=2)]
        assert asyncio.run(recall_async())[0] == "best"
    chain.close()
