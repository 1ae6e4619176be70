"""Which handler serves which message kind, at which app version (the version gate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from abci.codes import Code, TxError
from abci.context import TxContext
from abci.handlers import memory

Handler = Callable[[TxContext, Any], None]

#: kind -> (first app version that accepts it, handler)
_HANDLERS: dict[str, tuple[int, Handler]] = {
    "memory_submit": (1, memory.submit),
    "memory_vote": (1, memory.vote),
}


def register(kind: str, since_version: int, handler: Handler) -> None:
    """Used by handler modules of other tx families."""
    _HANDLERS[kind] = (since_version, handler)


def handler_for(kind: str, app_version: int) -> Handler:
    entry = _HANDLERS.get(kind)
    if entry is None or app_version < entry[0]:
        raise TxError(Code.UNKNOWN_MESSAGE, f"message kind {kind!r} not supported at v{app_version}")
    return entry[1]
