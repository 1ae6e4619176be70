"""Late interaction (MaxSim) over MiniLM's final-layer token states: the rerank stage's
scorer, and which token states it keeps.

Why: one pooled vector per memory loses which words matched; on long conversations
hybrid's top 5 misses the turn that holds the answer half the time. Scoring each query
token against each of a candidate's tokens (ColBERT's MaxSim) over hybrid's top 30, with
the weights the node already ships, lifted conversation recall@5 0.50 -> 0.65 and
paraphrase 0.82 -> 0.88, keyword unchanged (bench/bench_rerank_probe.py, BENCHMARKS.md
section 9). This module is exactly the probe's best variant (`content ... _128_int8`):

- **query side**: content tokens only: no [CLS]/[SEP], no token without a letter or digit
  (punctuation), no stopword (memledger.recall.stopwords); all but [CLS]/[SEP] when that
  leaves none. Projected on the index's 128 fixed axes, unit length.
- **candidate side**: every token but [CLS]/[SEP], projected on the same 128 axes and
  rounded to int8 with one scale per row. The scale need not be kept: a row's direction
  is its int8 values' own, and only directions count. ~1 byte per axis per token, what
  memledger.recall.late_store keeps per memory.
- **score**: the mean over the query's tokens of the best cosine over the candidate's
  tokens, in [-1, 1] (docs/RECALL.md, "Rerank", says what its values mean).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

from memledger.recall.embedder import TokenStates
from memledger.recall.stopwords import STOPWORDS

#: axes the token states are projected on: the committed principal axes of the model's
#: own outputs (memledger/recall/minilm_axes_128.npy), those the default index uses
AXES = 128
#: what a stored row means; part of each row's model key, so a change of selection or
#: encoding makes every stored row stale (recomputed), never misread
FORMAT = "maxsim-content-128-int8-v1"
_SPECIAL = frozenset(("[CLS]", "[SEP]", "[PAD]"))


@functools.cache
def axes() -> np.ndarray:
    """[384, AXES] float32: the projection the vector index's `minilm*:128` uses."""
    path = os.path.join(os.path.dirname(__file__), f"minilm_axes_{AXES}.npy")
    return np.ascontiguousarray(np.load(path).T, dtype=np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)
    return np.asarray(x / norms, dtype=np.float32)


def not_special(states: TokenStates) -> np.ndarray:
    """[n] bool: every token but [CLS]/[SEP] (all of them when that leaves none)."""
    keep = np.array([t not in _SPECIAL for t in states.tokens], dtype=bool)
    return keep if keep.any() else np.ones(len(states.tokens), dtype=bool)


def content(states: TokenStates) -> np.ndarray:
    """[n] bool: the query's content tokens: not special, with a letter or digit, not a
    stopword; `not_special` when that leaves none (a query of stopwords only)."""
    keep = np.array([t not in _SPECIAL and any(c.isalnum() for c in t)
                     and t not in STOPWORDS for t in states.tokens], dtype=bool)
    return keep if keep.any() else not_special(states)


def query_rows(states: TokenStates) -> np.ndarray:
    """float32 [k, AXES], unit rows: the query's content tokens on the axes."""
    return _unit(states.hidden[content(states)] @ axes())


def candidate_rows(states: TokenStates) -> np.ndarray:
    """int8 [k, AXES]: a candidate's tokens (no [CLS]/[SEP]) on the axes, each row
    rounded with its own scale (largest magnitude -> 127), as the store keeps them."""
    rows = states.hidden[not_special(states)] @ axes()
    scale = np.maximum(np.abs(rows).max(axis=1, keepdims=True), 1e-12) / 127.0
    return np.clip(np.round(rows / scale), -127, 127).astype(np.int8)


def maxsim(query: np.ndarray, candidate: np.ndarray) -> float:
    """Mean over the query's rows (unit, float) of the best cosine over the candidate's
    rows (int8 from `candidate_rows`); 0.0 for an empty side."""
    if not len(query) or not len(candidate):
        return 0.0
    rows = _unit(candidate.astype(np.float32))
    return float((query @ rows.T).max(axis=1).mean())


def scores(query: np.ndarray, candidates: Sequence[np.ndarray]) -> list[float]:
    """`maxsim` of one query against each candidate."""
    return [maxsim(query, c) for c in candidates]
