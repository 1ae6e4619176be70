"""Probe (issue 37): do question-to-statement tricks or a turn's conversation context lift
recall by meaning, before any of them is built?

Issue 37 asks to measure these before adding any:

- **Query side** (the question as the agent asks it, reworded by fixed rules):
  `as asked`; `query: ` prefixed (the instruction some embedders were trained with;
  all-MiniLM-L6-v2 was not); `question words dropped` (leading interrogatives and
  auxiliaries such as "when did", "how long", and the question mark); `content words`
  (memledger.recall.stopwords dropped, the hybrid word leg's rule); `expanded` (the mean
  of the `as asked` and `content words` vectors: the question widened only by its own
  words).
- **Memory side** (long conversations only): a turn embedded alone (today); with the
  turn before it in its session; with the turns before and after it. The author would
  have to submit that text (a node must never embed text the author did not sign), so
  this measures whether asking authors for it would pay.

Scored as the semantic leg alone (the default embedder, `minilm-int8:128`, exact cosine
over every memory): recall@5 and recall@30 per query kind on bench/data/recall_eval.json
and bench/data/conversation_eval.json. The rules are fixed here, not tuned on the sets.

    nice -n 10 .venv/bin/python bench/bench_query_probe.py --out bench/results/query_probe.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_static_probe import score  # noqa: E402
from memledger.recall.defaults import DEFAULT_EMBEDDER  # noqa: E402
from memledger.recall.embedder import Embedder, make_embedder  # noqa: E402
from memledger.recall.stopwords import STOPWORDS  # noqa: E402

SETS = {"recall": ROOT / "bench" / "data" / "recall_eval.json",
        "conversation": ROOT / "bench" / "data" / "conversation_eval.json"}
#: what a question opens with rather than what it asks about
_QUESTION_OPENING = re.compile(
    r"^\s*(?:(?:how\s+(?:long|many|much|often|old)|what|when|where|who|whom|whose|why|"
    r"which|how)\s+)?(?:(?:did|does|do|is|are|was|were|has|have|had|can|could|will|"
    r"would|should)\s+)?", re.IGNORECASE)
_WORD = re.compile(r"[\w']+")
#: a conversation turn's id: <conversation>/s<session>/t<turn>
_TURN = re.compile(r"^(?P<session>.+/s\d+)/t(?P<turn>\d+)$")
Vectors = Callable[[Sequence[str]], np.ndarray]


def drop_question_words(query: str) -> str:
    rest = _QUESTION_OPENING.sub("", query, count=1).rstrip(" ?")
    return rest or query


def content_words(query: str) -> str:
    words = [w for w in _WORD.findall(query) if w.lower() not in STOPWORDS]
    return " ".join(words) or query


def query_rules(embedder: Embedder) -> dict[str, Vectors]:
    def reworded(rule: Callable[[str], str]) -> Vectors:
        return lambda qs: embedder.embed([rule(q) for q in qs])

    def expanded(qs: Sequence[str]) -> np.ndarray:
        both = embedder.embed(list(qs)) + embedder.embed([content_words(q) for q in qs])
        return both / np.linalg.norm(both, axis=1, keepdims=True)

    return {"as asked": embedder.embed, "query: prefixed": reworded(lambda q: "query: " + q),
            "question words dropped": reworded(drop_question_words),
            "content words": reworded(content_words), "expanded": expanded}


def with_context(memories: list[dict[str, Any]], before: int, after: int) -> list[str]:
    """Each turn's text joined with up to `before`/`after` turns of its own session."""
    turns: dict[str, dict[int, str]] = {}
    for m in memories:
        match = _TURN.match(m["id"])
        if match:
            turns.setdefault(match["session"], {})[int(match["turn"])] = m["content"]
    out = []
    for m in memories:
        match = _TURN.match(m["id"])
        if not match:
            out.append(m["content"])
            continue
        session, turn = turns[match["session"]], int(match["turn"])
        parts = [session[t] for t in range(turn - before, turn + after + 1) if t in session]
        out.append(" ".join(parts))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    args = parser.parse_args()
    embedder = make_embedder(DEFAULT_EMBEDDER)
    assert embedder is not None
    report: dict[str, Any] = {"embedder": embedder.describe(), "queries": {}, "memories": {}}
    for label, path in SETS.items():
        doc = json.loads(path.read_text())
        ids = [m["id"] for m in doc["memories"]]
        alone = embedder.embed([m["content"] for m in doc["memories"]])
        for rule, vectors in query_rules(embedder).items():
            result = score(alone, ids, vectors([q["q"] for q in doc["queries"]]),
                           doc["queries"])
            report["queries"].setdefault(rule, {})[label] = result
            print(f"{label:13s} {rule:24s}", "  ".join(
                f"{k} {v['recall@5']:.2f}/{v['recall@30']:.2f}" for k, v in result.items()),
                flush=True)
        if label != "conversation":
            continue
        asked = embedder.embed([q["q"] for q in doc["queries"]])
        for name, (before, after) in {"turn alone": (0, 0), "with the turn before": (1, 0),
                                      "with the turns before and after": (1, 1)}.items():
            memory_vectors = embedder.embed(with_context(doc["memories"], before, after))
            result = score(memory_vectors, ids, asked, doc["queries"])
            report["memories"][name] = result
            print(f"{label:13s} {name:32s}", "  ".join(
                f"{k} {v['recall@5']:.2f}/{v['recall@30']:.2f}" for k, v in result.items()),
                flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
