"""The MCP `recall` tool's rerank and min_score: in its typed schema with a description a
model can act on, passed to the SDK's recall, reranked by default where the node can
(the plain order where it cannot), and min_score with rerank=false refused by name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

from memledger.mcp.cursors import CursorStore
from memledger.mcp.render import Budget
from memledger.mcp.server import build_server
from memledger.mcp.tools import Tools
from memledger.sdk.errors import MemLedgerError


class _Client:
    """The SDK's AsyncClient as far as recall goes: records each call, finds nothing; a
    reranked call fails as a node answers it with `refuse_rerank` set."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.refuse_rerank = ""

    async def recall(self, query: str, **kwargs: Any) -> list[Any]:
        self.calls.append({"query": query, **kwargs})
        if kwargs.get("rerank") and self.refuse_rerank:
            raise MemLedgerError(f"{self.refuse_rerank}: cannot", status=422,
                                 name=self.refuse_rerank)
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
    rerank = props["rerank"]
    assert {o.get("type") for o in rerank["anyOf"]} == {"boolean", "null"}
    assert rerank["default"] is None
    assert "relevance from -1 to 1" in rerank["description"]
    assert "Leave out to rerank" in rerank["description"]
    score = props["min_score"]
    number = next(o for o in score["anyOf"] if o.get("type") == "number")
    assert (number["minimum"], number["maximum"], score["default"]) == (-1, 1, None)
    assert "Needs the rerank (on unless rerank=false)" in score["description"]


def test_recall_passes_them_to_the_sdk_and_refuses_min_score_alone(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    ok = asyncio.run(tools.recall("which port", rerank=True, min_score=0.5))
    assert not ok.is_error
    call = tools.ledger.client.calls[-1]  # type: ignore[attr-defined]
    assert (call["rerank"], call["min_score"]) == (True, 0.5)
    plain = asyncio.run(tools.recall("which port", rerank=False))
    assert not plain.is_error
    assert tools.ledger.client.calls[-1]["rerank"] is False  # type: ignore[attr-defined]
    refused = asyncio.run(tools.recall("which port", rerank=False, min_score=0.5))
    assert refused.is_error
    assert refused.content[0].text.startswith("min_score_needs_rerank")  # type: ignore[union-attr]


def test_left_out_rerank_is_on_where_the_node_can_and_plain_where_it_cannot(
        tmp_path: Path) -> None:
    """Agents get the better order without asking; a node whose embedder cannot rerank
    (or that searches words only, or has no embedder) answers in the plain order, unless
    the agent asked for the rerank or a min_score, which then fail by name; a list longer
    than the rerank reaches is asked plain."""
    tools = _tools(tmp_path)
    client = cast(_Client, tools.ledger.client)
    assert not asyncio.run(tools.recall("which port")).is_error
    assert [c["rerank"] for c in client.calls] == [True]
    for name in ("rerank_unsupported", "rerank_needs_meaning", "recall_unavailable"):
        client.calls.clear()
        client.refuse_rerank = name
        done = asyncio.run(tools.recall("which port"))
        assert not done.is_error
        assert [c["rerank"] for c in client.calls] == [True, False]
        asked = asyncio.run(tools.recall("which port", rerank=True))
        assert asked.is_error and asked.content[0].text.startswith(name)  # type: ignore[union-attr]
        strict = asyncio.run(tools.recall("which port", min_score=0.4))
        assert strict.is_error and strict.content[0].text.startswith(name)  # type: ignore[union-attr]
    client.refuse_rerank = "invalid_request"  # any other refusal is the agent's to see
    assert asyncio.run(tools.recall("which port")).is_error
    client.refuse_rerank = ""
    client.calls.clear()
    assert not asyncio.run(tools.recall("which port", limit=40)).is_error
    assert [c["rerank"] for c in client.calls] == [False]


def test_turn_s_recall_phase_takes_rerank_too(tmp_path: Path) -> None:
    """`turn` is the one call per agent turn, so its recall offers the same rerank and
    min_score as `recall`, and min_score alone fails that phase by name only."""
    tools = _tools(tmp_path)
    listed = {t.name: t for t in asyncio.run(build_server(tools).list_tools())}
    props = listed["turn"].input_schema["properties"]
    assert props["rerank"]["default"] is None and "min_score" in props
    done = asyncio.run(tools.turn("which port", inbox=False, rerank=True, min_score=0.4))
    assert not done.is_error
    call = tools.ledger.client.calls[-1]  # type: ignore[attr-defined]
    assert (call["rerank"], call["min_score"]) == (True, 0.4)
    default = asyncio.run(tools.turn("which port", inbox=False))
    assert not default.is_error
    assert tools.ledger.client.calls[-1]["rerank"] is True  # type: ignore[attr-defined]
    refused = asyncio.run(tools.turn("which port", inbox=False, rerank=False, min_score=0.4))
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "recall: FAILED (min_score_needs_rerank)" in text
