"""Client and AsyncClient offer the same public surface.

Every public method of one exists on the other with the same parameters (names, kinds,
defaults, annotations); the only differences are the ones asyncio itself imposes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from memledger.sdk import AsyncClient, Client

#: sync name -> async name: closing, and context management, are spelled by the protocol.
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}
#: A property cannot await, so the async client asks for the chain id with a call.
SYNC_PROPERTY_ASYNC_METHOD = {"chain_id"}
#: Annotations that name each client's own httpx transport type.
TRANSPORT_PARAMS = {"transport"}


def _public(cls: type) -> dict[str, Any]:
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and name not in RENAMED and name not in RENAMED.values()}


def _params(func: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    sig = inspect.signature(func)
    return [(p.name, p.kind, p.default,
             None if p.name in TRANSPORT_PARAMS else p.annotation)
            for p in sig.parameters.values()]


def test_same_public_names() -> None:
    sync, aio = set(_public(Client)), set(_public(AsyncClient))
    assert sync == aio, f"only sync: {sorted(sync - aio)}; only async: {sorted(aio - sync)}"
    for sync_name, async_name in RENAMED.items():
        assert hasattr(Client, sync_name) and hasattr(AsyncClient, async_name)


def test_same_signatures() -> None:
    sync, aio = _public(Client), _public(AsyncClient)
    for name, member in sync.items():  # same names: test_same_public_names
        if name in SYNC_PROPERTY_ASYNC_METHOD:
            assert isinstance(member, property) and inspect.iscoroutinefunction(aio[name])
            continue
        if isinstance(member, property):
            assert isinstance(aio[name], property), name
            continue
        assert _params(member) == _params(aio[name]), name
    for sync_name, async_name in RENAMED.items():
        assert _params(getattr(Client, sync_name)) == \
            _params(getattr(AsyncClient, async_name)), sync_name
    assert _params(Client.__init__) == _params(AsyncClient.__init__)


def test_async_methods_are_awaitable() -> None:
    """Everything that does I/O is a coroutine; iterators are async iterators."""
    iterators = {"list_memories", "search"}
    for name, member in _public(AsyncClient).items():
        if isinstance(member, property) or name in iterators:
            continue
        assert inspect.iscoroutinefunction(member), name
    assert inspect.isasyncgenfunction(AsyncClient.list_memories)
