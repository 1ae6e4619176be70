"""No route of the REST API waits for a worker thread merely to be called.

FastAPI runs a sync (`def`) endpoint or dependency on a worker thread: a thread hop
and two interpreter-lock hand-offs per request. A sync dependency on POST /v1/memories
was ~13% of the REST process's samples under 64 SDK writers. Blocking work still goes to
threads, on purpose and in one hop (deps.read, deps.rpc_call)."""

from __future__ import annotations

import inspect

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from memledger.api import routes_export, routes_memories, routes_state, routes_status, routes_txs


def _is_async(call: object) -> bool:
    """A coroutine function, or an instance whose class's __call__ is one."""
    if inspect.iscoroutinefunction(call):
        return True
    dunder = "__call__"  # the method of an instance's class, not the instance's own
    return inspect.iscoroutinefunction(vars(type(call)).get(dunder))


def _sync_calls(dependant: Dependant) -> list[str]:
    found = []
    call = dependant.call
    if call is not None and not _is_async(call):
        found.append(getattr(call, "__qualname__", repr(call)))
    for sub in dependant.dependencies:
        found += _sync_calls(sub)
    return found


def test_every_route_and_dependency_is_async() -> None:
    sync = {}
    for module in (routes_txs, routes_memories, routes_state, routes_status, routes_export):
        for route in module.router.routes:
            if isinstance(route, APIRoute):
                calls = _sync_calls(route.dependant)
                if calls:
                    sync[f"{sorted(route.methods or ())} {route.path}"] = calls
    assert sync == {}
