"""Fuzz the stateless tx gate (memledger.consensus.gate.envelope.decode_tx): decode, canonical
form, chain, signature.

Properties, for any input bytes:
- the gate answers with a SignedTx or raises TxError with a gate code, nothing else;
- the same input twice gives the same answer (and CheckTx's processTx agrees);
- a mutation of a valid tx that is not re-signed is never accepted (one signed action has
  exactly one byte string and one tx hash);
- a re-signed body mutation is either rejected or is itself canonical, and duplicated or
  unknown fields in the body are always BODY_DECODE / BODY_NOT_CANONICAL.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from nacl.signing import SigningKey

from memledger.consensus.block.execute import process_tx
from memledger.consensus.families.context import BlockInfo, KeyValueView
from memledger.consensus.families.registry import HANDLERS
from memledger.consensus.gate.envelope import (
    SignedTx,
    decode_tx,
    verify_signature,
)
from memledger.consensus.gate.sigverify import SignatureVerifier
from memledger.protocol.codes import Code, TxError
from memledger.protocol.envelope import TX_SIGN_PREFIX, sign_bytes
from memledger.protocol.pb import tx_pb2
from memledger.protocol.txkinds import kind_named
from tests.fuzz import corpus_gen, world
from tests.fuzz.common import GATE_CODES, KEYS, budget, len_field, split_fields, tag, uvarint
from tests.fuzz.strategies import mutation
from tests.support.chain import CHAIN_ID, LocalChain
from tests.support.views import NoState

CORPUS = corpus_gen.load()
SEEDS = list(CORPUS.values())
BLOCK = BlockInfo(height=100, time_ns=1_780_000_100 * 10**9, chain_id=CHAIN_ID, app_version=1)


def gate(raw: bytes) -> SignedTx | Code:
    """decode_tx, with the contract checked: only TxError, only gate codes."""
    try:
        return decode_tx(raw, CHAIN_ID, app_version=BLOCK.app_version)
    except TxError as err:
        assert err.code in GATE_CODES, err.code
        assert err.log
        return err.code


def stable_gate(raw: bytes) -> SignedTx | Code:
    first, second = gate(raw), gate(raw)
    if isinstance(first, Code):
        assert second == first
        outcome = process_tx(cast("KeyValueView", NoState()), BLOCK, raw, apply=False,
                             check=SignatureVerifier())
        assert outcome.code == first, (outcome.code, first)
    else:
        assert isinstance(second, SignedTx) and second.tx_hash == first.tx_hash
        assert first.kind in HANDLERS
        # Accepted means canonical: the bytes are exactly the re-encoding.
        env = tx_pb2.Tx(body=first.body.SerializeToString(deterministic=True),
                        public_key=first.signer, signature=tx_pb2.Tx.FromString(raw).signature)
        assert env.SerializeToString(deterministic=True) == raw
    return first


def corpus_examples(f: Callable[..., Any]) -> Callable[..., Any]:
    for raw in SEEDS:
        f = example(raw)(f)
    return f


# ------------------------------------------------------------------ the corpus itself
def test_corpus_is_fresh_and_covers_every_kind() -> None:
    assert CORPUS == corpus_gen.seeds(), "regenerate: python -m tests.fuzz.corpus_gen"
    kinds = set()
    for name, raw in CORPUS.items():
        since = kind_named(name.split("-")[0]).since
        signed = gate(raw) if since == 1 else decode_tx(raw, CHAIN_ID, app_version=since)
        assert isinstance(signed, SignedTx), (name, signed)
        assert name.split("-")[0] == signed.kind
        kinds.add(signed.kind)
    assert kinds == set(HANDLERS)


#: seeds of kinds newer than the world's app version (1): applied on a v10 chain instead
NEWER = sorted(n for n in CORPUS if kind_named(n.split("-")[0]).since > 1)


def test_newer_kinds_seeds_apply_in_order_on_a_v10_chain(tmp_path: Path) -> None:
    chain = LocalChain(tmp_path / "v10", app_state={"app_version": 10})
    assert NEWER == ["domain_keys-stranger", "domain_private-stranger"]
    for name in ("domain_private-stranger", "domain_keys-stranger"):
        result = chain.block([CORPUS[name]])[0]
        assert result.code == Code.OK, (name, result.code, result.log)


@pytest.mark.parametrize("name", sorted(set(CORPUS) - set(NEWER)))
def test_corpus_seed_applies_in_the_world(name: str, world_template: world.Template,
                                          tmp_path: Path) -> None:
    w = world.clone(world_template, tmp_path / "w")
    try:
        result = w.chain.block([CORPUS[name]])[0]
        assert result.code == Code.OK, (name, result.code, result.log)
    finally:
        w.close()


# ------------------------------------------------------------------ random input
@budget(400)
@given(st.binary(max_size=4096))
@corpus_examples
def test_random_bytes(raw: bytes) -> None:
    stable_gate(raw)


def _field_strategy() -> st.SearchStrategy[bytes]:
    numbers = st.one_of(st.integers(1, 20), st.integers(1, 2**29 - 1))
    return st.one_of(
        st.builds(lambda n, v: tag(n, 0) + uvarint(v), numbers, st.integers(0, 2**64 - 1)),
        st.builds(lambda n, p: len_field(n, p), numbers, st.binary(max_size=96)),
        st.builds(lambda n, p: tag(n, 1) + p, numbers, st.binary(min_size=8, max_size=8)),
        st.builds(lambda n, p: tag(n, 5) + p, numbers, st.binary(min_size=4, max_size=4)),
        st.builds(lambda n: tag(n, 3) + tag(n, 4), numbers),
    )


@budget(300)
@given(body_fields=st.lists(_field_strategy(), max_size=8),
       key=st.sampled_from(sorted(KEYS)), resign=st.booleans(),
       signature=st.binary(max_size=80))
def test_random_protobuf_shaped_bodies(body_fields: list[bytes], key: bytes, resign: bool,
                                       signature: bytes) -> None:
    """Wire-format-valid bodies of random fields, signed properly or not."""
    body = len_field(1, CHAIN_ID.encode()) + b"".join(body_fields)
    if resign:
        signature = KEYS[key].sign(sign_bytes(body)).signature
    raw = tx_pb2.Tx(body=body, public_key=key, signature=signature).SerializeToString(
        deterministic=True)
    stable_gate(raw)


# ------------------------------------------------------------------ mutations
@budget(500)
@given(st.data())
def test_mutated_envelope_is_rejected_unless_identical(data: st.DataObject) -> None:
    original = data.draw(st.sampled_from(SEEDS), label="seed")
    raw = data.draw(mutation(original), label="mutant")
    answer = stable_gate(raw)
    if raw != original:
        assert isinstance(answer, Code), "a changed tx passed the gate without a new signature"


@budget(400)
@given(st.data())
def test_resigned_body_mutation(data: st.DataObject) -> None:
    """Mutate the body, sign it again: the gate must still only accept canonical bodies."""
    original = tx_pb2.Tx.FromString(data.draw(st.sampled_from(SEEDS), label="seed"))
    body = data.draw(mutation(original.body), label="mutant body")
    key: SigningKey = KEYS[original.public_key]
    raw = tx_pb2.Tx(body=body, public_key=original.public_key,
                    signature=key.sign(sign_bytes(body)).signature).SerializeToString(
                        deterministic=True)
    answer = stable_gate(raw)
    if isinstance(answer, SignedTx):
        assert answer.body.SerializeToString(deterministic=True) == body
    fields = split_fields(body)
    numbers = [f.number for f in fields or []]
    if fields is not None and len(numbers) != len(set(numbers)):
        assert answer in (Code.BODY_DECODE, Code.BODY_NOT_CANONICAL), answer


@budget(200)
@given(n=st.integers(1, 400), seed=st.sampled_from(SEEDS), envelope=st.booleans())
def test_deeply_nested_unknown_groups(n: int, seed: bytes, envelope: bool) -> None:
    """Nested unknown groups: decoded to upb's depth limit, rejected, never a crash."""
    nest = tag(99, 3) * n + tag(99, 4) * n
    if envelope:
        raw = seed + nest
    else:
        env = tx_pb2.Tx.FromString(seed)
        body = env.body + nest
        raw = tx_pb2.Tx(body=body, public_key=env.public_key,
                        signature=KEYS[env.public_key].sign(sign_bytes(body)).signature
                        ).SerializeToString(deterministic=True)
    answer = stable_gate(raw)
    expected = ((Code.TX_DECODE, Code.TX_NOT_CANONICAL) if envelope
                else (Code.BODY_DECODE, Code.BODY_NOT_CANONICAL))
    assert answer in expected


# ------------------------------------------------------------------ signature cache
@budget(200)
@given(msg=st.binary(max_size=200), other=st.binary(max_size=200),
       key=st.sampled_from(sorted(KEYS)), sig_bytes=st.binary(min_size=64, max_size=64))
def test_cached_verifier_agrees_with_libsodium_on_well_formed_inputs(
        msg: bytes, other: bytes, key: bytes, sig_bytes: bytes) -> None:
    verifier = SignatureVerifier()
    good = KEYS[key].sign(msg).signature
    assert verifier(key, msg, good) is True
    for m, s in ((msg, good), (other, good), (msg, sig_bytes), (other, sig_bytes)):
        assert verifier(key, m, s) == verify_signature(key, m, s)


# Regression (fixed in 15a29d1): the cache key sha256(pk + sig + msg) was ambiguous for
# signatures not 64 bytes long, so a cached triple vouched for (pk, sig + msg[:k], msg[k:]).
@budget(100)
@given(body=st.binary(min_size=1, max_size=120), shift=st.integers(-40, 40).filter(bool),
       key=st.sampled_from(sorted(KEYS)))
def test_cached_verifier_agrees_with_libsodium_across_the_sig_msg_boundary(
        body: bytes, shift: int, key: bytes) -> None:
    verifier = SignatureVerifier()
    msg = TX_SIGN_PREFIX + body
    sig = KEYS[key].sign(msg).signature
    assert verifier(key, msg, sig)
    if shift >= 0:  # the signature swallows the start of the message
        k = min(shift, len(msg))
        moved_sig, moved_msg = sig + msg[:k], msg[k:]
    else:  # the message swallows the end of the signature
        moved_sig, moved_msg = sig[:shift], sig[shift:] + msg
    assert verifier(key, moved_msg, moved_sig) == verify_signature(key, moved_msg, moved_sig)
    assert verifier(key, moved_msg, moved_sig) is False
