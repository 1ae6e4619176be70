"""Benchmark: recall quality (recall@5, MRR) of text, semantic and hybrid search, per
embedder, on the committed evaluation set bench/data/recall_eval.json.

The set (bench/data/make_recall_eval.py): 222 memories — 60 facts, 90 distractors and 4
multi-session conversations whose every turn is a memory — and 205 labelled queries:
paraphrase (no content word shared with the memory), keyword, mixed, and questions about
the conversations. Every memory is submitted through a real in-process chain (the
node's Commit path and SQL projection); the REST app (TestClient) then serves
GET /v1/memories?q=...&mode=...&limit=5 exactly as a node does, with the embedder's
vector index fed by the follower.

`--set conversation` runs the long-conversation set instead
(bench/data/make_conversation_eval.py): two conversations of 22-24 sessions and over 400
turns each, every turn a memory, and 100 questions (single-hop, multi-hop, temporal,
open-domain) labelled by their evidence turns. Both conversations share one ledger.

recall@k = |relevant in top k| / min(|relevant|, k) (k = 5, 10); MRR = 1 / rank of the
first relevant hit (0 if none in the top 10). Also: index build rate and per-query latency.

`--rerank` adds `hybrid+rerank` and `semantic+rerank` (the same request with
`rerank=true`: MaxSim over stored token states, memledger.recall.rerank), and for them the
distribution of the scores of relevant and other hits in the top 10, the share of each
a `min_score` keeps, and the top score of queries that match nothing (emoji, other
languages, gibberish): what docs/RECALL.md says the scores mean.

    .venv/bin/python bench/bench_recall.py                       # the default embedder
    .venv/bin/python bench/bench_recall.py --embedders wordllama minilm
    .venv/bin/python bench/bench_recall.py --embedders minilm minilm-int8
    .venv/bin/python bench/bench_recall.py --set conversation
    .venv/bin/python bench/bench_recall.py --set conversation --rerank
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from memledger.api import ApiSettings, create_app  # noqa: E402
from memledger.devtools.chain import LocalChain, seeded_key  # noqa: E402
from memledger.devtools.stats import percentile  # noqa: E402
from memledger.recall.embedder import DEFAULT_EMBEDDER  # noqa: E402

EVAL = ROOT / "bench" / "data" / "recall_eval.json"
MODES = ("text", "semantic", "hybrid")
#: with --rerank: the label of each reranked mode and its request
RERANKED = {"hybrid+rerank": {"mode": "hybrid", "rerank": "true"},
            "semantic+rerank": {"mode": "semantic", "rerank": "true"}}
#: queries that match no memory of either set: their best rerank score is noise's
NOISE = ("🍕🚀🎉🔥", "¿Dónde está la biblioteca municipal?", "今日は天気がいいですね",
         "Wie spät ist es jetzt bitte?", "xqzv blorft wuggle prann", "🙂 ¿qué tal? 元気")
#: min_score thresholds whose kept shares --rerank reports
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
#: each evaluation set: its file and its query kinds
SETS = {
    "recall": (EVAL, ("paraphrase", "keyword", "mixed", "conversation")),
    "conversation": (ROOT / "bench" / "data" / "conversation_eval.json",
                     ("single-hop", "multi-hop", "temporal", "open-domain")),
}
KINDS = SETS["recall"][1]


def build_chain(folder: Path, memories: list[dict[str, Any]]) -> LocalChain:
    chain = LocalChain(folder / "chain")
    key = seeded_key("recall-eval")
    b = chain.builder(key)
    for i in range(0, len(memories), 50):
        txs = [b.submit(chain.next_nonce(key), m["id"], m["content"], domain=m["domain"],
                        tags=m["tags"]) for m in memories[i:i + 50]]
        results = chain.block(txs)
        bad = [r for r in results if r.code != 0]
        assert not bad, bad
    return chain


def score(ranked: list[str], relevant: list[str]) -> tuple[float, float, float]:
    """(recall@5, recall@10, reciprocal rank within the top 10)"""
    rec5 = len(set(ranked[:5]) & set(relevant)) / min(len(relevant), 5)
    rec10 = len(set(ranked[:10]) & set(relevant)) / min(len(relevant), 10)
    rr = 0.0
    for rank, mid in enumerate(ranked[:10], start=1):
        if mid in relevant:
            rr = 1.0 / rank
            break
    return rec5, rec10, rr


def summary_row(vals: list[tuple[float, float, float]]) -> dict[str, Any]:
    """Mean recall@5, recall@10 and MRR of `score` results, and how many."""
    if not vals:
        return {"n": 0}
    return {"n": len(vals),
            "recall@5": round(statistics.fmean(v[0] for v in vals), 3),
            "recall@10": round(statistics.fmean(v[1] for v in vals), 3),
            "mrr": round(statistics.fmean(v[2] for v in vals), 3)}


def evaluate(chain: LocalChain, folder: Path, embedder: str,
             queries: list[dict[str, Any]], kinds: tuple[str, ...] = KINDS,
             rerank: bool = False) -> dict[str, Any]:
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9", chain_id="x",
                           embedder=embedder, index_dir=folder / f"recall-{embedder}")
    started = time.perf_counter()
    app = create_app(settings)
    indexer = app.state.memledger.recall
    assert indexer is not None
    assert indexer.wait_caught_up(600), "index did not catch up"
    build_s = time.perf_counter() - started
    out: dict[str, Any] = {"embedder": indexer.embedder.describe(),
                           "load_and_index_s": round(build_s, 3),
                           "memories": len(indexer.index), "modes": {}}
    modes: dict[str, dict[str, str]] = {m: {"mode": m} for m in MODES}
    if rerank:
        modes.update(RERANKED)
        out["token_states"] = {"rows": indexer.late.store.count(),
                               "disk_bytes": indexer.late.store.disk_bytes()}
    with TestClient(app) as client:
        for label, request in modes.items():
            per_kind: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
            per_conv: dict[str, list[tuple[float, float, float]]] = {}
            lat: list[float] = []
            scores: dict[str, list[float]] = {"relevant": [], "other": []}
            for query in queries:
                t0 = time.perf_counter()
                # the set is submitted, never voted: ask for proposed memories (reads
                # keep committed ones only by default)
                resp = client.get("/v1/memories", params={"q": query["q"], **request,
                                                          "limit": 10, "status": "proposed"})
                lat.append(time.perf_counter() - t0)
                resp.raise_for_status()
                items = resp.json()["items"]
                ranked = [m["id"] for m in items]
                for m in items:
                    scores["relevant" if m["id"] in query["relevant"] else "other"].append(
                        float(m["score"]))
                got = score(ranked, query["relevant"])
                per_kind[query["kind"]].append(got)
                if "conversation" in query:
                    per_conv.setdefault(query["conversation"], []).append(got)
            table: dict[str, Any] = {kind: summary_row(vals) for kind, vals in per_kind.items()}
            table["all"] = summary_row([v for vals in per_kind.values() for v in vals])
            if per_conv:
                table["by_conversation"] = {c: summary_row(v) for c, v in sorted(per_conv.items())}
            lat.sort()
            table["latency_ms"] = {"p50": round(percentile(lat, 50) * 1000, 2),
                                   "p99": round(percentile(lat, 99) * 1000, 2)}
            if label in RERANKED:
                table["scores_top10"] = _distribution(scores)
                table["noise_top_score"] = _noise(client, request)
            out["modes"][label] = table
    return out


def _distribution(scores: dict[str, list[float]]) -> dict[str, Any]:
    """Percentiles of the relevant and the other hits' scores, and the share of each that
    a min_score of each threshold keeps."""
    out: dict[str, Any] = {}
    for kind, values in scores.items():
        values = sorted(values)
        if not values:
            continue
        out[kind] = {"n": len(values), **{f"p{p}": round(percentile(values, p), 3)
                                          for p in (5, 10, 25, 50, 75, 90, 95)}}
    out["kept_by_min_score"] = {
        str(t): {kind: round(sum(v >= t for v in values) / len(values), 3)
                 for kind, values in scores.items() if values} for t in THRESHOLDS}
    return out


def _noise(client: TestClient, request: dict[str, str]) -> dict[str, float | None]:
    """The best score each NOISE query gets (none of the memories answers it)."""
    top: dict[str, float | None] = {}
    for q in NOISE:
        resp = client.get("/v1/memories", params={"q": q, **request, "limit": 1,
                                                  "status": "proposed"})
        resp.raise_for_status()
        items = resp.json()["items"]
        top[q] = round(float(items[0]["score"]), 3) if items else None
    return top


class _Writes:
    """Blocks of synthetic memories flushed into the projection at `per_s` memories/s,
    a block a second, from another process (as the node's ABCI process flushes at
    Commit while its REST process answers queries)."""

    def __init__(self, url: str, first_id: int, first_height: int, per_s: int) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.per_s = per_s
        self.next_id, self.next_height = first_id, first_height
        self._stop = context.Event()
        self._written = context.Value("q", 0)
        self._flushes = context.Queue()
        #: (wall-clock start, seconds) of each flush, to sort them into phases
        self.flushes: list[tuple[float, float]] = []
        self._process = context.Process(
            target=_write_blocks, daemon=True,
            args=(url, first_id, first_height, per_s, self._stop, self._written,
                  self._flushes))

    @property
    def written(self) -> int:
        return int(self._written.value)

    def __enter__(self) -> _Writes:
        if self.per_s:
            self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.per_s:
            while True:  # drain before join: a child with queued items cannot exit
                item = self._flushes.get()
                if item is None:
                    break
                self.flushes.append(item)
            self._process.join()
            blocks = len(self.flushes)
            self.next_id += blocks * self.per_s
            self.next_height += blocks


def _write_blocks(url: str, next_id: int, height: int, per_s: int, stop: Any,
                  written: Any, flushes: Any) -> None:
    import hashlib
    import random

    from bench.bench_read import _record, _text
    from memledger.consensus.store import codec
    from memledger.projection.writer import Projection
    from memledger.protocol import records

    proj = Projection(url)
    rng = random.Random(99)
    while not stop.wait(1.0):
        height += 1
        changes = []
        for _ in range(per_s):
            content = _text(rng)
            rec = _record(next_id, height, rng, content)
            changes.append((records.memory_key(rec["id"]), codec.encode(rec)))
            changes.append((records.content_key(rec["id"]), content.encode()))
            next_id += 1
        wall, started = time.time(), time.perf_counter()
        proj.flush(height, hashlib.sha256(b"w%d" % height).digest(), sorted(changes))
        flushes.put((wall, time.perf_counter() - started))
        written.value += per_s
    flushes.put(None)
    proj.close()


class _Watermarks:
    """When each block became searchable by meaning: the vector index's watermark,
    sampled every 5 ms (wall clock, as the writer's flushes are stamped)."""

    def __init__(self, indexer: Any) -> None:
        import threading

        self._indexer = indexer
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        last = -1
        while not self._stop.wait(0.005):
            mark = self._indexer.index.meta.indexed_height
            if mark != last:
                self.samples.append((time.time(), mark))
                last = mark

    def __enter__(self) -> _Watermarks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def delays_ms(self, flushes: list[tuple[float, float]], first_height: int
                  ) -> list[float]:
        """Per flushed block: from the end of its flush to the first sample whose
        watermark reached it (blocks never reached are left out)."""
        out = []
        for i, (wall, seconds) in enumerate(flushes):
            done = wall + seconds
            reached = next((t for t, mark in self.samples if mark >= first_height + i + 1),
                           None)
            if reached is not None:
                out.append(max(0.0, reached - done) * 1000)
        return out


#: Commit's cost with and without the index followers: rounds of two phases (followers
#: paused, then following), seconds per phase, and the start of each following phase
#: left out (the followers catch up on the paused phase's blocks there, a burst a node
#: following every block never has). Interleaving spreads the machine's drift over both.
COMMIT_ROUNDS = 5
COMMIT_PHASE_S = 20.0
COMMIT_CATCH_UP_S = 4.0


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"blocks": len(ms), "p50": round(percentile(ms, 50), 2),
            "p90": round(percentile(ms, 90), 2), "mean": round(statistics.fmean(ms), 2)}


def commit_cost(writer: _Writes, followers: list[Any]) -> dict[str, Any]:
    """The projection flush's time per block (the projection's half of Commit) while the
    followers are paused and while they follow every block, in interleaved phases."""
    windows: list[tuple[str, float, float]] = []
    with writer:
        time.sleep(2.0)  # the writer process starts
        for _ in range(COMMIT_ROUNDS):
            for follower in followers:
                follower.pause()
            start = time.time()
            time.sleep(COMMIT_PHASE_S)
            windows.append(("without_indexes", start, time.time()))
            for follower in followers:
                follower.pause(False)
            start = time.time()
            time.sleep(COMMIT_PHASE_S)
            windows.append(("with_indexes", start + COMMIT_CATCH_UP_S, time.time()))
    phases: dict[str, list[float]] = {"without_indexes": [], "with_indexes": []}
    for wall, took in writer.flushes:
        for name, lo, hi in windows:
            if lo <= wall < hi:
                phases[name].append(took * 1000)
    out: dict[str, Any] = {name: _summary(ms) for name, ms in phases.items()}
    out["ratio_p50"] = round(out["with_indexes"]["p50"] / out["without_indexes"]["p50"], 3)
    out["ratio_mean"] = round(out["with_indexes"]["mean"] / out["without_indexes"]["mean"], 3)
    out["method"] = (f"{COMMIT_ROUNDS} rounds of {COMMIT_PHASE_S:.0f} s paused, "
                     f"{COMMIT_PHASE_S:.0f} s following (first {COMMIT_CATCH_UP_S:.0f} s "
                     "of each left out)")
    return out


#: queries per leg run before measuring (the first one after a start reads cold pages; it
#: is reported on its own as `first_query`)
WARM_UP = 3


def _loaded_rss(index: Any) -> dict[str, Any]:
    """RSS the saved vector index takes when a fresh process loads it (as a node does at
    start): bench_hnsw_ram's loader, on this index's own file."""
    from memledger.recall.index import CONNECTIVITY

    meta = index.meta
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_hnsw_ram", str(meta.count), str(meta.dim),
         str(CONNECTIVITY), str(index.folder / meta.vectors_file)],
        check=True, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    return dict(json.loads(done.stdout))


def _cached_index(cache: Path | None, size: int) -> Path | None:
    """`cache` when it holds a saved index of exactly `size` memories (the fill alone)."""
    if cache is None or not (cache / "meta.json").exists():
        return None
    return cache if json.loads((cache / "meta.json").read_text()).get("count") == size \
        else None


def scale(size: int, queries: int, embedder_spec: str, write_rate: int = 0,
          db_url: str | None = None, compare_queries: int = 30,
          index_cache: Path | None = None, rerank: bool = False,
          token_states: bool = True, tail: bool = True,
          modes: tuple[str, ...] | None = None, commit: bool = True,
          background: bool = True) -> dict[str, Any]:
    """Latency of the modes at `size` synthetic memories (bench_read's Zipf generator,
    flushed into a SQLite projection, or `db_url`), plus index build rate, RAM and disk.

    `embedder_spec` "none" measures text only: through the word index, and through the
    projection's own full-text index for comparison. `write_rate` memories/s are flushed
    into the projection meanwhile, a block a second. `index_cache`: a folder the built
    vector index is copied to, or, when it already holds one of this size and model,
    copied from instead of building (the fill is seeded, so another backend's run has
    the same memories; embedding 1M texts with a transformer takes over an hour).
    `rerank`: also hybrid with `rerank=true`, from the token rows the build stored.
    `token_states` False: the follower stores no token rows (`recall_token_states` off).
    `modes`: time only these legs (labels as in the report; all by default); `commit`
    False: leave out the Commit-cost rounds (~200 s), for quick A/B runs of the searches.
    `background`: the searches run on a thread at background priority, as a node's reads
    do (False: at the normal priority, above the index followers').
    """
    import random

    from bench.bench_read import BLOCK, VOCAB, populate
    from memledger.api import ranked
    from memledger.api.db import readonly_engine
    from memledger.api.queries import MemoryFilter
    from memledger.priority import run_in_background
    from memledger.projection.writer import Projection
    from memledger.recall.embedder import make_embedder
    from memledger.recall.index import VectorIndex
    from memledger.recall.indexer import Indexer
    from memledger.recall.tail import TAIL_EMBEDDER
    from memledger.recall.text_index import TextIndex
    from memledger.recall.text_indexer import TextIndexer

    out: dict[str, Any] = {"size": size, "write_rate_per_s": write_rate}
    with tempfile.TemporaryDirectory(prefix="bench-recall-scale-") as tmp:
        url = db_url or f"sqlite:///{tmp}/projection.db"
        out["backend"] = url.split(":", 1)[0]
        proj = Projection(url)
        out["fill_s"] = round(populate(proj, 0, size, seed=7), 1)
        proj.close()
        next_id, next_height = size, (size + BLOCK - 1) // BLOCK
        engine = readonly_engine(url)
        words = TextIndexer(engine, TextIndex(Path(tmp) / "text"))
        words.index.open()
        t0 = time.perf_counter()
        words.catch_up()
        build = time.perf_counter() - t0
        words.index.close()
        words.start()  # follows the writes below, as on a node
        out["word_index"] = {"build_s": round(build, 1),
                             "memories_per_s": round(len(words.index) / build),
                             "disk_bytes_per_memory": round(words.index.disk_bytes()
                                                            / len(words.index))}
        embedder = make_embedder(embedder_spec)
        indexer = None
        if embedder is not None:
            folder = Path(tmp) / "recall"
            cached = _cached_index(index_cache, size)
            if cached is not None:
                shutil.copytree(cached, folder)
            index = VectorIndex(folder, embedder)
            reused = index.open() is None and cached is not None
            # with the static tail, as on a node (it follows from the watermark)
            indexer = Indexer(engine, index, store_token_states=token_states,
                              tail_embedder=None if embedder.static or not tail
                              else make_embedder(TAIL_EMBEDDER))
            t0 = time.perf_counter()
            if reused:
                indexer.catch_up()
            else:
                indexer.rebuild()
            build = time.perf_counter() - t0
            if index_cache is not None and not reused:
                shutil.rmtree(index_cache, ignore_errors=True)
                shutil.copytree(folder, index_cache)
            indexer.follow()  # follows the writes below, as on a node
            out["embedder"] = embedder.describe()
            # a reused index had no build to time: say where its vectors came from
            built = {"copied_from": str(index_cache)} if reused else {
                "build_s": round(build, 1), "memories_per_s": round(len(index) / build)}
            out["index"] = {**built,
                            "ram_bytes": index.memory_bytes(),
                            "ram_bytes_per_memory": round(index.memory_bytes() / len(index)),
                            "disk_bytes": index.disk_bytes(),
                            "disk_bytes_per_memory": round(index.disk_bytes() / len(index))}
            if indexer.late is not None:
                rows = indexer.late.store.count()
                out["token_states"] = {"rows": rows,
                                       "disk_bytes": indexer.late.store.disk_bytes(),
                                       "disk_bytes_per_memory": round(
                                           indexer.late.store.disk_bytes() / max(rows, 1))}
        rng = random.Random(3)
        kinds = {
            "common word": lambda: VOCAB[0],
            "rare word": lambda: rng.choice(VOCAB[-200:]),
            "paraphrase": lambda: rng.choice(["what should the pet not eat",
                                              "when do we ship releases",
                                              "who gets paged if the site breaks"]),
        }
        out["latency_ms"] = {}
        legs: list[tuple[str, TextIndexer | None, str]] = [("text", words, "text")]
        if indexer is None:
            legs.append(("text", None, "text (projection FTS, no word index)"))
        else:
            legs += [("semantic", words, "semantic"), ("hybrid", words, "hybrid")]
            if rerank:
                legs.append(("hybrid", words, "hybrid+rerank"))
        if modes is not None:
            legs = [leg for leg in legs if leg[2].split(" ")[0] in modes]
        if write_rate and commit:  # Commit's cost with the followers paused and following
            writer = _Writes(url, next_id, next_height, write_rate)
            followers: list[Any] = [words] if indexer is None else [words, indexer]
            out["commit_flush_ms"] = commit_cost(writer, followers)
            next_id, next_height = writer.next_id, writer.next_height
        def time_legs(conn: Any) -> None:
            if background:  # as a node's reads run (memledger.api.readgate)
                run_in_background()
            for mode, words_index, label in legs:
                for kind, make in kinds.items():
                    # the projection-FTS comparison is slow at scale: fewer queries
                    count = queries if words_index is not None or indexer is not None \
                        else min(queries, compare_queries)
                    lat = []
                    for _ in range(WARM_UP + count):
                        flt = MemoryFilter(q=make())
                        t1 = time.perf_counter()
                        ranked.ranked_search(conn, flt, mode, 10, None, indexer, words_index,
                                             rerank=label == "hybrid+rerank")
                        lat.append((time.perf_counter() - t1) * 1000)
                        conn.rollback()  # the next query sees the writes since
                    first, lat = lat[0], sorted(lat[WARM_UP:])
                    out["latency_ms"][f"{label} / {kind}"] = {
                        "n": count, "first_query": round(first, 2),
                        "p50": round(percentile(lat, 50), 2),
                        "p99": round(percentile(lat, 99), 2)}

        out["searches_at"] = "background priority" if background else "normal priority"
        first_height = next_height
        with _Writes(url, next_id, next_height, write_rate) as writes, \
                engine.connect() as conn, ThreadPoolExecutor(1) as searcher, \
                _Watermarks(indexer) if indexer is not None else contextlib.nullcontext() \
                as marks:
            searcher.submit(time_legs, conn).result()
        if marks is not None and writes.flushes:
            delays = sorted(marks.delays_ms(writes.flushes, first_height))
            # from a block's flush until its memories are in the vector index: how long
            # a new memory waits to be found by meaning, when no search embedded it
            out["to_meaning_ms"] = {
                "blocks": len(writes.flushes), "reached": len(delays),
                **({"p50": round(percentile(delays, 50)), "p99": round(percentile(delays, 99)),
                    "max": round(delays[-1])} if delays else {})}
        out["written_during_queries"] = writes.written
        if indexer is not None and indexer.tail is not None:  # held at the end
            st = indexer.status()
            out["tail"] = {"memories": len(indexer.tail), "index_lag_blocks": st.lag,
                           "covered_lag_blocks": st.covered_lag,
                           "searches_asked": indexer.tail_searches}
        words.stop()
        if indexer is not None:
            indexer.stop()  # saves the index: its RSS is measured loaded afresh
            out["index"]["rss_loaded"] = _loaded_rss(indexer.index)
        engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedders", nargs="+", default=[DEFAULT_EMBEDDER])
    parser.add_argument("--set", choices=sorted(SETS), default="recall",
                        help="the evaluation set: recall_eval.json (default) or the long "
                             "conversations of conversation_eval.json")
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    parser.add_argument("--rerank", action="store_true",
                        help="also hybrid+rerank and semantic+rerank (rerank=true), with the "
                             "distribution of their scores; with --scale, hybrid+rerank")
    parser.add_argument("--no-tail", action="store_true",
                        help="--scale: without the static tail (docs/RECALL.md)")
    parser.add_argument("--no-token-states", action="store_true",
                        help="with --scale: the follower stores no rerank token rows, for an "
                             "A/B of their cost")
    parser.add_argument("--scale", type=int, default=0,
                        help="instead: latency, build rate, RAM and disk at this many "
                             "synthetic memories (SQLite)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write-rate", type=int, default=0,
                        help="with --scale: memories/s flushed into the projection meanwhile")
    parser.add_argument("--index-cache", type=Path, default=None,
                        help="with --scale: copy the built vector index here, or reuse "
                             "the one here (same size and model) instead of building")
    parser.add_argument("--no-unindexed", action="store_true",
                        help="with --scale: searches leave out the memories above the vector "
                             "index's watermark (read-your-writes off), for an A/B of its cost")
    parser.add_argument("--modes", nargs="+", default=None,
                        choices=["text", "semantic", "hybrid", "hybrid+rerank"],
                        help="with --scale: time only these modes")
    parser.add_argument("--no-commit-cost", action="store_true",
                        help="with --scale and --write-rate: skip the Commit-cost rounds")
    parser.add_argument("--foreground-searches", action="store_true",
                        help="with --scale: searches at the normal priority, above the "
                             "index followers' (before reads ran at background priority)")
    parser.add_argument("--postgres", action="store_true",
                        help="with --scale: a private PostgreSQL server instead of SQLite")
    args = parser.parse_args()
    if args.scale:
        if args.no_unindexed:
            from memledger.recall import indexer

            indexer.UNINDEXED_CAP = 0
        server = None
        if args.postgres:
            from memledger.devtools.postgres import start_postgres

            server = start_postgres()
        try:
            result = scale(args.scale, args.queries, args.embedders[0], args.write_rate,
                           None if server is None else server.url,
                           index_cache=args.index_cache, rerank=args.rerank,
                           token_states=not args.no_token_states,
                           tail=not args.no_tail,
                           modes=None if args.modes is None else tuple(args.modes),
                           commit=not args.no_commit_cost,
                           background=not args.foreground_searches)
        finally:
            if server is not None:
                server.stop()
        result["command"] = "bench/bench_recall.py " + " ".join(sys.argv[1:])
        text = json.dumps(result, indent=1)
        if args.out:
            Path(args.out).write_text(text + "\n")
        print(text)
        return
    path, kinds = SETS[args.set]
    data = json.loads(path.read_text())
    report: dict[str, Any] = {
        "command": "bench/bench_recall.py " + " ".join(sys.argv[1:]),
        "machine": {"python": platform.python_version(), "cpus": 2},
        "eval_set": {"file": str(path.relative_to(ROOT)),
                     "memories": len(data["memories"]), "queries": len(data["queries"]),
                     "by_kind": {k: sum(q["kind"] == k for q in data["queries"])
                                 for k in kinds}},
        "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        chain = build_chain(folder, data["memories"])
        report["chain_fill_s"] = round(time.perf_counter() - t0, 2)
        try:
            for embedder in args.embedders:
                report["results"].append(evaluate(chain, folder, embedder, data["queries"],
                                                  kinds, args.rerank))
        finally:
            chain.close()
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
