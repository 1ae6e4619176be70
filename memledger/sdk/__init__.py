"""The memledger SDK: sign locally, submit, read back, and verify reads against the chain.

    from memledger import Agent, Client

    with Client("http://127.0.0.1:26680", key=Agent.generate()) as ml:
        ml.submit(None, "the build cache lives in .cache/", tags=["infra"])
        for memory in ml.recall("build cache"):
            print(memory.id, memory.status)

Keys never leave the process: every transaction is built and signed here and sent as
bytes. Nonces are `max(time_ns, last + 1)` under a lock, so concurrent calls and process
restarts never reuse one without a server round trip (the protocol allows gaps).
Failures raise `MemLedgerError` carrying the server's problem (numeric `code`, `name`);
429 and 503 answers are first retried with backoff, honouring Retry-After (`RetryPolicy`);
a signer whose backlog is full waits for the chain instead of failing.

This package needs httpx, PyNaCl and protobuf only (and `memledger.protocol`): no node,
server or database code is imported (tests/unit/sdk/test_sdk_imports.py keeps it so).
"""

from memledger.sdk.aio import AsyncClient
from memledger.sdk.checks import check_content, cocommit_core, derive_memory_id
from memledger.sdk.errors import MemLedgerConnectionError, MemLedgerError, ProvenAbsent
from memledger.sdk.keys import Agent, KeyFileError, load_agent
from memledger.sdk.light.errors import VerificationError
from memledger.sdk.models import (
    Account,
    Corroboration,
    Memory,
    MemoryPage,
    Status,
    TxReceipt,
    Validator,
    Vote,
)
from memledger.sdk.retry import NonceSource, RetryPolicy
from memledger.sdk.sync import Client
from memledger.sdk.txbuilder import TxBuilder, sign_cocommit

#: The names before 0.3 (kept for existing callers; new code says Client / AsyncClient).
MemLedgerClient = Client
AsyncMemLedgerClient = AsyncClient

__all__ = [
    "Account", "Agent", "AsyncClient", "AsyncMemLedgerClient", "Client", "Corroboration",
    "KeyFileError", "MemLedgerClient", "MemLedgerConnectionError", "MemLedgerError", "Memory",
    "MemoryPage", "NonceSource", "ProvenAbsent", "RetryPolicy", "Status", "TxBuilder",
    "TxReceipt", "Validator", "VerificationError", "Vote", "check_content", "cocommit_core",
    "derive_memory_id", "load_agent", "sign_cocommit",
]
