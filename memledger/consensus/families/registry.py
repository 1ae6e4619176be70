"""Which handler serves which message kind, from which app version (the version gate)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memledger.consensus.families.access import handlers as access
from memledger.consensus.families.cocommit import handlers as cocommit
from memledger.consensus.families.context import TxContext
from memledger.consensus.families.disputes import handlers as disputes
from memledger.consensus.families.governance import handlers as gov
from memledger.consensus.families.memory import handlers as memory
from memledger.protocol.codes import Code, TxError

Handler = Callable[[TxContext, Any], None]

#: kind -> (first app version that accepts it, handler)
HANDLERS: dict[str, tuple[int, Handler]] = {
    "memory_submit": (1, memory.submit),
    "memory_vote": (1, memory.vote),
    "memory_challenge": (1, disputes.challenge),
    "memory_corroborate": (1, disputes.corroborate),
    "memory_reinstate": (1, disputes.reinstate),
    "cocommit_submit": (1, cocommit.submit),
    "access_grant": (1, access.grant),
    "access_revoke": (1, access.revoke),
    "gov_propose": (1, gov.propose),
    "gov_vote": (1, gov.vote),
    "gov_cancel": (1, gov.cancel),
}


def handler_for(kind: str, app_version: int) -> Handler:
    entry = HANDLERS.get(kind)
    if entry is None or app_version < entry[0]:
        raise TxError(
            Code.UNKNOWN_MESSAGE, f"message kind {kind!r} not supported at v{app_version}"
        )
    return entry[1]
