"""The client path against the consensus path, on one node, ratios from one run (issue 36).

    .venv/bin/python -m bench.bench_client                  # all parts (~3 min)
    .venv/bin/python -m bench.bench_client --parts admission commit

Parts, each measured against its limit in the same run on the same node:

- `admission`: W writers, each with its own key, send pre-signed memory submits one
  after another: through CometBFT's RPC `broadcast_tx_sync` (the limit) and through
  REST `POST /v1/txs?wait=sync`; and the SDK's `submit(wait="sync")` from 64 threads
  with own keys against RPC from 64 threads. committed/s = txs / (first send until the
  mempool is empty and every tx is in a block). `--rounds` pairs, the order alternating.
  Each leg also reports the CPU each process spent per accepted tx (`cpu_ms_per_tx`:
  the ABCI app, cometbft, the REST process, its read process, this bench). `--client
  light` sends the RPC and REST legs through one minimal kept-alive client (PostPool on
  asyncio, one connection per writer) instead of httpx, so the two legs differ only on
  the node.
- `commit`: sequential `wait=commit` submits; latency p50 against the median block
  interval of the same blocks (block times).
- `verified`: sequential `Client.get(verify=True)` with a warm trust store; and with
  `fresh=True` (the old behaviour: each read waits for the next header).
- `client_cost`: the SDK's own CPU per call (this process's CPU time, sequential):
  `submit(wait="sync")` and `status()` through the blocking `Client` and the
  `AsyncClient` as they are (plain http, memledger.sdk.plainhttp) and through httpx
  (the same clients given httpx's default transport), taking turns in `--rounds`
  rounds; ratio plain ÷ httpx.
- `isolation`: one writer submits every 0.1 s (`wait=sync`) and a probe asks /health
  every 0.1 s while C readers run ranked hybrid searches, C = 0, 50, 300 (in their own
  process, each on its own connection, waiting Retry-After after a 503 as the SDK does):
  write and /health p99, read throughput, shed reads (503) and how fast they were
  answered, and the cores each of the node's processes used. The node first holds
  `--seed` memories (2,000), so that every round searches about the same data.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import random
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from nacl.signing import SigningKey

from bench.bench_read import _text
from bench.mcp_fill import metrics
from memledger.api.readgate import SHED_RETRY_AFTER_S
from memledger.daemon.home import NodeHome
from memledger.devtools.burst import wait_mempool_empty
from memledger.devtools.node import NodeRunner, wait_api_ready
from memledger.devtools.proccpu import tree_cpu_seconds
from memledger.devtools.stats import percentile
from memledger.sdk import AsyncClient, Client
from memledger.sdk.light import GenesisRoot
from memledger.sdk.retry import spread_retry_after
from memledger.sdk.rpc import RpcClient
from memledger.sdk.rpc_pool import PostPool
from memledger.sdk.txbuilder import TxBuilder

CHAIN = "memledger-bench-client"
#: what the isolation readers search for (hybrid, limit 10)
READER_QUERIES = ["client+path+memory", "bench+rest", "commit+wait", "verified+many+times"]


def _keys(n: int, tag: str) -> list[SigningKey]:
    return [SigningKey(f"{tag}-{i}".encode().ljust(32, b".")[:32]) for i in range(n)]


def _signed(keys: list[SigningKey], per_key: int, tag: str, nonce0: int) -> list[list[bytes]]:
    """Per writer, `per_key` memory submits signed by its own key."""
    return [[TxBuilder(k, CHAIN).submit(nonce0 + j, f"{tag}-{w}-{j}",
                                        f"bench {tag} memory {w} {j} about the client path")
             for j in range(per_key)] for w, k in enumerate(keys)]


def _roles(runner: NodeRunner) -> dict[str, float]:
    """CPU seconds so far of the node's processes by role, and of this bench."""
    out = {"app": 0.0, "cometbft": 0.0, "api": 0.0, "reads": 0.0}
    assert runner.proc is not None
    for pid, seconds in tree_cpu_seconds(runner.proc.pid).items():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        role = ("cometbft" if any(w.endswith("cometbft") for w in words[:1])
                else "api" if "api" in words else "app" if "app" in words
                # the REST process's read process (spawned by multiprocessing)
                else "reads" if any("multiprocessing.spawn" in w for w in words) else None)
        if role is not None:
            out[role] += seconds
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out["bench"] = usage.ru_utime + usage.ru_stime
    return out


def _drain(runner: NodeRunner, txs: list[list[Any]], send: Callable[[Any], bool] | None,
           light: Callable[[list[list[Any]]], int] | None = None) -> dict[str, Any]:
    """Each writer sends its txs in turn; committed/s until the mempool is empty."""
    accepted = [0] * len(txs)

    def writer(w: int) -> None:
        assert send is not None
        for tx in txs[w]:
            accepted[w] += bool(send(tx))

    _index_settled(runner.api_url)  # a leg pays for embedding its own memories only
    cpu0 = _roles(runner)
    started = time.perf_counter()
    if light is not None:
        accepted = [light(txs)]
    else:
        with ThreadPoolExecutor(len(txs)) as pool:
            list(pool.map(writer, range(len(txs))))
    sent_s = time.perf_counter() - started
    wait_mempool_empty(runner.rpc_url)
    # wait_mempool_empty adds two blocks after the mempool emptied; take them back out
    total_s = time.perf_counter() - started - 2 * _block_interval(runner)
    cpu1 = _roles(runner)
    n = sum(accepted)
    return {"txs": sum(len(t) for t in txs), "accepted": n, "send_s": round(sent_s, 2),
            "committed_per_s": round(n / total_s, 1),
            "cpu_ms_per_tx": {role: round((cpu1[role] - cpu0[role]) * 1e3 / max(1, n), 2)
                              for role in cpu1}}


def _light_sender(url: str, body: Callable[[bytes], bytes], ok: Callable[[int, bytes], bool]
                  ) -> Callable[[list[list[Any]]], int]:
    """All writers on one event loop, each on its own kept-alive connection."""
    def run(txs: list[list[Any]]) -> int:
        async def writer(mine: list[bytes]) -> int:
            pool = PostPool(url, timeout=120, keep=1)
            n = 0
            for tx in mine:
                status, data = await pool.post(body(tx))
                n += ok(status, data)
            await pool.aclose()
            return n

        async def every() -> int:
            return sum(await asyncio.gather(*(writer(w) for w in txs)))
        return asyncio.run(every())
    return run


def _rpc_body(tx: bytes) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "broadcast_tx_sync",
                       "params": {"tx": base64.b64encode(tx).decode()}}).encode()


def _rest_body(tx: bytes) -> bytes:
    return json.dumps({"tx": base64.b64encode(tx).decode()}).encode()


def _rpc_ok(status: int, data: bytes) -> bool:
    return status == 200 and json.loads(data).get("result", {}).get("code") == 0


def _rest_ok(status: int, data: bytes) -> bool:
    return status == 202


_intervals: dict[str, float] = {}


def _block_interval(runner: NodeRunner, blocks: int = 20) -> float:
    """Median seconds between the node's last `blocks` block times."""
    with runner.rpc() as rpc:
        top = rpc.latest_height()
        times = []
        for h in range(max(1, top - blocks), top + 1):
            t = rpc.block(h)["block"]["header"]["time"]
            times.append(_parse_time(t))
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    value = statistics.median(gaps) if gaps else 0.3
    _intervals[runner.rpc_url] = value
    return value


def _parse_time(text: str) -> float:
    head, _, frac = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float(f"0.{frac or 0}")


def admission(runner: NodeRunner, writers: int, per_key: int, rounds: int,
              client: str = "httpx") -> dict[str, Any]:
    """`rounds` pairs of each comparison, the order alternating (the machine's other load
    drifts): REST and RPC from `writers` threads (`client="light"`: coroutines on one
    PostPool-based client), SDK and RPC from 64 threads."""
    local = threading.local()

    def via_rpc(tx: bytes) -> bool:
        if not hasattr(local, "rpc"):
            local.rpc = RpcClient(runner.rpc_url)
        return bool(local.rpc.broadcast_tx_sync(tx).code == 0)

    def via_rest(tx: bytes) -> bool:
        if not hasattr(local, "rest"):
            local.rest = httpx.Client(base_url=runner.api_url, timeout=60)
        r = local.rest.post("/v1/txs", params={"wait": "sync"},
                            json={"tx": base64.b64encode(tx).decode()})
        return r.status_code == 202

    threads = 64
    per = max(1, per_key * writers // threads)
    pairs: list[dict[str, Any]] = []
    for n in range(rounds):
        rest_txs = _signed(_keys(writers, f"rest{n}"), per_key, f"rest{n}", 1)
        rpc_txs = _signed(_keys(writers, f"rpc{n}"), per_key, f"rpc{n}", 1)
        rpc64_txs = _signed(_keys(threads, f"rpc64-{n}"), per, f"rpc64-{n}", 1)
        clients = [Client(runner.api_url, key=k, chain_id=CHAIN)
                   for k in _keys(threads, f"sdk64-{n}")]

        def via_sdk(job: bytes, n: int = n, clients: list[Client] = clients) -> bool:
            w, j = (int(x) for x in job.decode().split(":"))
            clients[w].submit(f"sdk{n}-{w}-{j}", f"bench sdk memory {w} {j} about the "
                              "client path", wait="sync")
            return True

        jobs = [[f"{w}:{j}".encode() for j in range(per)] for w in range(threads)]
        first, second = ("rpc", "rest") if n % 2 == 0 else ("rest", "rpc")
        got = {}
        for what in (first, second):
            light = None
            if client == "light":
                light = (_light_sender(runner.rpc_url + "/", _rpc_body, _rpc_ok)
                         if what == "rpc" else
                         _light_sender(runner.api_url + "/v1/txs", _rest_body, _rest_ok))
            got[what] = _drain(runner, rpc_txs if what == "rpc" else rest_txs,
                               via_rpc if what == "rpc" else via_rest, light)
        for what in (("rpc64", "sdk64") if n % 2 == 0 else ("sdk64", "rpc64")):
            got[what] = _drain(runner, rpc64_txs if what == "rpc64" else jobs,
                               via_rpc if what == "rpc64" else via_sdk)
        for c in clients:
            c.close()
        got["rest_over_rpc"] = round(got["rest"]["committed_per_s"]
                                     / got["rpc"]["committed_per_s"], 2)
        got["sdk64_over_rpc64"] = round(got["sdk64"]["committed_per_s"]
                                        / got["rpc64"]["committed_per_s"], 2)
        pairs.append(got)
    return {"client": client, "writers": writers, "per_key": per_key, "sdk_threads": threads,
            "sdk_per_thread": per, "rounds": pairs,
            "rest_over_rpc_median": statistics.median(p["rest_over_rpc"] for p in pairs),
            "sdk64_over_rpc64_median": statistics.median(p["sdk64_over_rpc64"]
                                                         for p in pairs)}


def client_cost(runner: NodeRunner, calls: int, rounds: int) -> dict[str, Any]:
    """The SDK's CPU per call with its plain-http path and with httpx, both clients."""
    out: dict[str, Any] = {"calls": calls, "rounds": []}
    made = 0
    for n in range(rounds):
        got: dict[str, dict[str, float]] = {}
        for way in (("plain", "httpx") if n % 2 == 0 else ("httpx", "plain")):
            tag = f"cost-{way}-{n}"
            cpu = _blocking_cost(runner, calls, tag, way == "httpx")
            cpu.update(asyncio.run(_async_cost(runner, calls, tag + "a", way == "httpx")))
            made += 2 * (calls + 10)
            got[way] = {k: round(v, 3) for k, v in cpu.items()}
        got["plain_over_httpx"] = {k: round(got["plain"][k] / got["httpx"][k], 2)
                                   for k in got["plain"]}
        out["rounds"].append(got)
    for k in out["rounds"][0]["plain_over_httpx"]:
        out[f"{k[:-3]}_plain_over_httpx_median"] = statistics.median(
            r["plain_over_httpx"][k] for r in out["rounds"])
    out["memories_written"] = made
    return out


def _blocking_cost(runner: NodeRunner, calls: int, tag: str, httpx_way: bool
                   ) -> dict[str, float]:
    """ms of this process's CPU per `Client` submit and status call."""
    transport = httpx.HTTPTransport() if httpx_way else None
    with Client(runner.api_url, key=_keys(1, tag)[0], chain_id=CHAIN,
                transport=transport) as client:
        assert (client._plain is None) == httpx_way
        for j in range(10):  # warm: connections, the chain id
            client.submit(f"{tag}-w{j}", f"warm memory {j}", wait="sync")
        t0 = time.process_time()
        for j in range(calls):
            client.submit(f"{tag}-{j}", f"bench client cost memory {j} about the client "
                          "path", wait="sync")
        submit = (time.process_time() - t0) * 1e3 / calls
        t0 = time.process_time()
        for _ in range(calls):
            client.status()
        return {"submit_ms": submit, "status_ms": (time.process_time() - t0) * 1e3 / calls}


async def _async_cost(runner: NodeRunner, calls: int, tag: str, httpx_way: bool
                      ) -> dict[str, float]:
    """ms of this process's CPU per `AsyncClient` submit and status call."""
    transport = httpx.AsyncHTTPTransport() if httpx_way else None
    async with AsyncClient(runner.api_url, key=_keys(1, tag)[0], chain_id=CHAIN,
                           transport=transport) as client:
        assert (client._plain is None) == httpx_way
        for j in range(10):
            await client.submit(f"{tag}-w{j}", f"warm memory {j}", wait="sync")
        t0 = time.process_time()
        for j in range(calls):
            await client.submit(f"{tag}-{j}", f"bench client cost memory {j} about the "
                                "client path", wait="sync")
        submit = (time.process_time() - t0) * 1e3 / calls
        t0 = time.process_time()
        for _ in range(calls):
            await client.status()
        return {"async_submit_ms": submit,
                "async_status_ms": (time.process_time() - t0) * 1e3 / calls}


def commit(runner: NodeRunner, submits: int) -> dict[str, Any]:
    key = _keys(1, "commit")[0]
    builder = TxBuilder(key, CHAIN)
    lat = []
    with httpx.Client(base_url=runner.api_url, timeout=60) as api:
        for j in range(submits):
            tx = builder.submit(j + 1, f"commit-{j}", f"bench commit wait memory {j} here")
            t0 = time.perf_counter()
            r = api.post("/v1/txs", params={"wait": "commit"},
                         json={"tx": base64.b64encode(tx).decode()})
            lat.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text
        metrics = api.get("/metrics").text
    interval = _block_interval(runner, blocks=max(20, submits))
    p50 = percentile(lat, 50)
    by = {row.split('"')[1]: float(row.rsplit(" ", 1)[1]) for row in metrics.splitlines()
          if row.startswith("memledger_api_commit_waits_total{")}
    return {"submits": submits, "p50_ms": round(p50 * 1000, 1),
            "p99_ms": round(percentile(lat, 99) * 1000, 1),
            "block_interval_ms": round(interval * 1000, 1),
            "p50_minus_interval_ms": round((p50 - interval) * 1000, 1),
            "answered_by": by}


def verified(runner: NodeRunner, reads: int, trust_dir: Path) -> dict[str, Any]:
    key = _keys(1, "verified")[0]
    trust = GenesisRoot.from_file(NodeHome(runner.home).cometbft / "config" / "genesis.json")
    out: dict[str, Any] = {"reads": reads}
    with Client(runner.api_url, key=key, chain_id=CHAIN, trust=trust,
                trust_store=trust_dir) as client:
        client.submit("verified-1", "a memory read back verified many times", wait="commit")
        time.sleep(1.0)
        client.get("verified-1", verify=True)  # warm
        for label, fresh, n in (("settled", False, reads), ("fresh", True, max(10, reads // 10))):
            lat, heights = [], []
            started = time.perf_counter()
            for _ in range(n):
                t0 = time.perf_counter()
                m = client.get("verified-1", verify=True, fresh=fresh)
                lat.append(time.perf_counter() - t0)
                heights.append(m.verified_height)
            wall = time.perf_counter() - started
            out[label] = {"reads": n, "reads_per_s": round(n / wall, 1),
                          "p50_ms": round(percentile(lat, 50) * 1000, 1),
                          "p99_ms": round(percentile(lat, 99) * 1000, 1),
                          "heights_proven": len(set(heights))}
    return out


def _retry_after(body: bytes) -> float:
    try:
        return float(json.loads(body)["retry_after_s"])
    except (ValueError, KeyError, TypeError):
        return float(SHED_RETRY_AFTER_S)


async def _readers(api_url: str, readers: int,
                   seconds: float) -> list[tuple[int, float, float]]:
    """C readers, each on its own kept-alive connection, ranked hybrid searches: (status,
    seconds taken, seconds since the readers started) per read."""
    start = time.perf_counter()
    stop = start + seconds
    reads: list[tuple[int, float, float]] = []
    queries = READER_QUERIES

    async def reader(i: int) -> None:
        pool = PostPool(api_url + "/", timeout=120, keep=1)
        # the bench's node has no voter: every memory stays proposed. Asked for committed
        # ones alone (the default), a search would walk the whole index to find none.
        target = (f"/v1/memories?q={queries[i % len(queries)]}&mode=hybrid&limit=10"
                  "&status=proposed&status=committed")
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            try:
                code, body = await pool.get(target)
            except httpx.HTTPError:
                code, body = 0, b""
            reads.append((code, time.perf_counter() - t0, t0 - start))
            if code == 503:  # as the SDK does: wait what Retry-After says (also in the
                await asyncio.sleep(spread_retry_after(_retry_after(body)))  # body), spread
        await pool.aclose()

    await asyncio.gather(*(reader(i) for i in range(readers)))
    return reads


async def _readers_and_lag(api_url: str, readers: int,
                           seconds: float
                           ) -> tuple[list[tuple[int, float, float]], list[float]]:
    """The readers, and how late their own event loop wakes from a 10 ms sleep meanwhile:
    a client's latencies include that wait, which is not the node's."""
    lags: list[float] = []
    stop = time.perf_counter() + seconds

    async def watch() -> None:
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t0 - 0.01)

    reads, _ = await asyncio.gather(_readers(api_url, readers, seconds), watch())
    return reads, lags


def _reader_process(api_url: str, readers: int, seconds: float, out: Any) -> None:
    """One process's share of the readers, on uvloop (as the node's REST process runs):
    75 clients that start at once on asyncio's own loop were themselves a good part of
    how late the first answers arrived."""
    import gc

    import uvloop

    gc.collect()  # a full collection of the imports stopped the readers for ~35 ms at
    gc.freeze()   # the round's start, and their first answers seemed that much later
    reads, lags = uvloop.run(_readers_and_lag(api_url, readers, seconds)) if readers \
        else ([], [])
    out.send((reads, lags, time.process_time()))


def _isolation_round(runner: NodeRunner, readers: int, seconds: float,
                     writer_key: SigningKey, nonce0: int, procs: int = 1) -> dict[str, Any]:
    """Readers in `procs` processes of their own (their client's CPU is not the
    writer's); the writer and the /health probe each on their own thread here. Also
    the cores each of the node's processes used meanwhile: where a round's CPU went."""
    api_url = runner.api_url
    cpu0, clock0 = _roles(runner), time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    shares = [readers // procs + (1 if i < readers % procs else 0) for i in range(procs)]
    started = []
    for share in shares:
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_reader_process, args=(api_url, share, seconds, theirs))
        proc.start()
        started.append((proc, mine))
    time.sleep(1.0 if readers else 0.0)  # the readers' process starts up
    stop = time.perf_counter() + seconds - 1.0
    writes: list[float] = []
    health: list[float] = []
    builder = TxBuilder(writer_key, CHAIN)

    def writer() -> None:
        with httpx.Client(base_url=api_url, timeout=60) as own:
            j = 0
            while time.perf_counter() < stop:
                tx = builder.submit(nonce0 + j, f"iso-{nonce0}-{j}", f"write under load {j}")
                t0 = time.perf_counter()
                r = own.post("/v1/txs", params={"wait": "sync"},
                             json={"tx": base64.b64encode(tx).decode()})
                writes.append(time.perf_counter() - t0)
                assert r.status_code == 202, r.text
                j += 1
                time.sleep(0.1)

    def prober() -> None:
        with httpx.Client(base_url=api_url, timeout=60) as own:
            while time.perf_counter() < stop:
                t0 = time.perf_counter()
                r = own.get("/health")
                health.append(time.perf_counter() - t0)
                assert r.status_code == 200
                time.sleep(0.1)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda f: f(), (writer, prober)))
    reads: list[tuple[int, float, float]] = []
    lags: list[float] = []
    readers_cpu = 0.0
    for proc, mine in started:
        got_reads, got_lags, cpu = mine.recv()
        reads += got_reads
        lags += got_lags
        readers_cpu += cpu
        proc.join()
    cpu1, clock1 = _roles(runner), time.perf_counter()
    served = [t for code, t, _ in reads if code == 200]
    shed = [t for code, t, _ in reads if code == 503]
    # the readers' first requests (and their connections) all arrive at once
    shed_later = [t for code, t, at in reads if code == 503 and at >= 1.0]
    out: dict[str, Any] = {"readers": readers, "writes": len(writes),
                           "write_p50_ms": round(percentile(writes, 50) * 1000, 1),
                           "write_p99_ms": round(percentile(writes, 99) * 1000, 1),
                           "health_p99_ms": round(percentile(health, 99) * 1000, 1),
                           "reads_per_s": round(len(served) / seconds, 1),
                           "other_answers": sum(1 for c, _, _ in reads if c not in (200, 503)),
                           "node_cpu_cores": {
                               role: round((cpu1[role] - cpu0[role]) / (clock1 - clock0), 2)
                               for role in cpu1 if role != "bench"}}
    if served:
        out["read_p50_ms"] = round(percentile(served, 50) * 1000, 1)
        # reads answered in each second of the round (by when they were sent)
        per_second = [0] * (int(seconds) + 1)
        for code, _, at in reads:
            if code == 200:
                per_second[min(int(at), int(seconds))] += 1
        out["served_each_second"] = per_second
    out["shed"] = len(shed)
    if shed:
        out["shed_p50_ms"] = round(percentile(shed, 50) * 1000, 1)
        out["shed_p99_ms"] = round(percentile(shed, 99) * 1000, 1)
        out["shed_max_ms"] = round(max(shed) * 1000, 1)
        out["shed_within_50ms"] = round(sum(1 for t in shed if t <= 0.05) / len(shed), 3)
    if shed_later:
        out["shed_after_first_s"] = len(shed_later)
        out["shed_after_first_s_p99_ms"] = round(percentile(shed_later, 99) * 1000, 1)
        out["shed_after_first_s_within_50ms"] = round(
            sum(1 for t in shed_later if t <= 0.05) / len(shed_later), 3)
    if lags:
        out["reader_processes"] = procs
        # the clients share the node's cores: their CPU is taken from it
        out["readers_cpu_cores"] = round(readers_cpu / seconds, 2)
        out["reader_loop_lag_p50_ms"] = round(percentile(lags, 50) * 1000, 1)
        out["reader_loop_lag_p99_ms"] = round(percentile(lags, 99) * 1000, 1)
    return out


def _seed(runner: NodeRunner, memories: int, timeout: float = 600.0) -> dict[str, Any]:
    """`memories` memories through RPC from 16 keys, then wait until the recall index
    holds them all: the rounds then search the same data but for their own few writes
    (on a nearly empty node a hybrid search gets dearer with every write, so a later
    round would serve fewer reads for that alone)."""
    if memories <= 0:
        return {"memories": 0}
    keys = _keys(16, "seed")
    per_key = -(-memories // len(keys))
    rng = random.Random(36)
    # varied text (bench_read's Zipf vocabulary); one in 20 also says what the readers
    # search for, so a search matches some memories by its words, not all of them
    txs = [[TxBuilder(k, CHAIN).submit(
        1 + j, f"seed-{w}-{j}",
        _text(rng) + ("" if j % 20 else " " + READER_QUERIES[j % 4].replace("+", " ")))
        for j in range(per_key)] for w, k in enumerate(keys)]
    started = time.perf_counter()
    drained = _drain(runner, txs, None,
                     _light_sender(runner.rpc_url + "/", _rpc_body, _rpc_ok))
    _index_settled(runner.api_url, drained["accepted"], timeout)
    return {"memories": drained["accepted"],
            "indexed_after_s": round(time.perf_counter() - started, 1)}


def _index_settled(api_url: str, vectors: int = 0, timeout: float = 600.0) -> None:
    """Wait until the node's recall index has caught up with its projection and holds at
    least `vectors` memories (at once on a node without one, when `vectors` is 0)."""
    deadline = time.monotonic() + timeout
    while True:
        seen = metrics(api_url)
        if (seen.get("memledger_recall_lag_blocks", 0) == 0
                and seen.get("memledger_recall_index_vectors", 0) >= vectors):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the recall index did not catch up in {timeout:.0f} s")
        time.sleep(0.5)


def isolation(runner: NodeRunner, seconds: float, counts: list[int],
              reader_procs: int = 1, seed: int = 0) -> dict[str, Any]:
    seeded = _seed(runner, seed)
    key = _keys(1, "iso")[0]
    rounds = [_isolation_round(runner, c, seconds, key, 1 + 10_000 * i,
                               max(1, min(reader_procs, c)))
              for i, c in enumerate(counts)]
    out: dict[str, Any] = {"seconds": seconds, "seeded": seeded, "rounds": rounds}
    base = rounds[0]
    for r in rounds[1:]:
        r["write_p99_over_unloaded"] = round(r["write_p99_ms"] / base["write_p99_ms"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["admission", "client_cost", "commit",
                                                       "verified", "isolation"])
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--per-key", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client", choices=["httpx", "light"], default="httpx",
                        help="the RPC and REST legs' client (the SDK leg is the SDK)")
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--cost-calls", type=int, default=300,
                        help="client_cost: calls of each kind per way and round")
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--readers", type=int, nargs="+", default=[0, 50, 300])
    parser.add_argument("--reader-procs", type=int, default=1,
                        help="processes the isolation readers are spread over")
    parser.add_argument("--seed", type=int, default=2000,
                        help="memories written (through RPC) before the isolation rounds")
    parser.add_argument("--embedder", help="the node's embedder (default: the node's "
                        "default; `none`: text search only, no vector index follower)")
    parser.add_argument("--read-slots", type=int,
                        help="the node's extra.api_read_slots (default: the node's)")
    parser.add_argument("--read-backlog", type=int,
                        help="the node's extra.api_read_backlog (default: the node's)")
    parser.add_argument("--read-process", choices=["on", "off"],
                        help="the node's extra.api_read_process (default: the node's, on)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-client-") as tmp:
        runner = NodeRunner(Path(tmp) / "home", chain_id=CHAIN)
        # one address sends everything here: the per-address rate limit (200/s) would be
        # the thing measured, not the path
        config = json.loads((runner.home / "config.json").read_text())
        config.setdefault("extra", {})["api_rate_limit_per_s"] = "0"
        if args.embedder is not None:
            config["embedder"] = args.embedder
        for name, value in (("api_read_slots", args.read_slots),
                            ("api_read_backlog", args.read_backlog),
                            ("api_read_process", args.read_process)):
            if value is not None:
                config["extra"][name] = str(value)
        (runner.home / "config.json").write_text(json.dumps(config))
        runner.start()
        result: dict[str, Any] = {"config_extra": config["extra"]}
        try:
            wait_api_ready(runner.api_url)
            if "admission" in args.parts:
                result["admission"] = admission(runner, args.writers, args.per_key,
                                                args.rounds, args.client)
            if "client_cost" in args.parts:
                result["client_cost"] = client_cost(runner, args.cost_calls, args.rounds)
            if "commit" in args.parts:
                result["commit"] = commit(runner, args.commits)
            if "verified" in args.parts:
                result["verified"] = verified(runner, args.reads, Path(tmp) / "trust")
            if "isolation" in args.parts:
                result["isolation"] = isolation(runner, args.seconds, args.readers,
                                                args.reader_procs, args.seed)
        finally:
            runner.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
