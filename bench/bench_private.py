"""Benchmark: private domains (issue 39) against public ones, in the same run.

Why: a private memory costs the author a seal (XChaCha20-Poly1305 with a fresh nonce)
and the chain a larger content (base64 of nonce + ciphertext + tag); a member's read
costs an open. Issue 39 asks for private write and member read cost against public ones
in the same run, and local private recall p99 <= 20 ms at 100k private memories per
member. This measures, through the ABCI app (memledger.devtools.chain.LocalChain, one
validator set, no network: the node's own work, not the transport):

  * write: sign + FinalizeBlock + Commit of `--writes` submits, public (domain
    `general`) and private (a private domain, content sealed by the client), in blocks
    of 50; per-memory time and the ratio private / public;
  * read: the store read of record and content, public, and the same plus the member's
    open (epoch key from the domain record, cached as the SDK caches it), private;
  * local recall: `memledger.sdk.local_recall.LocalIndex` (words, BM25) over
    `--memories` opened private memories of synthetic text, `--queries` queries of 2-4
    words; build time and query p50/p99, against the 20 ms limit, both in wall-clock
    time and in this process's CPU time (on a shared machine the wall-clock tail is
    mostly the time the process waits for a core: the load average is recorded).

Prints JSON (bench/results/private.json holds a recorded run).

    python bench/bench_private.py --writes 2000 --memories 100000 --queries 300
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memledger.devtools.chain import LocalChain, seeded_key  # noqa: E402
from memledger.sdk import private  # noqa: E402
from memledger.sdk.local_recall import LocalIndex  # noqa: E402
from memledger.sdk.models import Memory  # noqa: E402

OWNER = seeded_key("bench-private-owner")
DOMAIN = "bench/private"
BLOCK = 50


def _text(rng: random.Random, vocab: list[str], n: int = 14) -> str:
    """Words drawn Zipf-like (weight 1/rank), as in prose: a few very common words."""
    return " ".join(rng.choices(vocab, cum_weights=_CUM[len(vocab)], k=n))


_CUM: dict[int, list[float]] = {}


def _zipf(size: int) -> list[str]:
    total, cum = 0.0, []
    for rank in range(1, size + 1):
        total += 1.0 / rank
        cum.append(total)
    _CUM[size] = cum
    return [f"w{i}" for i in range(size)]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_chain(writes: int, rng: random.Random, vocab: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        c = LocalChain(Path(tmp) / "chain", app_state={"app_version": 10})
        epoch_key = private.new_epoch_key()
        b = c.builder(OWNER)
        assert c.block([b.build("domain_private", c.next_nonce(OWNER), domain=DOMAIN,
                                keys=private.sealed_copies(epoch_key, [b.public_key]))]
                       )[0].code == 0
        texts = [_text(rng, vocab) for _ in range(writes)]
        for kind in ("public", "private"):
            started = time.perf_counter()
            for start in range(0, writes, BLOCK):
                txs = []
                for i in range(start, min(writes, start + BLOCK)):
                    mid = f"{kind}-{i}"
                    if kind == "public":
                        txs.append(b.submit(c.next_nonce(OWNER), mid, texts[i]))
                    else:
                        env = private.seal_content(epoch_key, DOMAIN, 1, mid, texts[i])
                        txs.append(b.submit(c.next_nonce(OWNER), mid, env, domain=DOMAIN,
                                            epoch=1))
                assert all(r.code == 0 for r in c.block(txs))
            out[f"write_{kind}_us"] = (time.perf_counter() - started) / writes * 1e6
        ring = private.Keyring(OWNER)
        ring.learn(DOMAIN, json.loads(c.app.store.get(b"dom/" + DOMAIN.encode()) or b"{}"))
        warm = (c.app.store.get(b"memc/private-0") or b"").decode()  # first-call costs
        private.open_content(ring.require(DOMAIN, 1), DOMAIN, 1, "private-0", warm)
        for i in range(min(writes, 50)):
            c.app.store.get(b"mem/" + f"public-{i}".encode())
        for kind in ("public", "private"):
            started = time.perf_counter()
            for i in range(writes):
                mid = f"{kind}-{i}"
                record = json.loads(c.app.store.get(b"mem/" + mid.encode()) or b"{}")
                content = (c.app.store.get(b"memc/" + mid.encode()) or b"").decode()
                if kind == "private":
                    content = private.open_content(ring.require(DOMAIN, record["epoch"]),
                                                   DOMAIN, record["epoch"], mid, content)
                assert content == texts[i]
            out[f"read_{kind}_us"] = (time.perf_counter() - started) / writes * 1e6
        c.close()
    out["write_ratio_private_public"] = out["write_private_us"] / out["write_public_us"]
    out["read_ratio_private_public"] = out["read_private_us"] / out["read_public_us"]
    return out


def bench_local_recall(memories: int, queries: int, rng: random.Random,
                       vocab: list[str]) -> dict[str, Any]:
    docs = [Memory(id=f"p-{i}", domain=DOMAIN, author="a", type="fact",
                   content=_text(rng, vocab), content_hash="", confidence_ppm=900_000,
                   tags=[], status="committed", submitted_height=i, submitted_time_ns=0,
                   decided_height=i, epoch=1) for i in range(memories)]
    out: dict[str, Any] = {"memories": memories, "queries": queries, "limit_ms": 20.0}
    # words only (the SDK's default), then words and meaning with a 128-dimension
    # stand-in embedder (random unit vectors: the index's cost, not a model's; the query's
    # own embedding by the node's default model is timed separately by bench_recall)
    import numpy as np

    dim = 128
    gen = np.random.default_rng(39)
    table = gen.standard_normal((len(docs), dim)).astype(np.float32)
    vectors = {d.content or "": table[i].tolist() for i, d in enumerate(docs)}

    def embed(texts: list[str]) -> list[list[float]]:
        return [vectors.get(t) or gen.standard_normal(dim).tolist() for t in texts]

    for name, index in (("words", LocalIndex()), ("words_and_meaning", LocalIndex(embed))):
        started = time.perf_counter()
        index.add(docs)
        build_s = time.perf_counter() - started
        times, cpu = [], []
        for i in range(queries + 5):
            q = " ".join(rng.choices(vocab, cum_weights=_CUM[len(vocab)],
                                     k=rng.randint(2, 4)))
            t0, c0 = time.perf_counter(), time.process_time()
            index.search(q, 10, lambda m: m.status == "committed")
            if i >= 5:  # the first queries build the vector matrix
                times.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
        out[name] = {"build_s": build_s, "p50_ms": _pct(times, 0.5),
                     "p99_ms": _pct(times, 0.99), "p99_within_limit": _pct(times, 0.99) <= 20,
                     "cpu_p50_ms": _pct(cpu, 0.5), "cpu_p99_ms": _pct(cpu, 0.99),
                     "cpu_p99_within_limit": _pct(cpu, 0.99) <= 20}
    out["load_average_after"] = os.getloadavg()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=20_000)
    args = parser.parse_args()
    rng = random.Random(39)
    vocab = _zipf(args.vocab)
    load_before = os.getloadavg()
    result = {"args": vars(args), "cpus": os.cpu_count(), "load_average_before": load_before,
              "chain": bench_chain(args.writes, rng, vocab),
              "local_recall": bench_local_recall(args.memories, args.queries, rng, vocab)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
