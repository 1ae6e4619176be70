"""The rerank stage: MaxSim (memledger.recall.late) of a query over a search's first
candidates, from the token states the index follower stored (memledger.recall.late_store)
and, for a candidate without them, from states computed here and stored for next time.

Opt-in per search (`rerank=true`), for the embedders that have token states: the
all-MiniLM-L6-v2 family (`minilm-int8:128`, the default, and its siblings), whose 128
committed axes the rows are projected on. Others (wordllama, remote models) have none;
the API answers 422 `rerank_unsupported` for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memledger.protocol.sealed import is_sealed
from memledger.recall import late
from memledger.recall.embedder import Embedder, TokenStates
from memledger.recall.late_store import LateStore

#: candidates of the first stage a reranked search scores (the probe's depth: hybrid's
#: recall@30 bounds what any reordering can find, and 30 stored rows score in ~2 ms)
RERANK_DEPTH = 30
#: the model whose committed axes (memledger/recall/minilm_axes_128.npy) the rows use
_FAMILY = "all-MiniLM-L6-v2"


def supports(embedder: Embedder) -> bool:
    """True when `embedder` can rerank: it gives token states, and they are the model's
    whose axes the rows are projected on (an embedder-like object without the flag has
    none)."""
    return bool(getattr(embedder, "token_states", False)) and \
        embedder.name.startswith(_FAMILY)


def model_key(embedder: Embedder) -> str:
    """What a stored row must have been made by: the embedder and the row format."""
    return f"{embedder.name} {embedder.version} {late.FORMAT}"


class Reranker:
    """Scores candidates for one embedder, with its token-state store."""

    def __init__(self, embedder: Embedder, folder: str | Path) -> None:
        if not supports(embedder):
            raise ValueError(f"{embedder.name} has no token states to rerank with")
        self.embedder = embedder
        self.store = LateStore(folder, model_key(embedder))

    def keep(self, memory_ids: Sequence[str], texts: Sequence[str],
             states: Sequence[TokenStates]) -> None:
        """Store the rows of memories the follower just embedded (from the same pass)."""
        self.store.put([(m, t, late.candidate_rows(s))
                        for m, t, s in zip(memory_ids, texts, states, strict=True)])

    def query(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's vector (as `embedder.embed` makes it, for the first stage) and its
        rerank rows, from one encoder pass."""
        vectors, states = self.embedder.embed_with_states([text])
        return vectors[0], late.query_rows(states[0])

    def rows(self, candidates: Sequence[tuple[str, str | None]]) -> dict[str, np.ndarray]:
        """Each candidate's rows: stored, else computed from its content (each text in its
        own encoder call, as the follower does, so the rows are the same) and stored.
        A candidate without content, or sealed (ciphertext), has none."""
        readable = [(m, c) for m, c in candidates if c is not None and not is_sealed(c)]
        have = self.store.get(readable)
        todo = [(m, c) for m, c in readable if m not in have]
        if todo:
            _, states = self.embedder.embed_with_states([c for _, c in todo])
            made = [(m, c, late.candidate_rows(s))
                    for (m, c), s in zip(todo, states, strict=True)]
            self.store.put(made)
            have.update((m, rows) for m, _, rows in made)
        return have

    def scores(self, query: np.ndarray, candidates: Sequence[tuple[str, str | None]]
               ) -> dict[str, float]:
        """MaxSim of the query's rows against each candidate that has rows."""
        rows = self.rows(candidates)
        return {m: late.maxsim(query, rows[m]) for m, _ in candidates if m in rows}

    def close(self) -> None:
        self.store.close()
