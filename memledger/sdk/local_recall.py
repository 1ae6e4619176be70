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


def _numpy() -> Any:
    """NumPy if installed (optional: the SDK's base install has none, and ranks by meaning
    without it), imported only when meaning is first ranked, never by `import memledger`."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - depends on the install
        return None
    return numpy

if TYPE_CHECKING:
    from memledger.sdk.sync import Client

Embed = Callable[[list[str]], Sequence[Sequence[float]]]
_WORD = re.compile(r"\w+", re.UNICODE)
K1, B = 1.2, 0.75
RRF_K = 60
CANDIDATES = 50  # per ranking, fused before the cut
CHAMPIONS = 500  # per word: the documents a query scores for it (BM25 champion lists)
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
        # NumPy's unit float32 rows (one per id), stacked into one matrix at the first
        # query after an add; Python vectors are kept only where NumPy is missing (100k
        # lists of floats would cost seconds to build and long garbage-collector pauses)
        self._matrix: tuple[list[str], Any] | None = None
        self._pending: list[tuple[list[str], Any]] = []
        self._champions: dict[str, list[tuple[str, float]]] = {}  # per term, until an add

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, memories: Iterable[Memory]) -> int:
        fresh = [m for m in memories if m.content is not None and not m.sealed]
        new: dict[str, Memory] = {}
        for memory in fresh:
            if memory.id in self.docs:
                self.docs[memory.id].memory = memory  # status may have moved
            else:
                new[memory.id] = memory
        vectors = self._vectors(list(new.values()))
        for (mid, memory), vector in zip(new.items(), vectors, strict=True):
            bag = Counter(words(memory.content or ""))
            for term, count in bag.items():
                self.postings.setdefault(term, {})[mid] = count
            length = sum(bag.values())
            self.docs[mid] = _Doc(memory, length, vector)
            self._total_len += length
        if new:
            # the touched words' champion lists, built now rather than by a query
            touched = {t for m in new.values() for t in words(m.content or "")}
            for term in touched:
                self._champions.pop(term, None)
            for term in sorted(touched):
                self._champions_of(term)
        return len(fresh)

    def _vectors(self, memories: list[Memory]) -> Sequence[Any]:
        """The new memories' unit vectors: Python lists without NumPy; with it, one
        float32 block queued for the matrix (and None per memory)."""
        if self.embed is None or not memories:
            return [None] * len(memories)
        raw = self.embed([m.content or "" for m in memories])
        _np = _numpy()
        if _np is None:
            return _normalised(raw)
        block = _np.asarray(raw, dtype=_np.float32).reshape(len(memories), -1)
        norms = _np.linalg.norm(block, axis=1, keepdims=True)
        block /= _np.where(norms > 0, norms, 1.0)
        self._pending.append(([m.id for m in memories], block))
        return [None] * len(memories)

    def _bm25(self, q: str) -> dict[str, float]:
        """BM25 of the documents holding a query word. A word in more than half the
        documents (a stop word, idf near 0) is skipped when the query has a rarer one: it
        would cost a walk over most of the index and barely move a score."""
        n = len(self.docs)
        scores: dict[str, float] = {}
        terms = [t for t in set(words(q)) if self.postings.get(t)]
        rare = [t for t in terms if len(self.postings[t]) <= n // 2]
        for term in sorted(rare or terms):
            for mid, part in self._champions_of(term):
                scores[mid] = scores.get(mid, 0.0) + part
        return scores

    def _champions_of(self, term: str) -> list[tuple[str, float]]:
        """The term's CHAMPIONS best documents with their BM25 parts, best first: a common
        word costs at most that many steps per query. Built when an add touches the word
        (with the collection's statistics then: a word no later add touches keeps them)."""
        found = self._champions.get(term)
        if found is None:
            posting = self.postings[term]
            n = len(self.docs)
            avg = self._total_len / n if n else 1.0
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            parts = [(mid, idf * tf * (K1 + 1)
                      / (tf + K1 * (1 - B + B * self.docs[mid].length / avg)))
                     for mid, tf in posting.items()]
            found = sorted(parts, key=lambda p: (-p[1], p[0]))[:CHAMPIONS]
            self._champions[term] = found
        return found

    def _by_meaning(self, q: str, keep: Callable[[Memory], bool], want: int) -> list[str]:
        """The `want` nearest documents `keep` accepts, best first (every vector is
        scored; the filter runs on the best only, widening until enough pass)."""
        if self.embed is None or not self.docs:
            return []
        _np = _numpy()
        if _np is not None and (self._pending or self._matrix):
            return self._by_matrix(_np, q, keep, want)
        (qv,) = _normalised(self.embed([q]))
        scored = sorted(((-sum(a * b for a, b in zip(qv, d.vector, strict=True)), mid)
                         for mid, d in self.docs.items() if d.vector is not None))
        return _first_kept(self, [mid for _, mid in scored], keep, want)

    def _by_matrix(self, _np: Any, q: str, keep: Callable[[Memory], bool],
                   want: int) -> list[str]:
        """One product of the unit matrix with the query (einsum: NumPy's own
        single-threaded loop, whose tail stays short on a busy machine where a threaded
        BLAS waits for its threads), then the best by partition, widened until `want`
        pass `keep`."""
        if self._pending:
            ids = list(self._matrix[0]) if self._matrix else []
            blocks = [self._matrix[1]] if self._matrix else []
            for block_ids, block in self._pending:
                ids.extend(block_ids)
                blocks.append(block)
            self._matrix = (ids, _np.concatenate(blocks) if len(blocks) > 1 else blocks[0])
            self._pending = []
        assert self._matrix is not None
        ids, matrix = self._matrix
        if not ids:
            return []
        (raw,) = self.embed([q]) if self.embed is not None else ([],)
        scores = _np.einsum("ij,j->i", matrix, _np.asarray(raw, dtype=_np.float32))
        take = 4 * want
        while True:
            if take >= len(ids):
                order = _np.argsort(-scores, kind="stable")
            else:
                part = _np.argpartition(scores, len(ids) - take)[len(ids) - take:]
                order = part[_np.argsort(-scores[part], kind="stable")]
            kept = _first_kept(self, [ids[int(i)] for i in order], keep, want)
            if len(kept) >= want or take >= len(ids):
                return kept
            take *= 4

    def search(self, q: str, limit: int, keep: Callable[[Memory], bool]) -> list[Memory]:
        """The `limit` best memories `keep` accepts: words, fused with meaning (RRF) when
        there is an embedder; each carries its fused score and mode `local`. Filters
        run on candidates only, never on the whole index."""
        want = max(limit, CANDIDATES)
        by_words = self._bm25(q)
        lists = [_first_kept(self, sorted(by_words, key=lambda m: (-by_words[m], m)), keep,
                             want)]
        by_meaning = self._by_meaning(q, keep, want)
        if by_meaning:
            lists.append(by_meaning)
        fused = fuse(lists)
        ranked = sorted(fused, key=lambda m: (-fused[m], m))[:limit]
        return [replace(self.docs[m].memory, score=fused[m], mode=LOCAL_MODE) for m in ranked]


def _first_kept(index: LocalIndex, ranked: list[str], keep: Callable[[Memory], bool],
                want: int) -> list[str]:
    out = []
    for mid in ranked:
        if keep(index.docs[mid].memory):
            out.append(mid)
            if len(out) >= want:
                break
    return out


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
