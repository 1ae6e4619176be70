"""The private-domain steps of the sync client (app version 10+): sealing on submit,
opening on read, and the key work of make-private, grant and revoke.

Everything secret stays in this process: epoch keys are opened with the client's own
signing key from the sealed copies in the domain's record on chain, plaintext is sealed
before the tx is signed, and neither is ever logged.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nacl.exceptions import CryptoError
from nacl.signing import SigningKey

from memledger.protocol.codes import Code
from memledger.sdk.checks import derive_memory_id
from memledger.sdk.errors import MemLedgerError
from memledger.sdk.models import Memory
from memledger.sdk.private import (
    Keyring,
    current_epoch,
    members_of,
    new_epoch_key,
    open_content,
    seal_content,
    sealed_copies,
)

#: the chain's default shared domain: never private (while governance keeps it shared)
SHARED_BY_DEFAULT = frozenset({"general"})
#: refusals of a submit whose domain lookup was one block behind: seal again, send again
RESEAL_CODES = frozenset({Code.PRIVATE_CONTENT_NOT_SEALED, Code.PRIVATE_EPOCH_NOT_CURRENT})
#: GET a domain's record: (path, params) -> the proof document
Fetch = Callable[[str, dict[str, str]], Any]
#: the verifying decoder of a proof document, when the client has a trust root
Verify = Callable[[str, str, Any], tuple[Any, int]] | None


def domain_query(domain: str, fresh: bool) -> dict[str, str]:
    """Query of GET /v1/proofs/domain: at the latest height, or the newest settled one."""
    return {"id": domain} if fresh else {"id": domain, "fresh": "false"}


class PrivateDomains:
    """Per client: its keyring and the domain records it read."""

    def __init__(self, key: SigningKey | None, fetch: Fetch | None, verify: Verify) -> None:
        self.ring = Keyring(key)
        self._key = key
        self._fetch = fetch
        self._verify = verify
        #: private domains this client has seen (local recall indexes these)
        self.seen: set[str] = set()
        self._tried: set[tuple[str, int]] = set()  # epochs no fresh record opened
        self._given: dict[str, dict[str, Any] | None] = {}

    def give(self, domain: str, record: dict[str, Any] | None) -> None:
        """A domain record fetched by the caller (the async client), used by the next
        step that needs it instead of a fetch of its own."""
        self._given[domain] = record

    def record(self, domain: str, fresh: bool = True) -> dict[str, Any] | None:
        """The domain's record from the chain: verified when the client has a trust root
        (use one for private domains: an unverified node could claim a domain is public
        and see the next write's plaintext refused by consensus only after it saw it).
        `fresh=False` reads it at the newest settled height, which verifies without
        waiting for the next block (see `seal`)."""
        if domain in self._given:
            return self._given.pop(domain)
        if self._fetch is None:
            raise LookupError(f"no record of domain {domain!r} given")
        try:
            doc = self._fetch("/v1/proofs/domain", domain_query(domain, fresh))
        except MemLedgerError as err:
            if self._verify is not None or err.status != 404:
                raise
            return None  # a node without proofs: unverified reads take it as not private
        return self.decode(domain, doc)

    def decode(self, domain: str, doc: Any) -> dict[str, Any] | None:
        """A proof document's domain record (checked when there is a trust root)."""
        if self._verify is not None:
            value, _ = self._verify("domain", domain, doc)
            return value if isinstance(value, dict) else None
        raw = (doc.get("record") or {}).get("value") if isinstance(doc, dict) else None
        if not raw:
            return None
        found: dict[str, Any] = json.loads(base64.b64decode(raw))
        return found

    def current(self, domain: str, fresh: bool = True) -> tuple[int, dict[str, Any] | None]:
        record = self.record(domain, fresh)
        epoch = current_epoch(record)
        self._tried = {t for t in self._tried if t[0] != domain}
        if epoch:
            self.seen.add(domain)
            self.ring.learn(domain, record)
        return epoch, record

    # --- writes ---------------------------------------------------------------------
    def seal(self, domain: str, memory_id: str | None, content: str, tags: Any,
             author: str, fresh: bool = False) -> tuple[str | None, str, int]:
        """(memory id, content to sign, epoch): unchanged outside private domains. The
        default shared domain is not looked up (a shared domain cannot be private).

        The domain is looked up at the newest settled height unless `fresh`: a write
        then waits for no block to verify it. A domain made private, or given a new
        epoch, in the newest block is refused by consensus (RESEAL_CODES); the client
        seals again from a fresh lookup and sends once more. That is the same race any
        write has with a domain turning private while it is in flight."""
        if domain in SHARED_BY_DEFAULT:
            return memory_id, content, 0
        epoch, _ = self.current(domain, fresh)
        if not epoch:
            return memory_id, content, 0
        if tags:
            raise MemLedgerError(f"domain {domain!r} is private: its memories carry no tags "
                                 "(tags are not sealed)", name="private_tags")
        key = self.ring.require(domain, epoch)
        # an id derived from the plaintext would let anyone test a guess of it
        mid = memory_id or derive_memory_id(author, domain, secrets.token_hex(16))
        return mid, seal_content(key, domain, epoch, mid, content), epoch

    def make_private_keys(self, domain: str, me: bytes) -> list[tuple[bytes, bytes]]:
        _, record = self.current(domain)
        members = {me, *(members_of(record) if record else [])}
        return sealed_copies(new_epoch_key(), members)

    def grant_keys(self, domain: str, grantee: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
        """(epoch, copies) handing `grantee` the current epoch key; (0, []) if public."""
        epoch, _ = self.current(domain)
        if not epoch:
            return 0, []
        return epoch, sealed_copies(self.ring.require(domain, epoch), [grantee])

    def revoke_keys(self, domain: str, grantee: bytes
                    ) -> tuple[int, list[tuple[bytes, bytes]]]:
        """(next epoch, copies of a fresh key for every member but `grantee`)."""
        epoch, record = self.current(domain)
        if not epoch or record is None:
            return 0, []
        remaining = [m for m in members_of(record) if m != grantee]
        return epoch + 1, sealed_copies(new_epoch_key(), remaining)

    # --- reads ----------------------------------------------------------------------
    def needs_record(self, memory: Memory) -> bool:
        """Whether opening `memory` would read its domain's record (the async client
        fetches it first and `give`s it)."""
        return (memory.sealed and self._key is not None and memory.epoch is not None
                and self.ring.get(memory.domain, memory.epoch) is None
                and (memory.domain, memory.epoch) not in self._tried)

    def open(self, memory: Memory) -> Memory:
        """The memory with its plaintext when this key can open it, else as served (its
        `sealed` is then True: a non-member sees ciphertext only)."""
        if not memory.sealed or memory.epoch is None or memory.content is None:
            return memory
        self.seen.add(memory.domain)
        key = self.ring.get(memory.domain, memory.epoch)
        if key is None and self._key is not None and (
                memory.domain, memory.epoch) not in self._tried:
            self.current(memory.domain)
            key = self.ring.get(memory.domain, memory.epoch)
            if key is None:
                self._tried.add((memory.domain, memory.epoch))
        if key is None:
            return memory
        try:
            return replace(memory, content=open_content(key, memory.domain, memory.epoch,
                                                        memory.id, memory.content))
        except (CryptoError, UnicodeDecodeError):
            return memory
