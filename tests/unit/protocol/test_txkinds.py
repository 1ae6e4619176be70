"""The transaction-kind table (memledger.protocol.txkinds) is the one place a kind is
described: every row matches tx.proto's TxBody, builds, is sendable from both clients and
the typed methods agree with it, has its consensus handler, and its CLI command where it
asks for one."""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
from typing import Any

import httpx
import pytest
from google.protobuf.descriptor import FieldDescriptor
from nacl.signing import SigningKey

from memledger.cli.main import main
from memledger.consensus.families.registry import FAMILIES, HANDLERS
from memledger.protocol.pb import tx_pb2
from memledger.protocol.txkinds import TX_KINDS, TxKind, kind_named
from memledger.sdk import AsyncClient, Client, MemLedgerError
from memledger.sdk.txbuilder import TxBuilder, param_proposal

KEY = SigningKey(b"\x05" * 32)
CHAIN = "txkinds-test"
ONEOF = tx_pb2.TxBody.DESCRIPTOR.oneofs_by_name["msg"]
#: Python type of a row field -> the protobuf types it may carry
PROTO_TYPES = {
    str: {FieldDescriptor.TYPE_STRING},
    bytes: {FieldDescriptor.TYPE_BYTES},
    int: {FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_INT64,
          FieldDescriptor.TYPE_INT32},
}


def _sample(kind: TxKind) -> dict[str, Any]:
    """A value for every field of `kind` (its defaults left out where it has them)."""
    special: dict[str, Any] = {
        "tags": ("b", "a"), "signatures": ((b"\x01" * 32, b"\x02" * 64),),
        "proposal": param_proposal("nonce_window", 64, title="t"),
        "origin": {"chain_id": "other-chain", "height": 9, "memory_id": "m-1",
                   "author": "ab" * 32},
        "keys": ((b"\x03" * 32, b"\x04" * 80),), "revoke": (b"\x05" * 32,),
    }
    out: dict[str, Any] = {}
    for f in kind.fields:
        if f.name in special:
            out[f.name] = special[f.name]
        elif f.choices is not None:
            out[f.name] = list(f.choices)[-1]
        else:
            out[f.name] = {str: f"{f.name}-1", bytes: b"\x09" * 32, int: 7}[f.type]
    return out


def test_rows_are_the_txbody_oneof() -> None:
    assert [k.name for k in TX_KINDS] == [f.name for f in ONEOF.fields]
    for kind in TX_KINDS:
        assert tx_pb2.TxBody.DESCRIPTOR.fields_by_name[kind.name].message_type \
            is kind.message.DESCRIPTOR


@pytest.mark.parametrize("kind", TX_KINDS, ids=lambda k: k.name)
def test_plain_fields_are_message_fields(kind: TxKind) -> None:
    """A row without its own encoder passes its fields to the message as they are: each is
    one of the message's fields, of a matching type (an enum by its names)."""
    if kind.encode is not None:
        return
    fields = kind.message.DESCRIPTOR.fields_by_name
    for f in kind.fields:
        assert f.name in fields, (kind.name, f.name)
        proto = fields[f.name]
        if f.choices is not None:
            assert proto.type == FieldDescriptor.TYPE_ENUM
            assert set(f.choices.values()) <= {v.number for v in proto.enum_type.values}
        else:
            assert proto.type in PROTO_TYPES[f.type], (kind.name, f.name)


@pytest.mark.parametrize("kind", TX_KINDS, ids=lambda k: k.name)
def test_builder_builds_every_kind_and_its_typed_method_agrees(kind: TxKind) -> None:
    builder = TxBuilder(KEY, CHAIN)
    fields = _sample(kind)
    raw = builder.build(kind.name, 42, **fields)
    body = tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body)
    assert body.WhichOneof("msg") == kind.name and body.nonce == 42
    if kind.builder_method is None:  # build only
        return
    typed = getattr(builder, kind.builder_method)
    params = inspect.signature(typed).parameters
    assert set(kind.field_names()) <= set(params), kind.builder_method
    assert typed(42, **fields) == raw


def test_builder_refuses_unknown_and_missing_fields() -> None:
    builder = TxBuilder(KEY, CHAIN)
    with pytest.raises(TypeError, match=r"TxBuilder.build\('memory_vote'\) got an unexpected "
                                        r"field 'resaon' .*memory_id, decision, reason"):
        builder.build("memory_vote", 1, memory_id="m", resaon="x")
    with pytest.raises(TypeError, match="missing the field 'memory_id'"):
        builder.build("memory_corroborate", 1)
    with pytest.raises(ValueError, match="unknown transaction kind 'memory_pin'"):
        builder.build("memory_pin", 1, memory_id="m")


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_clients_reach_every_kind(cls: type[Client] | type[AsyncClient]) -> None:
    """`send` reaches every row; a typed method, where the row names one, takes each of the
    row's fields (by the client's name for it)."""
    assert "kind" in inspect.signature(cls.send).parameters
    for kind in TX_KINDS:
        if kind.client_method is None:
            continue
        params = inspect.signature(getattr(cls, kind.client_method)).parameters
        for name in kind.field_names():
            if name in kind.client_derived:
                continue
            assert kind.client_names.get(name, name) in params, (kind.name, name)


def test_registry_serves_every_row_from_its_version() -> None:
    assert list(HANDLERS) == [k.name for k in TX_KINDS]
    for kind in TX_KINDS:
        since, handler = HANDLERS[kind.name]
        assert since == kind.since
        assert handler is getattr(FAMILIES[kind.family], kind.handler)


def test_cli_has_a_command_per_memory_action() -> None:
    actions = [k for k in TX_KINDS if k.cli is not None]
    assert {k.cli.name for k in actions if k.cli} == {"challenge", "corroborate", "reinstate"}
    for kind in actions:
        assert kind.cli is not None
        command = main.commands[kind.cli.name]
        options = {p.name for p in command.params}
        assert set(kind.field_names()) <= options | {"memory_id"}


class _Node:
    """A node that includes whatever tx is posted, keeping the bodies it got."""

    def __init__(self) -> None:
        self.bodies: list[tx_pb2.TxBody] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/v1/txs"
        raw = base64.b64decode(json.loads(request.content)["tx"])
        self.bodies.append(tx_pb2.TxBody.FromString(tx_pb2.Tx.FromString(raw).body))
        return httpx.Response(200, json={"status": "included", "hash": "ab" * 32, "code": 0,
                                         "name": "ok", "height": 3, "events": []})


def test_send_signs_with_the_clients_key_and_nonces() -> None:
    node = _Node()
    with Client("http://node", key=KEY, chain_id=CHAIN,
                transport=httpx.MockTransport(node.handle)) as ml:
        receipt = ml.send("memory_challenge", memory_id="m-1", reason="stale")
        ml.send("gov_vote", proposal_id="p-1", decision="reject")
    assert receipt.included and receipt.memory_id == "m-1"
    first, second = node.bodies
    assert first.memory_challenge == tx_pb2.MemoryChallenge(memory_id="m-1", reason="stale")
    assert second.gov_vote == tx_pb2.GovVote(proposal_id="p-1",
                                             decision=tx_pb2.DECISION_REJECT)
    assert first.chain_id == CHAIN and second.nonce > first.nonce > 0

    async def run() -> None:
        async with AsyncClient("http://node", key=KEY, chain_id=CHAIN,
                               transport=httpx.MockTransport(node.handle)) as aml:
            await aml.send("memory_reinstate", memory_id="m-2")

    asyncio.run(run())
    assert node.bodies[-1].memory_reinstate.memory_id == "m-2"


def test_send_refuses_before_signing() -> None:
    node = _Node()
    with Client("http://node", key=KEY, chain_id=CHAIN,
                transport=httpx.MockTransport(node.handle)) as ml:
        with pytest.raises(TypeError, match=r"^Client\.send\('memory_vote'\) got an "
                                            r"unexpected field 'resaon'"):
            ml.send("memory_vote", memory_id="m", resaon="x")
        with pytest.raises(MemLedgerError, match="invalid_kind: unknown transaction kind"):
            ml.send("memory_pin", memory_id="m")
        with pytest.raises(MemLedgerError, match="invalid_decision: decision must be one of"):
            ml.send("memory_vote", memory_id="m", decision="maybe")
    assert node.bodies == []


def test_kind_named() -> None:
    assert kind_named("memory_vote").builder_method == "vote"
    with pytest.raises(ValueError, match="the kinds are: memory_submit, memory_vote"):
        kind_named("vote")


def test_a_kind_newer_than_the_app_version_is_parsed_as_its_binaries_did(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row's `since` also drops the kind from older versions' TxBody schema: below it the
    body is refused as not canonical (an unknown field to those binaries), not parsed."""
    import dataclasses

    from memledger.consensus.gate import schema
    from memledger.consensus.gate.envelope import parse_canonical
    from memledger.protocol import txkinds
    from memledger.protocol.codes import Code, TxError

    # today: the private-domain kinds are v10's; every other kind is as old as genesis
    assert {k.name: k.since for k in TX_KINDS if k.since > 1} == {
        "domain_private": 10, "domain_keys": 10}
    assert ("TxBody", "domain_keys") in schema.fields_unknown_at(9)
    later = tuple(dataclasses.replace(k, since=10) if k.name == "memory_reinstate" else k
                  for k in TX_KINDS)
    monkeypatch.setattr(txkinds, "TX_KINDS", later)
    schema.body_class.cache_clear()
    try:
        assert ("TxBody", "memory_reinstate") in schema.fields_unknown_at(9)
        assert ("TxBody", "memory_reinstate") not in schema.fields_unknown_at(10)
        raw = TxBuilder(KEY, CHAIN).reinstate(5, "m-1")
        body = tx_pb2.Tx.FromString(raw).body
        with pytest.raises(TxError) as info:
            parse_canonical(schema.body_class(9), body, Code.BODY_DECODE, Code.BODY_NOT_CANONICAL)
        assert info.value.code == Code.BODY_NOT_CANONICAL
        parsed = parse_canonical(schema.body_class(10), body, Code.BODY_DECODE,
                                 Code.BODY_NOT_CANONICAL)
        assert parsed.WhichOneof("msg") == "memory_reinstate"
    finally:
        schema.body_class.cache_clear()
