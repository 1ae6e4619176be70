"""The SDK addresses exactly the memory it is asked for, whatever its id holds ('/',
'.', '..', a sub-resource's name), and reads no page more than it needs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memledger.api import ApiSettings
from memledger.sdk import AsyncClient, Client
from tests.support.api import served_api
from tests.support.chain import LocalChain, seeded_key

AGENT = seeded_key("sdk-ids")
# valid ledger ids that an HTTP client would clean ('.', '..') or a router would split
# ("/votes" is "" then a sub-resource's name)
PATH_LIKE = ["b", "a/../b", "c/./d", "c/d", "e//f", "g/", "x", "x/votes", ".", "..",
             "/votes", "/challenges", "/corroborations"]


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    chain = LocalChain(tmp_path_factory.mktemp("sdk-ids"))
    b = chain.builder(AGENT)
    chain.block([b.submit(chain.next_nonce(AGENT), mid, f"the memory called {mid!r}")
                 for mid in PATH_LIKE])
    assert all(chain.memory(mid) is not None for mid in PATH_LIKE)
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9")
    with served_api(settings) as url:
        yield url
    chain.close()


def test_path_like_ids_read_their_own_memory(base_url: str) -> None:
    with Client(base_url) as ml:
        for mid in PATH_LIKE:
            memory = ml.get_memory(mid)
            assert memory.id == mid and memory.content == f"the memory called {mid!r}"
        # the sub-resources of an id ending in a sub-resource's name are reached too
        assert ml.votes("x/votes") == [] and ml.votes("a/../b") == []
        assert ml.votes(".") == [] and ml.votes("..") == []
        assert ml.challenges("..") == [] and ml.corroborations(".") == []
        assert ml.votes("/votes") == [] and ml.corroborations("/challenges") == []
        # sent literally, "//votes" is the votes of no memory (the id "" is none)
        empty = httpx.get(f"{base_url}/v1/memories//votes")
        assert empty.status_code == 404 and empty.json()["name"] == "not_found"
        proven = httpx.get(f"{base_url}/v1/memories/x%2Fvotes", params={"prove": "maybe"})
        assert proven.status_code == 422
        assert proven.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize("sub", ["votes", "challenges", "corroborations"])
def test_an_encoded_slash_keeps_a_sub_resource_s_name_in_the_id(base_url: str,
                                                                sub: str) -> None:
    """Over REST, "/v1/memories/x/votes" is the votes of "x"; "x%2Fvotes" is memory
    "x/votes", with the same JSON as any memory read."""
    plain = httpx.get(f"{base_url}/v1/memories/x").json()
    if sub == "votes":
        whole = httpx.get(f"{base_url}/v1/memories/x%2F{sub}")
        assert whole.status_code == 200 and whole.json()["id"] == "x/votes"
        assert whole.json().keys() == plain.keys()
        assert httpx.get(f"{base_url}/v1/memories/x/{sub}").json()["votes"] == []
    else:  # no such memory: a 404 for that id, not the list of "x"
        missing = httpx.get(f"{base_url}/v1/memories/x%2F{sub}")
        assert missing.status_code == 404 and f"x/{sub}" in missing.json()["detail"]
        assert httpx.get(f"{base_url}/v1/memories/x/{sub}").json()["memory_id"] == "x"


@pytest.mark.parametrize("mid", [".", ".."])
def test_the_server_reads_a_dot_id_sent_as_percent_2e(base_url: str, mid: str) -> None:
    """What the SDK sends for an id that is a dot segment: the server decodes %2E back
    and routes it to that memory (and its sub-resources), not to the list or /v1."""
    sent = mid.replace(".", "%2E")
    doc = httpx.get(f"{base_url}/v1/memories/{sent}").json()
    assert doc["id"] == mid and doc["content"] == f"the memory called {mid!r}"
    assert httpx.get(f"{base_url}/v1/memories/{sent}/votes").json()["memory_id"] == mid


def test_async_client_reads_path_like_ids(base_url: str) -> None:
    ids = ("a/../b", "c/./d", ".", "..")

    async def run() -> list[str]:
        async with AsyncClient(base_url) as ml:
            assert await ml.votes("..") == []
            return [(await ml.get_memory(mid)).id for mid in ids]
    assert asyncio.run(run()) == list(ids)


def test_no_page_is_read_beyond_max_items(base_url: str) -> None:
    asked: list[str] = []
    transport = httpx.HTTPTransport()

    class Counting(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            asked.append(str(request.url))
            return transport.handle_request(request)

    with Client(base_url, transport=Counting()) as ml:
        assert len(list(ml.list_memories(page_size=4, max_items=4, status="proposed"))) == 4
        assert len(asked) == 1
        assert len(list(ml.list_memories(page_size=4, max_items=5, status="proposed"))) == 5
        assert len(asked) == 3
        assert len(list(ml.list_memories(page_size=4, status="proposed"))) == len(PATH_LIKE)
        assert len(asked) == 3 + -(-len(PATH_LIKE) // 4)  # every page of 4 once


def test_proposals_follow_every_page() -> None:
    pages = {None: ([{"id": f"p-{i:03d}"} for i in range(500)], "p-499"),
             "p-499": ([{"id": "p-500"}], None)}

    def node(request: httpx.Request) -> httpx.Response:
        items, after = pages[request.url.params.get("cursor")]
        return httpx.Response(200, json={"items": items, "next_cursor": after})

    with Client("http://node", transport=httpx.MockTransport(node)) as ml:
        assert [p["id"] for p in ml.proposals()][-2:] == ["p-499", "p-500"]

    async def run() -> list[dict[str, Any]]:
        async with AsyncClient("http://node",
                                        transport=httpx.MockTransport(node)) as aml:
            return await aml.proposals()
    assert len(asyncio.run(run())) == 501
