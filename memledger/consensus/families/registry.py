"""Which handler serves which message kind, from which app version (the version gate).

The kinds, their first app versions and the name of each one's handler are rows of
`memledger.protocol.txkinds`; this module only finds each row's handler in its family's
`handlers` module. A new kind in an existing family needs no change here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from memledger.consensus.families.access import handlers as access
from memledger.consensus.families.cocommit import handlers as cocommit
from memledger.consensus.families.context import TxContext
from memledger.consensus.families.disputes import handlers as disputes
from memledger.consensus.families.governance import handlers as gov
from memledger.consensus.families.memory import handlers as memory
from memledger.protocol.codes import Code, TxError
from memledger.protocol.txkinds import TX_KINDS, TxKind

Handler = Callable[[TxContext, Any], None]

#: family name (a row's `family`) -> its handlers module
FAMILIES: Mapping[str, ModuleType] = {
    "memory": memory, "disputes": disputes, "cocommit": cocommit, "access": access,
    "governance": gov,
}


def _handler(kind: TxKind) -> Handler:
    """The row's handler; a row naming a family or function that does not exist fails at
    import, not on the first tx of that kind."""
    family = FAMILIES.get(kind.family)
    handler = getattr(family, kind.handler, None) if family is not None else None
    if not callable(handler):
        raise LookupError(f"tx kind {kind.name!r}: no handler {kind.handler!r} in family "
                          f"{kind.family!r}")
    return handler  # type: ignore[no-any-return]


#: kind -> (first app version that accepts it, handler)
HANDLERS: dict[str, tuple[int, Handler]] = {
    kind.name: (kind.since, _handler(kind)) for kind in TX_KINDS
}


def handler_for(kind: str, app_version: int) -> Handler:
    entry = HANDLERS.get(kind)
    if entry is None or app_version < entry[0]:
        raise TxError(
            Code.UNKNOWN_MESSAGE, f"message kind {kind!r} not supported at v{app_version}"
        )
    return entry[1]
