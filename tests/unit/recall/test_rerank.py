"""The rerank stage's parts without a node: MaxSim and which tokens it keeps (as the probe
measured them), the token-state store (a cache keyed by memory id and model), and the
Reranker that computes and stores what the store lacks."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memledger.recall import late
from memledger.recall.embedder import Embedder, TokenStates, make_embedder
from memledger.recall.late_store import FILE, LateStore
from memledger.recall.rerank import Reranker, model_key, supports
from memledger.recall.stopwords import STOPWORDS


def _axis(i: int, width: int = late.AXES) -> np.ndarray:
    v = np.zeros(width, dtype=np.float32)
    v[i] = 1.0
    return v


def _int8(rows: list[np.ndarray]) -> np.ndarray:
    return np.round(np.stack(rows) * 127).astype(np.int8)


def test_maxsim_rewards_every_query_token_matched() -> None:
    """Two query tokens (axes 0 and 1): a candidate with both scores 1; one whose single
    token sits between them ~0.71 (a pooled vector would tie it with the first); one
    with only the first 0.5; an opposite one -1."""
    query = np.stack([_axis(0), _axis(1)])
    both = _int8([_axis(0), _axis(5), _axis(1)])
    between = _int8([(_axis(0) + _axis(1)) / np.sqrt(2)])
    one = _int8([_axis(0), _axis(7)])
    opposite = _int8([-_axis(0) - _axis(1)])
    got = late.scores(query, [both, between, one, opposite])
    assert got[0] == pytest.approx(1.0) and got[1] == pytest.approx(np.sqrt(0.5), abs=1e-2)
    assert got[2] == pytest.approx(0.5) and got[3] == pytest.approx(-np.sqrt(0.5), abs=1e-2)
    assert late.maxsim(query, np.zeros((0, late.AXES), np.int8)) == 0.0


def _states(tokens: list[str], seed: int = 0) -> TokenStates:
    rng = np.random.default_rng(seed)
    ids = tuple({"[CLS]": 101, "[SEP]": 102}.get(t, 1000 + i) for i, t in enumerate(tokens))
    return TokenStates(rng.standard_normal((len(tokens), 384)).astype(np.float32), ids,
                       tuple(tokens))


def test_the_query_keeps_content_tokens_and_the_candidate_all_but_special() -> None:
    question = _states(["[CLS]", "what", "does", "the", "cat", "eat", "##s", "?", "[SEP]"])
    assert late.content(question).tolist() == [False, False, False, False, True, True, True,
                                               False, False]
    assert late.query_rows(question).shape == (3, late.AXES)
    # a query of stopwords only keeps every token but [CLS]/[SEP]
    stop = _states(["[CLS]", "what", "is", "it", "[SEP]"])
    assert late.content(stop).tolist() == [False, True, True, True, False]
    # the candidate side keeps punctuation and stopwords, drops only [CLS]/[SEP]
    said = _states(["[CLS]", "the", "cat", "ate", ".", "[SEP]"])
    assert late.not_special(said).tolist() == [False, True, True, True, True, False]
    rows = late.candidate_rows(said)
    assert rows.dtype == np.int8 and rows.shape == (4, late.AXES)
    assert np.allclose(np.linalg.norm(late.query_rows(question), axis=1), 1.0, atol=1e-5)


def test_int8_rows_keep_their_direction_and_the_probe_s_score() -> None:
    """Rounded to int8 with one scale per row, a token's row keeps its direction (cosine
    > 0.999 to the float one), and the score is the probe's `content _128_int8` variant,
    computed its way (bench/bench_rerank_probe.py)."""
    from bench import bench_rerank_probe as probe

    doc = _states(["[CLS]", "the", "staging", "database", "listens", "on", "5433", "[SEP]"], 1)
    rows = late.candidate_rows(doc)
    exact = doc.hidden[1:-1] @ late.axes()
    cos = np.sum(late._unit(rows.astype(np.float32)) * late._unit(exact), axis=1)
    assert cos.min() > 0.999
    ask = _states(["[CLS]", "which", "port", "does", "staging", "use", "?", "[SEP]"], 2)
    ours = late.maxsim(late.query_rows(ask), rows)

    def tokens(s: TokenStates) -> probe.Tokens:
        special = np.array([i in (probe.CLS, probe.SEP) for i in s.ids])
        content = np.array([not sp and any(c.isalnum() for c in t)
                            and t not in STOPWORDS
                            for sp, t in zip(special, s.tokens, strict=True)])
        return probe.Tokens(probe._unit(s.hidden), probe._unit(s.hidden.mean(0)), special,
                            content)
    theirs = probe.maxsim(tokens(ask), tokens(doc), "content", late.axes(), stored_int8=True)
    assert ours == pytest.approx(theirs, abs=1e-5)


def test_the_store_reads_only_its_model_s_rows_of_the_same_content(tmp_path: Path) -> None:
    store = LateStore(tmp_path, "model-a")
    a, b = late.candidate_rows(_states(["x", "y"], 3)), late.candidate_rows(_states(["z"], 4))
    store.put([("m/1", "one", a), ("m/2", "two", b)])
    asked = [("m/1", "one"), ("m/2", "two"), ("m/3", "three")]
    got = store.get(asked)
    assert set(got) == {"m/1", "m/2"} and np.array_equal(got["m/1"], a)
    assert store.count() == 2
    # another model's rows are not this one's: left out, for the caller to make
    assert LateStore(tmp_path, "model-b").get(asked) == {}
    # nor are rows of other content under the same id (a projection of another chain)
    assert set(store.get([("m/1", "one"), ("m/2", "not two")])) == {"m/1"}
    # a torn row (its length disagrees with ntok) is left out too
    with sqlite3.connect(tmp_path / FILE) as conn:
        conn.execute("UPDATE states SET ntok = 9 WHERE memory_id = 'm/2'")
    assert set(store.get(asked)) == {"m/1"}
    store.close()


def test_a_damaged_store_starts_afresh(tmp_path: Path) -> None:
    (tmp_path / FILE).write_bytes(b"not a database at all" * 100)
    store = LateStore(tmp_path, "model-a")
    assert store.get([("m/1", "one")]) == {}
    rows = late.candidate_rows(_states(["x"], 5))
    store.put([("m/1", "one", rows)])
    assert np.array_equal(store.get([("m/1", "one")])["m/1"], rows)
    store.close()


@pytest.fixture(scope="module")
def minilm_int8() -> Embedder:
    embedder = make_embedder("minilm-int8:128")
    assert embedder is not None
    return embedder


def test_the_reranker_computes_what_the_store_lacks_and_keeps_it(
        tmp_path: Path, minilm_int8: Embedder) -> None:
    """A candidate without rows (never indexed, or another model's or content's) gets
    them from its content, the same rows the follower's pass stores; a sealed or absent content has
    none. The query's vector is the one `embed` gives."""
    assert supports(minilm_int8) and not supports(make_embedder("wordllama"))  # type: ignore[arg-type]
    texts = {"cat": "Our cat Miso is allergic to chicken",
             "port": "The staging database listens on port 5433",
             "budget": "The marketing budget for the third quarter is 40,000 euros"}
    reranker = Reranker(minilm_int8, tmp_path)
    # the follower's pass: vectors and token states at once
    vectors, states = minilm_int8.embed_with_states([texts["cat"]])
    assert np.allclose(vectors, minilm_int8.embed([texts["cat"]]), atol=1e-6)
    reranker.keep(["cat"], [texts["cat"]], states)
    other = LateStore(tmp_path, "someone else's model")
    other.put([("port", texts["port"], np.ones((3, late.AXES), np.int8))])  # stale: model
    reranker.store.put([("budget", "other content", np.ones((3, late.AXES), np.int8))])
    vector, query = reranker.query("which port does the test db use?")
    assert np.allclose(vector, minilm_int8.embed(["which port does the test db use?"])[0],
                       atol=1e-6)
    got = reranker.scores(query, [*texts.items(), ("gone", None)])
    assert set(got) == {"cat", "port", "budget"}
    assert max(got, key=lambda m: got[m]) == "port" and all(-1 <= s <= 1 for s in got.values())
    stored = reranker.store.get(list(texts.items()))
    assert set(stored) == set(texts)  # made on demand, and kept for the next search
    assert not (stored["budget"] == 1).all()  # the other content's row was replaced
    _, fresh = minilm_int8.embed_with_states([texts["port"]])
    assert np.array_equal(stored["port"], late.candidate_rows(fresh[0]))
    assert reranker.store.model == model_key(minilm_int8)
    reranker.close()


def test_rest_rerank_orders_by_maxsim_filters_by_min_score_and_says_when_it_cannot(
        tmp_path: Path) -> None:
    """GET /v1/memories?rerank=true: the first stage's hits reordered by MaxSim, each
    scored by it (the scores the Reranker gives), from rows the follower stored;
    min_score leaves out the lower ones; the 422s name why a search cannot rerank."""
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import LocalChain, seeded_key

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("rerank-unit")
    b = chain.builder(key)
    notes = {"port": "The staging database listens on port 5433",
             "cat": "Our cat Miso is allergic to chicken, so buy salmon food",
             "budget": "The marketing budget for the third quarter is 40,000 euros",
             "deploy": "Deploys go out on Tuesdays after the staging checks pass",
             "trip": "Anna flies to Lisbon on the 14th for the design review"}
    chain.block([b.submit(chain.next_nonce(key), m, text) for m, text in notes.items()] +
                [b.submit(chain.next_nonce(key), f"z-{i}", f"zebra note number {i}")
                 for i in range(40)])
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                 chain_id="x", embedder="minilm-int8:128",
                                 index_dir=tmp_path / "recall", store_token_states=True))
    indexer = app.state.memledger.recall
    assert indexer.wait_caught_up(60)
    assert indexer.late.store.count() == 45  # stored by the follower, from its pass
    question = "which port does the staging db use?"
    with TestClient(app, raise_server_exceptions=False) as api:
        def get(**params: Any) -> dict[str, Any]:
            resp = api.get("/v1/memories", params={"q": question, **params})
            return {"status": resp.status_code, **resp.json()}

        plain = get(mode="hybrid", limit=30)
        reranked = get(mode="hybrid", rerank=True, limit=30)
        assert reranked["status"] == 200 and reranked["items"][0]["id"] == "port"
        assert {m["id"] for m in reranked["items"]} == {m["id"] for m in plain["items"]}
        scores = [m["score"] for m in reranked["items"]]
        assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
        _, query = indexer.late.query(question)
        direct = indexer.late.scores(query, [(m, notes.get(m)) for m in notes])
        assert reranked["items"][0]["score"] == pytest.approx(direct["port"], abs=1e-5)
        # pages of a reranked search are slices of its one order, up to 30 hits
        first, second = get(rerank=True, limit=3), get(rerank=True, limit=3, cursor="3~ranked")
        assert [m["id"] for m in first["items"] + second["items"]] == \
            [m["id"] for m in reranked["items"][:6]]
        assert get(rerank=True, limit=3, cursor="27~ranked")["next_cursor"] is None
        semantic = get(mode="semantic", rerank=True, limit=5)
        assert semantic["items"][0]["id"] == "port"
        # min_score: only the hits the rerank scores at least that high
        floor = (scores[0] + scores[1]) / 2
        kept = get(rerank=True, min_score=floor, limit=30)["items"]
        assert [m["id"] for m in kept] == ["port"]
        assert get(rerank=True, min_score=1.0)["items"] == []
        # what cannot rerank says why
        cases: list[tuple[dict[str, Any], str]] = [
            ({"mode": "text", "rerank": True}, "rerank_needs_meaning"),
            ({"mode": "words", "rerank": True}, "rerank_needs_meaning"),
            ({"min_score": 0.5}, "min_score_needs_rerank")]
        for params, name in cases:
            got = get(**params)
            assert (got["status"], got["name"]) == (422, name), params
        assert api.get("/v1/memories", params={"rerank": True}).json()["name"] == \
            "rerank_needs_meaning"
        assert get(rerank=True, min_score=2)["status"] == 422  # outside -1..1
    words_only = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                        chain_id="x", embedder="wordllama",
                                        index_dir=tmp_path / "recall-wordllama"))
    with TestClient(words_only, raise_server_exceptions=False) as api:
        resp = api.get("/v1/memories", params={"q": question, "rerank": True})
        assert (resp.status_code, resp.json()["name"]) == (422, "rerank_unsupported")
    chain.close()


def test_with_token_states_off_the_follower_stores_none_and_searches_keep_theirs(
        tmp_path: Path, minilm_int8: Embedder) -> None:
    """`extra.recall_token_states: off`: the follower writes no rows (the store's disk
    cost goes), and a rerank computes and keeps only the rows it needs."""
    import sqlalchemy as sa

    from memledger.devtools.chain import LocalChain, seeded_key
    from memledger.recall.index import VectorIndex
    from memledger.recall.indexer import Indexer

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("rerank-off")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"m-{i}", f"note {i} on the staging db")
                 for i in range(12)])
    engine = sa.create_engine(chain.db_url)
    index = VectorIndex(tmp_path / "recall", minilm_int8)
    index.open()
    indexer = Indexer(engine, index, store_token_states=False)
    assert indexer.catch_up() == 12 and len(index) == 12
    assert indexer.late is not None and indexer.late.store.count() == 0
    _, query = indexer.late.query("staging database")
    got = indexer.late.scores(query, [("m-1", "note 1 on the staging db")])
    assert set(got) == {"m-1"} and indexer.late.store.count() == 1
    indexer.late.close()
    index.close()
    engine.dispose()
    chain.close()



def test_the_node_stores_token_rows_unless_its_config_says_off(tmp_path: Path) -> None:
    """Agents rerank by default, and the follower's pass makes the rows for ~3% more, so
    a node keeps every memory's token rows unless `extra.recall_token_states: "off"`; a
    value that is neither on nor off is a configuration error, not silently one of them."""
    from tests.support.api import settings_with_extra

    def token_states(extra: dict[str, str]) -> bool:
        return settings_with_extra(tmp_path / "home", extra).store_token_states

    assert token_states({}) is True
    assert token_states({"recall_token_states": "off"}) is False
    assert token_states({"recall_token_states": "on"}) is True
    with pytest.raises(ValueError, match="recall_token_states"):
        token_states({"recall_token_states": "yes"})
