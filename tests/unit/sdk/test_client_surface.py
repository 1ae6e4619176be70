"""The SDK's public methods take one or two natural positional arguments, then keyword-only
ones, and refuse an unknown keyword by the public method's own name (a typo in a recall
filter named an internal method before); a stopped node is named and how to start one."""

from __future__ import annotations

import asyncio
import inspect
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from memledger.sdk import AsyncClient, Client, MemLedgerConnectionError

#: Public methods whose third positional parameter callers already pass by position.
MORE_POSITIONAL = {"__init__": 3, "grant": 3}
#: The one generic write, whose keywords are the transaction kind's fields (checked there).
GENERIC = {"send"}


def _refuse_io(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"no request expected, got {request.url}")


def _methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {name: member for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") or name == "__init__"}


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_positional_then_keyword_only(cls: type) -> None:
    for name, method in _methods(cls).items():
        params = list(inspect.signature(method).parameters.values())[1:]  # not self
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert len(positional) <= MORE_POSITIONAL.get(name, 2), (name, positional)
        if name not in GENERIC:
            assert all(p.kind is not p.VAR_KEYWORD for p in params), name


def test_unknown_keyword_names_the_public_method() -> None:
    with Client("http://node.invalid", transport=httpx.MockTransport(_refuse_io)) as ml:
        calls: list[tuple[str, Callable[[], object]]] = [
            ("recall", lambda: ml.recall("q", tagz=["x"])),  # type: ignore[call-arg]
            ("search", lambda: ml.search("q", domian="d")),  # type: ignore[call-arg]
            ("list_memories", lambda: ml.list_memories(stauts="committed")),  # type: ignore[call-arg]
            ("memory_page", lambda: ml.memory_page(tag="x")),  # type: ignore[call-arg]
            ("submit", lambda: ml.submit(None, "c", tag=["x"])),  # type: ignore[call-arg]
        ]
        for name, call in calls:
            with pytest.raises(TypeError, match=rf"^Client\.{name}\(\) got an unexpected"):
                call()


def test_unknown_keyword_names_the_public_method_async() -> None:
    async def run() -> None:
        async with AsyncClient("http://node.invalid",
                               transport=httpx.MockTransport(_refuse_io)) as ml:
            with pytest.raises(TypeError, match=r"^AsyncClient\.recall\(\) got an unexpected"):
                await ml.recall("q", tagz=["x"])  # type: ignore[call-arg]
            with pytest.raises(TypeError, match=r"^AsyncClient\.search\(\) got an unexpected"):
                ml.search("q", domian="d")  # type: ignore[call-arg]
            with pytest.raises(TypeError,
                               match=r"^AsyncClient\.list_memories\(\) got an unexpected"):
                ml.list_memories(stauts="committed")  # type: ignore[call-arg]

    asyncio.run(run())


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_stopped_node_is_named_with_how_to_start_one() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with Client(url) as ml, pytest.raises(MemLedgerConnectionError) as info:
        ml.status()
    message = str(info.value)
    assert message.startswith(f"cannot reach {url}: ConnectError")
    assert "`memledger start`" in message and "`make run`" in message

    async def run() -> str:
        async with AsyncClient(url) as aml:
            try:
                await aml.status()
            except MemLedgerConnectionError as exc:
                return str(exc)
        raise AssertionError("a stopped node answered")

    async_message = asyncio.run(run())  # the async transport words the reason its own way
    assert async_message.startswith(f"cannot reach {url}: ConnectError")
    assert "`memledger start`" in async_message
