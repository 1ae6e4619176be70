"""What the MCP layer costs: `recall` and `remember` through `memledger mcp` (stdio, the
official MCP client) against the same calls straight to the REST API with the async SDK,
interleaved in one run on one real node; and the wall time of the session-start hook as a
host runs it, a whole process: the light `python -m memledger.mcp.hook` form, the
`memledger hook` form, and a bare interpreter importing httpx (the floor).

    .venv/bin/python -m bench.bench_mcp [--recalls 200] [--remembers 30] [--memories 200]
        [--hooks 10]

The figure of merit is the p50 overhead (MCP p50 - REST p50) in ms per call. `--memories`
are stored first (one key, wait for inclusion) so recall ranks a real index; the
session-start figure is at that many memories, not at the issue's 100k.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memledger.devtools.node import REPO, NodeRunner, wait_api_ready
from memledger.sdk import AsyncClient
from memledger.sdk.keys import Agent

TOPICS = ("deploys", "backups", "caches", "alerts", "reviews", "builds", "tests", "keys")


async def _in_process(node: NodeRunner, agent: Agent, runs: int, state: Path) -> dict[str, Any]:
    """The server's own cost without a transport: its call_tool against the SDK's recall,
    in one process (what stdio adds on top is the JSON-RPC round trip between two)."""
    from memledger.mcp.cursors import CursorStore
    from memledger.mcp.ledger import Ledger
    from memledger.mcp.render import Budget
    from memledger.mcp.server import build_server
    from memledger.mcp.tools import Tools

    tools = Tools(Ledger(node.api_url, agent), Budget(8192), CursorStore(state, "bench"))
    server = build_server(tools)
    client = tools.ledger.client
    via_mcp, via_rest = [], []
    for i in range(runs):
        query = f"how do we handle {TOPICS[i % len(TOPICS)]}"
        via_mcp.append(await _timed(server.call_tool("recall", {"query": query})))
        via_rest.append(await _timed(client.recall(query, limit=5, status="committed")))
    await tools.ledger.aclose()
    row: dict[str, Any] = {"mcp": _ms(via_mcp), "rest": _ms(via_rest)}
    row["p50_overhead_ms"] = round(row["mcp"]["p50_ms"] - row["rest"]["p50_ms"], 2)
    return row


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[int(len(ordered) * 0.9)] * 1000, 2), "n": len(ordered)}


async def _timed(coro: Any) -> float:
    start = time.perf_counter()
    result = await coro
    if getattr(result, "is_error", False):
        raise RuntimeError(f"tool error: {result.content}")
    return time.perf_counter() - start


async def _measure(node: NodeRunner, keys: Path, agent: Agent, args: argparse.Namespace,
                   env: dict[str, str]) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "memledger.cli.main", "mcp", "--key", agent.name, "--node", node.api_url,
        "--domain", "bench"], env=env, cwd=str(REPO))
    rest = AsyncClient(node.api_url, key=agent)
    out: dict[str, Any] = {}
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as mcp:
            await mcp.initialize()
            await mcp.call_tool("status", {})  # warm both paths
            await rest.status()
            via_mcp, via_rest = [], []
            for i in range(args.recalls):
                query = f"how do we handle {TOPICS[i % len(TOPICS)]}"
                via_mcp.append(await _timed(mcp.call_tool("recall", {"query": query})))
                via_rest.append(await _timed(rest.recall(query, limit=5,
                                                         status="committed")))
            out["recall"] = {"mcp": _ms(via_mcp), "rest": _ms(via_rest)}
            via_mcp, via_rest = [], []
            for i in range(args.remembers):
                via_mcp.append(await _timed(mcp.call_tool("remember", {
                    "content": f"Bench note {i} via MCP about {TOPICS[i % len(TOPICS)]}."})))
                via_rest.append(await _timed(rest.submit(
                    None, f"Bench note {i} via REST about {TOPICS[i % len(TOPICS)]}.",
                    domain="bench", type="observation", confidence=0.8)))
            out["remember"] = {"mcp": _ms(via_mcp), "rest": _ms(via_rest)}
    await rest.aclose()
    for name in ("recall", "remember"):
        row = out[name]
        row["p50_overhead_ms"] = round(row["mcp"]["p50_ms"] - row["rest"]["p50_ms"], 2)
    return out


async def _preload(node: NodeRunner, agent: Agent, count: int) -> None:
    async with AsyncClient(node.api_url, key=agent) as client:
        sem = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            async with sem:
                await client.submit(None, f"Note {i}: the team decided how {TOPICS[i % 8]} "
                                          f"work, revision {i}.", domain="bench",
                                    type="fact", confidence=0.9, wait="sync")
        await asyncio.gather(*(one(i) for i in range(count)))


def _hook_times(node: NodeRunner, env: dict[str, str], runs: int,
                module: list[str]) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", *module, "session-start", "--node",
                              node.api_url, "--domain", "bench"], env=env, check=True,
                             capture_output=True, text=True, timeout=60)
        samples.append(time.perf_counter() - start)
        if "<memory " not in out.stdout:
            raise RuntimeError(f"the hook printed no memory: {out.stdout}{out.stderr}")
    return _ms(samples)


def _hook_times_bare(runs: int) -> dict[str, float]:
    """The floor under any hook written in Python: an interpreter that imports httpx."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import httpx"], check=True, timeout=60)
        samples.append(time.perf_counter() - start)
    return _ms(samples)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        keys = root / "keys"
        agent = Agent.generate("bench")
        agent.save(keys / "bench.json")
        env = dict(os.environ, PYTHONPATH=str(REPO), MEMLEDGER_KEYS_DIR=str(keys),
                   MEMLEDGER_HOME=str(root / "home"))
        node = NodeRunner(root / "home", chain_id="bench-mcp", voter=True)
        node.start()
        try:
            wait_api_ready(node.api_url)
            asyncio.run(_preload(node, agent, args.memories))
            time.sleep(3)  # let the voter commit and the index catch up
            result = asyncio.run(_measure(node, keys, agent, args, env))
            result["recall_in_process"] = asyncio.run(
                _in_process(node, agent, args.recalls, root / "cursors"))
            result["session_start_hook"] = _hook_times(node, env, args.hooks,
                                                       ["memledger.mcp.hook"])
            result["session_start_hook_cli"] = _hook_times(
                node, env, args.hooks, ["memledger.cli.main", "hook"])
            result["python_startup"] = _hook_times_bare(args.hooks)
            result["memories"] = args.memories
        finally:
            node.stop()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recalls", type=int, default=200)
    parser.add_argument("--remembers", type=int, default=30)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--hooks", type=int, default=10)
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
