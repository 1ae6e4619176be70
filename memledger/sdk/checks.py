"""Caller input checked before anything is signed: each refusal names what was wrong."""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memledger.protocol.codes import Code
from memledger.protocol.limits import MAX_CONTENT_BYTES
from memledger.sdk.errors import MemLedgerError, invalid
from memledger.sdk.paths import PUBLIC_KEY_HEX
from memledger.sdk.txbuilder import cocommit_core as build_cocommit_core
from memledger.sdk.txbuilder import confidence_to_ppm

__all__ = ["check_content", "check_content_size", "checked_tags", "cocommit_core",
           "derive_memory_id", "fraction_to_ppm", "grantee_bytes", "MemoryFilter",
           "most_items", "one_of", "Statuses"]


def check_content_size(content: str) -> None:
    """Refuse content the ledger would refuse, before signing, naming its size and the
    limit (sent anyway, a huge content would be refused as an oversized request body)."""
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise MemLedgerError(
            f"content_too_large (code {int(Code.CONTENT_TOO_LARGE)}): content is {size} "
            f"bytes ({size / 1024:.0f} KiB); a memory's content is at most "
            f"{MAX_CONTENT_BYTES} bytes ({MAX_CONTENT_BYTES >> 10} KiB)",
            code=int(Code.CONTENT_TOO_LARGE), name="content_too_large",
            detail=f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES} bytes")


def check_content(content: str) -> None:
    """Refuse content that cannot be sent, before signing: text UTF-8 cannot carry (a lone
    surrogate, e.g. from command-line bytes that are not UTF-8; it failed deep in the
    encoder as a UnicodeEncodeError) or too large (check_content_size)."""
    if not isinstance(content, str):
        invalid("invalid_content", f"content must be a str, got {type(content).__name__}")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError as exc:
        invalid("invalid_content", f"content holds a lone surrogate "
                                   f"U+{ord(content[exc.start]):04X} at character {exc.start} "
                                   "(counting from 0), which is not text: UTF-8 cannot carry it")
    check_content_size(content)


def checked_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The tags as a tuple of strings: a str given for tags would be taken as its letters
    ("abc" as a, b, c)."""
    if isinstance(tags, (str, bytes)):
        invalid("invalid_tags", f"tags must be a list of tags, got the {type(tags).__name__} "
                                f"{tags!r} (write tags=[{tags!r}])")
    if not isinstance(tags, Iterable):  # None or 7 was a bare TypeError
        invalid("invalid_tags", f"tags must be a list of tags, got {tags!r}")
    out = tuple(tags)
    odd = next((t for t in out if not isinstance(t, str)), None)
    if odd is not None:
        invalid("invalid_tags", f"each tag must be a str, got {odd!r}")
    return out


def fraction_to_ppm(confidence: float) -> int:
    """A confidence given as a fraction from 0 to 1 (0.9: 90%), in the ledger's parts per
    million. Anything else is refused: an int above 1 silently meant parts per million (2
    was 0.0002%), and 1.5 was signed only to be refused by the ledger."""
    if (isinstance(confidence, bool) or not isinstance(confidence, numbers.Real)
            or not 0 <= confidence <= 1):
        invalid("invalid_confidence", "confidence is a fraction from 0 to 1 (0.9 means 90%), "
                                      f"got {confidence!r}")
    return confidence_to_ppm(float(confidence))


def cocommit_core(chain_id: str, content: str, coauthors: Sequence[bytes], *,
                  tags: Sequence[str] = (), **fields: Any) -> bytes:
    """The co-commit core every coauthor signs (`memledger.sdk.txbuilder.cocommit_core`),
    refusing before anything is signed what `submit` refuses: content that is not text or
    too large, and a str for tags (it was signed as its letters: tags="infra" committed a
    co-commit tagged a, f, i, n, r)."""
    check_content(content)
    return build_cocommit_core(chain_id, content, coauthors, tags=checked_tags(tags), **fields)


def one_of(name: str, value: str, choices: Mapping[str, Any]) -> str:
    """`value` if it is one of `choices` (a vote's decision, a grant's level), else
    MemLedgerError `invalid_<name>` naming them (it was a bare KeyError from the builder)."""
    if not isinstance(value, str) or value not in choices:
        invalid(f"invalid_{name}", f"{name} must be one of {'|'.join(choices)}, got {value!r}")
    return value


def derive_memory_id(author_hex: str, domain: str, content: str) -> str:
    """A stable id for (author, domain, content), so a retried submit is idempotent."""
    digest = hashlib.sha256(f"{author_hex}\0{domain}\0{content}".encode()).hexdigest()
    return f"m-{digest[:32]}"


def grantee_bytes(grantee: bytes | str) -> bytes:
    """A grantee's public key: 32 bytes, or 64 hex digits (else MemLedgerError, where
    "zz" raised a bare ValueError)."""
    if isinstance(grantee, bytes) and len(grantee) == 32:
        return grantee
    if isinstance(grantee, str) and PUBLIC_KEY_HEX.fullmatch(grantee) is not None:
        return bytes.fromhex(grantee)
    invalid("invalid_public_key", f"grantee {grantee!r} is not a public key (64 hex digits "
                                  "or 32 bytes, an Ed25519 key)")


#: A read's status filter: one status, several, or None (the safe default).
Statuses = str | Sequence[str] | None


@dataclass(frozen=True)
class MemoryFilter:
    """What a listing, search or recall keeps: memories matching every field given."""

    domain: str | None = None
    #: one status or several; None: the node's safe default, committed only (challenged
    #: too with include_disputed); deprecated and superseded only when named here
    status: Statuses = None
    type: str | None = None
    author: str | None = None
    tags: Sequence[str] = ()
    include_disputed: bool = False

    def params(self, *, q: str | None, mode: str | None, limit: int,
               cursor: str | None) -> dict[str, Any]:
        """The query string of GET /v1/memories (tags checked: a str would be sent as its
        letters, matching nothing)."""
        params: dict[str, Any] = {"limit": limit}
        status = self.status
        if status is not None and not isinstance(status, str):
            status = list(dict.fromkeys(status)) or None
        for name, value in (("domain", self.domain), ("status", status),
                            ("type", self.type), ("author", self.author), ("q", q),
                            ("cursor", cursor), ("mode", mode)):
            if value is not None:
                params[name] = value
        tags = checked_tags(self.tags)
        if tags:
            params["tag"] = list(tags)
        if self.include_disputed:
            params["include_disputed"] = "true"
        return params


def most_items(max_items: int | None, limit: int | None) -> int | None:
    """The most items a listing yields: `limit` is `max_items` by recall's name (passed on
    to the page request, it collided with the page size: a TypeError)."""
    if limit is None:
        return max_items
    return limit if max_items is None else min(max_items, limit)
