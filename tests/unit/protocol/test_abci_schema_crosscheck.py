"""Check our hand-written ABCI schema against CometBFT v0.38.25's own .proto sources.

An ABCI socket only carries field numbers and wire types, so a single wrong number would
silently drop data (or crash CometBFT). Here we compile CometBFT's sources from the Go module
cache (test-time only; nothing of theirs lands in the repo) and compare every message, field
and enum value we define, in both directions, with type names mapped between the packages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import TypeAlias

import pytest
from google.protobuf import descriptor_pb2

from memledger.protocol.pb import abci_pb2

COMETBFT_VERSION = "v0.38.25"
OUR_PACKAGE = "memledger.abci.v1"
# Where each of our top-level names may live on their side, in lookup order. tendermint.abci
# comes first because tendermint.types also has an (unrelated) `Validator`.
THEIR_PACKAGES = ("tendermint.abci", "tendermint.types", "tendermint.crypto")
RENAMED = {"Timestamp": "google.protobuf.Timestamp", "Duration": "google.protobuf.Duration"}

Field: TypeAlias = descriptor_pb2.FieldDescriptorProto


def _gomodcache() -> Path:
    """GOMODCACHE from `go env` if go is installed, else the Go defaults."""
    go = shutil.which("go")
    if go:
        out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    gopath = os.environ.get("GOPATH", str(Path.home() / "go")).split(os.pathsep)[0]
    return Path(gopath) / "pkg" / "mod"


def _gogoproto_root(modcache: Path, cometbft_root: Path) -> Path | None:
    """The gogoproto module dir: the version CometBFT's go.mod pins, else the newest present."""
    base = modcache / "github.com" / "cosmos"
    gomod = cometbft_root / "go.mod"
    if gomod.exists():
        pinned = re.search(r"github\.com/cosmos/gogoproto (v\S+)", gomod.read_text())
        if pinned and (base / f"gogoproto@{pinned.group(1)}/gogoproto/gogo.proto").exists():
            return base / f"gogoproto@{pinned.group(1)}"
    found = sorted(base.glob("gogoproto@*/gogoproto/gogo.proto"))
    return found[-1].parent.parent if found else None


Files: TypeAlias = descriptor_pb2.FileDescriptorSet | list[descriptor_pb2.FileDescriptorProto]
Index: TypeAlias = tuple[
    dict[str, descriptor_pb2.DescriptorProto], dict[str, descriptor_pb2.EnumDescriptorProto]
]


def _index(fds: Files) -> Index:
    """Map full names (no leading dot) to message and enum descriptor protos."""
    files = list(fds.file) if isinstance(fds, descriptor_pb2.FileDescriptorSet) else fds
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    enums: dict[str, descriptor_pb2.EnumDescriptorProto] = {}

    def walk(prefix: str, msg: descriptor_pb2.DescriptorProto) -> None:
        name = f"{prefix}.{msg.name}"
        messages[name] = msg
        for enum in msg.enum_type:
            enums[f"{name}.{enum.name}"] = enum
        for nested in msg.nested_type:
            walk(name, nested)

    for f in files:
        for msg in f.message_type:
            walk(f.package, msg)
        for enum in f.enum_type:
            enums[f"{f.package}.{enum.name}"] = enum
    return messages, enums


@pytest.fixture(scope="module")
def theirs(tmp_path_factory: pytest.TempPathFactory) -> descriptor_pb2.FileDescriptorSet:
    """CometBFT's ABCI schema (plus everything it imports), compiled to a descriptor set."""
    from grpc_tools import protoc

    modcache = _gomodcache()
    cometbft_root = modcache / "github.com" / "cometbft" / f"cometbft@{COMETBFT_VERSION}"
    proto_root = cometbft_root / "proto"
    # Missing sources fail, as tests/conftest.py's rule wants: a skip here would let a
    # green run hide that the schema was never compared.
    fetch = "`make cometbft-protos` (go mod download) fetches them"
    if not (proto_root / "tendermint" / "abci" / "types.proto").exists():
        pytest.fail(f"CometBFT {COMETBFT_VERSION} .proto sources not in the Go module cache "
                    f"({proto_root} missing); {fetch}", pytrace=False)
    gogo = _gogoproto_root(modcache, cometbft_root)
    if gogo is None:
        pytest.fail(f"gogoproto .proto sources not in the Go module cache {modcache}; {fetch}",
                    pytrace=False)
    google_root = resources.files("grpc_tools") / "_proto"
    out = tmp_path_factory.mktemp("cometbft") / "abci.fds"
    rc = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{proto_root}",
            f"-I{gogo}",
            f"-I{google_root}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            str(proto_root / "tendermint" / "abci" / "types.proto"),
        ]
    )
    assert rc == 0, "protoc could not compile CometBFT's abci/types.proto"
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _ours() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto()
    abci_pb2.DESCRIPTOR.CopyToProto(fdp)
    return fdp


class _Mapper:
    """Translates our full type names into theirs."""

    def __init__(self, their_names: set[str]) -> None:
        self.their_names = their_names

    def __call__(self, ours: str) -> str | None:
        rel = ours.lstrip(".").removeprefix(OUR_PACKAGE + ".")
        head, _, tail = rel.partition(".")
        if head in RENAMED:
            return RENAMED[head] + (f".{tail}" if tail else "")
        for pkg in THEIR_PACKAGES:
            if f"{pkg}.{rel}" in self.their_names:
                return f"{pkg}.{rel}"
        return None


def _field_shape(field: Field, owner: descriptor_pb2.DescriptorProto, type_name: str) -> tuple:
    """Everything about a field that matters on the wire (and for oneof semantics)."""
    oneof = owner.oneof_decl[field.oneof_index].name if field.HasField("oneof_index") else None
    return (field.number, field.type, field.label, type_name, oneof)


def compare(
    ours: descriptor_pb2.FileDescriptorProto, theirs: descriptor_pb2.FileDescriptorSet
) -> list[str]:
    """Return human-readable mismatches between our schema and CometBFT's (empty = equal)."""
    our_msgs, our_enums = _index([ours])
    their_msgs, their_enums = _index(theirs)
    mapped = _Mapper(set(their_msgs) | set(their_enums))
    problems: list[str] = []

    for name, msg in our_msgs.items():
        other_name = mapped(name)
        other = their_msgs.get(other_name or "")
        if other is None:
            problems.append(f"{name}: no counterpart in CometBFT")
            continue
        mine = {f.name: f for f in msg.field}
        their_fields = {f.name: f for f in other.field}
        for fname in sorted(set(their_fields) - set(mine)):
            problems.append(f"{name}.{fname}: missing (CometBFT {other_name} has it)")
        for fname, field in mine.items():
            if fname not in their_fields:
                problems.append(f"{name}.{fname}: not in CometBFT {other_name}")
                continue
            ref = ""
            if field.type_name:
                ref = mapped(field.type_name) or f"<unmapped {field.type_name}>"
            a = _field_shape(field, msg, ref)
            b = _field_shape(their_fields[fname], other, their_fields[fname].type_name.lstrip("."))
            if a != b:
                problems.append(f"{name}.{fname}: ours {a} != CometBFT {b}")

    for name, enum in our_enums.items():
        other_name = mapped(name)
        other_enum = their_enums.get(other_name or "")
        if other_enum is None:
            problems.append(f"{name}: no counterpart enum in CometBFT")
            continue
        a_vals = {v.name: v.number for v in enum.value}
        b_vals = {v.name: v.number for v in other_enum.value}
        if a_vals != b_vals:
            problems.append(f"{name}: values {a_vals} != CometBFT {other_name} {b_vals}")
    return problems


def _field(fdp: descriptor_pb2.FileDescriptorProto, msg: str, field: str) -> Field:
    owner = next(m for m in fdp.message_type if m.name == msg)
    return next(f for f in owner.field if f.name == field)


def test_schema_matches_cometbft(theirs: descriptor_pb2.FileDescriptorSet) -> None:
    assert compare(_ours(), theirs) == []


def test_every_request_and_response_method_is_covered(
    theirs: descriptor_pb2.FileDescriptorSet,
) -> None:
    # The bidirectional field check already implies this; assert it plainly for readers.
    their_msgs, _ = _index(theirs)
    for envelope in ("Request", "Response"):
        theirs_fields = {f.name for f in their_msgs[f"tendermint.abci.{envelope}"].field}
        ours_fields = set(getattr(abci_pb2, envelope).DESCRIPTOR.fields_by_name)
        assert ours_fields == theirs_fields


@pytest.mark.parametrize(
    ("msg", "field", "attr", "value"),
    [
        ("ResponseInitChain", "app_hash", "number", 4),
        ("ResponseFinalizeBlock", "tx_results", "label", Field.LABEL_OPTIONAL),
        ("ExecTxResult", "gas_used", "type", Field.TYPE_UINT64),
        ("Misbehavior", "time", "type_name", ".memledger.abci.v1.Duration"),
        ("ValidatorUpdate", "pub_key", "name", "pubkey"),
    ],
)
def test_compare_catches_mistakes(
    theirs: descriptor_pb2.FileDescriptorSet, msg: str, field: str, attr: str, value: object
) -> None:
    broken = _ours()
    setattr(_field(broken, msg, field), attr, value)
    problems = compare(broken, theirs)
    assert problems and all(msg in p for p in problems), problems


def test_compare_catches_wrong_enum_value(theirs: descriptor_pb2.FileDescriptorSet) -> None:
    broken = _ours()
    flag = next(e for e in broken.enum_type if e.name == "BlockIDFlag")
    flag.value[2].number = 7
    assert any("BlockIDFlag" in p for p in compare(broken, theirs))


def test_compare_catches_dropped_field(theirs: descriptor_pb2.FileDescriptorSet) -> None:
    broken = _ours()
    info = next(m for m in broken.message_type if m.name == "ResponseInfo")
    del info.field[-1]
    assert any("ResponseInfo.last_block_app_hash: missing" in p for p in compare(broken, theirs))
