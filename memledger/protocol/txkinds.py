"""One row per transaction kind: the single place that says what a kind is and who serves it.

A row names the `TxBody` oneof field (proto/memledger/tx.proto), its protobuf message, the
fields a caller gives (with their types and defaults), the consensus family and handler
that apply it, the first app version that accepts it, and what the client surface makes of
it. From these rows:

- `TxBuilder.build(kind, nonce, **fields)` signs any kind (the typed builder methods call it);
- `Client.send` / `AsyncClient.send` submit any kind with the client's key and nonces;
- the consensus registry (`memledger.consensus.families.registry`) maps kind -> handler
  and gates it by `since`;
- the CLI makes a command for each row with `cli` set.

A new kind is its message in tx.proto (and the regenerated pb modules), its row here, its
handler in its family folder and its result codes in protocol/codes.py; tests check that
every row matches a oneof field, builds, is sendable and has a handler.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from memledger.protocol.pb import tx_pb2

__all__ = ["DECISIONS", "LEVELS", "REQUIRED", "TX_KINDS", "CliCommand", "TxField",
           "TxFieldError", "TxKind", "kind_named", "message_for"]

#: A vote's decision by name (memory and governance votes).
DECISIONS: Mapping[str, int] = MappingProxyType({
    "accept": tx_pb2.DECISION_ACCEPT,
    "reject": tx_pb2.DECISION_REJECT,
    "abstain": tx_pb2.DECISION_ABSTAIN,
})
#: An access grant's level by name.
LEVELS: Mapping[str, int] = MappingProxyType({
    "read": tx_pb2.GRANT_LEVEL_READ,
    "write": tx_pb2.GRANT_LEVEL_WRITE,
    "modify": tx_pb2.GRANT_LEVEL_MODIFY,
})


class _Required:
    """The default of a field the caller must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class TxFieldError(ValueError):
    """A field value the kind cannot carry (a decision or level not among its names)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


@dataclass(frozen=True)
class TxField:
    """One field a caller gives: its name in the message, the Python type it is given as,
    its default (`REQUIRED` if none), the names an enum field takes (sent as their numbers),
    and a short help text (the CLI's option help)."""

    name: str
    type: type
    default: Any = REQUIRED
    choices: Mapping[str, int] | None = None
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def wire(self, value: Any) -> Any:
        """The value as the message holds it (an enum name as its number)."""
        if self.choices is None:
            return value
        if not isinstance(value, str) or value not in self.choices:
            raise TxFieldError(self.name, f"{self.name} must be one of "
                                          f"{'|'.join(self.choices)}, got {value!r}")
        return self.choices[value]


@dataclass(frozen=True)
class CliCommand:
    """A CLI command made from the row: `memledger NAME MEMORY_ID [--FIELD ...]`."""

    name: str
    help: str


#: Builds a kind's message from its checked fields, when they are not the message's own
#: fields one to one (a hash to compute, a list of pairs, a whole message given).
Encoder = Callable[[Mapping[str, Any]], Message]


@dataclass(frozen=True)
class TxKind:
    """One transaction kind. `builder_method` is its typed `TxBuilder` method and
    `client_method` its typed SDK method (None: `build` / `send` only), `client_names` the
    parameter names the SDK method gives fields it names differently."""

    name: str
    message: type[Message]
    family: str
    handler: str
    since: int
    fields: tuple[TxField, ...]
    builder_method: str | None = None
    client_method: str | None = None
    client_names: Mapping[str, str] = field(default_factory=dict)
    #: fields the SDK method fills in itself (a submit's epoch: from the domain's record)
    client_derived: frozenset[str] = frozenset()
    cli: CliCommand | None = None
    encode: Encoder | None = None

    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def checked(self, given: Mapping[str, Any], caller: str) -> dict[str, Any]:
        """Every field's value (defaults filled in), refusing unknown and missing ones as
        Python refuses keywords: a TypeError naming `caller` and the kind's fields."""
        names = self.field_names()
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"{caller} got an unexpected field {unknown[0]!r} for "
                            f"{self.name} (its fields: {', '.join(names)})")
        missing = [f.name for f in self.fields if f.required and f.name not in given]
        if missing:
            raise TypeError(f"{caller} is missing the field {missing[0]!r} of {self.name} "
                            f"(its fields: {', '.join(names)})")
        return {f.name: given.get(f.name, f.default) for f in self.fields}

    def message_of(self, values: Mapping[str, Any]) -> Message:
        """The kind's message from checked values (see `checked`)."""
        if self.encode is not None:
            return self.encode(values)
        return self.message(**{f.name: f.wire(values[f.name]) for f in self.fields})


def _submit(values: Mapping[str, Any]) -> Message:
    content: str = values["content"]
    origin: Mapping[str, Any] | None = values["origin"]
    if origin is not None and not isinstance(origin, Mapping):
        raise TxFieldError("origin", "origin must be a mapping of chain_id, height, "
                                     f"memory_id and author, got {origin!r}")
    try:
        pb_origin = None if origin is None else tx_pb2.Origin(**origin)
    except (TypeError, ValueError) as exc:
        raise TxFieldError("origin", f"origin takes chain_id, height, memory_id and author: "
                                     f"{exc}") from None
    return tx_pb2.MemorySubmit(
        memory_id=values["memory_id"], domain=values["domain"],
        memory_type=values["memory_type"], content=content,
        content_hash=hashlib.sha256(content.encode()).digest(),
        confidence_ppm=values["confidence_ppm"], tags=sorted(values["tags"]),
        supersedes=values["supersedes"], origin=pb_origin, epoch=values["epoch"])


def _sealed_keys(values: Mapping[str, Any]) -> list[Any]:
    pairs: Sequence[tuple[bytes, bytes]] = values["keys"]
    return [tx_pb2.SealedKey(recipient=r, sealed=s) for r, s in sorted(pairs)]


def _domain_private(values: Mapping[str, Any]) -> Message:
    return tx_pb2.DomainPrivate(domain=values["domain"], keys=_sealed_keys(values))


def _domain_keys(values: Mapping[str, Any]) -> Message:
    return tx_pb2.DomainKeys(domain=values["domain"], epoch=values["epoch"],
                             keys=_sealed_keys(values), revoke=sorted(values["revoke"]))


def _cocommit(values: Mapping[str, Any]) -> Message:
    pairs: Sequence[tuple[bytes, bytes]] = values["signatures"]
    return tx_pb2.CoCommitSubmit(core=values["core"], signatures=[
        tx_pb2.CoauthorSignature(public_key=pk, signature=sig) for pk, sig in pairs])


def _proposal(values: Mapping[str, Any]) -> Message:
    proposal: Message = values["proposal"]
    if not isinstance(proposal, tx_pb2.GovPropose):
        raise TxFieldError("proposal", "proposal must be a GovPropose message (see "
                                       f"memledger.sdk.txbuilder), got {proposal!r}")
    return proposal


_MEMORY_ID = TxField("memory_id", str)
_REASON = TxField("reason", str, "", help="Why (up to 4 KiB).")
_DECISION = TxField("decision", str, "accept", DECISIONS)

TX_KINDS: tuple[TxKind, ...] = (
    TxKind("memory_submit", tx_pb2.MemorySubmit, "memory", "submit", 1, (
        _MEMORY_ID, TxField("content", str), TxField("domain", str, "general"),
        TxField("memory_type", str, "fact"), TxField("confidence_ppm", int, 900_000),
        TxField("tags", tuple, ()),
        TxField("supersedes", str, "", help="v10+: id of the memory this one corrects."),
        TxField("origin", dict, None, help="v10+: provenance of an imported memory."),
        TxField("epoch", int, 0, help="v10+: the private domain's epoch sealing content.")),
        builder_method="submit", client_method="submit",
        client_names={"memory_type": "type", "confidence_ppm": "confidence"},
        client_derived=frozenset({"epoch"}), encode=_submit),
    TxKind("memory_vote", tx_pb2.MemoryVote, "memory", "vote", 1,
           (_MEMORY_ID, _DECISION, TxField("reason", str, "")),
           builder_method="vote", client_method="vote"),
    TxKind("memory_challenge", tx_pb2.MemoryChallenge, "disputes", "challenge", 1,
           (_MEMORY_ID, _REASON), builder_method="challenge", client_method="challenge",
           cli=CliCommand("challenge", "Open a dispute on a committed memory.")),
    TxKind("memory_corroborate", tx_pb2.MemoryCorroborate, "disputes", "corroborate", 1,
           (_MEMORY_ID,), builder_method="corroborate", client_method="corroborate",
           cli=CliCommand("corroborate", "Corroborate someone else's memory.")),
    TxKind("memory_reinstate", tx_pb2.MemoryReinstate, "disputes", "reinstate", 1,
           (_MEMORY_ID,), builder_method="reinstate", client_method="reinstate",
           cli=CliCommand("reinstate", "Return a challenged memory to committed.")),
    TxKind("cocommit_submit", tx_pb2.CoCommitSubmit, "cocommit", "submit", 1,
           (TxField("core", bytes), TxField("signatures", tuple)),
           builder_method="cocommit", client_method="cocommit", encode=_cocommit),
    TxKind("access_grant", tx_pb2.AccessGrant, "access", "grant", 1, (
        TxField("domain", str), TxField("grantee", bytes), TxField("level", str, "write", LEVELS),
        TxField("expires_height", int, 0)),
        builder_method="grant", client_method="grant"),
    TxKind("access_revoke", tx_pb2.AccessRevoke, "access", "revoke", 1,
           (TxField("domain", str), TxField("grantee", bytes)),
           builder_method="revoke", client_method="revoke"),
    TxKind("gov_propose", tx_pb2.GovPropose, "governance", "propose", 1,
           (TxField("proposal", tx_pb2.GovPropose),), builder_method="propose",
           encode=_proposal),
    TxKind("gov_vote", tx_pb2.GovVote, "governance", "vote", 1,
           (TxField("proposal_id", str), _DECISION), builder_method="gov_vote"),
    TxKind("gov_cancel", tx_pb2.GovCancel, "governance", "cancel", 1,
           (TxField("proposal_id", str),), builder_method="gov_cancel"),
    TxKind("domain_private", tx_pb2.DomainPrivate, "access", "make_private", 10,
           (TxField("domain", str), TxField("keys", tuple)), encode=_domain_private),
    TxKind("domain_keys", tx_pb2.DomainKeys, "access", "hand_keys", 10,
           (TxField("domain", str), TxField("epoch", int), TxField("keys", tuple),
            TxField("revoke", tuple, ())), encode=_domain_keys),
)

_BY_NAME: Mapping[str, TxKind] = MappingProxyType({kind.name: kind for kind in TX_KINDS})


def kind_named(name: str) -> TxKind:
    """The row of kind `name` (a TxBody oneof field name); ValueError naming the kinds."""
    kind = _BY_NAME.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown transaction kind {name!r}; the kinds are: "
                         f"{', '.join(_BY_NAME)}")
    return kind


def message_for(name: str, fields: Mapping[str, Any], caller: str) -> Message:
    """The message of kind `name` from a caller's fields (checked: see TxKind.checked)."""
    kind = kind_named(name)
    return kind.message_of(kind.checked(fields, caller))
