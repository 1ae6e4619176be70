"""The MCP `recall` tool's rerank and min_score: in its typed schema with a description a
model can act on, passed to the SDK's recall, and min_score alone refused by name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memledger.mcp.cursors import CursorStore
from memledger.mcp.render import Budget
from memledger.mcp.server import build_server
from memledger.mcp.tools import Tools


class _Client:
    """The SDK's AsyncClient as far as recall goes: records each call, finds nothing."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def recall(self, query: str, **kwargs: Any) -> list[Any]:
        self.calls.append({"query": query, **kwargs})
        return []


class _Ledger:
    api_url = "http://node.invalid"

    def __init__(self) -> None:
        self.client = _Client()


def _tools(tmp_path: Path) -> Tools:
    return Tools(ledger=_Ledger(), budget=Budget(4096),  # type: ignore[arg-type]
                 cursors=CursorStore(tmp_path, "test"))


def test_recall_s_schema_offers_rerank_and_min_score(tmp_path: Path) -> None:
    server = build_server(_tools(tmp_path))
    listed = {t.name: t for t in asyncio.run(server.list_tools())}
    props = listed["recall"].input_schema["properties"]
    assert props["rerank"]["type"] == "boolean" and props["rerank"]["default"] is False
    assert "relevance from -1 to 1" in props["rerank"]["description"]
    score = props["min_score"]
    number = next(o for o in score["anyOf"] if o.get("type") == "number")
    assert (number["minimum"], number["maximum"], score["default"]) == (-1, 1, None)
    assert "With rerank only" in score["description"]


def test_recall_passes_them_to_the_sdk_and_refuses_min_score_alone(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    ok = asyncio.run(tools.recall("which port", rerank=True, min_score=0.5))
    assert not ok.is_error
    call = tools.ledger.client.calls[-1]  # type: ignore[attr-defined]
    assert (call["rerank"], call["min_score"]) == (True, 0.5)
    plain = asyncio.run(tools.recall("which port"))
    assert not plain.is_error
    assert tools.ledger.client.calls[-1]["rerank"] is False  # type: ignore[attr-defined]
    refused = asyncio.run(tools.recall("which port", min_score=0.5))
    assert refused.is_error
    assert refused.content[0].text.startswith("min_score_needs_rerank")  # type: ignore[union-attr]


def test_turn_s_recall_phase_takes_rerank_too(tmp_path: Path) -> None:
    """`turn` is the one call per agent turn, so its recall offers the same rerank and
    min_score as `recall`, and min_score alone fails that phase by name only."""
    tools = _tools(tmp_path)
    listed = {t.name: t for t in asyncio.run(build_server(tools).list_tools())}
    props = listed["turn"].input_schema["properties"]
    assert props["rerank"]["default"] is False and "min_score" in props
    done = asyncio.run(tools.turn("which port", inbox=False, rerank=True, min_score=0.4))
    assert not done.is_error
    call = tools.ledger.client.calls[-1]  # type: ignore[attr-defined]
    assert (call["rerank"], call["min_score"]) == (True, 0.4)
    refused = asyncio.run(tools.turn("which port", inbox=False, min_score=0.4))
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "recall: FAILED (min_score_needs_rerank)" in text
