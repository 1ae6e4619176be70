"""Benchmark: the auto-voter's near-copy check, its error rates and its cost per vote.

Why: issue 38 has the voter reject reworded copies of committed memories (memledger/
daemon/nearcopy.py) and asks for the check's false-positive rate on an evaluation set
and its cost per vote. This measures:

  * on bench/data/nearcopy_eval.json (`pairs`: 25 reworded copies, 25 different facts
    sharing most words, used to shape the rule; `held_out`: 12 + 12 written after the
    rule was fixed, never used to tune it), for each cosine threshold: copies caught
    and different facts wrongly rejected, by the voter's rule (cosine and the same
    specific words) and by cosine alone. Cosines are the node embedder's, the query
    side embedded as the voter's recall query sends it;
  * with `--node`: a real node (cometbft + app + API + default embedder) holding
    `--memories` committed-looking memories in one domain (filled by pre-signed batched
    broadcasts, then indexed), and the voter's neighbour lookup plus decision timed per
    vote, against a plain `GET /v1/memories?domain=&limit=3` listing in the same run
    (the limit: the cheapest read a voter could make).

Prints JSON.

    python bench/bench_nearcopy.py
    python bench/bench_nearcopy.py --node --memories 10000 --votes 200
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memledger.daemon.nearcopy import (  # noqa: E402
    DEFAULT_NEAR_COPY_COSINE,
    Neighbour,
    NeighbourSource,
    first_near_copy,
    is_near_copy,
    query_text,
)
from memledger.devtools.stats import percentile  # noqa: E402
from memledger.recall.embedder import DEFAULT_EMBEDDER, make_embedder  # noqa: E402

EVAL = REPO / "bench" / "data" / "nearcopy_eval.json"
THRESHOLDS = (0.85, 0.88, 0.90, 0.92, 0.94, 0.96)


def rates(embedder_spec: str, which: str) -> dict[str, Any]:
    pairs = json.loads(EVAL.read_text())[which]
    embedder = make_embedder(embedder_spec)
    assert embedder is not None
    stored = embedder.embed([p[1] for p in pairs])
    asked = embedder.embed([query_text(p[2]) for p in pairs])
    cosines = [float(c) for c in (stored * asked).sum(axis=1)]
    copies = sum(1 for p in pairs if p[0] == "copy")
    different = len(pairs) - copies
    out: dict[str, Any] = {"embedder": embedder_spec, "copies": copies,
                           "different": different, "thresholds": {}}
    copy = [p[0] == "copy" for p in pairs]

    def share(flags: list[bool], of_copies: bool) -> float:
        hits = sum(f for f, c in zip(flags, copy, strict=True) if c == of_copies)
        return hits / (copies if of_copies else different)

    for t in THRESHOLDS:
        rule = [is_near_copy(p[2], Neighbour("x", p[1], c), t)
                for p, c in zip(pairs, cosines, strict=True)]
        alone = [c >= t for c in cosines]
        out["thresholds"][f"{t:.2f}"] = {
            "caught": share(rule, True), "false_positive": share(rule, False),
            "cosine_alone_caught": share(alone, True),
            "cosine_alone_false_positive": share(alone, False),
        }
    out["default"] = f"{DEFAULT_NEAR_COPY_COSINE:.2f}"
    return out


def on_node(memories: int, votes: int) -> dict[str, Any]:
    import httpx

    from memledger.devtools.fill import fill
    from memledger.devtools.node import NodeRunner, wait_api_ready
    from memledger.sdk.waiting import wait_until

    pairs = json.loads(EVAL.read_text())["pairs"]
    with tempfile.TemporaryDirectory(prefix="bench-nearcopy-") as tmp:
        node = NodeRunner(Path(tmp) / "home", chain_id="bench-nearcopy")
        node.start()
        try:
            wait_api_ready(node.api_url)
            started = time.perf_counter()
            fill([node.rpc_url], "bench-nearcopy", memories, agents=8, label="nc")
            filled_s = time.perf_counter() - started

            def indexed() -> bool:
                st = httpx.get(f"{node.api_url}/v1/status", timeout=30).json()
                return bool(st["embedder"]["lag"] == 0 and st["embedder"]["vectors"] >= memories)

            wait_until(indexed, 1800, 1.0, what="the index to catch up",
                       ignore=(httpx.HTTPError, KeyError, TypeError))
            source = NeighbourSource(node.api_url, timeout=30)
            # the filled memories are proposed: the voter's query asks for committed ones,
            # so ask for proposed ones here to make it compare against a full neighbourhood
            check_ms, plain_ms = [], []
            http = httpx.Client(base_url=node.api_url, timeout=30)
            for i in range(votes):
                text = pairs[i % len(pairs)][2]
                t0 = time.perf_counter()
                found = source.neighbours(f"bench-{i}", "general", text, status="proposed")
                first_near_copy(text, found, DEFAULT_NEAR_COPY_COSINE)
                check_ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                listing: dict[str, str | int] = {"domain": "general", "limit": 3}
                http.get("/v1/memories", params=listing).raise_for_status()
                plain_ms.append((time.perf_counter() - t0) * 1000)
            source.close()
            http.close()
        finally:
            node.stop()
    p50, p50_plain = percentile(check_ms, 50), percentile(plain_ms, 50)
    return {"memories": memories, "fill_s": round(filled_s, 1), "votes": votes,
            "check_ms_p50": round(p50, 2), "check_ms_p99": round(percentile(check_ms, 99), 2),
            "plain_list_ms_p50": round(p50_plain, 2),
            "ratio_p50": round(p50 / p50_plain, 2) if p50_plain else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    ap.add_argument("--node", action="store_true", help="also time the check on a real node")
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--votes", type=int, default=200)
    args = ap.parse_args()
    out: dict[str, Any] = {"rates": rates(args.embedder, "pairs"),
                           "held_out": rates(args.embedder, "held_out")}
    if args.node:
        out["node"] = on_node(args.memories, args.votes)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
