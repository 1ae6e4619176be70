"""Offline verification of a bundle against a trusted header or genesis.

Nothing here talks to a node. The header line's light block must be the trusted header
itself (`PinnedRoot`: same height, same hash) or be signed by more than 2/3 of the
genesis validator set (`GenesisRoot`: valid while that set is unchanged); its commit
signatures are checked either way. Every memory line's two proofs must lead to that
header's app hash. The first line that fails is named, with its memory when it has one.
Trusting periods do not apply: a pinned hash is the reader's own decision, and a bundle
is an archive meant to be checked long after it was made (docs/EXPORT.md says what that
means for a genesis root).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import IO, Any

from memledger.protocol.proofs import record_key, verify_ops
from memledger.sdk.bundle.format import (
    FORMAT,
    MEMORY_FIELDS,
    BundleError,
    end_line,
    header_line,
    memory_line,
    ops_from,
    unb64,
)
from memledger.sdk.light.client import GenesisRoot, PinnedRoot, TrustRoot
from memledger.sdk.light.errors import VerificationError
from memledger.sdk.light.header import LightBlock, parse_light_block
from memledger.sdk.light.verify import check_self_consistent, verify_commit_full


@dataclass(frozen=True)
class VerifiedMemory:
    """One memory as its bundle proves it: the canonical record and content at `height`."""

    memory_id: str
    record: dict[str, Any]
    content: str
    chain_id: str
    height: int


@dataclass(frozen=True)
class BundleSummary:
    chain_id: str
    height: int
    count: int
    header_hash: str


def _json(raw: bytes, line: int) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(line, f"not a JSON line ({exc})") from None


def _check_header(raw: bytes, trust: TrustRoot) -> tuple[str, int, LightBlock]:
    doc = _json(raw, 1)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BundleError(1, f"not a {FORMAT} header line")
    chain_id, height, lb_doc = doc.get("chain_id"), doc.get("height"), doc.get("light_block")
    if not isinstance(chain_id, str) or isinstance(height, bool) or not isinstance(height, int) \
            or not isinstance(lb_doc, dict) or set(doc) != {"format", "chain_id", "height",
                                                             "light_block"}:
        raise BundleError(1, "header line lacks chain_id, height or light_block")
    try:
        lb = parse_light_block(lb_doc.get("signed_header"), lb_doc.get("validators"))
    except VerificationError as exc:
        raise BundleError(1, f"light block: {exc}") from None
    if header_line(chain_id, height, lb) != raw:
        raise BundleError(1, "header line is not in canonical form (altered)")
    if lb.header.chain_id != chain_id or lb.height != height + 1:
        raise BundleError(1, f"light block is header {lb.height} of {lb.header.chain_id!r}, "
                             f"not header {height + 1} of {chain_id!r}")
    try:
        _trust(lb, trust)
        check_self_consistent(chain_id, lb)
        verify_commit_full(chain_id, lb.validators, lb.header, lb.commit)
    except VerificationError as exc:
        raise BundleError(1, f"header {lb.height}: {exc}") from None
    return chain_id, height, lb


def _trust(lb: LightBlock, trust: TrustRoot) -> None:
    if isinstance(trust, PinnedRoot):
        if trust.height != lb.height:
            raise BundleError(1, f"the bundle is proven by header {lb.height}; the trusted "
                                 f"header is {trust.height}: pin header {lb.height}'s hash")
        if lb.header.hash() != trust.hash:
            raise BundleError(1, f"header {lb.height} of chain {lb.header.chain_id!r} does not "
                                 "hash to the trusted hash (another chain, or altered)")
        return
    assert isinstance(trust, GenesisRoot)
    if lb.header.chain_id != trust.chain_id:
        raise BundleError(1, f"the bundle is from chain {lb.header.chain_id!r}, not "
                             f"{trust.chain_id!r}")
    if lb.header.validators_hash != trust.validators.hash():
        raise BundleError(1, f"header {lb.height} is not signed by the genesis validator set "
                             "(it changed since, or altered): verify with --trust HEIGHT:HASH")


_RECORD = re.compile(rb'"record":"([A-Za-z0-9+/=]*)"')
_ID = re.compile(rb'"id":"([^"\\]*)"')


def _record_id(record: bytes) -> str | None:
    try:
        ident = json.loads(record).get("id")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    return ident if isinstance(ident, str) and ident else None


def name_of(raw: bytes, app_hash: bytes) -> str | None:
    """Best-effort id of the memory an altered line is about, to name it. When the
    `id` field and the id inside the record differ, one was altered: the record's id
    is the memory's if the record still proves under it. A line that is no longer JSON
    was altered outside its record when the record still decodes (one changed byte)."""
    field = _ID.search(raw)
    ident = field.group(1).decode(errors="replace") if field is not None else None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        found = _RECORD.search(raw)
        try:
            rid = _record_id(base64.b64decode(found.group(1), validate=True)) if found else None
        except binascii.Error:
            rid = None
        return rid or ident
    rid = None
    try:
        record = unb64(doc["record"])
        rid = _record_id(record)
        if rid is not None and rid != doc.get("id") and ident is not None and verify_ops(
                app_hash, record_key("/memory", rid.encode()), record,
                ops_from(doc["proof"]["memory"])):
            return rid
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return ident or rid


def _memory(raw: bytes, line: int, n: int, previous: str | None, app_hash: bytes,
            chain_id: str, height: int) -> VerifiedMemory:
    try:
        return _checked_memory(raw, line, n, previous, app_hash, chain_id, height)
    except BundleError as exc:
        name = name_of(raw, app_hash)
        if name is None or name == exc.memory_id:
            raise
        raise BundleError(exc.line, exc.message, name) from None


def _checked_memory(raw: bytes, line: int, n: int, previous: str | None, app_hash: bytes,
                    chain_id: str, height: int) -> VerifiedMemory:
    doc = _json(raw, line)
    if not isinstance(doc, dict) or set(doc) != MEMORY_FIELDS:
        raise BundleError(line, "not a memory line")
    memory_id = doc["id"]
    if not isinstance(memory_id, str) or not memory_id:
        raise BundleError(line, "memory line has no id")
    if doc["n"] != n or (previous is not None and memory_id <= previous):
        raise BundleError(line, f"out of order (expected memory number {n}, after "
                                f"{previous!r})", memory_id)
    try:
        proof = doc["proof"]
        if not isinstance(proof, dict) or set(proof) != {"memory", "content"}:
            raise ValueError("proof is not {memory, content}")
        record, content = unb64(doc["record"]), unb64(doc["content"])
        mem_ops, content_ops = ops_from(proof["memory"]), ops_from(proof["content"])
    except ValueError as exc:
        raise BundleError(line, str(exc), memory_id) from None
    if memory_line(n, memory_id, record, content, mem_ops, content_ops) != raw:
        raise BundleError(line, "not in canonical form (altered)", memory_id)
    ident = memory_id.encode()
    if not verify_ops(app_hash, record_key("/memory", ident), record, mem_ops):
        raise BundleError(line, f"record proof does not match the app hash of height {height}",
                          memory_id)
    if not verify_ops(app_hash, record_key("/content", ident), content, content_ops):
        raise BundleError(line, f"content proof does not match the app hash of height {height}",
                          memory_id)
    try:
        rec = json.loads(record)
        text = content.decode()
    except (ValueError, UnicodeDecodeError) as exc:  # proven, so only a foreign chain's
        raise BundleError(line, f"proven record is unreadable: {exc}", memory_id) from None
    if not isinstance(rec, dict) or rec.get("content_hash") != sha256(content).hexdigest():
        raise BundleError(line, "content does not match its record's content_hash", memory_id)
    return VerifiedMemory(memory_id, rec, text, chain_id, height)


#: how the end line starts (keys are sorted, and no memory line has a `count`)
END_PREFIX = b'{"count":'


def read_bundle(stream: IO[bytes], trust: TrustRoot) -> Iterator[VerifiedMemory]:
    """Each memory of the bundle, verified, in order; BundleError at the first bad line
    (so nothing is yielded past it). Lines must end with a newline, the last one too."""
    lines = iter(stream)
    first = next(lines, b"")
    if not first.endswith(b"\n"):
        raise BundleError(1, "empty or truncated header line")
    chain_id, height, lb = _check_header(first[:-1], trust)
    n, previous, line = 0, None, 1
    for raw in lines:
        line += 1
        if not raw.endswith(b"\n"):
            raise BundleError(line, "truncated line (no newline at its end)")
        body = raw[:-1]
        if body.startswith(END_PREFIX):
            if body != end_line(n):
                raise BundleError(line, f"end line does not say {n} memories (truncated, "
                                        "or altered)")
            if next(lines, None) is not None:
                raise BundleError(line + 1, "a line after the end line")
            return
        memory = _memory(body, line, n, previous, lb.header.app_hash, chain_id, height)
        yield memory
        n, previous = n + 1, memory.memory_id
    raise BundleError(line + 1, f"the bundle ends after {n} memories without its end line "
                                "(truncated)")


def read_bundle_file(path: str | Path, trust: TrustRoot) -> Iterator[VerifiedMemory]:
    """`read_bundle` over a file."""
    with open(path, "rb") as stream:
        yield from read_bundle(stream, trust)


def bundle_count(path: str | Path) -> int:
    """The count an (unverified) bundle's end line states; -1 without one."""
    with open(path, "rb") as stream:
        stream.seek(0, 2)
        size = stream.tell()
        stream.seek(max(0, size - 256))
        last = stream.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    if not last.startswith(END_PREFIX):
        return -1
    try:
        return int(json.loads(last)["count"])
    except (ValueError, KeyError, TypeError):
        return -1


def bundle_params(domain: str | None, status: str | None, type_: str | None,
                  author: str | None, tags: Sequence[str]) -> dict[str, Any]:
    """The query string of GET /v1/export."""
    if isinstance(tags, str):
        raise TypeError("tags must be a list of strings, not a str")
    params: dict[str, Any] = {name: value for name, value in (
        ("domain", domain), ("status", status), ("type", type_), ("author", author))
        if value is not None}
    if tags:
        params["tag"] = list(tags)
    return params


def verify_bundle(path: str | Path, trust: TrustRoot) -> BundleSummary:
    """Verify a whole bundle file offline; returns what it holds, or raises BundleError."""
    with open(path, "rb") as stream:
        first = stream.readline()
        stream.seek(0)
        count = sum(1 for _ in read_bundle(stream, trust))
    header = json.loads(first)
    lb = parse_light_block(header["light_block"]["signed_header"],
                           header["light_block"]["validators"])
    return BundleSummary(header["chain_id"], header["height"], count, lb.header.hash().hex())


