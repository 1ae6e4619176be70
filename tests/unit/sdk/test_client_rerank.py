"""The SDK's recall passes `rerank` and `min_score` to GET /v1/memories only when asked,
in both clients, and a reranked recall never falls back to unranked words: the node's
reason it cannot rerank reaches the caller."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from memledger.sdk import AsyncClient, Client, MemLedgerError


class _Node:
    """Answers GET /v1/memories with an empty page, keeping each request's query."""

    def __init__(self, refuse: bool = False) -> None:
        self.seen: list[dict[str, str]] = []
        self.refuse = refuse

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(dict(request.url.params))
        if self.refuse:
            return httpx.Response(409, json={
                "type": "about:blank", "title": "Conflict", "status": 409,
                "name": "recall_unavailable", "detail": "no embedder"},
                headers={"content-type": "application/problem+json"})
        return httpx.Response(200, json={"items": [], "next_cursor": None})


def test_recall_sends_rerank_and_min_score_only_when_asked() -> None:
    node = _Node()
    with Client("http://node.invalid", transport=httpx.MockTransport(node)) as ml:
        assert ml.recall("which port", limit=3) == []
        assert ml.recall("which port", limit=3, rerank=True, min_score=0.4) == []
    plain, reranked = node.seen
    assert "rerank" not in plain and "min_score" not in plain
    assert (reranked["rerank"], reranked["min_score"], reranked["mode"]) == \
        ("true", "0.4", "hybrid")


def test_async_recall_sends_them_too() -> None:
    node = _Node()

    async def run() -> None:
        async with AsyncClient("http://node.invalid",
                               transport=httpx.MockTransport(node)) as ml:
            assert await ml.recall("which port", mode="semantic", rerank=True) == []

    asyncio.run(run())
    assert (node.seen[0]["rerank"], node.seen[0]["mode"]) == ("true", "semantic")
    assert "min_score" not in node.seen[0]


def test_a_reranked_recall_does_not_fall_back_to_words() -> None:
    """Without rerank, a node with no embedder is asked again by words; with it, the
    caller learns the node cannot rerank."""
    node = _Node(refuse=True)
    with Client("http://node.invalid", transport=httpx.MockTransport(node)) as ml:
        with pytest.raises(MemLedgerError) as info:
            ml.recall("which port", rerank=True)
        assert info.value.name == "recall_unavailable" and len(node.seen) == 1
        with pytest.raises(MemLedgerError):
            ml.recall("which port")  # asked again by words, refused again here
        assert [s["mode"] for s in node.seen[1:]] == ["hybrid", "text"]
