"""Light client trust rules on synthetic chains (signed here with real Ed25519 keys).

Real CometBFT headers and commits are checked in tests/integration/test_verified_reads.py
and tests/e2e/test_light_net.py; these tests drive the rules that are hard to provoke on a
live net: bisection across set changes, every rejection reason, expiry, backwards links.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from nacl.signing import SigningKey

from memledger.sdk.light import GenesisRoot, LightClient, PinnedRoot, TrustOptions
from memledger.sdk.light.client import legacy_root_identity, root_identity
from memledger.sdk.light.encoding import parse_time, time_ns
from memledger.sdk.light.errors import (
    CommitError,
    HeaderError,
    ProviderError,
    PrunedError,
    TrustError,
    VerificationError,
)
from memledger.sdk.light.header import (
    FLAG_ABSENT,
    FLAG_COMMIT,
    BlockId,
    Commit,
    CommitSig,
    Header,
    LightBlock,
    Validator,
    ValidatorSet,
    address_of,
    merkle_root,
)
from memledger.sdk.light.provider import RestProvider, fetch_rpc_light_block, pruned_lowest
from memledger.sdk.light.store import TrustedStore
from memledger.sdk.light.verify import verify_commit_full
from memledger.sdk.rpc import RpcError

CHAIN = "light-test"
T0 = 1_700_000_000
BLOCK_S = 5
SEC = 1_000_000_000
GENESIS_NS = (T0 + BLOCK_S) * SEC  # the time of every test chain's first header


def keys(tag: str, n: int) -> list[SigningKey]:
    return [SigningKey(hashlib.sha256(f"{tag}-{i}".encode()).digest()) for i in range(n)]


def valset(ks: list[SigningKey], powers: list[int] | None = None) -> ValidatorSet:
    powers = powers or [10] * len(ks)
    vals = [Validator(address_of(bytes(k.verify_key)), bytes(k.verify_key), p)
            for k, p in zip(ks, powers, strict=True)]
    vals.sort(key=lambda v: (-v.power, v.address))
    return ValidatorSet(tuple(vals))


class Chain:
    """Headers 1..n; `sets[h]` are the signers of height h (keys by address)."""

    def __init__(self, sets: dict[int, list[SigningKey]], n: int, chain_id: str = CHAIN,
                 t0: int = T0) -> None:
        self.keys = {address_of(bytes(k.verify_key)): k for ks in sets.values() for k in ks}
        self.blocks: dict[int, LightBlock] = {}
        current = sets[1]
        prev_id = BlockId(b"", 0, b"")
        vs_by_h = {}
        for h in range(1, n + 2):
            current = sets.get(h, current)
            vs_by_h[h] = valset(current)
        for h in range(1, n + 1):
            header = Header(11, 1, chain_id, h, t0 + BLOCK_S * h, 0, prev_id,
                            bytes(32), bytes(32), vs_by_h[h].hash(), vs_by_h[h + 1].hash(),
                            bytes(32), hashlib.sha256(b"app%d" % h).digest(), bytes(32),
                            bytes(32), vs_by_h[h].validators[0].address)
            block_id = BlockId(header.hash(), 1, hashlib.sha256(b"parts%d" % h).digest())
            commit = self.sign(header, block_id, vs_by_h[h], chain_id)
            self.blocks[h] = LightBlock(header, commit, vs_by_h[h])
            prev_id = block_id

    def sign(self, header: Header, block_id: BlockId, vs: ValidatorSet, chain_id: str,
             absent: frozenset[int] = frozenset()) -> Commit:
        unsigned = Commit(header.height, 0, block_id, tuple(
            CommitSig(FLAG_ABSENT if i in absent else FLAG_COMMIT, v.address,
                      header.time_s + 1, 7, b"") for i, v in enumerate(vs.validators)))
        sigs = []
        for i, s in enumerate(unsigned.signatures):
            if s.flag == FLAG_ABSENT:
                sigs.append(CommitSig(FLAG_ABSENT, b"", 0, 0, b""))
                continue
            msg = unsigned.sign_bytes(chain_id, i)
            sigs.append(replace(s, signature=self.keys[s.validator_address].sign(msg).signature))
        return replace(unsigned, signatures=tuple(sigs))


class FakeProvider:
    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.fetched: list[int] = []
        self.override: dict[int, LightBlock] = {}

    def light_block(self, height: int) -> LightBlock:
        self.fetched.append(height)
        if height in self.override:
            return self.override[height]
        if height not in self.chain.blocks:
            raise ProviderError(f"no block {height}")
        return self.chain.blocks[height]

    def latest_height(self) -> int:
        return max(self.chain.blocks)


def genesis(validators: ValidatorSet) -> GenesisRoot:
    """The test chains' genesis: `validators` at the first header's time."""
    return GenesisRoot(CHAIN, validators, 1, genesis_time_ns=GENESIS_NS)


def client(chain: Chain, *, root: GenesisRoot | PinnedRoot | None = None,
           now: int | None = None, options: TrustOptions | None = None,
           provider: FakeProvider | None = None) -> LightClient:
    first = chain.blocks[1]
    root = root or genesis(first.validators)
    at = now if now is not None else (T0 + BLOCK_S * (len(chain.blocks) + 1)) * SEC
    return LightClient(provider or FakeProvider(chain), root, options=options,
                       now_ns=lambda: at, wait_s=0)


# --- encodings -----------------------------------------------------------------------


def test_merkle_root_matches_rfc6962_shape() -> None:
    sha = hashlib.sha256
    assert merkle_root([]) == sha(b"").digest()
    assert merkle_root([b"a"]) == sha(b"\x00a").digest()
    leaf = [sha(b"\x00" + x).digest() for x in (b"a", b"b", b"c")]
    left = sha(b"\x01" + leaf[0] + leaf[1]).digest()
    assert merkle_root([b"a", b"b", b"c"]) == sha(b"\x01" + left + leaf[2]).digest()


def test_time_parsing_is_exact_integer_nanoseconds() -> None:
    assert parse_time("1970-01-01T00:00:00Z") == (0, 0)
    assert parse_time("2026-12-01T05:58:36.123456789Z")[1] == 123456789
    assert parse_time("2026-12-01T05:58:36.5Z")[1] == 500_000_000
    assert time_ns("1970-01-01T00:00:01.000000001Z") == 1_000_000_001
    for bad in ("2026-12-01 05:58:36Z", "2026-12-01T05:58:36+01:00", "x", ""):
        with pytest.raises(ValueError):
            parse_time(bad)


# --- trust moves ---------------------------------------------------------------------


def test_sequential_and_skipping_verification_with_a_stable_set() -> None:
    chain = Chain({1: keys("a", 4)}, 40)
    lc = client(chain)
    assert lc.verify_to(2).header.app_hash == chain.blocks[2].header.app_hash
    provider = lc.provider
    assert isinstance(provider, FakeProvider)
    before = len(provider.fetched)
    assert lc.verify_to(40).height == 40  # one skip: same set, full trust
    assert provider.fetched[before:] == [40]
    assert lc.verify_to(40) is lc.store.get(40)  # stored: no refetch
    assert provider.fetched[before:] == [40]


def test_bisection_crosses_a_full_validator_set_rotation() -> None:
    # Heights 1-10 set A, 11-20 set B (overlapping 2 of 4 with A), 21+ set C (disjoint
    # from A): a direct skip 1 -> 30 has no trusted power, so the client must bisect.
    a, b_new, c = keys("a", 4), keys("b", 2), keys("c", 4)
    chain = Chain({1: a, 11: a[:2] + b_new, 21: c}, 30)
    lc = client(chain)
    lb = lc.verify_to(30)
    assert lb.header.app_hash == chain.blocks[30].header.app_hash
    provider = lc.provider
    assert isinstance(provider, FakeProvider)
    assert len(provider.fetched) > 2  # pivots were needed
    assert any(10 <= h <= 21 for h in provider.fetched)


def test_adjacent_step_requires_the_announced_next_set() -> None:
    a, b = keys("a", 4), keys("b", 4)
    chain = Chain({1: a, 3: b}, 5)
    lc = client(chain)
    forged = Chain({1: a, 2: b}, 3)  # height 2 signed by b, but header 1 announced a
    provider = lc.provider
    assert isinstance(provider, FakeProvider)
    provider.override[2] = forged.blocks[2]
    with pytest.raises(HeaderError) as err:
        lc.verify_to(2)
    assert err.value.reason in ("next_validators_mismatch", "broken_link")


# --- rejections, each with its own reason --------------------------------------------


def _tampered_signature(chain: Chain, h: int) -> LightBlock:
    lb = chain.blocks[h]
    sigs = list(lb.commit.signatures)
    bad = bytearray(sigs[0].signature)
    bad[5] ^= 1
    sigs[0] = replace(sigs[0], signature=bytes(bad))
    return replace(lb, commit=replace(lb.commit, signatures=tuple(sigs)))


def test_rejections_have_distinct_reasons() -> None:
    chain = Chain({1: keys("a", 4)}, 12)
    seen: dict[str, type[VerificationError]] = {}

    def expect(exc_type: type[VerificationError], reason: str, lc: LightClient,
               height: int) -> None:
        with pytest.raises(exc_type) as err:
            lc.verify_to(height)
        assert err.value.reason == reason, err.value
        seen[reason] = exc_type

    lc = client(chain)
    lc.verify_to(1)
    provider = lc.provider
    assert isinstance(provider, FakeProvider)
    provider.override[5] = _tampered_signature(chain, 5)
    expect(CommitError, "bad_signature", lc, 5)

    lb = chain.blocks[6]
    under = chain.sign(lb.header, lb.commit.block_id, lb.validators, CHAIN,
                       absent=frozenset({0, 1}))  # 20 of 40: not more than 2/3
    provider.override[6] = replace(lb, commit=under)
    expect(CommitError, "insufficient_power", lc, 6)

    other = Chain({1: keys("a", 4)}, 12, chain_id="other-chain")
    provider.override[7] = other.blocks[7]
    expect(HeaderError, "wrong_chain_id", lc, 7)

    late = client(chain, now=(T0 + 30 * 24 * 3600) * SEC)
    expect(TrustError, "expired", late, 8)

    pinned = client(chain, root=PinnedRoot(3, bytes(32)))
    expect(TrustError, "pinned_hash_mismatch", pinned, 9)

    wrong_genesis = client(chain, root=genesis(valset(keys("z", 4))))
    expect(TrustError, "genesis_mismatch", wrong_genesis, 9)

    lb10 = chain.blocks[10]
    provider.override[10] = replace(lb10, header=replace(lb10.header, app_hash=bytes(32)))
    expect(HeaderError, "hash_mismatch", lc, 10)

    assert len(seen) == 7


def test_commit_check_counts_only_commit_votes_of_the_right_validators() -> None:
    chain = Chain({1: keys("a", 4)}, 3)
    lb = chain.blocks[2]
    assert verify_commit_full(CHAIN, lb.validators, lb.header, lb.commit) == 40
    three = chain.sign(lb.header, lb.commit.block_id, lb.validators, CHAIN,
                       absent=frozenset({3}))
    assert verify_commit_full(CHAIN, lb.validators, lb.header, three) == 30  # 30*3 > 2*40
    swapped = list(lb.commit.signatures)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    with pytest.raises(CommitError) as err:
        verify_commit_full(CHAIN, lb.validators, lb.header,
                           replace(lb.commit, signatures=tuple(swapped)))
    assert err.value.reason == "wrong_signer"


def test_pinned_root_then_backwards_through_hash_links() -> None:
    chain = Chain({1: keys("a", 4)}, 20)
    root = PinnedRoot(15, chain.blocks[15].header.hash())
    lc = LightClient(FakeProvider(chain), root, now_ns=lambda: (T0 + 200) * SEC, wait_s=0)
    assert lc.verify_to(12).header == chain.blocks[12].header
    assert lc.chain_id == CHAIN
    assert lc.verify_to(18).height == 18


def test_store_persists_verified_blocks_only_as_given(tmp_path: Path) -> None:
    store = TrustedStore(None, keep=3)
    chain = Chain({1: keys("a", 4)}, 6)
    for h in range(1, 7):
        store.save(chain.blocks[h])
    assert len(store) == 3 and store.get(1) is not None  # the root stays
    assert store.latest_at_or_below(4) is store.get(1)
    assert store.latest() is store.get(6)


def test_headers_another_root_verified_are_never_served_from_the_store() -> None:
    """A store one root filled (chain A) refuses a client with another root (chain B)
    even at the heights it holds: those headers were never checked against B."""
    chain = Chain({1: keys("a", 4)}, 5)
    store = TrustedStore(None)
    mine = genesis(valset(keys("a", 4)))
    now = (T0 + 100) * SEC
    LightClient(FakeProvider(chain), mine, store=store, wait_s=0,
                now_ns=lambda: now).verify_to(3)
    assert store.get(3) is not None and store.root == root_identity(mine)
    for other in (genesis(valset(keys("b", 4))),
                  PinnedRoot(3, chain.blocks[3].header.hash())):  # a pin, even on chain A
        lc = LightClient(FakeProvider(chain), other, store=store, wait_s=0,
                         now_ns=lambda: now)
        with pytest.raises(TrustError) as err:
            lc.verify_to(3)
        assert err.value.reason == "conflict"
    again = LightClient(FakeProvider(chain), mine, store=store, wait_s=0, now_ns=lambda: now)
    assert again.verify_to(3) is store.get(3)  # its own root: served from the store


def test_a_trust_store_from_another_chain_is_refused(tmp_path: Path) -> None:
    chain = Chain({1: keys("a", 4)}, 5)
    store = TrustedStore(None)
    store.save(chain.blocks[1])
    other = genesis(valset(keys("b", 4)))
    lc = LightClient(FakeProvider(chain), other, store=store, wait_s=0,
                     now_ns=lambda: (T0 + 100) * SEC)
    with pytest.raises(TrustError) as err:
        lc.verify_to(3)
    assert err.value.reason == "conflict"


# --- heights: the block served is the block asked for ----------------------------------


@pytest.mark.parametrize(("asked", "served"), [
    (40, 5),    # the target: an old signed header passed off as the newest
    (20, 8),    # a bisection pivot (sets rotate at 11 and 21, so 1 -> 40 must bisect)
    (1, 3),     # the genesis root's own header (same set, so genesis_mismatch misses it)
])
def test_a_signed_header_of_another_height_is_refused(asked: int, served: int) -> None:
    a, b, c = keys("a", 4), keys("b", 2), keys("c", 4)
    chain = Chain({1: a, 11: a[:2] + b, 21: c}, 40) if asked == 20 else Chain({1: a}, 40)
    provider = FakeProvider(chain)
    provider.override[asked] = chain.blocks[served]
    lc = client(chain, provider=provider)
    with pytest.raises(HeaderError) as err:
        lc.verify_to(40)
    assert err.value.reason == "wrong_height"
    assert asked in provider.fetched and lc.store.get(served) is None


def test_backwards_refuses_a_header_of_another_height() -> None:
    chain = Chain({1: keys("a", 4)}, 20)
    provider = FakeProvider(chain)
    provider.override[13] = chain.blocks[12]
    lc = LightClient(provider, PinnedRoot(15, chain.blocks[15].header.hash()),
                     now_ns=lambda: (T0 + 200) * SEC, wait_s=0)
    with pytest.raises(HeaderError) as err:
        lc.verify_to(12)
    assert err.value.reason == "wrong_height"


class _StaleLightClient(LightClient):
    """A light client whose store went wrong: it answers every height with header 6."""

    def verify_to(self, height: int) -> LightBlock:
        return self.store.get(6) or self.provider.light_block(6)


def test_a_record_proof_is_checked_only_against_header_h_plus_1() -> None:
    """An absence proof of height 5 relabelled as height 17 must not verify as 17."""
    from memledger.protocol.proofs import record_key
    from memledger.sdk.light.reads import verify_record

    chain = Chain({1: keys("a", 4)}, 20)
    lc = _StaleLightClient(FakeProvider(chain), genesis(chain.blocks[1].validators))
    key = base64.b64encode(record_key("/memory", b"m-1")).decode()
    doc = {"path": "/memory", "key": key, "value": None, "height": 17,
           "proof_ops": [{"type": "ml.gap.v2", "key": key, "data": ""},
                         {"type": "ml.tree.v1", "key": "", "data": ""}]}
    with pytest.raises(HeaderError) as err:
        verify_record(lc, doc, "/memory", b"m-1")
    assert err.value.reason == "wrong_height"


# --- /validators paging from an untrusted RPC ----------------------------------------


class _PagingRpc:
    """A /validators endpoint that answers pages from `pages(page)`; counts the calls."""

    def __init__(self, pages: Callable[[int], tuple[list[object], int]]) -> None:
        self.pages = pages
        self.calls = 0

    def call(self, method: str, params: dict[str, str]) -> dict[str, object]:
        if method == "commit":
            return {"signed_header": {}}
        self.calls += 1
        if self.calls > 1000:
            raise RuntimeError("still paging")
        items, total = self.pages(int(params["page"]))
        return {"validators": items, "total": str(total)}


def _val(i: int) -> dict[str, object]:
    return {"address": f"{i:040x}", "voting_power": "1"}


def test_honest_validator_pages_are_joined() -> None:
    rpc = _PagingRpc(lambda p: ([_val(i) for i in range(100 * (p - 1), min(250, 100 * p))],
                                250))
    doc = fetch_rpc_light_block(rpc, 5)  # type: ignore[arg-type]
    assert doc["validators"] == [_val(i) for i in range(250)] and rpc.calls == 3


@pytest.mark.parametrize("pages", [
    lambda p: ([_val(p)], 10**18),                # a total no set can have
    lambda p: ([_val(p)], 10_000),                # a possible total, one validator a page
    lambda p: ([_val(p)], 50 + p),                # a total that grows with every page
    lambda p: ([_val(1)] if p == 1 else [], 2),   # a page that adds nothing
], ids=["huge-total", "trickle", "moving-total", "empty-page"])
def test_a_lying_rpc_cannot_keep_the_client_paging(
        pages: Callable[[int], tuple[list[object], int]]) -> None:
    rpc = _PagingRpc(pages)
    with pytest.raises(ProviderError):
        fetch_rpc_light_block(rpc, 5)  # type: ignore[arg-type]
    assert rpc.calls <= 100


# --- expiry: trust above the target still reaches it ---------------------------------


def test_an_expired_header_below_gives_way_to_a_fresh_one_above() -> None:
    chain = Chain({1: keys("a", 4)}, 40)
    clock = [(T0 + 155) * SEC]
    provider = FakeProvider(chain)
    lc = LightClient(provider, genesis(chain.blocks[1].validators),
                     options=TrustOptions(period_ns=200 * SEC), now_ns=lambda: clock[0],
                     wait_s=0)
    assert lc.verify_to(30).height == 30           # header 1 (T0+5) is still in the period
    clock[0] = (T0 + 260) * SEC                      # now header 1 expired, 30 (T0+150) not
    lb = lc.verify_to(20)
    assert lb.header == chain.blocks[20].header
    assert provider.fetched[-10:] == list(range(29, 19, -1))  # by hash links from 30
    clock[0] = (T0 + 400) * SEC                      # every trusted header has expired
    with pytest.raises(TrustError) as err:
        lc.verify_to(10)
    assert err.value.reason == "expired"


# --- the genesis root: its time, not a served header's ---------------------------------

DAY_S = 24 * 3600


def test_an_expired_genesis_is_not_renewed_by_a_fresh_header_its_old_keys_sign() -> None:
    """Set A left at height 11; 30 days on, A's keys sign a new chain whose header 1 looks
    an hour old. The trusting period runs from the genesis time, so nothing is fetched."""
    a, b = keys("a", 4), keys("b", 4)
    real = Chain({1: a, 11: b}, 20)
    now = (T0 + 30 * DAY_S) * SEC
    forged = Chain({1: a}, 20, t0=T0 + 30 * DAY_S - 3600)
    provider = FakeProvider(forged)
    lc = LightClient(provider, genesis(real.blocks[1].validators), now_ns=lambda: now, wait_s=0)
    with pytest.raises(TrustError) as err:
        lc.verify_to(20)
    assert err.value.reason == "expired" and provider.fetched == []


def test_the_header_at_the_initial_height_must_carry_the_genesis_time() -> None:
    a = keys("a", 4)
    forged = Chain({1: a}, 20, t0=T0 + 60)  # the genesis keys, a later first block
    lc = client(forged, root=genesis(valset(a)))
    with pytest.raises(TrustError) as err:
        lc.verify_to(20)
    assert err.value.reason == "genesis_mismatch"
    assert lc.store.get(20) is None


def test_genesis_root_reads_the_genesis_time() -> None:
    doc = {"chain_id": CHAIN, "initial_height": "1", "genesis_time": "2023-11-14T22:13:25.5Z",
           "validators": [{"pub_key": {"type": "tendermint/PubKeyEd25519", "value": base64
                                       .b64encode(bytes(k.verify_key)).decode()},
                           "power": "10"} for k in keys("a", 4)]}
    root = GenesisRoot.from_genesis(doc)
    assert root.genesis_time_ns == 1_700_000_005 * SEC + 500_000_000
    assert root.validators == valset(keys("a", 4))
    for bad in ({k: v for k, v in doc.items() if k != "genesis_time"},
                {**doc, "genesis_time": "yesterday"}):
        with pytest.raises(HeaderError) as err:
            GenesisRoot.from_genesis(bad)
        assert err.value.reason == "malformed"


def test_a_reset_chain_with_the_same_keys_does_not_share_a_trust_store() -> None:
    chain = Chain({1: keys("a", 4)}, 5)
    store = TrustedStore(None)
    now = (T0 + 100) * SEC
    LightClient(FakeProvider(chain), genesis(valset(keys("a", 4))), store=store, wait_s=0,
                now_ns=lambda: now).verify_to(3)
    reset = GenesisRoot(CHAIN, valset(keys("a", 4)), 1, genesis_time_ns=GENESIS_NS + SEC)
    lc = LightClient(FakeProvider(chain), reset, store=store, wait_s=0, now_ns=lambda: now)
    with pytest.raises(TrustError) as err:
        lc.verify_to(3)
    assert err.value.reason == "conflict"


def _legacy_store(chain: Chain, root: GenesisRoot) -> TrustedStore:
    """A store as loaded from a file written before the genesis time was part of a
    root's identity: headers 1 and 30."""
    store = TrustedStore(None)
    store.save(chain.blocks[1])
    store.save(chain.blocks[30])
    store.root = legacy_root_identity(root)
    return store


def test_a_trust_store_written_before_genesis_times_is_taken_over() -> None:
    """Its headers were verified from the genesis whose time its root header carries:
    they are used, past an expired genesis, and the store now names the new identity."""
    chain = Chain({1: keys("a", 4)}, 40)
    root = genesis(chain.blocks[1].validators)
    store = _legacy_store(chain, root)
    now = (T0 + 20 * DAY_S) * SEC  # the genesis has expired; header 30 is stored
    options = TrustOptions(period_ns=(20 * DAY_S - 100) * SEC)
    lc = LightClient(FakeProvider(chain), root, store=store, wait_s=0, now_ns=lambda: now,
                     options=options)
    assert lc.verify_to(35).header == chain.blocks[35].header
    assert store.root == root_identity(root)
    other = GenesisRoot(CHAIN, root.validators, 1, genesis_time_ns=GENESIS_NS - SEC)
    store = _legacy_store(chain, other)  # the same chain id and keys, another genesis
    lc = LightClient(FakeProvider(chain), other, store=store, wait_s=0, now_ns=lambda: now,
                     options=options)
    with pytest.raises(TrustError) as err:
        lc.verify_to(30)  # refused even where the store holds the header
    assert err.value.reason == "conflict"


def test_the_cli_keeps_reading_a_store_file_named_the_old_way(tmp_path: Path) -> None:
    from memledger.cli.client import default_trust_store

    root = genesis(valset(keys("a", 4)))
    fresh = default_trust_store(tmp_path, root)
    old = fresh.with_name(
        f"trusted-{hashlib.sha256(str(legacy_root_identity(root)).encode()).hexdigest()[:16]}"
        ".json")
    assert old != fresh and not fresh.exists()
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    assert default_trust_store(tmp_path, root) == old  # the only file there is
    fresh.write_text("{}")
    assert default_trust_store(tmp_path, root) == fresh


# --- a node that pruned its old blocks (retain_blocks) -----------------------------------


class _PrunedProvider(FakeProvider):
    """A node whose lowest block is `lowest`, as CometBFT answers after pruning."""

    def __init__(self, chain: Chain, lowest: int) -> None:
        super().__init__(chain)
        self.lowest = lowest

    def light_block(self, height: int) -> LightBlock:
        if height < self.lowest:
            self.fetched.append(height)
            raise PrunedError(height, self.lowest)
        return super().light_block(height)


def test_a_genesis_root_on_a_pruned_node_fails_at_once_and_says_what_to_do() -> None:
    chain = Chain({1: keys("a", 4)}, 30)
    provider = _PrunedProvider(chain, 20)
    lc = LightClient(provider, genesis(chain.blocks[1].validators), wait_s=30,
                     now_ns=lambda: (T0 + 200) * SEC)
    started = time.monotonic()
    with pytest.raises(TrustError) as err:
        lc.verify_to(25)
    assert time.monotonic() - started < 5  # not retried for wait_s like a height to come
    assert err.value.reason == "root_pruned" and provider.fetched == [1]
    assert "lowest block is 20" in err.value.message and "PinnedRoot" in err.value.message
    # A header pinned at or above the node's lowest block verifies as before.
    pinned = LightClient(provider, PinnedRoot(20, chain.blocks[20].header.hash()), wait_s=0,
                         now_ns=lambda: (T0 + 200) * SEC)
    assert pinned.verify_to(25).header == chain.blocks[25].header


def test_providers_recognise_cometbfts_pruned_answer() -> None:
    said = RpcError("commit", -32603, "Internal error",
                    "height 1 is not available, lowest height is 51")
    assert pruned_lowest(said) == 51
    assert pruned_lowest(RpcError("commit", -32603, "Internal error", "other")) is None

    def gone(request: httpx.Request) -> httpx.Response:
        return httpx.Response(410, json={"name": "height_pruned", "lowest_height": 51})

    rest = RestProvider("http://node", http=httpx.Client(transport=httpx.MockTransport(gone)))
    with pytest.raises(PrunedError) as err:
        rest.light_block(3)
    assert (err.value.height, err.value.lowest) == (3, 51)
