"""Request and response models: the OpenAPI contract of /v1."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from memledger.protocol.limits import MAX_TAG_BYTES, MAX_TAGS

# Every pattern below is the whole rule the server applies to that value: a request the
# OpenAPI document calls valid is never refused by request validation (only the ledger's
# own verdicts on signatures, nonces and state remain, and those carry a result `code`).
HEX_KEY = r"^[0-9a-fA-F]{64}$"
HEX_SIG = r"^[0-9a-fA-F]{128}$"
#: Ids and domains, as the ledger's check_name accepts them (ASCII, so chars == bytes).
NAME = r"^[A-Za-z0-9._:/@-]{1,128}$"
#: Standard base64 with padding, at least one quantum: exactly what the server decodes.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)$"
#: GET /v1/memories cursor: `<submitted_height>~<memory id>`, the last key of a page.
MEMORY_CURSOR = r"^[0-9]{1,18}~[A-Za-z0-9._:/@-]{1,128}$"
#: GET /v1/proposals cursor: the last proposal id of a page.
DOCUMENT_CURSOR = NAME
#: GET /v1/proofs/account id: the key in hex, as the ledger reads it (whole bytes, at most
#: NAME's 128 characters); anything else is 'malformed query data' there.
ACCOUNT_ID = r"^(?:[0-9a-fA-F]{2}){0,64}$"
#: What separates the words of a query: spaces and control characters up to U+0020, and
#: every other character Python's str.split() takes for whitespace (NBSP, U+2000..U+200A,
#: U+3000...), so the bound below counts the words the search splits (search.query_words).
#: Regex escapes both Python's and the server's (Rust) engine read the same way.
QUERY_SEPARATORS = (r"\x00-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f"
                    r"\u3000")
#: Full-text query: at most 32 words, a word being a run of non-separators (above).
#: Unambiguous, so no regex backtracks.
QUERY = (f"^[{QUERY_SEPARATORS}]*(?:[^{QUERY_SEPARATORS}]+(?:[{QUERY_SEPARATORS}]+|$))"
         "{0,32}$")
MAX_QUERY_WORDS = 32
#: A tag: what the ledger stores (1..64 UTF-8 bytes, no NUL; bytes beyond the character
#: bound are the ledger's own `invalid_tag` verdict).
TAG = r"^[^\x00]+$"
#: a tag of more characters than the ledger's bytes is too long in any encoding
MAX_TAG_CHARS = MAX_TAG_BYTES


class WaitMode(StrEnum):
    """How long POST /v1/txs waits: not at all, for CheckTx, or for block inclusion."""

    none = "none"
    sync = "sync"
    commit = "commit"


class MemoryStatus(StrEnum):
    proposed = "proposed"
    committed = "committed"
    challenged = "challenged"
    deprecated = "deprecated"
    superseded = "superseded"  # v10+: replaced by a committed correction


class MemoryType(StrEnum):
    fact = "fact"
    observation = "observation"
    inference = "inference"
    task = "task"


class ProblemModel(BaseModel):
    """RFC 7807 problem document (extension members vary by problem)."""

    model_config = ConfigDict(extra="allow", title="Problem")
    type: str
    title: str
    status: int
    detail: str
    name: str = Field(description="Stable slug; for tx rejections the result code's name")
    instance: str | None = None
    code: int | None = Field(None, description="Ledger result code (tx rejections only)")


Base64Tx = Annotated[str, Field(pattern=BASE64, json_schema_extra={"contentEncoding": "base64"},
                                description="base64 (standard alphabet, padded) of the "
                                            "signed protobuf Tx")]
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS, pattern=TAG)]


def _distinct(tags: list[str]) -> list[str]:
    """The ledger refuses duplicate tags; say so before signing bytes reach it."""
    if len(set(tags)) != len(tags):
        raise ValueError("tags must be distinct")
    return tags


class TxRequest(BaseModel):
    """A signed transaction, base64 of the protobuf `Tx` bytes."""

    model_config = ConfigDict(extra="forbid")
    tx: Base64Tx


#: the most txs one POST /v1/txs batch may carry
MAX_BATCH_TXS = 256


class TxBatchRequest(BaseModel):
    """Many signed transactions in one request, for agents that write in bursts."""

    model_config = ConfigDict(extra="forbid")
    txs: list[Base64Tx] = Field(min_length=1, max_length=MAX_BATCH_TXS)


class TxEvent(BaseModel):
    type: str
    attributes: dict[str, str]


class TxOutcome(BaseModel):
    """What is known about a submitted transaction.

    status: `submitted` (wait=none), `accepted` (passed CheckTx, in the mempool),
    `included` (in a block with code 0), `unknown` (not seen in a block before the
    timeout: poll GET /v1/txs/{hash}; it may still be included).

    `included` is about the transaction. A memory is `committed` only once validators
    accept it: `memory_status` says what the block made of the memory the tx is about
    (a submit is `proposed`; a vote may have decided it).
    """

    status: str
    hash: str
    code: int | None = None
    name: str | None = None
    log: str = ""
    height: int | None = None
    events: list[TxEvent] = Field(default_factory=list)
    memory_id: str | None = Field(None, description="the memory this tx is about, if any")
    memory_status: str | None = Field(
        None, description="that memory's status after the block (wait=commit)")


class TxBatchItem(BaseModel):
    """One tx of a batch: its HTTP status as a single submit would have had it, and the
    outcome (2xx) or the RFC 7807 problem document (4xx/5xx)."""

    index: int
    status: int
    outcome: TxOutcome | None = None
    problem: dict[str, Any] | None = None


class TxBatchOutcome(BaseModel):
    """Per-tx outcomes of a batch, in the order sent. Txs of one signer are sent in that
    order; different signers' txs are sent side by side."""

    results: list[TxBatchItem]
    accepted: int = Field(description="txs whose status is 2xx")
    refused: int = Field(description="txs answered with a problem")


class MemorySubmitTx(BaseModel):
    """A signed memory_submit Tx, as the SDK builds it."""

    model_config = ConfigDict(extra="forbid", title="MemorySubmitTx")
    tx: Base64Tx


class MemorySubmitForm(BaseModel):
    """The JSON form: the server rebuilds the canonical TxBody (chain id, nonce,
    MemorySubmit with SHA-256 content hash and sorted tags) and attaches `public_key` and
    `signature`; the signature must cover `"memledger/tx/v1\\0" || body` exactly as the
    client built it. The private key never leaves the client.
    """

    model_config = ConfigDict(extra="forbid", title="MemorySubmitForm")
    memory_id: str = Field(pattern=NAME)
    content: str = Field(min_length=1, max_length=512 << 10, pattern=TAG,
                         description="UTF-8 text, no NUL, at most 512 KiB encoded")
    domain: str = Field("general", pattern=NAME)
    type: MemoryType = MemoryType.fact
    confidence_ppm: int = Field(900_000, ge=0, le=1_000_000)
    tags: Annotated[list[Tag], AfterValidator(_distinct)] = Field(
        default_factory=list, max_length=MAX_TAGS, json_schema_extra={"uniqueItems": True})
    chain_id: str | None = Field(None, description="defaults to this node's chain")
    nonce: int = Field(ge=1, lt=1 << 64)
    public_key: str = Field(pattern=HEX_KEY)
    signature: str = Field(pattern=HEX_SIG)


#: Body of POST /v1/memories: exactly one of the two forms (their keys are disjoint and
#: neither allows extra keys, so the document's `oneOf` is what the server checks).
MemorySubmitRequest = MemorySubmitTx | MemorySubmitForm


class Memory(BaseModel):
    id: str
    domain: str
    author: str
    type: str
    content: str | None
    content_hash: str
    confidence: float = Field(description="confidence_ppm / 1e6, for display only")
    confidence_ppm: int
    tags: list[str]
    status: MemoryStatus
    submitted_height: int
    submitted_time_ns: int
    decided_height: int | None
    scope: str | None
    cocommit: str | None
    tx: str
    history: list[list[Any]] = Field(default_factory=list)
    ballot: dict[str, Any] | None = None
    corroborators: list[str] = Field(default_factory=list)
    coauthors: list[str] | None = None
    supersedes: str | None = Field(None, description="v10+: the memory this one corrects")
    superseded_by: str | None = Field(
        None, description="v10+: the committed correction that replaced this memory")
    pending_correction: str | None = Field(
        None, description="v10+: a correction of this memory awaiting its validators")
    origin: dict[str, Any] | None = Field(
        None, description="v10+: where an imported memory came from, as its importer gave "
                          "it (not verified against that chain): chain_id, height (its "
                          "commit height there), memory_id (its id there), author (hex)")
    epoch: int | None = Field(
        None, description="v10+: set on a memory of a private domain: the epoch whose key "
                          "sealed its content, which is then the sealed envelope; members "
                          "decrypt it on their own machine (docs/PRIVATE.md)")
    corrections: list[str] | None = Field(
        None, description="one memory's read only: the chain of corrections it is part of, "
                          "oldest first (its originals, itself, the corrections of it)")
    status_reason: str | None = Field(
        None, description="Why the memory has its status, in one sentence: the vote tally, "
                          "the dispute round (e.g. withdrawn by its author), expiry, and "
                          "this node's auto-voter's reason for its vote. Derived when read, "
                          "not part of the canonical record.")


class SearchMode(StrEnum):
    text = "text"
    semantic = "semantic"
    hybrid = "hybrid"
    words = "words"  # every word must match, unranked, (height, id) order: the listing


class MemoryHit(Memory):
    score: float | None = Field(
        None, description="ranked searches (q with mode): the hit's score in that mode, "
                          "higher is better (text: BM25 or ts_rank_cd; semantic: cosine "
                          "similarity; hybrid: reciprocal rank fusion score)")
    mode: str | None = Field(None, description="the search mode that ranked this hit")


class MemoryPage(BaseModel):
    items: list[MemoryHit]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page")


class Vote(BaseModel):
    voter: str
    decision: str
    height: int
    reason: str | None = Field(
        None, description="Why, as the voter gave it on chain (app version 5+); null if not")


class VoteList(BaseModel):
    memory_id: str
    votes: list[Vote]


class Corroboration(BaseModel):
    agent: str
    height: int


class CorroborationList(BaseModel):
    memory_id: str
    corroborations: list[Corroboration]


class ChallengeList(BaseModel):
    """Dispute rounds, oldest first (opener, frozen electorate, challengers, outcome)."""

    memory_id: str
    challenges: list[dict[str, Any]]


class Document(BaseModel):
    """A record served whole (co-commit, proposal, ...), as canonical state holds it."""

    id: str
    record: dict[str, Any]


class DocumentPage(BaseModel):
    items: list[Document]
    next_cursor: str | None = None


class Account(BaseModel):
    public_key: str
    last_nonce: int
    next_nonce: int
    height: int
    source: str = Field("app", description="app (committed store) or projection (fallback)")


class Validator(BaseModel):
    public_key: str
    address: str
    power: int


class ValidatorSet(BaseModel):
    height: int
    total_power: int
    validators: list[Validator]


class RecallTail(BaseModel):
    name: str
    memories: int = Field(description="memories above the index's watermark it holds")
    covered_height: int = Field(
        description="last projection height whose memories are all in the index or here")
    memory_bytes: int


class Recall(BaseModel):
    name: str
    version: str
    dim: int
    state: str = Field(description="building (from the projection), following or stopped")
    indexed_height: int = Field(
        description="last projection height whose memories are all in the vector index")
    lag: int = Field(description="blocks the vector index is behind the projection")
    vectors: int
    memory_bytes: int
    disk_bytes: int
    rebuilt_reason: str | None = Field(
        None, description="why the index was rebuilt at start (missing, another model, ...)")
    covered_lag: int = Field(
        0, description="blocks whose memories are in neither the vector index nor its "
                       "tail: how far behind recall by meaning is (the tail embeds new "
                       "memories with a static model until the index reaches them)")
    tail: RecallTail | None = Field(
        None, description="the static model's tail (None when the node has none)")


class Status(BaseModel):
    chain_id: str
    moniker: str
    height: int
    app_hash: str
    app_version: int
    software_version: str
    latest_block_time: str
    catching_up: bool
    projection_height: int
    embedder: Recall | None = Field(
        None, description="recall by meaning: the embedder and its vector index (None when "
                          "no embedder is configured: text search only)")


class Health(BaseModel):
    status: str


class ReadyCheck(BaseModel):
    ok: bool
    detail: str


class Ready(BaseModel):
    status: str
    checks: dict[str, ReadyCheck]


# --- verified reads (docs/VERIFIED_READS.md) ---------------------------------------------


class ProofOpDoc(BaseModel):
    """One ABCI proof op; key and data are base64."""

    type: str
    key: str
    data: str


class ProvenRecord(BaseModel):
    """A raw canonical record with its proof; `value` null means proven absent."""

    path: str = Field(description="ABCI query path the record was read with")
    key: str = Field(description="state key, base64")
    value: str | None = Field(description="raw canonical record, base64; null if absent")
    height: int = Field(description="state height H; its app hash is in header H+1")
    proof_ops: list[ProofOpDoc]


class RecordProofs(BaseModel):
    records: list[ProvenRecord]


class ProvenMemory(Memory):
    """A memory with the proofs a client needs to check it against the chain."""

    proof: RecordProofs


class LightBlockDoc(BaseModel):
    """CometBFT `/commit` signed header and `/validators` list, passed through unverified."""

    signed_header: dict[str, Any]
    validators: list[dict[str, Any]]


class ProvenDocument(BaseModel):
    kind: str
    id: str
    record: ProvenRecord


class ProvenAccount(Account):
    """An account with its canonical record's proof (`?prove=true`)."""

    proof: ProvenRecord


class ProvenRecordDocument(Document):
    """A proposal or co-commit with its canonical record's proof (`?prove=true`)."""

    proof: ProvenRecord
