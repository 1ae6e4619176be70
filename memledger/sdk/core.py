"""State and request shapes the sync and async clients share (no I/O here)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from nacl.signing import SigningKey

from memledger.protocol.txkinds import TxFieldError, kind_named
from memledger.sdk.checks import check_content, checked_tags, derive_memory_id, fraction_to_ppm
from memledger.sdk.errors import MemLedgerError, invalid
from memledger.sdk.keys import Agent
from memledger.sdk.light.client import TrustRoot
from memledger.sdk.light.errors import ProofError, TrustError
from memledger.sdk.light.provider import Provider, RestProvider, RpcProvider
from memledger.sdk.light.reads import ReadVerifier
from memledger.sdk.models import Memory, TxReceipt
from memledger.sdk.retry import NonceSource, RetryPolicy
from memledger.sdk.txbuilder import TxBuilder

DEFAULT_URL = "http://127.0.0.1:26680"
#: Signs one write for a nonce: called again with a fresh nonce when the write is re-signed.
MakeTx = Callable[[TxBuilder, int], bytes]

#: Pause before the one re-read after a served-vs-proven difference (a Commit in flight).
SERVED_RETRY_S = 0.3

#: Record kinds of GET /v1/proofs/{kind} -> the ABCI query path whose key rule applies.
RECORD_KINDS = {"memory": "/memory", "content": "/content", "account": "/account",
                "domain": "/domain", "scope": "/scope", "proposal": "/proposal",
                "cocommit": "/cocommit", "validators": "/validators"}


def _signing_key(key: Agent | SigningKey | None) -> SigningKey | None:
    if key is None or isinstance(key, SigningKey):
        return key
    return key.signing_key


class ClientCore:
    """State and request shapes shared by the sync and async clients (no I/O here)."""

    def __init__(self, base_url: str, key: Agent | SigningKey | None, chain_id: str | None,
                 nonces: NonceSource | None = None, retry: RetryPolicy | None = None,
                 trust: TrustRoot | None = None, trust_store: Path | None = None,
                 light_rpc: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = _signing_key(key)
        self._chain_id = chain_id
        self._nonces = NonceSource() if nonces is None else nonces
        self._retry = RetryPolicy() if retry is None else retry
        # Verified reads (`verify=True`) trust `trust` (genesis or a pinned header). Light
        # blocks come from this node's `/v1/light` pass-through unless `light_rpc` names
        # a CometBFT RPC endpoint; either way they are verified, not trusted.
        # `trust_store` keeps verified headers on disk between runs.
        self._trust = (trust, trust_store, light_rpc)
        self._verifier_obj: ReadVerifier | None = None

    def _verifier(self) -> ReadVerifier:
        root, store, rpc_url = self._trust
        if root is None:
            raise TrustError("no_root", "verified reads need a trust root: pass "
                                        "trust=GenesisRoot(...) or PinnedRoot(...)")
        if self._verifier_obj is None:
            provider: Provider = (RpcProvider(rpc_url) if rpc_url
                                  else RestProvider(self.base_url))
            self._verifier_obj = ReadVerifier(root, provider, store_path=store)
        return self._verifier_obj

    def _record_value(self, kind: str, ident: str, doc: Any) -> tuple[Any, int]:
        path = RECORD_KINDS.get(kind)
        if path is None:
            raise ValueError(f"unknown record kind {kind!r}")
        record = doc.get("record") if isinstance(doc, dict) else None
        raw, height = self._verifier().record(record, path, ident.encode())
        if raw is None:
            return None, height
        return (raw.decode() if kind == "content" else json.loads(raw)), height

    def _absent(self, memory_id: str, proof: Any) -> int:
        """A 404 stands only if the chain proves the memory absent (else ProofError);
        returns the height it is proven absent at."""
        record = proof.get("record") if isinstance(proof, dict) else None
        value, height = self._verifier().record(record, "/memory", memory_id.encode())
        if value is not None:
            raise ProofError("served_differs", f"memory {memory_id!r} was answered 'not found' "
                                               f"but is committed at height {height}")
        return height

    def _verified(self, memory_id: str, served: dict[str, Any] | None,
                  proof: Any) -> Memory:
        """Memory as proven; raises VerificationError (see memledger.sdk.light.errors)."""
        doc = self._verifier().memory(memory_id, served, proof)
        return Memory.from_json(doc)

    @property
    def public_key(self) -> str | None:
        return None if self._key is None else bytes(self._key.verify_key).hex()

    def _require_key(self) -> SigningKey:
        if self._key is None:
            raise MemLedgerError("this client has no signing key (pass key=...)",
                                 name="no_key")
        return self._key

    @staticmethod
    def _tx_json(tx: bytes) -> dict[str, str]:
        return {"tx": base64.b64encode(tx).decode()}

    def _submit_maker(self, memory_id: str | None, content: str, domain: str, type: str,  # noqa: A002
                      confidence: float | int, tags: Sequence[str], supersedes: str = "",
                      origin: Mapping[str, Any] | None = None, epoch: int = 0
                      ) -> tuple[str, MakeTx, dict[str, Any]]:
        """The memory id, the tx maker, and the fields the memory will hold (to know an
        earlier attempt's memory as this same write)."""
        check_content(content)
        if memory_id is not None and not isinstance(memory_id, str):  # 7: a bare TypeError
            invalid("invalid_memory_id", f"memory_id must be a str or None, got {memory_id!r}")
        tags = checked_tags(tags)
        ppm = fraction_to_ppm(confidence)
        mid = memory_id or derive_memory_id(self.public_key or "", domain, content)

        def make(b: TxBuilder, nonce: int) -> bytes:
            return b.submit(nonce, mid, content, domain=domain, memory_type=type,
                            confidence_ppm=ppm, tags=tags, supersedes=supersedes,
                            origin=origin, epoch=epoch)

        fields = {"author": self.public_key, "domain": domain, "type": type,
                  "content_hash": hashlib.sha256(content.encode()).hexdigest(),
                  "confidence_ppm": ppm, "tags": sorted(tags)}
        return mid, make, fields

    def _kind_maker(self, kind: str, fields: dict[str, Any],
                    caller: str) -> tuple[MakeTx, str | None]:
        """The tx maker of a `send`, and the memory it names: the kind and its fields are
        checked before anything is signed (an unknown field is a TypeError naming
        `caller`, as Python names a method; a value the kind cannot carry, or an unknown
        kind, is a MemLedgerError)."""
        try:
            row = kind_named(kind)
        except ValueError as exc:
            invalid("invalid_kind", str(exc))
        values = row.checked(fields, f"{caller}({kind!r})")
        try:
            row.message_of(values)
        except TxFieldError as exc:
            invalid(f"invalid_{exc.field}", str(exc))
        memory_id = values.get("memory_id")

        def make(b: TxBuilder, nonce: int) -> bytes:
            return b.build(kind, nonce, **fields)

        return make, memory_id if isinstance(memory_id, str) else None

    @staticmethod
    def _earlier_write(refused: MemLedgerError, memory: Memory | None,
                       fields: dict[str, Any]) -> TxReceipt:
        """A submit refused as `memory_terminal` whose memory is this very write (same
        author, content and fields: an earlier attempt whose answer was lost, decided
        since) succeeded: the receipt of the tx that wrote it. Anything else: `refused`."""
        if memory is None or any(getattr(memory, k) != v for k, v in fields.items()):
            raise refused
        return TxReceipt(status="included", hash=memory.tx, code=0, name="ok",
                         log="already written by this key (an earlier attempt); "
                             f"the memory is {memory.status}",
                         height=memory.submitted_height, memory_id=memory.id,
                         memory_status=memory.status)

    @staticmethod
    def _tx_hash(tx: bytes) -> str:
        return hashlib.sha256(tx).hexdigest()

    @staticmethod
    def _raise_for(resp: httpx.Response) -> Any:
        # a 3xx too: redirects are not followed, and its empty body is no answer to parse
        if resp.status_code >= 300:
            raise MemLedgerError.from_response(resp)
        if resp.headers.get("content-type", "").startswith("application/json"):
            return resp.json()
        return resp.text


def prove_params(fresh: bool) -> dict[str, str]:
    """Query of a proven memory read: settled (no wait to verify) unless `fresh`."""
    return {"prove": "true", "fresh": "true"} if fresh else {"prove": "true"}


def batch_outcomes(doc: Any) -> list[TxReceipt | MemLedgerError]:
    """A POST /v1/txs batch answer as one receipt or error per tx, in the order sent."""
    out: list[TxReceipt | MemLedgerError] = []
    for item in doc.get("results", []) if isinstance(doc, dict) else []:
        if item.get("outcome") is not None:
            out.append(TxReceipt.from_json(item["outcome"]))
        else:
            out.append(MemLedgerError.from_problem(int(item.get("status") or 0),
                                                   item.get("problem") or {}))
    return out


def served_memory(doc: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """The memory a proven read served, without its proof."""
    return {k: v for k, v in the_memory(doc, memory_id).items() if k != "proof"}


def the_memory(doc: dict[str, Any], memory_id: str) -> dict[str, Any]:
    """`doc` if it is the memory asked for; a clear error if the node answered for
    something else (never a memory with another id, or a crash on a vote list)."""
    if isinstance(doc, dict) and doc.get("id") == memory_id:
        return doc
    detail = f"the node did not answer with memory {memory_id!r}"
    raise MemLedgerError(detail, name="unexpected_response", detail=detail)


def memory_doc(memory: Memory) -> dict[str, Any]:
    """A Memory back in the API's JSON shape, to compare with the proven record."""
    names = [n for n in Memory.__dataclass_fields__
             if n not in ("verified_height", "score", "mode")]
    return {n: getattr(memory, n) for n in names}
