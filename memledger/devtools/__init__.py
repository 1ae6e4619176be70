"""Tools for developing memledger, shared by tests/ and bench/ (never used by a node).

- ``chain``: an in-process chain driving the ABCI app as CometBFT would (``LocalChain``)
  and deterministic keys (``seeded_key``);
- ``comet``: CometBFT homes for one node or an n-validator local net;
- ``postgres``: a throwaway private PostgreSQL server;
- ``ports``: free local TCP ports.

tests/support re-exports these under their old names.
"""
