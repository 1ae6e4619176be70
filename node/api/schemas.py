"""Request and response models: the OpenAPI contract of /v1."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

HEX_KEY = r"^[0-9a-fA-F]{64}$"
HEX_SIG = r"^[0-9a-fA-F]{128}$"


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


class TxRequest(BaseModel):
    """A signed transaction, base64 of the protobuf `Tx` bytes."""

    model_config = ConfigDict(extra="forbid")
    tx: str = Field(min_length=1, description="base64 (standard alphabet) of the signed Tx")


class TxEvent(BaseModel):
    type: str
    attributes: dict[str, str]


class TxOutcome(BaseModel):
    """What is known about a submitted transaction.

    status: `submitted` (wait=none), `accepted` (passed CheckTx, in the mempool),
    `committed` (in a block with code 0), `unknown` (not seen in a block before the
    timeout: poll GET /v1/txs/{hash}; it may still commit).
    """

    status: str
    hash: str
    code: int | None = None
    name: str | None = None
    log: str = ""
    height: int | None = None
    events: list[TxEvent] = Field(default_factory=list)
    memory_id: str | None = None


class MemorySubmitRequest(BaseModel):
    """Either `tx` (a signed memory_submit Tx, as the SDK builds it) or the JSON form.

    JSON form: the server rebuilds the canonical TxBody (chain id, nonce, MemorySubmit
    with SHA-256 content hash and sorted tags) and attaches `public_key` and `signature`;
    the signature must cover `"memledger/tx/v1\\0" || body` exactly as the client built
    it. The private key never leaves the client in either form.
    """

    model_config = ConfigDict(extra="forbid")
    tx: str | None = Field(None, description="base64 of a signed memory_submit Tx")
    memory_id: str | None = Field(None, min_length=1, max_length=128)
    content: str | None = None
    domain: str = "general"
    type: MemoryType = MemoryType.fact
    confidence_ppm: int = Field(900_000, ge=0, le=1_000_000)
    tags: list[str] = Field(default_factory=list, max_length=32)
    chain_id: str | None = None
    nonce: int | None = Field(None, ge=1, lt=1 << 64)
    public_key: str | None = Field(None, pattern=HEX_KEY)
    signature: str | None = Field(None, pattern=HEX_SIG)

    @model_validator(mode="after")
    def _one_form(self) -> MemorySubmitRequest:
        fields = ("memory_id", "content", "nonce", "public_key", "signature")
        if self.tx is not None:
            extra = [f for f in fields if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"give either tx or the JSON form, not both ({extra})")
            return self
        missing = [f for f in fields if getattr(self, f) is None]
        if missing:
            raise ValueError(f"JSON form needs {', '.join(missing)} (or give tx)")
        return self


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


class MemoryPage(BaseModel):
    items: list[Memory]
    next_cursor: str | None = Field(None, description="Pass as `cursor` for the next page")


class Vote(BaseModel):
    voter: str
    decision: str
    height: int


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


class Health(BaseModel):
    status: str


class ReadyCheck(BaseModel):
    ok: bool
    detail: str


class Ready(BaseModel):
    status: str
    checks: dict[str, ReadyCheck]
