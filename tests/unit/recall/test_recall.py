"""Recall building blocks without a node: embedders, the persisted index (its meta file is
the commit point), filtered semantic top-k on both paths, and rank fusion."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from memledger.recall.embedder import (
    EmbedderUnavailable,
    HttpEmbedder,
    dist_version_or_zero,
    make_embedder,
)
from memledger.recall.hybrid import (
    first_passing,
    fuse_in_windows,
    fusion_windows,
    rrf,
    semantic_ranked,
)
from memledger.recall.index import VectorIndex, memory_key
from memledger.recall.minilm import MiniLMEmbedder
from memledger.recall.minilm_int8 import MiniLMInt8Embedder, cache_folder


def test_wordllama_offline_unit_vectors_and_meaning(wordllama) -> None:  # type: ignore[no-untyped-def]
    assert (wordllama.name, wordllama.dim) == ("wordllama-l2_supercat-128", 128)
    docs = wordllama.embed(["Our cat Miso is allergic to chicken, so buy salmon food",
                            "The marketing budget for the third quarter is 40,000 euros"])
    assert docs.shape == (2, 128) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    pet, ads = wordllama.embed(["what should the pet not eat",
                                "how much money can advertising spend this summer"])
    assert pet @ docs[0] > pet @ docs[1] and ads @ docs[1] > ads @ docs[0]
    assert np.array_equal(wordllama.embed(["same"]), wordllama.embed(["same"]))
    assert make_embedder("none") is None and make_embedder("") is None
    with pytest.raises(EmbedderUnavailable):
        make_embedder("no-such-model")
    with pytest.raises(EmbedderUnavailable, match="is a dimension"):
        make_embedder("wordllama:wide")


def test_minilm_runs_offline_from_its_wheel_as_the_reference_does() -> None:
    """`minilm` (installed by `make install`, which `make test` runs) loads from
    its wheel with no download, and our NumPy encoder gives the vectors the reference
    sentence-transformers implementation gives for these two sentences (their first six
    components, as that implementation prints them)."""
    minilm = make_embedder("minilm")
    assert minilm is not None and (minilm.name, minilm.dim) == ("all-MiniLM-L6-v2", 384)
    hello, example = minilm.embed(["hello world", "This is an example sentence"])
    assert np.allclose(hello[:6], [-0.03448, 0.03102, 0.00673, 0.02611, -0.03936, -0.16030],
                       atol=2e-4)
    assert np.allclose(example[:6], [0.06766, 0.06350, 0.04871, 0.07930, 0.03745, 0.00265],
                       atol=2e-4)
    memory, other = minilm.embed(["The staging database listens on port 5433",
                                  "Our cat Miso is allergic to chicken"])
    question = minilm.embed(["which port does the test db use"])[0]
    assert question @ memory > question @ other + 0.2


def test_http_embedder_speaks_the_ollama_shape() -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append((request.url.path, body["model"]))
        return httpx.Response(200, json={"embeddings": [[3.0, 4.0] for _ in body["input"]]})

    emb = HttpEmbedder("nomic", "http://embed.invalid", transport=httpx.MockTransport(handler))
    assert emb.dim == 2 and emb.name == "http:nomic"
    assert np.allclose(emb.embed(["a", "b"]), [[0.6, 0.8], [0.6, 0.8]])
    assert seen[-1] == ("/api/embed", "nomic")


def _filled(tmp_path: Path, embedder, n: int = 300) -> VectorIndex:  # type: ignore[no-untyped-def]
    index = VectorIndex(tmp_path / "recall", embedder)
    assert index.open() == "missing"
    items = [(f"m-{i}", f"note {i} about topic {i % 7} and colour {i % 5}") for i in range(n)]
    items.append(("m-cat", "Our cat Miso is allergic to chicken, so buy salmon food"))
    index.add(items, height=10)
    return index


def test_index_persists_and_meta_is_the_commit_point(tmp_path: Path, wordllama) -> None:  # type: ignore[no-untyped-def]
    index = _filled(tmp_path, wordllama)
    index.save()
    q = wordllama.embed(["what should the pet not eat"])[0]
    first = index.search(q, 5)
    assert first[0][0] == "m-cat"
    # more vectors and a newer file, but the process dies before meta.json moves
    index.add([("m-late", "a late memory")], height=11)
    index._index.save(str(index.folder / "vectors-99.usearch"))
    index.close()

    again = VectorIndex(tmp_path / "recall", wordllama)
    assert again.open() is None
    assert again.meta.indexed_height == 10 and len(again) == 301  # never claims m-late
    assert again.search(q, 5) == first
    again.close()

    (tmp_path / "recall" / again.meta.vectors_file).unlink()
    broken = VectorIndex(tmp_path / "recall", wordllama)
    assert "missing vectors file" in (broken.open() or "")
    assert len(broken) == 0 and broken.meta.indexed_height == 0
    broken.close()


def test_other_model_forces_rebuild(tmp_path: Path, wordllama) -> None:  # type: ignore[no-untyped-def]
    index = _filled(tmp_path, wordllama, n=10)
    index.save()
    index.close()
    wide = make_embedder("wordllama:256")
    assert wide is not None and wide.dim == 256
    other = VectorIndex(tmp_path / "recall", wide)
    reason = other.open() or ""
    assert reason.startswith("built by wordllama-l2_supercat-128 ") and len(other) == 0
    other.close()


def test_other_graph_or_format_forces_rebuild(tmp_path: Path, wordllama) -> None:  # type: ignore[no-untyped-def]
    index = _filled(tmp_path, wordllama, n=10)
    index.save()
    index.close()
    meta_file = tmp_path / "recall" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({**meta, "connectivity": 16}))
    denser = VectorIndex(tmp_path / "recall", wordllama)
    assert "connectivity 16" in (denser.open() or "") and len(denser) == 0
    denser.close()
    old = {k: v for k, v in meta.items() if k != "connectivity"}
    meta_file.write_text(json.dumps({**old, "format": 1}))
    older = VectorIndex(tmp_path / "recall", wordllama)
    assert older.open() == "index format 1, this node writes format 2" and len(older) == 0
    older.close()


def test_semantic_top_k_respects_filters_on_both_paths(tmp_path: Path, wordllama) -> None:  # type: ignore[no-untyped-def]
    index = _filled(tmp_path, wordllama)
    q = wordllama.embed(["what should the pet not eat"])[0]
    allowed = {f"m-{i}" for i in range(0, 300, 30)}  # 10 memories, m-cat not among them

    def keep(ids: list[str]) -> set[str]:
        return {m for m in ids if m in allowed}

    broad = semantic_ranked(index, q, 5, keep, None)  # HNSW, widened until 5 survive
    assert len(broad) == 5 and all(m in allowed for m, _ in broad)
    narrow = semantic_ranked(index, q, 5, keep, lambda cap: sorted(allowed))  # exact
    exact = sorted(((m, float(s)) for m, s in index.similarities(q, sorted(allowed)).items()),
                   key=lambda kv: -kv[1])
    assert [m for m, _ in narrow] == [m for m, _ in exact[:5]]
    assert semantic_ranked(index, q, 3, None, None)[0][0] == "m-cat"
    assert memory_key("m-cat") == memory_key("m-cat") < 1 << 63


def test_first_passing_keeps_order_and_checks_only_as_deep_as_needed() -> None:
    hits = [(f"m-{i:03d}", 1.0 - i / 1000) for i in range(400)]
    checked: list[str] = []

    def keep(ids: list[str]) -> set[str]:
        checked.extend(ids)
        return {m for m in ids if int(m[2:]) % 10 != 3}  # one in ten rejected

    top = first_passing(hits, 50, keep)
    assert [m for m, _ in top] == [m for m, _ in hits if int(m[2:]) % 10 != 3][:50]
    assert len(checked) < 80  # not all 400 candidates: chunks stop once 50 passed
    assert checked == [m for m, _ in hits[:len(checked)]]  # in rank order, none twice
    everything_rejected = first_passing(hits, 5, lambda ids: set())
    assert everything_rejected == []
    assert first_passing(hits, 3, None) == hits[:3]


def test_rrf_fuses_and_breaks_ties_by_id() -> None:
    fused = rrf([["a", "b", "c"], ["c", "a", "d"]])
    assert [m for m, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
    assert [m for m, _ in rrf([["x"], ["y"]])] == ["x", "y"]
    assert [m for m, _ in rrf([["x"], ["y"]], weights=(0.5, 1.0))] == ["y", "x"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 119), max_size=120, unique=True),
       st.lists(st.integers(0, 119), max_size=120, unique=True),
       st.integers(1, 100), st.integers(1, 100))
def test_a_deeper_page_only_appends_to_the_fused_order(words: list[int], meaning: list[int],
                                                        first: int, second: int) -> None:
    """Legs fetched as deep as a page needs (the window holding it), fused in windows:
    the shallower page is a prefix of the deeper one, scores never rise, no id twice."""
    windows = fusion_windows(5, 101)
    assert windows == (5, 10, 20, 40, 80, 101)
    legs = [[f"w{i}" for i in words], [f"w{i}" for i in meaning]]
    pages = []
    for want in sorted((first, second)):
        depth = next(w for w in windows if w >= want)
        pages.append(fuse_in_windows([leg[:depth] for leg in legs], windows, want,
                                     weights=(0.5, 1.0)))
    shallow, deep = pages
    n = min(first, second)
    assert [m for m, _ in shallow[:n]] == [m for m, _ in deep[:n]]
    assert len({m for m, _ in deep}) == len(deep)
    assert [sc for _, sc in deep] == sorted((sc for _, sc in deep), reverse=True)
    # the top window is the plain fusion at that depth
    top = rrf([leg[:5] for leg in legs], weights=(0.5, 1.0))[:5]
    assert [m for m, _ in deep[:5]] == [m for m, _ in top]
    union = set(legs[0]) | set(legs[1])
    assert len(deep) >= min(max(first, second), len(union))  # a full page while any is left


def test_rest_modes_cursors_and_errors(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import LocalChain, seeded_key

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("recall-unit")
    b = chain.builder(key)
    chain.block([b.submit(chain.next_nonce(key), f"z-{i}", f"zebra note number {i}")
                 for i in range(7)] +
                [b.submit(chain.next_nonce(key), "cat", "Our cat is allergic to chicken")])
    plain = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x")
    with TestClient(create_app(plain), raise_server_exceptions=False) as api:
        resp = api.get("/v1/memories", params={"q": "zebra", "mode": "semantic"})
        assert resp.status_code == 409 and resp.json()["name"] == "recall_unavailable"
        text = api.get("/v1/memories", params={"q": "zebra note 3", "mode": "text"}).json()
        assert [m["id"] for m in text["items"]] == ["z-3"] and text["items"][0]["score"] > 0
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x",
                           embedder="wordllama", index_dir=tmp_path / "recall")
    app = create_app(settings)
    assert app.state.memledger.recall.wait_caught_up(60)
    with TestClient(app, raise_server_exceptions=False) as api:
        seen: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"q": "zebra", "limit": 3,
                                            **({"cursor": cursor} if cursor else {})}
            page = api.get("/v1/memories", params=params).json()
            assert all(m["mode"] == "hybrid" for m in page["items"])
            seen += [m["id"] for m in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 8 and seen[-1] == "cat"  # words rank first
        words = api.get("/v1/memories", params={"q": "zebra", "mode": "words"}).json()
        assert [m["id"] for m in words["items"]] == [f"z-{i}" for i in range(7)]
        assert words["items"][0]["score"] is None
        assert api.get("/v1/memories", params={"q": " - * "}).json()["items"] == []
        # any schema-valid cursor is accepted: its leading number is the offset
        late = api.get("/v1/memories", params={"q": "zebra", "cursor": "7~z-1"}).json()
        assert [m["id"] for m in late["items"]] == ["cat"] and late["next_cursor"] is None
        # with the follower held, a new memory is found by meaning all the same
        recall = app.state.memledger.recall
        recall.pause()
        watermark = recall.index.meta.indexed_height
        chain.block([b.submit(chain.next_nonce(key), "dog", "The dog must never eat grapes")])
        for mode in ("semantic", "hybrid"):
            found = api.get("/v1/memories", params={"q": "what should a pet not eat",
                                                    "mode": mode, "limit": 2}).json()
            assert {m["id"] for m in found["items"]} == {"cat", "dog"}, (mode, found)
        assert recall.index.meta.indexed_height == watermark < chain.height
        recall.pause(False)
    chain.close()


def test_hybrid_pages_are_slices_of_one_order(tmp_path: Path) -> None:
    """Following the cursors past the first fusion window shows every hit once, in the
    order one big page has (it showed 19 of 60 twice and skipped 19 others)."""
    from fastapi.testclient import TestClient

    from memledger.api import ApiSettings, create_app
    from memledger.devtools.chain import LocalChain, seeded_key

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("recall-pages")
    b = chain.builder(key)
    topics = ["staging database", "deploy restart", "backup window", "pager rota"]
    chain.block([b.submit(chain.next_nonce(key), f"p-{i:03d}",
                          f"{topics[i % 4]} note {i}: restart {i % 7} on host {i % 11}")
                 for i in range(120)])
    app = create_app(ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                                 chain_id="x", embedder="wordllama",
                                 index_dir=tmp_path / "recall"))
    assert app.state.memledger.recall.wait_caught_up(60)
    with TestClient(app, raise_server_exceptions=False) as api:
        query = {"q": "staging database restart", "mode": "hybrid"}
        whole = [m["id"] for m in api.get("/v1/memories",
                                          params={**query, "limit": 60}).json()["items"]]
        paged: list[str] = []
        cursor: str | None = None
        while len(paged) < 60:
            params: dict[str, str | int] = {**query, "limit": 7,
                                            **({"cursor": cursor} if cursor else {})}
            page = api.get("/v1/memories", params=params).json()
            scores = [m["score"] for m in page["items"]]
            assert scores == sorted(scores, reverse=True)
            paged += [m["id"] for m in page["items"]]
            cursor = page["next_cursor"]
            assert cursor is not None
    assert len(whole) == 60 and paged[:60] == whole
    chain.close()


def test_a_follower_step_during_a_search_loses_no_new_memory(tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             wordllama, monkeypatch) -> None:
    """The follower may index new memories between the search's walk of the index and
    its read of the watermark: they must still be ranked (they were in neither list)."""
    import sqlalchemy as sa

    from memledger.api.filter_check import FilterCheck
    from memledger.api.queries import MemoryFilter
    from memledger.api.ranked import hybrid, semantic
    from memledger.devtools.chain import LocalChain, seeded_key
    from memledger.recall.indexer import Indexer

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("race-unit")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"n-{i}",
                                           f"note {i} about topic {i % 7} and colour {i % 5}")
                 for i in range(60)])
    engine = sa.create_engine(chain.db_url)
    indexer = Indexer(engine, VectorIndex(tmp_path / "recall", wordllama))
    indexer.index.open()
    indexer.catch_up()
    indexer.state = "following"  # serving, with no follower thread: the test steps it
    walk = indexer.index.search

    def walk_then_follower_step(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = walk(*args, **kwargs)
        indexer.catch_up()  # what the follower thread may do at this moment
        return found

    monkeypatch.setattr(indexer.index, "search", walk_then_follower_step)
    question = "what should the pet not eat"
    for n, mode in enumerate((semantic, hybrid)):
        chain.block([chain.builder(key).submit(chain.next_nonce(key), f"cat-{n}",
                                               "Our cat Miso must never eat chicken")])
        with engine.connect() as conn:
            flt = MemoryFilter(q=question)
            if mode is semantic:
                hits = semantic(conn, flt, question, 5, indexer, FilterCheck(conn, flt))
            else:
                hits = hybrid(conn, flt, question, 5, indexer, None, FilterCheck(conn, flt))
        assert indexer.index.meta.indexed_height == chain.height  # the step did happen
        assert f"cat-{n}" in [m for m, _ in hits][:2], (mode, hits)
    engine.dispose()
    chain.close()


def test_followers_yield_the_cpu_to_consensus() -> None:
    """Index work runs at a lower priority than the ABCI process's Commit (Linux nice is
    per thread): the follower thread, and the threads it starts."""
    import os
    import threading

    from memledger.priority import BACKGROUND_NICE
    from memledger.recall.follow import FollowerThread

    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}
    done = threading.Event()

    def step() -> bool:
        seen["follower"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        child = threading.Thread(target=lambda: seen.__setitem__(
            "child", os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        child.start()
        child.join()
        done.set()
        return True

    follower = FollowerThread("test-follower", step, 0.05).start()
    try:
        assert done.wait(10)
    finally:
        follower.stop()
    assert seen["follower"] >= BACKGROUND_NICE and seen["child"] >= BACKGROUND_NICE
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # caller's own


def test_a_woken_follower_steps_at_once_instead_of_at_its_next_poll() -> None:
    """A search that sees memories the index lacks wakes the follower: the next step
    comes now, not after the poll interval."""
    import threading

    from memledger.recall.follow import FollowerThread

    steps = threading.Semaphore(0)

    def step() -> bool:
        steps.release()
        return True  # caught up: wait for the poll (an hour) or a wake

    follower = FollowerThread("test-woken", step, 3600.0).start()
    try:
        assert steps.acquire(timeout=10)  # the first step
        follower.wake()
        assert steps.acquire(timeout=10)
    finally:
        follower.stop()


def test_paused_follower_takes_no_step_until_resumed() -> None:
    """bench_recall times Commit with the followers paused and following: a paused
    follower must really stop stepping (a step under way may finish), and resume."""
    import threading
    import time

    from memledger.recall.follow import FollowerThread

    steps: list[float] = []
    stepped = threading.Event()

    def step() -> bool:
        steps.append(time.monotonic())
        stepped.set()
        return True

    follower = FollowerThread("test-follower", step, 0.01).start()
    try:
        assert stepped.wait(10)
        follower.pause()
        time.sleep(0.1)  # any step under way ends
        count = len(steps)
        time.sleep(0.3)
        assert len(steps) == count
        stepped.clear()
        follower.resume()
        assert stepped.wait(10)
        assert len(steps) > count
    finally:
        follower.stop()


def _toy_bert(hidden: int = 8, inner: int = 16, layers: int = 2, heads: int = 2
              ) -> tuple[Tokenizer, dict[str, np.ndarray], dict[str, int], dict[str, int]]:
    """A BERT with random weights (safetensors names, torch's (out, in) layout) and a
    word-level tokenizer over a toy vocabulary."""
    rng = np.random.default_rng(5)
    words = "the river stone quartz ember glacier port database listens staging".split()
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3} | {
        word: i + 4 for i, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)
    weights = {"embeddings.word_embeddings.weight": w(len(vocab), hidden),
               "embeddings.position_embeddings.weight": w(32, hidden),
               "embeddings.token_type_embeddings.weight": w(2, hidden),
               "embeddings.LayerNorm.weight": w(hidden), "embeddings.LayerNorm.bias": w(hidden)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for name, out, into in (("attention.self.query", hidden, hidden),
                                ("attention.self.key", hidden, hidden),
                                ("attention.self.value", hidden, hidden),
                                ("attention.output.dense", hidden, hidden),
                                ("intermediate.dense", inner, hidden),
                                ("output.dense", hidden, inner)):
            weights[p + name + ".weight"], weights[p + name + ".bias"] = w(out, into), w(out)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[p + norm + ".weight"], weights[p + norm + ".bias"] = w(hidden), w(hidden)
    config = {"num_hidden_layers": layers, "num_attention_heads": heads, "hidden_size": hidden}
    return tokenizer, weights, config, vocab


def _reference_bert(weights: dict[str, np.ndarray], config: dict[str, int],
                    ids: list[int]) -> np.ndarray:
    """BERT as its paper writes it, one unpadded text in float64 with the exact erf:
    what the NumPy encoder's fused, batched, in-place float32 pass must equal."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    heads, n = config["num_attention_heads"], len(ids)

    def norm(x: np.ndarray, p: str) -> np.ndarray:
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def linear(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]
    x = norm(w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    erf = np.vectorize(math.erf)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (np.split(linear(x, p + f"attention.self.{part}"), heads, axis=-1)
                   for part in ("query", "key", "value"))
        outputs = []
        for qh, kh, vh in zip(q, k, v, strict=True):
            scores = qh @ kh.T / math.sqrt(qh.shape[-1])
            att = np.exp(scores - scores.max(-1, keepdims=True))
            outputs.append(att / att.sum(-1, keepdims=True) @ vh)
        x = norm(x + linear(np.concatenate(outputs, axis=-1), p + "attention.output.dense"),
                 p + "attention.output.LayerNorm")
        inter = linear(x, p + "intermediate.dense")
        inter = 0.5 * inter * (1.0 + erf(inter / math.sqrt(2.0)))
        x = norm(x + linear(inter, p + "output.dense"), p + "output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_the_numpy_bert_encoder_equals_bert_as_written() -> None:
    """The MiniLM encoder (fused query/key/value, in-place GELU, texts batched by length
    and padded) gives each text the vector plain BERT gives it alone, in the order asked,
    and stays in float32: a float64 activation would make every matmul convert its
    float32 weights first (3x slower)."""
    tokenizer, weights, config, vocab = _toy_bert()
    encoder = MiniLMEmbedder.from_parts(tokenizer, weights, config)
    encoder.BATCH = 2  # several batches, each padded to its longest text
    texts = ["the staging database listens", "river", "quartz ember glacier port the river",
             "stone", "the port", "listens database staging river stone quartz ember"]
    vectors = encoder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (len(texts), 8)
    for text, vector in zip(texts, vectors, strict=True):
        ids = [2, *(vocab[word] for word in text.split()), 3]
        assert np.allclose(vector, _reference_bert(weights, config, ids), atol=1e-5), text
    padded = encoder._encode(np.array([[2, 5, 6, 3], [2, 7, 3, 0]]),
                             np.array([[1, 1, 1, 1], [1, 1, 1, 0]]))
    assert padded.dtype == np.float32


class _FloatGraph(MiniLMInt8Embedder):
    """minilm-int8's ONNX graph run unquantised: it must be BERT exactly."""

    QUANTISE = False


def test_the_onnx_encoder_graph_equals_bert_as_written_and_its_int8_stays_close(
        caplog: pytest.LogCaptureFixture) -> None:
    """minilm-int8 writes the encoder as an ONNX graph: run unquantised it gives each text
    plain BERT's vector (so the graph's algebra is right, op for op); quantised to int8
    it stays within a few percent of it in cosine, and quantising logs nothing."""
    tokenizer, weights, config, vocab = _toy_bert()
    texts = ["the staging database listens", "river", "quartz ember glacier port the river",
             "stone", "the port", "listens database staging river stone quartz ember"]
    reference = np.stack([_reference_bert(weights, config,
                                          [2, *(vocab[word] for word in text.split()), 3])
                          for text in texts])
    graph = _FloatGraph.from_parts(tokenizer, weights, config)
    graph.BATCH = 2  # several padded batches
    assert np.allclose(graph.embed(texts), reference / np.linalg.norm(
        reference, axis=1, keepdims=True), atol=1e-5)
    with caplog.at_level(logging.INFO):
        int8 = MiniLMInt8Embedder.from_parts(tokenizer, weights, config).embed(texts)
    assert caplog.records == []
    unit = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    assert np.min(np.sum(int8 * unit, axis=1)) > 0.97
    assert not np.allclose(int8, unit, atol=1e-4)  # it did quantise


def test_minilm_int8_runs_offline_close_to_the_float_model() -> None:
    """`minilm-int8` (same wheel, ONNX Runtime; `make install`) loads offline,
    names itself apart from `minilm` (so a switch rebuilds the index), stays within 2%
    in cosine of the float model's vectors, and still finds a memory by a paraphrase
    that shares no word with it."""
    float_model, int8 = make_embedder("minilm"), make_embedder("minilm-int8")
    assert float_model is not None and int8 is not None
    assert (int8.name, int8.dim) == ("all-MiniLM-L6-v2-int8", 384)
    assert int8.version.endswith("+ort" + dist_version_or_zero("onnxruntime"))
    texts = ["hello world", "This is an example sentence",
             "The staging database listens on port 5433", "Our cat Miso is allergic to chicken",
             "user: My partner gets seasick, so no ferries between islands."]
    vectors = int8.embed(texts)
    assert np.min(np.sum(vectors * float_model.embed(texts), axis=1)) > 0.98
    # a text's vector is its own: not moved by batch-mates or by a build's threads
    assert np.array_equal(vectors, np.stack([int8.embed([text])[0] for text in texts]))
    assert np.array_equal(vectors, int8.embed(texts, threads=2))
    memory, other = int8.embed(texts[2:4])
    question = int8.embed(["which port does the test db use"])[0]
    assert question @ memory > question @ other + 0.2


def test_minilm_at_128_dimensions_projects_on_the_committed_axes() -> None:
    """`minilm-int8:128` projects on the axes file scripts/make_minilm_axes.py wrote (its
    hash is in the version, so a new file rebuilds indexes), still finds a paraphrase,
    and a dimension it has no axes for fails with a clear error."""
    full, small = make_embedder("minilm-int8"), make_embedder("minilm-int8:128")
    assert full is not None and small is not None
    assert (small.name, small.dim) == ("all-MiniLM-L6-v2-int8-128", 128)
    assert small.version.startswith(full.version + "+axes")
    texts = ["The staging database listens on port 5433", "Our cat Miso is allergic to chicken"]
    memory, other = small.embed(texts)
    assert np.allclose(np.linalg.norm(small.embed(texts), axis=1), 1.0, atol=1e-5)
    question = small.embed(["which port does the test db use"])[0]
    assert question @ memory > question @ other + 0.2
    with pytest.raises(EmbedderUnavailable, match="no 100-dimensional axes"):
        make_embedder("minilm:100")


def test_minilm_int8_caches_its_quantised_model_and_reads_back_the_same_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default embedder quantises once per machine: a later load reads the cached
    model and gives bit-for-bit the same vectors (an index built before a restart stays
    valid after it). An altered cache file is a miss that heals; a cache that cannot be
    written, or none, still loads."""
    monkeypatch.setenv("MEMLEDGER_MODEL_CACHE", str(tmp_path / "models"))
    texts = ["The staging database listens on port 5433", "which port does the test db use",
             "Our cat Miso is allergic to chicken, so buy salmon food"]
    fresh = MiniLMInt8Embedder(128)
    expected = fresh.embed(texts)
    assert not fresh.from_cache
    folder = cache_folder()
    assert folder is not None and folder.parent == tmp_path / "models"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "encoder.onnx", "front.npz", "manifest.json", "tokenizer.json"]

    cached = MiniLMInt8Embedder(128)
    assert cached.from_cache and cached.version == fresh.version
    assert np.array_equal(cached.embed(texts), expected)

    encoder = folder / "encoder.onnx"
    altered = bytearray(encoder.read_bytes())
    altered[len(altered) // 2] ^= 0x01
    encoder.write_bytes(bytes(altered))
    healed = MiniLMInt8Embedder(128)
    assert not healed.from_cache and np.array_equal(healed.embed(texts), expected)
    assert MiniLMInt8Embedder(128).from_cache

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("MEMLEDGER_MODEL_CACHE", str(tmp_path / "a-file" / "models"))
    unwritable = MiniLMInt8Embedder(128)
    assert not unwritable.from_cache and np.array_equal(unwritable.embed(texts), expected)
    monkeypatch.setenv("MEMLEDGER_MODEL_CACHE", "")
    assert cache_folder() is None and not MiniLMInt8Embedder(128).from_cache


def test_the_committed_minilm_axes_are_what_the_script_makes() -> None:
    """The axes file is reproducible from the model by its script (the same subspace:
    axes within near-equal components may turn, the space they span may not)."""
    from scripts.make_minilm_axes import minilm_axes

    committed = np.load(Path(__file__).resolve().parents[3] / "memledger" / "recall" /
                        "minilm_axes_128.npy")
    made = minilm_axes(128)
    assert made.shape == committed.shape == (128, 384)
    overlap = float(np.sum((made @ committed.T) ** 2)) / 128  # 1.0: the same subspace
    assert overlap > 0.999


class _CountingEmbedder:
    """The wordllama embedder, counting the texts it is asked to embed."""

    def __init__(self, inner, seconds_per_text: float = 0.0) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.texts, self.seconds_per_text = inner, 0, seconds_per_text
        self.name, self.version, self.dim = inner.name, inner.version, inner.dim

    def embed(self, texts: list[str], threads: int = 1) -> np.ndarray:
        self.texts += len(texts)
        time.sleep(self.seconds_per_text * len(texts))  # a slow (transformer) model
        return np.asarray(self.inner.embed(texts, threads=threads))


def _two_new_memories(tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    """60 memories indexed, then a block of two the index lacks ("cat" and "dog", two
    authors), and a search by meaning and a hybrid one for a question about both."""
    import sqlalchemy as sa

    from memledger.api.filter_check import FilterCheck
    from memledger.api.queries import MemoryFilter
    from memledger.api.ranked import hybrid, semantic
    from memledger.devtools.chain import LocalChain, seeded_key
    from memledger.recall.indexer import Indexer

    chain = LocalChain(tmp_path / "chain")
    key, other = seeded_key("ryw-unit"), seeded_key("ryw-other")
    chain.block([chain.builder(key).submit(chain.next_nonce(key), f"n-{i}",
                                           f"note {i} about topic {i % 7} and colour {i % 5}")
                 for i in range(60)])
    engine = sa.create_engine(chain.db_url)
    indexer = Indexer(engine, VectorIndex(tmp_path / "recall", embedder))
    indexer.index.open()
    indexer.catch_up()
    indexer.state = "following"  # serving, with no follower thread to move it
    chain.block([chain.builder(key).submit(chain.next_nonce(key), "cat",
                                           "Our cat Miso is allergic to chicken"),
                 chain.builder(other).submit(chain.next_nonce(other), "dog",
                                             "The dog must never eat chocolate")])
    question = "what should the pet not eat"

    def search(mode: str = "semantic", **flt: object) -> list[str]:
        with engine.connect() as conn:
            wanted = MemoryFilter(q=question, **flt)  # type: ignore[arg-type]
            check = FilterCheck(conn, wanted)
            if mode == "semantic":
                return [m for m, _ in semantic(conn, wanted, question, 5, indexer, check)]
            return [m for m, _ in hybrid(conn, wanted, question, 5, indexer, None, check)]

    return chain, engine, indexer, search, bytes(key.verify_key).hex()


def test_new_memories_that_fit_a_search_s_budget_are_found_by_meaning_at_once(  # type: ignore[no-untyped-def]
        tmp_path: Path, wordllama, monkeypatch) -> None:
    """Read-your-writes: a memory committed above the index's watermark is ranked by
    the search itself, embedded once, and the follower reuses its vector."""
    from memledger.recall import indexer as indexer_module

    # the ranking, not the clock: on a loaded machine even a static model's texts may
    # take longer than the 5 ms budget
    monkeypatch.setattr(indexer_module, "UNINDEXED_BUDGET_S", 60.0)
    counting = _CountingEmbedder(wordllama)
    chain, engine, indexer, search, author = _two_new_memories(tmp_path, counting)
    watermark = indexer.index.meta.indexed_height
    before = counting.texts
    fresh = search()
    assert {"cat", "dog"} <= set(fresh[:2])  # the two new memories are the nearest
    assert search("hybrid")[:2] == fresh[:2]
    assert "dog" not in search(author=author)
    assert indexer.index.meta.indexed_height == watermark < chain.height  # nothing waited
    assert counting.texts - before == 2 + 3  # each new memory once, the question 3 times
    indexer.catch_up()  # the follower takes the searches' vectors instead of embedding
    assert counting.texts - before == 2 + 3
    assert indexer.index.meta.indexed_height == chain.height
    assert search()[:2] == fresh[:2]  # the index ranks them alike
    engine.dispose()


def test_new_memories_over_a_search_s_budget_are_left_to_the_follower(  # type: ignore[no-untyped-def]
        tmp_path: Path, wordllama) -> None:
    """With a slow model (4 ms a memory, measured on the follower's batch) two new
    memories do not fit a search's 5 ms: it embeds neither, so its latency does not
    carry the follower's work, and wakes the follower, which embeds them."""
    counting = _CountingEmbedder(wordllama, 0.004)
    chain, engine, indexer, search, _ = _two_new_memories(tmp_path, counting)
    assert indexer.seconds_per_memory is not None and indexer.seconds_per_memory >= 0.004
    woken: list[bool] = []
    indexer.wake = lambda: woken.append(True)  # type: ignore[method-assign]
    before = counting.texts
    assert not {"cat", "dog"} & set(search())
    assert counting.texts - before == 1 and woken  # the question alone; follower woken
    indexer.catch_up()
    assert {"cat", "dog"} <= set(search()[:2])
    engine.dispose()


def test_the_lag_is_counted_from_the_projection_s_height_now(tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             wordllama) -> None:
    """A follower step may embed for minutes; the lag it began with said 0 meanwhile,
    in /v1/status and /metrics, however far the projection had gone."""
    import sqlalchemy as sa

    from memledger.api.metrics import RecallCollector
    from memledger.devtools.chain import LocalChain, seeded_key
    from memledger.recall.indexer import Indexer

    chain = LocalChain(tmp_path / "chain")
    key = seeded_key("lag-unit")

    def block(memory_id: str) -> None:
        chain.block([chain.builder(key).submit(chain.next_nonce(key), memory_id, "a note")])

    block("first")
    engine = sa.create_engine(chain.db_url)
    indexer = Indexer(engine, VectorIndex(tmp_path / "recall", wordllama))
    indexer.index.open()
    indexer.catch_up()
    assert indexer.status().lag == 0
    block("second")
    block("third")  # no follower step since: the index is two blocks behind
    assert indexer.status().lag == 2
    assert indexer.status(projection_height=chain.height + 1).lag == 3
    gauges = {g.name: g.samples[0].value for g in RecallCollector(indexer).collect()}
    assert gauges["memledger_recall_lag_blocks"] == 2
    engine.dispose()
    chain.close()
