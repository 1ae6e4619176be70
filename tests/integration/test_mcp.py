"""`memledger mcp` driven by the official MCP Python client against a real node.

One node (cometbft + the auto-voter) for the module. Each test starts the server as a host
would: a subprocess on stdio (`stdio_client`), or on streamable HTTP behind a bearer token.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memledger.sdk import Client
from memledger.sdk.keys import Agent
from memledger.sdk.waiting import wait_until
from tests.support.node import REPO, NodeRunner, free_base_port, wait_api_ready

pytestmark = pytest.mark.cometbft
TOOLS = {"recall", "remember", "turn", "get", "list", "challenge", "corroborate",
         "reinstate", "status", "inbox"}


class Env:
    def __init__(self, node: NodeRunner, keys: Path) -> None:
        self.node = node
        self.keys = keys
        self.agents = {name: Agent.generate(name) for name in ("alice", "bob")}
        for name, agent in self.agents.items():
            agent.save(keys / f"{name}.json")

    def environ(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(REPO), MEMLEDGER_KEYS_DIR=str(self.keys),
                    MEMLEDGER_HOME=str(self.node.home))

    def args(self, key: str, *extra: str) -> list[str]:
        return ["-m", "memledger.cli.main", "mcp", "--key", key, "--node", self.node.api_url,
                "--domain", "mcptest", *extra]

    @asynccontextmanager
    async def session(self, key: str, *extra: str) -> AsyncIterator[ClientSession]:
        params = StdioServerParameters(command=sys.executable, args=self.args(key, *extra),
                                       env=self.environ(), cwd=str(REPO))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                yield session


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, cometbft_bin: Path) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("mcp")
    runner = NodeRunner(root / "home", chain_id="memledger-mcp", voter=True)
    runner.start()
    try:
        wait_api_ready(runner.api_url)
        (root / "keys").mkdir()
        yield Env(runner, root / "keys")
    finally:
        runner.stop()


def text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def call(session: ClientSession, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    assert not result.is_error, f"{tool}: {text(result)}"
    return text(result)


def test_tools_and_schemas_and_a_node_that_is_down(env: Env) -> None:
    async def run() -> None:
        async with env.session("alice") as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert set(listed) == TOOLS
            for tool in listed.values():
                assert tool.description and len(tool.description) > 40, tool.name
                assert tool.input_schema["type"] == "object"
            recall = listed["recall"].input_schema
            assert recall["required"] == ["query"]
            assert recall["properties"]["limit"]["default"] == 5
            assert recall["properties"]["status"]["default"] == "committed"
            assert listed["remember"].input_schema["properties"]["wait"]["enum"] == [
                "included", "decided"]
            notes = listed["recall"].annotations
            assert notes is not None and notes.read_only_hint is True
            prompts = [p.name for p in (await session.list_prompts()).prompts]
            assert prompts == ["memory_guide"]
            # a bad argument is refused by the schema, as an error result
            bad = await session.call_tool("recall", {"query": "x", "limit": 500})
            assert bad.is_error and text(bad).startswith("invalid_arguments: limit: "), \
                text(bad)
            assert "\n" not in text(bad)
            unknown = await session.call_tool("forget_everything", {})
            assert unknown.is_error and text(unknown).startswith("unknown_tool: ")
        async with env.session("alice", "--node", "http://127.0.0.1:1") as down:
            for _ in range(2):  # one clear error per call, the server stays up
                result = await down.call_tool("recall", {"query": "anything"})
                assert result.is_error
                assert text(result).startswith("node_unreachable: "), text(result)
                assert "Traceback" not in text(result)
    asyncio.run(run())


def _score(answer: str, memory_id: str) -> float:
    """The score a recall's answer shows for one memory."""
    found = re.search(rf'<memory id="{re.escape(memory_id)}"[^>]*score="(-?[0-9.]+)"', answer)
    assert found is not None, answer
    return float(found[1])


def test_remember_recall_verify_challenge_inbox_once(env: Env) -> None:
    bob = env.agents["bob"].public_key_hex

    async def run() -> None:
        async with env.session("alice") as alice:
            stored = await call(alice, "remember", id="mcp-backup", wait="decided",
                                content="The staging database is backed up every night at "
                                        "02:00 UTC into the cold storage bucket.",
                                type="fact", tags=["ops"])
            assert "id mcp-backup, status committed" in stored, stored
            hits = await call(alice, "recall", query="when do staging DB backups happen?")
            assert 'id="mcp-backup"' in hits, hits
            # reranked by default: the score is a relevance, not a fused rank's ~0.016
            assert _score(hits, "mcp-backup") > 0.3, hits
            plain = await call(alice, "recall", query="when do staging DB backups happen?",
                               rerank=False)
            assert _score(plain, "mcp-backup") < 0.05, plain
            assert f'author="{env.agents["alice"].public_key_hex}"' in hits
            assert 'status="committed" disputed="false" verified="false"' in hits
            proven = await call(alice, "get", id="mcp-backup", verify=True)
            assert re.search(r'verified="true \(height \d+\)"', proven), proven
            first = await call(alice, "inbox")
            assert "mcp-backup" in first and "was committed" in first, first
        # alice owns the domain she wrote first; a modify grant lets bob dispute in it
        with Client(env.node.api_url, key=env.agents["alice"]) as ml:
            assert ml.grant("mcptest", bob, "modify").included
        # carol backs it, so bob's challenge opens a dispute instead of deprecating it
        with Client(env.node.api_url, key=Agent.generate("carol")) as ml:
            assert ml.corroborate("mcp-backup").included
        async with env.session("bob") as session:
            out = await call(session, "challenge", id="mcp-backup",
                             reason="backups moved to 03:00 UTC last week")
            assert "included at height" in out, out
        async with env.session("alice") as alice:  # a new server process
            news = await call(alice, "inbox")
            assert f"was challenged by {bob}" in news, news
            assert "was corroborated by" in news
            assert "backups moved to 03:00 UTC" in news
            again = await call(alice, "inbox")
            assert "challenged" not in again and "nothing new" in again, again
            recalled = await call(alice, "recall", query="staging database backups",
                                  include_disputed=True, status="committed")
            assert 'id="mcp-backup"' in recalled and 'disputed="true"' in recalled
            assert "[DISPUTED: " in recalled, recalled
            assert 'id="mcp-backup"' not in await call(
                alice, "recall", query="staging database backups")
        async with env.session("alice") as alice:  # and after another restart
            later = await call(alice, "inbox")
            assert "challenged" not in later, later
            peek = await call(alice, "inbox", since=0)
            assert f"was challenged by {bob}" in peek and "did not move" in peek
    asyncio.run(run())


def test_turn_reports_a_refused_store_and_still_recalls(env: Env) -> None:
    async def run() -> None:
        async with env.session("alice") as alice:
            await call(alice, "remember", id="mcp-turn", wait="decided",
                       content="Deploys to production need two approvals in the release "
                               "channel.")
            result = await alice.call_tool("turn", {
                "topic": "production deploy approvals",
                "observation": "Deploys need three approvals now.",
                "observation_id": "mcp-turn"})
            out = text(result)
            assert not result.is_error, out
            assert "## recall: ok" in out and 'id="mcp-turn"' in out, out
            assert "## remember: FAILED (memory_terminal)" in out, out
            assert "remember failed" in out and "not atomic" in out
            assert "## inbox: ok" in out
    asyncio.run(run())
    cli = [sys.executable, "-m", "memledger.cli.main", "turn", "production deploy approvals",
           "--key", "alice", "--node", env.node.api_url, "--domain", "mcptest",
           "--observation", "-"]
    same = subprocess.run([*cli, "--observation-id", "mcp-turn"], input="Three approvals.",
                          capture_output=True, text=True, env=env.environ(), timeout=120)
    assert same.returncode == 3, same.stderr  # some phase failed
    assert "## remember: FAILED (memory_terminal)" in same.stdout
    assert 'id="mcp-turn"' in same.stdout
    fine = subprocess.run(cli, input="Deploy approvals are counted by the release bot.",
                          capture_output=True, text=True, env=env.environ(), timeout=120)
    assert fine.returncode == 0, fine.stdout + fine.stderr
    assert fine.stdout.startswith("turn: all phases ok") and "## remember: ok" in fine.stdout


def test_32_concurrent_calls_in_one_session(env: Env) -> None:
    async def run() -> None:
        async with env.session("bob") as bob:
            writes = [bob.call_tool("remember", {
                "content": f"Concurrent note number {i}: the cache key is v{i}.",
                "id": f"mcp-conc-{i}"}) for i in range(16)]
            reads = [bob.call_tool("status" if i % 2 else "recall",
                                   {} if i % 2 else {"query": "cache key"})
                     for i in range(16)]
            results = await asyncio.gather(*writes, *reads)
            assert len(results) == 32
            failed = [text(r) for r in results if r.is_error]
            assert not failed, failed
            for i, result in enumerate(results[:16]):
                assert f"id mcp-conc-{i}," in text(result), text(result)
    asyncio.run(run())
    with httpx.Client(base_url=env.node.api_url, timeout=30) as api:
        for i in range(16):
            assert api.get(f"/v1/memories/mcp-conc-{i}").status_code == 200


def test_http_needs_its_token(env: Env, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-for-the-test\n")
    refused = subprocess.run([sys.executable, *env.args("alice", "--http", "--host",
                                                        "0.0.0.0")],
                             capture_output=True, text=True, env=env.environ(), timeout=60)
    assert refused.returncode != 0 and "--token-file" in refused.stderr, refused.stderr
    port = free_base_port()
    proc = subprocess.Popen([sys.executable, *env.args(
        "alice", "--http", "--port", str(port), "--token-file", str(token_file))],
        env=env.environ(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        def up() -> bool:
            try:
                httpx.get(url, timeout=1)
            except httpx.HTTPError:
                return False
            return True
        wait_until(up, 30, 0.2, what="the MCP HTTP server")
        plain = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"},
                           headers={"accept": "application/json, text/event-stream"})
        assert plain.status_code == 401
        wrong = httpx.post(url, json={}, headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401

        async def run() -> None:
            headers = {"authorization": "Bearer s3cret-token-for-the-test"}
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                    streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                assert names == TOOLS
                assert "this agent's key: " + env.agents["alice"].public_key_hex in \
                    await call(session, "status")
                stored = await call(session, "remember", id="mcp-http", wait="decided",
                                    content="The HTTP transport stores memories as well.")
                assert "id mcp-http, status committed" in stored, stored
                got = await call(session, "get", id="mcp-http")
                assert 'status="committed"' in got and "HTTP transport" in got
        asyncio.run(run())
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "s3cret" not in err


def test_operator_tools_vote_with_the_validator_key(env: Env, tmp_path: Path) -> None:
    notes = tmp_path / "instructions.md"
    notes.write_text("Store deploy facts in the ops domain.\n")

    async def run() -> None:
        async with env.session("alice", "--operator", "--instructions-file",
                               str(notes)) as ops:
            guide = await ops.get_prompt("memory_guide")
            said = "\n".join(getattr(m.content, "text", "") for m in guide.messages)
            assert "what is worth storing" in said.lower(), said
            assert "From the operator of this node:\nStore deploy facts in the ops domain." \
                in said
            names = {t.name for t in (await ops.list_tools()).tools}
            assert names == TOOLS | {"proposals", "vote_proposal"}
            assert await call(ops, "proposals", open_only=False) == "no proposals"
            refused = await ops.call_tool("vote_proposal", {"proposal_id": "p999",
                                                            "decision": "yes"})
            assert refused.is_error
            assert re.fullmatch(r"[a-z_]+: [^\n]+", text(refused)), text(refused)
    asyncio.run(run())


def test_remember_supersedes_and_recall_leaves_the_original_out(env: Env) -> None:
    async def run() -> None:
        async with env.session("alice") as alice:
            first = await call(alice, "remember", id="mcp-standup", wait="decided",
                               content="The team standup is held at 09:30 in room Orion.",
                               type="fact")
            assert "status committed" in first, first
            fixed = await call(alice, "remember", id="mcp-standup-2", wait="decided",
                               supersedes="mcp-standup",
                               content="Since the move the team standup is at 10:00 in the "
                                       "Vega room.", type="fact")
            assert "id mcp-standup-2, status committed" in fixed, fixed
            hits = await call(alice, "recall", query="when is the team standup", limit=10)
            assert 'id="mcp-standup-2"' in hits and 'id="mcp-standup"' not in hits, hits
            assert 'supersedes="mcp-standup"' in hits
            old = await call(alice, "recall", query="when is the team standup",
                             status="superseded")
            assert 'id="mcp-standup"' in old and 'superseded_by="mcp-standup-2"' in old, old
            shown = await call(alice, "get", id="mcp-standup")
            assert "corrections=\"mcp-standup -> mcp-standup-2\"" in shown, shown
            refused = await alice.call_tool("remember", {
                "id": "mcp-standup-3", "supersedes": "mcp-standup",
                "content": "The team standup is held at 11:00 in the Lyra room."})
            assert refused.is_error and text(refused).startswith("supersedes_taken"), \
                text(refused)
    asyncio.run(run())
