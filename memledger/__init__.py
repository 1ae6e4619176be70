"""memledger: a consensus-replicated memory ledger for AI agents.

The SDK's names are importable from here (`from memledger import Client, Agent`). They
load on first use, so importing a node-side package (`memledger.consensus`, ...) does not
import the SDK's HTTP stack, and importing `memledger` alone imports nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memledger.sdk import (
        Agent,
        AsyncClient,
        Client,
        MemLedgerConnectionError,
        MemLedgerError,
        Memory,
        ProvenAbsent,
        RetryPolicy,
        TxReceipt,
    )

__all__ = ["Agent", "AsyncClient", "Client", "MemLedgerConnectionError", "MemLedgerError",
           "Memory", "ProvenAbsent", "RetryPolicy", "TxReceipt"]


def __getattr__(name: str) -> Any:
    """The SDK's public names, imported from `memledger.sdk` when first asked for."""
    if name in __all__:
        return getattr(importlib.import_module("memledger.sdk"), name)
    raise AttributeError(f"module 'memledger' has no attribute {name!r}")
