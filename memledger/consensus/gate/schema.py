"""TxBody as the binaries of each app version knew it.

A field added at app version n (`memledger.consensus.versions.FIELDS`) did not exist for
the binaries that ran a chain below n: they parsed its bytes as an unknown field, which
never fails on UTF-8 or on the field's type, and then refused the body as not canonical.
Parsing a body under the current schema and refusing the new field afterwards is not the
same answer: the current parser checks the field while it parses (a `string` that is not
UTF-8 fails the decode, code 4, where the old binaries said code 5). So below n the body
is parsed with the schema of that time, the current one with every newer field removed,
and every byte string gets exactly the code it got then; old heights replay unchanged.
"""

from __future__ import annotations

from functools import cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

from memledger.consensus import versions
from memledger.protocol import txkinds
from memledger.protocol.pb import tx_pb2


def fields_unknown_at(app_version: int) -> frozenset[tuple[str, str]]:
    """The (message type, field) pairs that `app_version`'s binaries did not have: fields
    added to a kind's message, and whole kinds (TxBody's oneof members) newer than it."""
    body = tx_pb2.TxBody.DESCRIPTOR
    return frozenset((body.fields_by_name[kind].message_type.name, name)
                     for (kind, name), since in versions.FIELDS.items() if since > app_version
                     ) | frozenset((body.name, kind.name) for kind in txkinds.TX_KINDS
                                   if kind.since > app_version)


@cache  # asked once per tx: a dict lookup after the first
def body_class(app_version: int | None) -> type[Message]:
    """The TxBody class that parses like the binaries of `app_version` (None: this one's)."""
    dropped = frozenset() if app_version is None else fields_unknown_at(app_version)
    return tx_pb2.TxBody if not dropped else _body_class_without(dropped)


@cache
def _body_class_without(dropped: frozenset[tuple[str, str]]) -> type[Message]:
    """tx.proto's TxBody with the `dropped` fields removed, in a pool of its own (the
    message names stay those of tx.proto, and so do the decode errors' texts)."""
    file_proto = descriptor_pb2.FileDescriptorProto()
    tx_pb2.DESCRIPTOR.CopyToProto(file_proto)
    removed: set[tuple[str, str]] = set()
    orphan_types: set[str] = set()  # message types only a dropped field used (e.g. Origin)
    for message in file_proto.message_type:
        for i in reversed(range(len(message.field))):
            if (message.name, message.field[i].name) in dropped:
                removed.add((message.name, message.field[i].name))
                if message.field[i].type_name:
                    orphan_types.add(message.field[i].type_name)
                del message.field[i]
    if removed != dropped:  # a FIELDS entry that tx.proto lacks: a bug here, not a bad tx
        raise LookupError(f"versions.FIELDS names fields tx.proto lacks: {dropped - removed}")
    # A message type added with a field did not exist either: drop it when nothing left
    # uses it, so the schema is the older file's, descriptor byte for byte.
    # Transitively: a dropped kind's message (DomainKeys) may be the only user of another
    # new type (SealedKey).
    while True:
        orphan_types -= {f.type_name for m in file_proto.message_type for f in m.field}
        gone = [i for i, m in enumerate(file_proto.message_type)
                if f".{file_proto.package}.{m.name}" in orphan_types]
        if not gone:
            break
        orphan_types = set()
        for i in reversed(gone):
            orphan_types |= {f.type_name for f in file_proto.message_type[i].field
                             if f.type_name}
            del file_proto.message_type[i]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    body: type[Message] = message_factory.GetMessageClass(
        pool.FindMessageTypeByName(tx_pb2.TxBody.DESCRIPTOR.full_name))
    return body
