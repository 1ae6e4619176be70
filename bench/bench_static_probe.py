"""Probe (issue 37, ingest): would a static first stage let the default index follow
1,000 new memories/s without losing the recall the transformer gives?

A static embedder (one fixed vector per vocabulary token, a text's vector their average)
costs microseconds per memory; the default, `minilm-int8:128`, costs ~1-3 ms of CPU.
Two static tables are measured against it:

- `wordllama` (shipped, MIT): its own 128-axis table;
- a table **distilled from the MiniLM weights we already ship**: every one of the
  model's 30,522 tokens encoded alone (`[CLS] token [SEP]`, the float NumPy encoder, as
  scripts/make_minilm_axes.py does), keeping either the pooled vector (`pooled`) or the
  token's own output state (`token`), on the 128 index axes or all 384, averaged plain,
  weighted by log(frequency rank) (the vocabulary lists whole words in rough frequency
  order from id 1996), or smooth-inverse-frequency under a Zipf law, optionally centred
  on the table's own mean. The variants are fixed here, not searched for.

And the transformer cut short: the float NumPy encoder (`minilm:128`, the int8 model's
reference) with only its first k of 6 layers, k = 6, 5, 4, 3, whose cost falls with k.

Scored as the semantic leg alone (exact cosine over every memory, no HNSW, no word leg):
recall@5 per query kind, and recall@30, the ceiling of any rerank of a top-30 first
stage. Both evaluation sets (bench/data/recall_eval.json, conversation_eval.json).
Also the CPU per memory of embedding each set's memories, one thread.

    nice -n 10 .venv/bin/python bench/bench_static_probe.py \
        --out bench/results/static_probe.json
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread: per-memory CPU is the figure

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memledger.recall.embedder import make_embedder  # noqa: E402
from memledger.recall.minilm import MiniLMEmbedder  # noqa: E402

SETS = {"recall": ROOT / "bench" / "data" / "recall_eval.json",
        "conversation": ROOT / "bench" / "data" / "conversation_eval.json"}
CLS, SEP = 101, 102  # the model's [CLS] and [SEP] ids
FIRST_WORD = 1996  # ids below are padding, unused slots, and single characters
Embed = Callable[[Sequence[str]], np.ndarray]


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


def distil(encoder: MiniLMEmbedder) -> tuple[np.ndarray, np.ndarray]:
    """(pooled, token) tables [vocab, 384]: each token encoded on its own."""
    vocab = encoder._w["embeddings.word_embeddings.weight"].shape[0]
    pooled = np.empty((vocab, encoder._hidden), dtype=np.float32)
    token = np.empty_like(pooled)
    for start in range(0, vocab, 1024):
        ids = np.arange(start, min(vocab, start + 1024))
        batch = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], axis=1)
        hidden, vectors = encoder._encode_states(batch, np.ones_like(batch))
        pooled[ids], token[ids] = vectors, hidden[:, 1]
    return pooled, token


def static_embedder(encoder: MiniLMEmbedder, table: np.ndarray, *, weights: str = "plain",
                    centre: bool = False, axes: bool = True) -> Embed:
    """A text's vector: the (weighted) mean of its tokens' rows."""
    rows = table.astype(np.float64)
    if centre:
        rows = rows - rows.mean(axis=0)
    if axes:
        projection = np.load(ROOT / "memledger" / "recall" / "minilm_axes_128.npy")
        rows = rows @ projection.T.astype(np.float64)
    rank = np.maximum(np.arange(len(rows)) - FIRST_WORD + 1, 1).astype(np.float64)
    zipf = (1 / rank) / (1 / rank).sum()
    weight = {"plain": np.ones(len(rows)), "logrank": np.log1p(rank),
              "sif": 1e-4 / (1e-4 + zipf)}[weights]

    def embed(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), rows.shape[1]))
        for i, encoding in enumerate(encoder._tok.encode_batch(list(texts))):
            ids = np.array([t for t in encoding.ids if t not in (CLS, SEP)], dtype=np.int64)
            if len(ids):
                out[i] = weight[ids] @ rows[ids] / weight[ids].sum()
        return _unit(out)
    return embed


def evaluate(embed: Embed, path: Path) -> dict[str, Any]:
    """recall@5 and recall@30 per query kind; CPU µs per memory embedded."""
    doc = json.loads(path.read_text())
    ids = [m["id"] for m in doc["memories"]]
    texts = [m["content"] for m in doc["memories"]]
    t0 = time.process_time()
    memories = embed(texts)
    cpu_us = (time.process_time() - t0) * 1e6 / len(texts)
    queries = embed([q["q"] for q in doc["queries"]])
    return {"cpu_us_per_memory": round(cpu_us, 1),
            "kinds": score(memories, ids, queries, doc["queries"])}


def score(memory_vectors: np.ndarray, ids: list[str], query_vectors: np.ndarray,
          queries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """recall@5 and recall@30 per query kind, by exact cosine over every memory."""
    kinds: dict[str, list[tuple[float, float]]] = {}
    for row, query in zip(query_vectors @ memory_vectors.T, queries, strict=True):
        top = [ids[j] for j in np.argsort(-row, kind="stable")[:30]]
        relevant = set(query["relevant"])
        kinds.setdefault(query["kind"], []).append(
            (len(relevant & set(top[:5])) / min(len(relevant), 5),
             len(relevant & set(top)) / min(len(relevant), 30)))
    return {kind: {"n": len(v), "recall@5": round(float(np.mean([a for a, _ in v])), 3),
                   "recall@30": round(float(np.mean([b for _, b in v])), 3)}
            for kind, v in sorted(kinds.items())}


def first_layers(encoder: MiniLMEmbedder, layers: int) -> Embed:
    """The encoder's vectors from its first `layers` layers only."""
    def embed(texts: Sequence[str]) -> np.ndarray:
        encoder._layers = layers
        return encoder.embed(texts)
    return embed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    args = parser.parse_args()
    encoder = MiniLMEmbedder()
    t0 = time.perf_counter()
    pooled, token = distil(encoder)
    distil_s = time.perf_counter() - t0
    int8, wordllama = make_embedder("minilm-int8:128"), make_embedder("wordllama")
    assert int8 is not None and wordllama is not None
    variants: dict[str, Embed] = {
        "minilm-int8:128 (the default)": int8.embed,
        "wordllama": wordllama.embed,
        "pooled, 128 axes": static_embedder(encoder, pooled),
        "pooled, 384": static_embedder(encoder, pooled, axes=False),
        "token, 128 axes": static_embedder(encoder, token),
        "pooled, 128 axes, centred": static_embedder(encoder, pooled, centre=True),
        "pooled, 128 axes, log-rank": static_embedder(encoder, pooled, weights="logrank"),
        "pooled, 128 axes, SIF": static_embedder(encoder, pooled, weights="sif"),
        "token, 384, SIF": static_embedder(encoder, token, weights="sif", axes=False),
    }
    cut = MiniLMEmbedder(128)
    variants.update({f"minilm:128, first {k} of 6 layers": first_layers(cut, k)
                     for k in (6, 5, 4, 3)})
    report: dict[str, Any] = {"distil_s": round(distil_s, 1), "variants": {}}
    for name, embed in variants.items():
        report["variants"][name] = {label: evaluate(embed, path)
                                    for label, path in SETS.items()}
        row = report["variants"][name]
        print(f"{name:32s}", "  ".join(
            f"{label}:{kind} {v['recall@5']:.2f}/{v['recall@30']:.2f}"
            for label, result in row.items() for kind, v in result["kinds"].items()),
            " µs/memory", [result["cpu_us_per_memory"] for result in row.values()],
            flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
