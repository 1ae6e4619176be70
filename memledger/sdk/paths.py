"""REST paths built from caller input, checked first so no input reaches another route."""

from __future__ import annotations

import re
from urllib.parse import quote

from memledger.sdk.errors import MemLedgerError

__all__ = ["PUBLIC_KEY_HEX", "account_path", "quote_id", "tx_path"]

def quote_id(ident: str) -> str:
    """Percent-encode an id as one URL path segment. A '/' is sent as %2F (the server
    decodes it back): left as it is, an id such as "a/../b" would be cleaned to "b" by
    the HTTP client, and the node asked for another memory. For the same reason an id
    that is all "." or ".." is sent as %2E / %2E%2E: as a literal dot segment the HTTP
    client would drop it (and "..", the segment before it) from the path."""
    if ident in (".", ".."):
        return ident.replace(".", "%2E")
    return quote(ident, safe=":@")


TX_HASH = re.compile(r"[0-9a-fA-F]{64}")


def tx_path(tx_hash: str) -> str:
    """The path of one tx outcome, for a hash checked first: "" would ask for /v1/txs/
    (a redirect, no outcome) and "../status" for another route altogether."""
    if not isinstance(tx_hash, str) or TX_HASH.fullmatch(tx_hash) is None:
        detail = f"{tx_hash!r} is not a tx hash (64 hex digits, the SHA-256 of the tx)"
        raise MemLedgerError(f"invalid_tx_hash: {detail}", name="invalid_tx_hash",
                             detail=detail)
    return f"/v1/txs/{tx_hash}"


PUBLIC_KEY_HEX = re.compile(r"[0-9a-fA-F]{64}")


def account_path(public_key: str) -> str:
    """The path of one account, for a key checked first: put in the path as it is,
    "../status" would ask for another route (and its answer crash Account)."""
    if not isinstance(public_key, str) or PUBLIC_KEY_HEX.fullmatch(public_key) is None:
        detail = f"{public_key!r} is not a public key (64 hex digits, an Ed25519 key)"
        raise MemLedgerError(f"invalid_public_key: {detail}", name="invalid_public_key",
                             detail=detail)
    return f"/v1/accounts/{public_key}"
