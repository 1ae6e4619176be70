"""The SDK (sync and async) over real HTTP against uvicorn serving a real projection."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from memledger.api import ApiSettings
from memledger.sdk import (
    AsyncClient,
    Client,
    MemLedgerConnectionError,
    MemLedgerError,
)
from tests.support.api import served_api
from tests.support.chain import LocalChain, seeded_key

AGENT = seeded_key("sdk-agent")
COUNT = 12


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    chain = LocalChain(tmp_path_factory.mktemp("sdk-reads"))
    b = chain.builder(AGENT)
    for i in range(COUNT):
        chain.block([b.submit(chain.next_nonce(AGENT), f"s-{i:02d}",
                              f"note {i} on {'otters' if i % 2 else 'badgers'}",
                              tags=["even" if i % 2 == 0 else "odd"])])
    voters = chain.validator_keys[2:]  # 70 of 100: committed (reads show committed ones)
    chain.block([chain.builder(k).vote(chain.next_nonce(k), f"s-{i:02d}")
                 for i in range(COUNT) for k in voters])
    settings = ApiSettings(db_url=chain.db_url, rpc_url="http://127.0.0.1:9")
    with served_api(settings) as url:
        yield url
    chain.close()


def test_iterates_all_pages(base_url: str) -> None:
    with Client(base_url) as ml:
        ids = [m.id for m in ml.list_memories(page_size=5)]
        assert ids == [f"s-{i:02d}" for i in range(COUNT)]
        assert [m.id for m in ml.list_memories(page_size=5, max_items=7)] == ids[:7]
        otters = [m.id for m in ml.search("otter", tags=["odd"])]
        assert otters == ids[1::2]
        # `limit`, as recall takes it: the most hits (it was a TypeError, sent as page size too)
        assert [m.id for m in ml.search("otter", limit=3, page_size=2)] == otters[:3]
        assert [m.id for m in ml.list_memories(limit=4, max_items=2)] == ids[:2]
        memory = ml.get_memory("s-03")
        assert memory.status == "committed" and memory.confidence == 0.9
        assert ml.account(bytes(AGENT.verify_key).hex()).last_nonce == COUNT
        assert len(ml.validators()) == 4


def test_errors_carry_the_problem(base_url: str) -> None:
    with Client(base_url) as ml:
        with pytest.raises(MemLedgerError) as info:
            ml.get_memory("missing")
        assert info.value.status == 404 and info.value.name == "not_found"
        with pytest.raises(MemLedgerError) as info:
            ml.memory_page(status="bogus")
        assert info.value.status == 422 and "status" in info.value.detail
        with pytest.raises(MemLedgerError, match="no signing key"):
            ml.vote("s-01")
    with Client("http://127.0.0.1:9") as dead, \
            pytest.raises(MemLedgerConnectionError, match="cannot reach"):
        dead.get_memory("s-01")


def test_async_client(base_url: str) -> None:
    async def run() -> list[str]:
        async with AsyncClient(base_url) as ml:
            got = [m.id async for m in ml.search("badgers", page_size=2)]
            assert [m.id async for m in ml.search("badgers", limit=3)] == got[:3]
            assert (await ml.get_memory("s-00")).content == "note 0 on badgers"
            votes = await ml.votes("s-00")
            assert len(votes) == 2
            return got

    assert asyncio.run(run()) == [f"s-{i:02d}" for i in range(0, COUNT, 2)]


BAD_HASHES = ["", "zz", "../status", "ab" * 32 + "/"]


def test_a_tx_hash_that_is_none_is_a_clear_error(base_url: str) -> None:
    """"" once asked for /v1/txs/ (a 307) and crashed parsing its empty body; "../status"
    reached another route."""
    with Client(base_url) as ml:
        for bad in BAD_HASHES:
            with pytest.raises(MemLedgerError) as info:
                ml.tx(bad)
            assert info.value.name == "invalid_tx_hash" and repr(bad) in info.value.detail
        with pytest.raises(MemLedgerError) as info:  # a well-formed one is asked for
            ml.tx("ab" * 32)
        assert info.value.name == "cometbft_unavailable"  # (none runs in this test)

    async def run() -> list[str]:
        names = []
        async with AsyncClient(base_url) as aml:
            for bad in BAD_HASHES:
                with pytest.raises(MemLedgerError) as info:
                    await aml.tx(bad)
                names.append(info.value.name)
        return names
    assert asyncio.run(run()) == ["invalid_tx_hash"] * len(BAD_HASHES)


def test_a_redirect_is_an_error_not_an_answer(base_url: str) -> None:
    """The SDK follows no redirect: a 3xx is raised, not parsed as a document."""
    with Client(base_url) as ml, pytest.raises(MemLedgerError) as info:
        ml._request("GET", "/v1/txs/")  # Starlette redirects the trailing slash
    assert info.value.status == 307
