"""Near-copy detection for the auto-voter: is a proposed memory a reworded committed one?

Two signals, both from the node itself: the cosine similarity of the node's embedder
(through its recall index, `GET /v1/memories?q=&mode=semantic`), and the memories'
words. Meaning alone is not enough: "the staging database listens on port 5433" and
"... on port 5434" embed almost identically yet are different facts. So a near-copy is a
neighbour at or above the cosine threshold whose *specific* words (numbers, names,
identifiers, negations) are the same as the candidate's: a rewording keeps those, a
different fact changes at least one. Measured on bench/data/nearcopy_eval.json
(bench/bench_nearcopy.py, BENCHMARKS.md "Near-copy check").

Node-local and advisory like every voter check: no consensus rule depends on it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger("memledger.voter")

#: default cosine threshold (node config `near_copy_cosine`; 0 turns the check off)
DEFAULT_NEAR_COPY_COSINE = 0.92
#: committed neighbours the check looks at
NEIGHBOURS = 3
_WORD = re.compile(r"[\w.:/@+-]+")
#: words whose presence changes what a sentence states
NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor",
                       "cannot", "can't", "don't", "doesn't", "isn't", "aren't", "won't",
                       "wasn't", "weren't", "shouldn't", "mustn't", "without"})
#: number words: "seven years" and "ten years" are different facts
NUMBER_WORDS = frozenset({
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "twenty", "thirty", "fifty", "hundred", "thousand", "million",
    "first", "second", "third", "fourth", "fifth", "sixth", "last", "half", "once", "twice"})


@dataclass(frozen=True)
class Neighbour:
    """A committed memory of the candidate's domain and its cosine to the candidate."""

    memory_id: str
    content: str
    cosine: float


def words(text: str) -> list[tuple[str, bool]]:
    """The text's words, edge punctuation stripped, case kept, each with whether it
    starts a sentence (where a capital letter says nothing)."""
    out = []
    for match in _WORD.finditer(text):
        word = match.group().strip(".,;:/-+@_'")
        if word:
            before = text[:match.start()].rstrip()
            out.append((word, not before or before[-1] in ".!?"))
    return out


def specific_words(text: str) -> frozenset[str]:
    """The words that pin a fact down, lower-cased: anything with a digit, a capital
    letter not at the start of a sentence (names, days, products) or a symbol (paths,
    hosts, versions), number words and negations."""
    out = set()
    for word, starts in words(text):
        low = word.lower()
        if (any(ch.isdigit() for ch in word) or (not starts and any(ch.isupper() for ch in word))
                or any(ch in "./:@_" for ch in word) or low in NEGATIONS
                or low in NUMBER_WORDS):
            out.add(low)
    return frozenset(out)


def differing_specifics(a: str, b: str) -> frozenset[str]:
    """Specific words of either text that the other does not use at all. A word
    capitalised only because it starts one sentence is in both texts, so not counted."""
    words_a = {w.lower() for w, _ in words(a)}
    words_b = {w.lower() for w, _ in words(b)}
    return (specific_words(a) - words_b) | (specific_words(b) - words_a)


def is_near_copy(candidate: str, neighbour: Neighbour, threshold: float) -> bool:
    """Whether `candidate` restates `neighbour`: close in meaning, same specifics."""
    if threshold <= 0 or neighbour.cosine < threshold:
        return False
    return not differing_specifics(candidate, neighbour.content)


def first_near_copy(candidate: str, neighbours: Sequence[Neighbour], threshold: float
                    ) -> Neighbour | None:
    """The closest neighbour `candidate` is a near-copy of, if any."""
    for n in sorted(neighbours, key=lambda n: (-n.cosine, n.memory_id)):
        if is_near_copy(candidate, n, threshold):
            return n
    return None


class NeighbourSource:
    """Committed neighbours from the node's own REST API (its embedder and vector index).

    Any failure (API down, no embedder, index still building) gives no neighbours: the
    check is skipped for that vote rather than blocking it."""

    def __init__(self, api_url: str, timeout: float = 5.0) -> None:
        self.http = httpx.Client(base_url=api_url, timeout=timeout)

    def neighbours(self, memory_id: str, domain: str, content: str,
                   status: str = "committed") -> list[Neighbour]:
        params: dict[str, Any] = {"q": query_text(content), "mode": "semantic",
                                  "domain": domain, "status": status,
                                  "limit": NEIGHBOURS}
        try:
            resp = self.http.get("/v1/memories", params=params)
            if resp.status_code != 200:
                log.info("near-copy check skipped: recall answered %d", resp.status_code)
                return []
            items = resp.json().get("items") or []
        except (httpx.HTTPError, ValueError, OSError) as exc:
            log.info("near-copy check skipped: %s", exc)
            return []
        return [Neighbour(str(h["id"]), str(h.get("content") or ""), float(h["score"]))
                for h in items if h.get("id") != memory_id and h.get("score") is not None]

    def close(self) -> None:
        self.http.close()


def query_text(content: str) -> str:
    """The content as a recall query: the API takes at most 512 characters of words."""
    words = _WORD.findall(content)
    out, size = [], 0
    for w in words:
        if size + len(w) + 1 > 500:
            break
        out.append(w)
        size += len(w) + 1
    return " ".join(out) or content[:500]
