"""Recall inside private domains, on the member's machine (app version 10+).

Nodes hold only ciphertext for private domains, so they cannot rank them. The client
keeps a local index of the private memories its key can open, built from the ledger
(the node's listing of each private domain, opened here and optionally verified against
the chain), and `Client.recall` merges its hits with the node's public results before
the top-k cut (reciprocal-rank fusion: the two lists' scores are not comparable).

Words are ranked by BM25. Meaning is ranked too when the client is given an `embed`
function (texts -> vectors, e.g. the node's default embedder where it is installed:
`memledger.recall.embedder.make_embedder`); the SDK itself depends on no model. The index
lives in memory only: plaintext is never written to disk by the SDK.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memledger.sdk.models import Memory

if TYPE_CHECKING:
    from memledger.sdk.sync import Client

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
_WORD = re.compile(r"\w+", re.UNICODE)
K1, B = 1.2, 0.75
RRF_K = 60
LOCAL_MODE = "local"


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


@dataclass
class _Doc:
    memory: Memory
    length: int
    vector: Any = None


class LocalIndex:
    """BM25 over words, and cosine over vectors when an embedder is given."""

    def __init__(self, embed: Embed | None = None) -> None:
        self.embed = embed
        self.docs: dict[str, _Doc] = {}
        self.postings: dict[str, dict[str, int]] = {}
        self._total_len = 0

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, memories: Iterable[Memory]) -> int:
        fresh = [m for m in memories if m.content is not None and not m.sealed]
        vectors: Sequence[Any] = [None] * len(fresh)
        if self.embed is not None and fresh:
            vectors = _normalised(self.embed([m.content or "" for m in fresh]))
        for memory, vector in zip(fresh, vectors, strict=True):
            if memory.id in self.docs:
                self.docs[memory.id].memory = memory  # status may have moved
                continue
            bag = Counter(words(memory.content or ""))
            for term, count in bag.items():
                self.postings.setdefault(term, {})[memory.id] = count
            length = sum(bag.values())
            self.docs[memory.id] = _Doc(memory, length, vector)
            self._total_len += length
        return len(fresh)

    def _bm25(self, q: str) -> dict[str, float]:
        n = len(self.docs)
        avg = self._total_len / n if n else 1.0
        scores: dict[str, float] = {}
        for term in set(words(q)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for mid, tf in posting.items():
                norm = tf + K1 * (1 - B + B * self.docs[mid].length / avg)
                scores[mid] = scores.get(mid, 0.0) + idf * tf * (K1 + 1) / norm
        return scores

    def _cosine(self, q: str, allowed: set[str]) -> dict[str, float]:
        if self.embed is None or not allowed:
            return {}
        (qv,) = _normalised(self.embed([q]))
        return {mid: sum(a * b for a, b in zip(qv, self.docs[mid].vector, strict=True))
                for mid in allowed if self.docs[mid].vector is not None}

    def search(self, q: str, limit: int, keep: Callable[[Memory], bool]) -> list[Memory]:
        """The `limit` best memories `keep` accepts: words, fused with meaning (RRF) when
        there is an embedder; each carries its fused score and mode `local`."""
        allowed = {mid for mid, d in self.docs.items() if keep(d.memory)}
        by_words = {m: s for m, s in self._bm25(q).items() if m in allowed}
        lists = [sorted(by_words, key=lambda m: (-by_words[m], m))]
        by_meaning = self._cosine(q, allowed)
        if by_meaning:
            lists.append(sorted(by_meaning, key=lambda m: (-by_meaning[m], m)))
        fused = fuse(lists)
        ranked = sorted(fused, key=lambda m: (-fused[m], m))[:limit]
        return [replace(self.docs[m].memory, score=fused[m], mode=LOCAL_MODE) for m in ranked]


def _normalised(vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    out = []
    for v in vectors:
        norm = math.sqrt(sum(float(x) * float(x) for x in v)) or 1.0
        out.append([float(x) / norm for x in v])
    return out


def fuse(lists: Sequence[Sequence[str]]) -> dict[str, float]:
    """Reciprocal-rank fusion of ranked id lists."""
    scores: dict[str, float] = {}
    for ranked in lists:
        for rank, mid in enumerate(ranked):
            scores[mid] = scores.get(mid, 0.0) + 1.0 / (RRF_K + rank + 1)
    return scores


def merge(public: Sequence[Memory], private: Sequence[Memory], limit: int) -> list[Memory]:
    """The node's hits and the local ones in one ranking, cut to `limit` (a memory in both
    is kept once, as opened here)."""
    by_id = {m.id: m for m in public}
    by_id.update({m.id: m for m in private})
    fused = fuse([[m.id for m in public], [m.id for m in private]])
    ranked = sorted(fused, key=lambda m: -fused[m])[:limit]
    return [by_id[m] for m in ranked]


def wanted_statuses(status: str | Sequence[str] | None, include_disputed: bool) -> set[str]:
    """The statuses a recall keeps, as the node decides them (committed by default)."""
    if status is None:
        return {"committed", "challenged"} if include_disputed else {"committed"}
    chosen = {status} if isinstance(status, str) else set(status)
    return chosen | ({"challenged"} if include_disputed else set())


class LocalRecall:
    """The client's local index of the private domains it reads."""

    def __init__(self, client: Client, embed: Embed | None = None) -> None:
        self.client = client
        self.index = LocalIndex(embed)

    def use_embedder(self, embed: Embed | None) -> None:
        """Rank by meaning too (rebuilds the index on the next `sync`)."""
        self.index = LocalIndex(embed)

    def sync(self, domains: Iterable[str] | None = None, *, verify: bool = False) -> int:
        """Read every memory of the private `domains` (default: those this client has
        seen) from the ledger, open what this key can, and index it. With `verify`, each
        is checked against the chain first. Returns how many are indexed."""
        statuses = ["proposed", "committed", "challenged", "deprecated", "superseded"]
        for domain in sorted(set(domains or ()) | self.client.private.seen):
            found = self.client.list_memories(domain=domain, status=statuses)
            mine = [self.client.verify_memory(m) if verify else m for m in found
                    if m.epoch and not m.sealed]
            self.index.add(mine)
        return len(self.index)

    def search(self, q: str, limit: int, *, domain: str | None, statuses: set[str],
               type: str | None = None, author: str | None = None) -> list[Memory]:  # noqa: A002
        def keep(m: Memory) -> bool:
            return ((domain is None or m.domain == domain) and m.status in statuses
                    and (type is None or m.type == type)
                    and (author is None or m.author == author))
        return self.index.search(q, limit, keep)
