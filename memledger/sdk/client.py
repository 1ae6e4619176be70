"""The module the SDK's clients lived in before 0.3, kept so existing imports work.

New code imports from `memledger.sdk` (or `memledger`): `Client`, `AsyncClient`.
"""

from memledger.sdk import (
    Account,
    AsyncClient,
    AsyncMemLedgerClient,
    Client,
    Corroboration,
    MemLedgerClient,
    MemLedgerConnectionError,
    MemLedgerError,
    Memory,
    MemoryPage,
    NonceSource,
    ProvenAbsent,
    RetryPolicy,
    Status,
    TxReceipt,
    Validator,
    VerificationError,
    Vote,
    check_content,
    cocommit_core,
    derive_memory_id,
    sign_cocommit,
)

__all__ = [
    "Account", "AsyncClient", "AsyncMemLedgerClient", "Client", "Corroboration",
    "MemLedgerClient", "MemLedgerConnectionError", "MemLedgerError", "Memory", "MemoryPage",
    "NonceSource", "ProvenAbsent", "RetryPolicy", "Status", "TxReceipt", "Validator",
    "VerificationError", "Vote", "check_content", "cocommit_core", "derive_memory_id",
    "sign_cocommit",
]
