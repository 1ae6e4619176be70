"""The SDK checks what it puts in a URL and reads answers by the fields it knows (sync and
async): a public key that is no key is refused before any request (it was put in the path
as it was: "../status" asked GET /v1/status), and a field a newer node adds to an
account, vote, corroboration or validator is ignored, not a TypeError."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memledger.sdk import (
    AsyncClient,
    Client,
    MemLedgerError,
    cocommit_core,
    txbuilder,
)
from tests.support.chain import seeded_key

KEY = seeded_key("inputs-agent")
PK = bytes(KEY.verify_key).hex()
PK_B = bytes(seeded_key("inputs-coauthor").verify_key)
NEW = {"added_by_a_newer_node": 1}
ANSWERS: dict[str, Any] = {
    f"/v1/accounts/{PK}": {"public_key": PK, "last_nonce": 4, "next_nonce": 5, "height": 9,
                           "source": "app", **NEW},
    "/v1/memories/m-1/votes": {"votes": [{"voter": PK, "decision": "accept", "height": 3,
                                          "reason": None, **NEW}]},
    "/v1/memories/m-1/corroborations": {"corroborations": [{"agent": PK, "height": 4, **NEW}]},
    "/v1/validators": {"validators": [{"public_key": PK, "address": "ab", "power": 10,
                                       **NEW}]},
}


class Recorder:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        doc = self.answers.get(request.url.path)
        return httpx.Response(200 if doc is not None else 404,
                              json=doc if doc is not None else {"name": "not_found"})


def _both(answers: dict[str, Any], call: Callable[[Any], Any]) -> tuple[Any, Any, list[str]]:
    """`call` on a sync and on an async client; their results and the paths requested."""
    rec = Recorder(answers)
    with Client("http://node", transport=httpx.MockTransport(rec)) as ml:
        sync = call(ml)

    async def run() -> Any:
        async with AsyncClient("http://node",
                                        transport=httpx.MockTransport(rec)) as aml:
            return await call(aml)

    return sync, asyncio.run(run()), rec.paths


@pytest.mark.parametrize("bad", ["../status", "../validators", "abc?prove=true", PK[:-1],
                                 PK + "0", "g" * 64, f"{PK}/../x", 7])
def test_a_public_key_that_is_no_key_is_refused_before_sending(bad: Any) -> None:
    rec = Recorder(ANSWERS)
    with Client("http://node", transport=httpx.MockTransport(rec)) as ml, \
            pytest.raises(MemLedgerError) as err:
        ml.account(bad)
    assert err.value.name == "invalid_public_key" and repr(bad) in str(err.value)

    async def run() -> None:
        async with AsyncClient("http://node",
                                        transport=httpx.MockTransport(rec)) as aml:
            await aml.account(bad)

    with pytest.raises(MemLedgerError) as aerr:
        asyncio.run(run())
    assert aerr.value.name == "invalid_public_key"
    assert rec.paths == []


def test_fields_a_newer_node_adds_are_ignored() -> None:
    sync, asyn, _ = _both(ANSWERS, lambda ml: ml.account(PK))
    assert sync == asyn and (sync.last_nonce, sync.next_nonce, sync.height) == (4, 5, 9)
    sync, asyn, _ = _both(ANSWERS, lambda ml: ml.votes("m-1"))
    assert sync == asyn and [v.decision for v in sync] == ["accept"]
    sync, asyn, _ = _both(ANSWERS, lambda ml: ml.corroborations("m-1"))
    assert sync == asyn and [c.height for c in sync] == [4]
    sync, asyn, _ = _both(ANSWERS, lambda ml: ml.validators())
    assert sync == asyn and [v.power for v in sync] == [10]


def test_an_answer_missing_fields_is_a_clear_error() -> None:
    answers = {f"/v1/accounts/{PK}": {"public_key": PK}}
    for which in (0, 1):
        with pytest.raises(MemLedgerError) as err:
            _both(answers, lambda ml: ml.account(PK)) if which == 0 else asyncio.run(
                AsyncClient("http://node", transport=httpx.MockTransport(
                    Recorder(answers))).account(PK))
        assert err.value.name == "unexpected_response" and "Account" in str(err.value)


# --- what a write is given: refused before signing, as MemLedgerError --------------------

def _refused(call: Callable[[Any], Any]) -> MemLedgerError:
    """`call`'s MemLedgerError on a sync and an async client with a key (the same name
    from both), having sent nothing."""
    rec = Recorder({})
    names = []
    with Client("http://node", key=KEY, chain_id="c",
                         transport=httpx.MockTransport(rec)) as ml, \
            pytest.raises(MemLedgerError) as err:
        call(ml)
    names.append(err.value.name)

    async def run() -> None:
        async with AsyncClient("http://node", key=KEY, chain_id="c",
                                        transport=httpx.MockTransport(rec)) as aml:
            await call(aml)

    with pytest.raises(MemLedgerError) as aerr:
        asyncio.run(run())
    assert aerr.value.name == err.value.name
    assert rec.paths == []
    return err.value


def test_a_str_for_tags_is_refused_not_split_into_letters() -> None:
    err = _refused(lambda ml: ml.submit("m-1", "tagged with a string", tags="abc"))
    assert err.name == "invalid_tags" and "tags=['abc']" in str(err)
    assert _refused(lambda ml: ml.submit("m-1", "a number tag", tags=["a", 7])).name == \
        "invalid_tags"


@pytest.mark.parametrize(("memory_id", "tags", "name"), [
    ("m-1", None, "invalid_tags"), ("m-1", 7, "invalid_tags"), (7, (), "invalid_memory_id"),
])
def test_tags_or_an_id_of_another_type_are_refused_not_a_type_error(
        memory_id: Any, tags: Any, name: str) -> None:
    assert _refused(lambda ml: ml.submit(memory_id, "odd inputs", tags=tags)).name == name


@pytest.mark.parametrize("read", [
    lambda ml: ml.memory_page(tags="infra"),
    lambda ml: ml.recall("staging port", tags="infra"),
    lambda ml: ml.memory_page(tags=["infra", 7]),
])
def test_a_str_for_tags_in_a_read_is_refused_not_split_into_letters(
        read: Callable[[Any], Any]) -> None:
    # sent as tag=i&tag=n&tag=f&tag=r&tag=a, it matched nothing: an empty answer, no error
    assert _refused(read).name == "invalid_tags"
    with Client("http://node", transport=httpx.MockTransport(Recorder({}))) as ml, \
            pytest.raises(MemLedgerError, match="invalid_tags"):
        list(ml.search("staging port", tags="infra"))


@pytest.mark.parametrize(("content", "tags", "name"), [
    ("we agreed on the cache", "infra", "invalid_tags"),
    ("we agreed on the cache", ["infra", 7], "invalid_tags"),
    ("not text \udc80", (), "invalid_content"),
])
def test_a_cocommit_core_the_ledger_would_mistake_is_refused_before_signing(
        content: str, tags: Any, name: str) -> None:
    # tags="infra" was signed as its letters: a co-commit tagged a, f, i, n, r, committed
    with pytest.raises(MemLedgerError) as err:
        cocommit_core("c", content, [PK_B, bytes(KEY.verify_key)], tags=tags)
    assert err.value.name == name


def test_a_cocommit_core_with_a_list_of_tags_is_the_builders() -> None:
    keys = [PK_B, bytes(KEY.verify_key)]
    assert cocommit_core("c", "we agreed", keys, tags=["b", "a"], agreement_nonce=2) == \
        txbuilder.cocommit_core("c", "we agreed", keys, tags=["b", "a"], agreement_nonce=2)


@pytest.mark.parametrize(("write", "name"), [
    (lambda ml: ml.vote("m-1", "yes"), "invalid_decision"),
    (lambda ml: ml.vote("m-1", "Accept"), "invalid_decision"),
    (lambda ml: ml.grant("ops", PK, "admin"), "invalid_level"),
])
def test_a_decision_or_level_not_among_the_choices_is_refused_not_a_key_error(
        write: Callable[[Any], Any], name: str) -> None:
    err = _refused(write)  # a bare KeyError('yes') from the tx builder
    assert err.name == name and "must be one of" in str(err)


@pytest.mark.parametrize("confidence", [2, 900_000, 1.5, -0.1, float("nan"), True, "0.9"])
def test_a_confidence_that_is_no_fraction_is_refused(confidence: Any) -> None:
    err = _refused(lambda ml: ml.submit("m-1", "confident content", confidence=confidence))
    assert err.name == "invalid_confidence" and "fraction from 0 to 1" in str(err)


def test_confidence_0_and_1_are_sent() -> None:
    posted: list[bytes] = []

    def answer(request: httpx.Request) -> httpx.Response:
        posted.append(request.content)
        return httpx.Response(200, json={"status": "included", "hash": "00" * 32, "code": 0,
                                         "height": 2})

    with Client("http://node", key=KEY, chain_id="c",
                         transport=httpx.MockTransport(answer)) as ml:
        for confidence in (0, 1, 0.5):
            ml.submit(None, f"sure {confidence}", confidence=confidence,
                      tags=["x", "y"])
    assert len(posted) == 3


@pytest.mark.parametrize("grantee", ["zz", PK[:-2], bytes(31), b"\x00" * 33, None])
def test_a_grantee_that_is_no_key_is_refused(grantee: Any) -> None:
    err = _refused(lambda ml: ml.grant("team", grantee))
    assert err.name == "invalid_public_key" and "grantee" in str(err)
    assert _refused(lambda ml: ml.revoke("team", grantee)).name == "invalid_public_key"


def test_content_with_a_lone_surrogate_is_refused_naming_where() -> None:
    err = _refused(lambda ml: ml.submit("m-1", "caf\udce9 au lait"))
    assert err.name == "invalid_content"
    assert "lone surrogate U+DCE9 at character 3" in str(err)
