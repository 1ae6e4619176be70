"""What the MCP layer costs: `recall` and `remember` through `memledger mcp` (stdio, the
official MCP client) against the same calls straight to the REST API with the async SDK,
in pairs (one MCP call, one REST call, the order alternating) in one run on one real
node; and the wall time of the session-start hook as a host runs it, a whole process,
with the ledger filled to `--fill` memories.

    .venv/bin/python -m bench.bench_mcp [--recalls 300] [--remembers 200] [--memories 200]
        [--fill 0] [--hooks 15]

Figures of merit: the p50 overhead per call, both as the median of the per-pair
differences (MCP - REST, same query, same moment; with a distribution-free 95% interval
for that median) and as p50(MCP) - p50(REST) (issue 35: at most 5 ms); and the hook's
p50 and max against the floor measured in the same run (a bare interpreter, and one that
imports the hook module). `--memories` are stored first through the REST API by the
bench's key, which so owns the `bench` domain; `--fill N` then adds N more there as
co-commits of filler keys it grants (bench/mcp_fill.py: committed by inclusion, no vote
to wait for) and waits until they are all indexed. The recall pairs run on the filled
ledger too.

`remember` waits for its block both ways (the MCP tool's wait="included", the SDK's
wait="commit"), so each call carries the block timing: started at a random point of the
block interval, one pair's difference could be most of an interval either way. So each
remember starts just after the node reports a new block (untimed), both calls of a pair
wait about one interval, and many pairs (default 200) give the median with its
interval, which says whether the overhead is placed under 5 ms or not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.mcp_fill import fill
from memledger.devtools.node import REPO, NodeRunner, wait_api_ready
from memledger.devtools.stats import percentile
from memledger.sdk import AsyncClient
from memledger.sdk.keys import Agent

TOPICS = ("deploys", "backups", "caches", "alerts", "reviews", "builds", "tests", "keys")
CHAIN_ID = "bench-mcp"
DOMAIN = "bench"


def _ms(samples: list[float]) -> dict[str, float]:
    """min, p50, p99 and max in ms (nearest rank); min is the closest a shared machine
    comes to the uncontended cost."""
    return {"min_ms": round(min(samples) * 1000, 2),
            "p50_ms": round(percentile(samples, 50) * 1000, 2),
            "p99_ms": round(percentile(samples, 99) * 1000, 2),
            "max_ms": round(max(samples) * 1000, 2), "n": len(samples)}


async def _timed(coro: Awaitable[Any]) -> float:
    start = time.perf_counter()
    result = await coro
    if getattr(result, "is_error", False):
        raise RuntimeError(f"tool error: {result.content}")
    return time.perf_counter() - start


async def _pairs(runs: int, via_mcp: Callable[[int], Awaitable[Any]],
                 via_rest: Callable[[int], Awaitable[Any]],
                 align: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """`runs` pairs of the same call both ways, alternating which goes first, so drift in
    the node (load, block timing) falls on both sides of each pair. `align`: awaited
    before each call (untimed), so a call that waits for its block starts at the same
    point of the block interval both ways."""
    async def timed(call: Awaitable[Any]) -> float:
        if align is not None:
            await align()
        return await _timed(call)

    mcp_s, rest_s, diffs = [], [], []
    for i in range(runs):
        if i % 2:
            r = await timed(via_rest(i))
            m = await timed(via_mcp(i))
        else:
            m = await timed(via_mcp(i))
            r = await timed(via_rest(i))
        mcp_s.append(m)
        rest_s.append(r)
        diffs.append(m - r)
    row: dict[str, Any] = {"mcp": _ms(mcp_s), "rest": _ms(rest_s)}
    row["p50_pair_overhead_ms"] = round(statistics.median(diffs) * 1000, 2)
    row["p50_pair_overhead_ci95_ms"] = [round(d * 1000, 2) for d in median_ci(diffs)]
    row["p50_overhead_ms"] = round(row["mcp"]["p50_ms"] - row["rest"]["p50_ms"], 2)
    return row


def median_ci(samples: list[float]) -> tuple[float, float]:
    """A distribution-free 95% interval for the median: the order statistics at ranks
    n/2 -+ 0.98 sqrt(n) (the binomial's normal approximation), so a reader sees whether
    the pairs are enough to place the median overhead on either side of a limit."""
    ordered = sorted(samples)
    n = len(ordered)
    half = 0.98 * n ** 0.5
    lo = max(0, int(n / 2 - half))
    hi = min(n - 1, int(n / 2 + half + 0.999))
    return ordered[lo], ordered[hi]


async def _in_process(node: NodeRunner, agent: Agent, runs: int, state: Path,
                      remembers: int = 0) -> dict[str, Any]:
    """The server's own cost without a transport: its call_tool against the SDK's recall,
    in one process (what stdio adds on top is the JSON-RPC round trip between two); with
    `remembers`, also its remember against the SDK's submit, each started after a block
    ({"recall": ..., "remember": ...})."""
    from memledger.mcp.cursors import CursorStore
    from memledger.mcp.ledger import Ledger
    from memledger.mcp.render import Budget
    from memledger.mcp.server import build_server
    from memledger.mcp.tools import Tools

    tools = Tools(Ledger(node.api_url, agent), Budget(8192), CursorStore(state, "bench"))
    server = build_server(tools)
    client = tools.ledger.client
    row = await _pairs(
        runs, lambda i: server.call_tool("recall", {"query": _query(i)}),
        lambda i: client.recall(_query(i), limit=5, status="committed"))
    if remembers:
        row = {"recall": row, "remember": await _pairs(
            remembers,
            lambda i: server.call_tool("remember", {
                "content": f"In-process note {i} via MCP about {TOPICS[i % 8]}.",
                "wait": "included"}),
            lambda i: client.submit(None, f"In-process note {i} via REST about "
                                          f"{TOPICS[i % 8]}.", domain=DOMAIN,
                                    type="observation", confidence=0.8, wait="commit"),
            lambda: _after_block(client))}
    await tools.ledger.aclose()
    return row


async def _after_block(client: AsyncClient) -> None:
    """Returns just after the node reports a new block (see `_pairs`' `align`)."""
    start = (await client.status()).height
    while (await client.status()).height <= start:
        await asyncio.sleep(0.005)


def _query(i: int) -> str:
    return f"how do we handle {TOPICS[i % len(TOPICS)]}"


async def _measure(node: NodeRunner, agent: Agent, args: argparse.Namespace,
                   env: dict[str, str]) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "memledger.cli.main", "mcp", "--key", agent.name, "--node", node.api_url,
        "--domain", DOMAIN], env=env, cwd=str(REPO))
    rest = AsyncClient(node.api_url, key=agent)
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as mcp:
            await mcp.initialize()
            for i in range(5):  # warm both paths (connections, caches)
                await mcp.call_tool("recall", {"query": _query(i)})
                await rest.recall(_query(i), limit=5, status="committed")
            out["recall"] = await _pairs(
                args.recalls, lambda i: mcp.call_tool("recall", {"query": _query(i)}),
                lambda i: rest.recall(_query(i), limit=5, status="committed"))
            # the MCP tool's wait="included" is the SDK's wait="commit": in a block. Each
            # call starts just after a new block, so both wait about one block interval
            # and the pair's difference is the overhead, not where in the interval each
            # call happened to start (~0-300 ms either way)
            out["remember"] = await _pairs(
                args.remembers,
                lambda i: mcp.call_tool("remember", {
                    "content": f"Bench note {i} via MCP about {TOPICS[i % 8]}.",
                    "wait": "included"}),
                lambda i: rest.submit(None, f"Bench note {i} via REST about {TOPICS[i % 8]}.",
                                      domain=DOMAIN, type="observation", confidence=0.8,
                                      wait="commit"),
                lambda: _after_block(rest))
            out["remember"]["started_after_a_block"] = True
    await rest.aclose()
    return out


async def _preload(node: NodeRunner, agent: Agent, count: int) -> None:
    async with AsyncClient(node.api_url, key=agent) as client:
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                await client.submit(None, f"Note {i}: the team decided how {TOPICS[i % 8]} "
                                          f"work, revision {i}.", domain=DOMAIN,
                                    type="fact", confidence=0.9, wait="sync")
        await asyncio.gather(*(one(i) for i in range(count)))


def _wall(command: list[str], env: dict[str, str], runs: int,
          must_print: str = "") -> dict[str, float]:
    """Wall time of `command` as a whole process, `runs` times (one unmeasured first)."""
    samples = []
    for n in range(runs + 1):
        start = time.perf_counter()
        out = subprocess.run(command, env=env, check=True, capture_output=True, text=True,
                             timeout=60, cwd=tempfile.gettempdir())
        if n:
            samples.append(time.perf_counter() - start)
        if must_print not in out.stdout:
            raise RuntimeError(f"{command} printed no {must_print!r}: {out.stdout}{out.stderr}")
    return _ms(samples)


def _hooks(node: NodeRunner, env: dict[str, str], runs: int) -> dict[str, Any]:
    """The session-start hook as hosts run it, and the floor under it."""
    exe = shutil.which("memledger", path=str(Path(sys.executable).parent))
    hook = ["session-start", "--node", node.api_url, "--domain", DOMAIN]
    row = {"python_m_memledger_mcp_hook": _wall(
        [sys.executable, "-m", "memledger.mcp.hook", *hook], env, runs, "<memory ")}
    if exe:
        row["memledger_hook_command"] = _wall([exe, "hook", *hook], env, runs, "<memory ")
    row["floor_bare_python"] = _wall([sys.executable, "-c", "pass"], env, runs)
    row["floor_python_import_hook"] = _wall(
        [sys.executable, "-c", "import memledger.mcp.hook"], env, runs)
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"load_before": os.getloadavg(), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = root / "keys"
        agent = Agent.generate("bench")
        agent.save(keys / "bench.json")
        env = dict(os.environ, PYTHONPATH=str(REPO), MEMLEDGER_KEYS_DIR=str(keys),
                   MEMLEDGER_HOME=str(root / "home"))
        node = NodeRunner(root / "home", chain_id=CHAIN_ID, voter=True)
        node.start()
        try:
            wait_api_ready(node.api_url)
            asyncio.run(_preload(node, agent, args.memories))
            time.sleep(3)  # the owner's first write in a block before its grants
            if args.fill:
                result["fill"] = fill(node.api_url, node.rpc_url, CHAIN_ID, agent, DOMAIN,
                                      args.fill, fillers=args.fillers).to_json()
                print(f"filled: {json.dumps(result['fill'])}", file=sys.stderr)
            else:
                time.sleep(3)  # let the voter commit and the index catch up
            result.update(asyncio.run(_measure(node, agent, args, env)))
            both = asyncio.run(_in_process(node, agent, args.recalls, root / "cursors",
                                           args.remembers))
            result["recall_in_process"] = both["recall"] if args.remembers else both
            if args.remembers:
                result["remember_in_process"] = both["remember"]
            result["session_start_hook"] = _hooks(node, env, args.hooks)
            result["memories"] = args.memories + args.fill
        finally:
            node.stop()
    result["load_after"] = os.getloadavg()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--fill", type=int, default=0,
                        help="add this many memories before measuring (e.g. 100000)")
    parser.add_argument("--fillers", type=int, default=4, help="filler keys for --fill")
    parser.add_argument("--hooks", type=int, default=15)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
