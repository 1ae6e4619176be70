"""Hypothesis strategies for well-signed txs of every message kind, aimed at the world.

Every field is drawn from realistic world values most of the time (real memory ids,
owners, validators, correct content hashes, the right chain id) so handlers run deep,
and from empty, huge, malformed and extreme values the rest of the time so their guards
are exercised. `biased(good, bad)` is that mix.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from hypothesis import strategies as st
from nacl.signing import SigningKey

from memledger.protocol.envelope import sign_bytes
from memledger.protocol.pb import tx_pb2
from memledger.sdk.txbuilder import COCOMMIT_SIGN_PREFIX
from tests.fuzz import world
from tests.fuzz.common import KEYS, VALIDATORS, len_field, split_fields
from tests.support.chain import CHAIN_ID

T = TypeVar("T")
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


@st.composite
def biased(draw: st.DrawFn, good: st.SearchStrategy[T], bad: st.SearchStrategy[T],
           good_in_ten: int = 8) -> T:
    """`good` in good_in_ten of ten draws, `bad` otherwise."""
    return draw(good if draw(st.integers(0, 9)) < good_in_ten else bad)


def huge(lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.integers(lo, hi).map(lambda n: "x" * n)


def extreme_ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = sorted({v for v in (lo, lo + 1, 0, 1, 2, 5, 100, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                                2**40, 2**40 + 1, 2**53 + 1, 2**63 - 1, 2**63, hi - 1, hi)
                    if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


SIGNERS: list[SigningKey] = [*world.AGENTS.values(), *VALIDATORS]
PUBKEYS = [bytes(k.verify_key) for k in SIGNERS]
A = world.AGENTS
#: who usually sends each kind (the rest of the time: anybody)
SIGNER_POOLS: dict[str, list[SigningKey]] = {
    "memory_submit": [A["owner"], A["writer"], A["reader"], A["stranger"], A["s1"], A["s2"]],
    "memory_vote": [*VALIDATORS, A["s1"], A["s2"], A["s3"]],
    "memory_challenge": [A["owner"], A["modder"], A["corr"], A["writer"], A["stranger"]],
    "memory_corroborate": [A["corr"], A["stranger"], A["reader"], A["owner"], A["modder"]],
    "memory_reinstate": [A["modder"], A["corr"], A["owner"], A["stranger"]],
    "cocommit_submit": [A["c1"], A["c2"], A["owner"]],
    "access_grant": [A["owner"], A["owner"], A["writer"], A["modder"]],
    "access_revoke": [A["owner"], A["owner"], A["modder"]],
    "gov_propose": VALIDATORS,
    "gov_vote": VALIDATORS,
    "gov_cancel": VALIDATORS,
}

JUNK_TEXT = st.one_of(
    st.text(max_size=48),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\u202e", "é", "\U0001f600", "../x", "\ufeff"]),
    huge(100_000, 200_000),
)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._:/@-", min_size=1, max_size=24)
WORLD_IDS = [*world.MEMORIES, "m-maxed"]
MEMORY_IDS = biased(
    st.one_of(st.sampled_from(WORLD_IDS), NAME.map(lambda s: f"fz-{s}")),
    st.one_of(st.sampled_from(["nope", "cc-", "m-proposed\x00x", "x" * 128, "x" * 129]),
              huge(500, 700), JUNK_TEXT))
DOMAINS = biased(st.sampled_from(["general", "vault", "ops", "lab", "fz-domain"]),
                 st.one_of(st.sampled_from(["", "Vault", "vault\x00", "x" * 128, "x" * 129]),
                           NAME, JUNK_TEXT))
TYPES = biased(st.sampled_from(["fact", "observation", "inference", "task"]),
               st.one_of(st.sampled_from(["Fact", "", "facts"]), JUNK_TEXT))
TAG = biased(st.sampled_from(["a", "b", "ops", "infra", "x" * 64]),
             st.one_of(st.sampled_from(["", "\x00", "x" * 65, "é" * 33]), st.text(max_size=8)))
TAGS = biased(st.lists(TAG, max_size=4), st.lists(TAG, min_size=30, max_size=36))
CONTENT = biased(st.text(min_size=1, max_size=200),
                 st.one_of(st.sampled_from(["", "\x00", "a\x00b"]),
                           huge(512 * 1024 - 1, 512 * 1024 + 1), huge(1000, 100_000)))
KEY_BYTES = biased(st.sampled_from(PUBKEYS),
                   st.one_of(st.sampled_from([b"", bytes(32), b"\xff" * 32, bytes(31), bytes(33)]),
                             st.binary(max_size=40)))
DECISIONS = biased(st.integers(1, 3), extreme_ints(I32_MIN, I32_MAX))
LEVELS = biased(st.integers(1, 3), extreme_ints(I32_MIN, I32_MAX))
PROPOSAL_IDS = biased(st.sampled_from(["p1", "p2"]),
                      st.one_of(st.sampled_from(["p3", "p0", "", "P2", "p2\x00"]), JUNK_TEXT))
CONFIDENCE = biased(st.integers(0, 1_000_000), extreme_ints(0, U32_MAX))


@st.composite
def content_and_hash(draw: st.DrawFn) -> tuple[str, bytes]:
    content = draw(CONTENT)
    good = hashlib.sha256(content.encode()).digest()
    return content, draw(biased(st.just(good), st.binary(max_size=40), 9))


@st.composite
def memory_submit(draw: st.DrawFn) -> dict[str, Any]:
    content, digest = draw(content_and_hash())
    fresh = NAME.map(lambda s: f"fz-{s}")
    return {"memory_submit": tx_pb2.MemorySubmit(
        memory_id=draw(biased(fresh, MEMORY_IDS, 7)), domain=draw(DOMAINS),
        memory_type=draw(biased(TYPES, JUNK_TEXT, 9)),
        content=content, content_hash=digest, confidence_ppm=draw(CONFIDENCE),
        tags=draw(TAGS))}


def _one_id(kind: str, cls: type) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda mid: {kind: cls(memory_id=mid)}, MEMORY_IDS)


memory_vote = st.builds(
    lambda mid, d: {"memory_vote": tx_pb2.MemoryVote(memory_id=mid, decision=d)},
    MEMORY_IDS, DECISIONS)
memory_challenge = st.builds(
    lambda mid, r: {"memory_challenge": tx_pb2.MemoryChallenge(memory_id=mid, reason=r)},
    MEMORY_IDS, biased(st.text(max_size=40), st.one_of(huge(4095, 4097), JUNK_TEXT)))
memory_corroborate = _one_id("memory_corroborate", tx_pb2.MemoryCorroborate)
memory_reinstate = _one_id("memory_reinstate", tx_pb2.MemoryReinstate)
access_grant = st.builds(
    lambda d, g, lv, e: {"access_grant": tx_pb2.AccessGrant(domain=d, grantee=g, level=lv,
                                                           expires_height=e)},
    DOMAINS, KEY_BYTES, LEVELS,
    biased(st.one_of(st.just(0), st.integers(21, 10_000)), extreme_ints(0, U64_MAX)))
access_revoke = st.builds(
    lambda d, g: {"access_revoke": tx_pb2.AccessRevoke(domain=d, grantee=g)}, DOMAINS, KEY_BYTES)
gov_vote = st.builds(
    lambda p, d: {"gov_vote": tx_pb2.GovVote(proposal_id=p, decision=d)}, PROPOSAL_IDS, DECISIONS)
gov_cancel = st.builds(lambda p: {"gov_cancel": tx_pb2.GovCancel(proposal_id=p)}, PROPOSAL_IDS)

WEIGHTS = biased(st.integers(1, 100), extreme_ints(0, U64_MAX))
_members = st.lists(st.builds(lambda k, w: tx_pb2.ScopeMember(public_key=k, weight=w),
                              KEY_BYTES, WEIGHTS), min_size=1, max_size=5)
_spec = st.builds(
    lambda sid, ds, ms: tx_pb2.ScopeSpec(scope_id=sid, domains=ds, members=ms),
    biased(st.sampled_from(["ops", "fz-scope"]), st.one_of(st.just(""), JUNK_TEXT)),
    biased(st.lists(st.sampled_from(["fz-a", "fz-b", "ops", "lab"]), min_size=1, max_size=3,
                    unique=True), st.lists(DOMAINS, max_size=4)),
    biased(_members, st.lists(st.builds(lambda k, w: tx_pb2.ScopeMember(public_key=k, weight=w),
                                        KEY_BYTES, WEIGHTS), max_size=3)))
_proposal_kind = st.one_of(
    st.builds(lambda k, p: {"validator": tx_pb2.ValidatorChange(public_key=k, power=p)},
              KEY_BYTES, biased(st.integers(0, 60), extreme_ints(0, U64_MAX))),
    st.builds(lambda s: {"scope_create": s}, _spec),
    st.builds(lambda s: {"scope_revise": s}, _spec),
    st.builds(lambda k, s: {k: s}, st.sampled_from(["scope_pause", "scope_retire",
                                                   "scope_resume"]),
              biased(st.just("ops"), JUNK_TEXT)),
    st.builds(lambda k, v: {"param": tx_pb2.ParamChange(key=k, value=v)},
              biased(st.sampled_from(["gov_voting_period", "gov_min_upgrade_delay"]),
                     st.one_of(st.just("shared_domains"), JUNK_TEXT)),
              biased(st.integers(1, 1_000_000), extreme_ints(0, U64_MAX))),
    st.builds(lambda n, v, h, s: {"upgrade": tx_pb2.SoftwareUpgrade(
        name=n, app_version=v, activation_height=h, binary_sha256=s)},
        biased(st.just("memledger-v2"), JUNK_TEXT), biased(st.integers(2, 3),
                                                           extreme_ints(0, U64_MAX)),
        biased(st.integers(41, 10_000), extreme_ints(0, U64_MAX)),
        biased(st.sampled_from(["", "ab" * 32]), st.one_of(st.just("AB" * 32), JUNK_TEXT))),
    st.just({}),
)
gov_propose = st.builds(
    lambda kind, title: {"gov_propose": tx_pb2.GovPropose(title=title, **kind)},
    _proposal_kind, biased(st.text(max_size=40), st.one_of(huge(4096, 4097), JUNK_TEXT)))


@st.composite
def cocommit_submit(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(biased(st.lists(st.sampled_from([world.C1, world.C2, world.OWNER]),
                                min_size=2, max_size=3, unique=True),
                       st.lists(st.sampled_from(SIGNERS), max_size=4)))
    coauthors = [bytes(k.verify_key) for k in keys]
    if draw(biased(st.just(True), st.just(False), 9)):
        coauthors = sorted(set(coauthors))
    coauthors += draw(biased(st.just([]), st.lists(KEY_BYTES, max_size=1), 9))
    content, digest = draw(content_and_hash())
    core_msg = tx_pb2.CoCommitCore(
        chain_id=draw(biased(st.just(CHAIN_ID), JUNK_TEXT, 9)), domain=draw(DOMAINS),
        memory_type=draw(TYPES), content=content, content_hash=digest,
        confidence_ppm=draw(CONFIDENCE), tags=draw(TAGS), coauthors=coauthors,
        agreement_nonce=draw(biased(st.integers(1, 5), extreme_ints(0, U64_MAX))),
        not_before_unix_ns=draw(biased(st.just(0), extreme_ints(I64_MIN, I64_MAX))),
        not_after_unix_ns=draw(biased(st.just(I64_MAX), extreme_ints(I64_MIN, I64_MAX))))
    core = core_msg.SerializeToString(deterministic=True)
    if draw(st.integers(0, 9)) == 0:
        core = draw(st.one_of(st.binary(max_size=64), st.just(core + b"\x00")))
    sigs = []
    for pk in coauthors:
        key = KEYS.get(pk)
        if key is not None and draw(st.integers(0, 9)) > 0:
            sig = key.sign(COCOMMIT_SIGN_PREFIX + core).signature
        else:
            sig = draw(st.binary(max_size=64))
        sigs.append(tx_pb2.CoauthorSignature(public_key=pk, signature=sig))
    if draw(st.integers(0, 9)) == 0:
        sigs = draw(st.permutations(sigs))
    return {"cocommit_submit": tx_pb2.CoCommitSubmit(core=core, signatures=sigs)}


MESSAGES: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "memory_submit": memory_submit(),
    "memory_vote": memory_vote,
    "memory_challenge": memory_challenge,
    "memory_corroborate": memory_corroborate,
    "memory_reinstate": memory_reinstate,
    "cocommit_submit": cocommit_submit(),
    "access_grant": access_grant,
    "access_revoke": access_revoke,
    "gov_propose": gov_propose,
    "gov_vote": gov_vote,
    "gov_cancel": gov_cancel,
}


def sign(key: SigningKey, body: bytes) -> bytes:
    return tx_pb2.Tx(body=body, public_key=bytes(key.verify_key),
                     signature=key.sign(sign_bytes(body)).signature).SerializeToString(
                         deterministic=True)


def _strings(message: Any) -> list[str]:
    """Every non-empty str value inside a message (targets for invalid UTF-8)."""
    found: list[str] = []
    for fd, value in message.ListFields():
        if fd.type == fd.TYPE_STRING:
            found.extend(list(value) if fd.is_repeated else [value])
        elif fd.type == fd.TYPE_MESSAGE:
            for v in (value if fd.is_repeated else [value]):
                found.extend(_strings(v))
    return [s for s in found if s]


@st.composite
def signed_tx(draw: st.DrawFn, kind: str, nonces: dict[bytes, int]) -> tuple[bytes, bool]:
    """(raw tx, whether invalid UTF-8 was injected): a well-signed tx of `kind`.

    `nonces` is the world's nonce map (updated): most txs use the signer's next nonce so
    they get past the nonce check; some use gaps, replays or extremes.
    """
    key = draw(biased(st.sampled_from(SIGNER_POOLS[kind]), st.sampled_from(SIGNERS), 9))
    pk = bytes(key.verify_key)
    last = nonces.get(pk, 0)
    mode = draw(biased(st.just("next"), st.sampled_from(["gap", "extreme"]), 9))
    if mode == "next":
        nonce = min(last + 1, U64_MAX)
    elif mode == "gap":
        nonce = min(last + draw(st.integers(2, 10**9)), U64_MAX)
    else:
        nonce = draw(extreme_ints(0, U64_MAX))
    nonces[pk] = max(last, nonce)
    body_msg = tx_pb2.TxBody(chain_id=draw(biased(st.just(CHAIN_ID), JUNK_TEXT, 19 // 2)),
                             nonce=nonce, **draw(MESSAGES[kind]))
    body = body_msg.SerializeToString(deterministic=True)
    invalid_utf8 = False
    strings = _strings(body_msg)
    if strings and draw(st.integers(0, 11)) == 0:
        victim = draw(st.sampled_from(strings)).encode()
        junk = draw(st.binary(min_size=len(victim), max_size=len(victim)))
        try:
            junk.decode("utf-8")
        except UnicodeDecodeError:
            invalid_utf8 = True
        body = body.replace(victim, junk, 1)
    return sign(key, body), invalid_utf8


# ------------------------------------------------------------------ mutations
@st.composite
def mutation(draw: st.DrawFn, data: bytes) -> bytes:
    """One structural or byte-level mutation of `data` (may rarely be the identity)."""
    ops = ["flip", "truncate", "insert", "delete", "set_byte", "append_unknown",
           "dup_field", "swap_fields", "drop_field", "grow_length", "repeat"]
    op = draw(st.sampled_from(ops))
    n = len(data)
    if op == "flip" and n:
        i, bit = draw(st.integers(0, n - 1)), draw(st.integers(0, 7))
        return data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1:]
    if op == "truncate" and n:
        return data[:draw(st.integers(0, n - 1))]
    if op == "insert":
        i = draw(st.integers(0, n))
        return data[:i] + draw(st.binary(min_size=1, max_size=16)) + data[i:]
    if op == "delete" and n:
        i = draw(st.integers(0, n - 1))
        return data[:i] + data[i + draw(st.integers(1, 16)):]
    if op == "set_byte" and n:
        i = draw(st.integers(0, n - 1))
        return data[:i] + bytes([draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))]) + data[i + 1:]
    fields = split_fields(data)
    if op == "append_unknown" or not fields:
        number = draw(st.one_of(st.integers(4, 40), st.integers(1000, 2**29 - 1)))
        return data + len_field(number, draw(st.binary(max_size=8)))
    if op == "dup_field":
        f = draw(st.sampled_from(fields))
        return data + f.raw
    if op == "swap_fields" and len(fields) > 1:
        i = draw(st.integers(0, len(fields) - 2))
        raws = [f.raw for f in fields]
        raws[i], raws[i + 1] = raws[i + 1], raws[i]
        return b"".join(raws)
    if op == "drop_field":
        i = draw(st.integers(0, len(fields) - 1))
        return b"".join(f.raw for j, f in enumerate(fields) if j != i)
    if op == "grow_length" and any(f.wire_type == 2 for f in fields):
        f = draw(st.sampled_from([f for f in fields if f.wire_type == 2]))
        return data.replace(f.raw, f.raw + b"\x00", 1)
    return data + data  # "repeat": every field duplicated
